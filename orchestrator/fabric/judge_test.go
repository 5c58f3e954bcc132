package fabric

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
)

func load(t *testing.T, name string) parse.NCCL {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../../shared/samples/nccl-tests", name))
	if err != nil {
		t.Fatalf("the shared samples are needed beside the repository: %v", err)
	}
	r, err := parse.NCCLTests(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func quote(inter, intra float64) *inventory.Inventory {
	return &inventory.Inventory{Quote: inventory.Quote{InterBusBWGBs: inter, IntraBusBWGBs: intra}, Acceptance: inventory.Acceptance{Tolerance: 0.9}}
}

func TestInterNodeGatesOnLargeMessagesOnly(t *testing.T) {
	r := load(t, "a3mega-all-reduce-2node-16xH100.txt")
	// The median by hand: out-of-place busbw of every row ≥ 1 GiB.
	var want []float64
	for _, row := range r.Rows {
		if row.Size >= 1<<30 {
			want = append(want, row.OOP.BusBW)
		}
	}
	slices.Sort(want)
	if len(want) == 0 {
		t.Fatal("sample has no row ≥ 1 GiB")
	}
	j := Judge(r, quote(1, 0), "")
	j = Judge(r, quote(j.BusBW.Median/0.95, 0), "")
	if j.Scope != "inter" || j.Hosts != 2 || j.Ranks != 16 || j.GateRows != len(want) {
		t.Fatalf("judgement %+v", j)
	}
	// Recomputed from size and time, so equal to the printed column up to
	// its two decimals.
	if math.Abs(j.BusBW.Min-want[0]) > 0.01 || math.Abs(j.BusBW.Max-want[len(want)-1]) > 0.01 {
		t.Errorf("spread %+v, want %v..%v", j.BusBW, want[0], want[len(want)-1])
	}
	// The sweep's average (70.742) is not what is judged.
	if j.BusBW.Median == r.AvgBusBW {
		t.Error("judged on the sweep's average")
	}
	// 2 nodes, 16 ranks: each GPU's share of the wire is busbw × 1/15.
	if d := j.WireRate - j.BusBW.Median/15; d > 1e-9 || d < -1e-9 {
		t.Errorf("wire rate %v", j.WireRate)
	}
	v := find(j, "NCCL-002")
	if v.Status != record.Pass || *v.Ratio < 0.94 || *v.Ratio > 1.06 {
		t.Errorf("NCCL-002 %+v", v)
	}
	// 20% below the quote's tolerance: fail.
	if v := find(Judge(r, quote(j.BusBW.Median/0.7, 0), ""), "NCCL-002"); v.Status != record.Fail {
		t.Errorf("slow fabric passed: %+v", v)
	}
}

func TestWrongResultsFailWhateverTheSpeed(t *testing.T) {
	r := load(t, "cscs-all-reduce-2.17.1-2x4-gh200-dedented.txt")
	one := int64(1)
	r.Rows[len(r.Rows)-1].IP.Wrong = &one
	j := Judge(r, quote(1, 1), "")
	if v := find(j, "NCCL-001"); v.Status != record.Fail || v.Measured != "1 wrong" {
		t.Fatalf("NCCL-001 %+v", v)
	}
}

func TestShortSweepIsJudgedOnItsLargestSizeWithAWarning(t *testing.T) {
	r := load(t, "cscs-all-reduce-2.18.2-2node-gh200-unalign.txt")
	j := Judge(r, quote(0.001, 0.001), "")
	v := find(j, "NCCL-002")
	if v.Status != record.Warn || !strings.Contains(v.Detail, "below the 1GiB") {
		t.Fatalf("NCCL-002 %+v", v)
	}
}

func TestSingleNodeIsIntra(t *testing.T) {
	r := load(t, "sb-all-reduce-8xA100-old-error-col-NA.txt")
	j := Judge(r, quote(0, 200), "gpu-01")
	if j.Scope != "intra" || j.WireRate != 0 {
		t.Fatalf("judgement %+v", j)
	}
	if v := find(j, "NCCL-003"); v.Node != "gpu-01" || v.Quoted != "200.00 GB/s" {
		t.Fatalf("NCCL-003 %+v", v)
	}
}

func TestBusBWThatDoesNotAddUpIsNoted(t *testing.T) {
	r := load(t, "cscs-all-reduce-2.17.1-2x4-gh200-dedented.txt")
	if msg := busbwConsistency(r, r.Rows); msg != "" {
		t.Fatalf("genuine log flagged: %s", msg)
	}
	r.Rows[len(r.Rows)-1].OOP.BusBW *= 2
	if msg := busbwConsistency(r, r.Rows); !strings.Contains(msg, "is not algbw") {
		t.Fatalf("doubled busbw not noticed: %q", msg)
	}
}

func find(j Judgement, id string) record.Verdict {
	for _, v := range j.Verdicts {
		if v.ID == id {
			return v
		}
	}
	return record.Verdict{}
}

func TestSlowLinksAreMeasuredFromTime(t *testing.T) {
	// 200 Mbit/s: nccl-tests prints busbw 0.02; the time says 0.0207.
	r := parse.NCCL{Collective: "all_reduce", OK: true,
		Ranks: []parse.NCCLRank{{Rank: 0, Host: "h1"}, {Rank: 1, Host: "h2"}},
		Rows: []parse.NCCLRow{{Size: 16 << 20, Count: 4 << 20, Type: "float",
			OOP: parse.NCCLResult{TimeUS: 810450, AlgBW: 0.02, BusBW: 0.02}}}}
	j := Judge(r, quote(0.0239, 0), "")
	if math.Abs(j.BusBW.Median-0.0207) > 0.0001 {
		t.Fatalf("busbw %v, want 0.0207 from size / time", j.BusBW.Median)
	}
}
