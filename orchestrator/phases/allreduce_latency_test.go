package phases

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/scripts/standins"
)

// TestSweepLatencyOnGenuineOutputs: the latency of every genuine
// all-reduce output in the shared samples that has small rows is the
// median out-of-place time of its rows from 8 B to 64 KiB, worked out
// here by hand from the files; an output whose sweep starts at 1 MiB has
// none.
func TestSweepLatencyOnGenuineOutputs(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "samples", "nccl-tests")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("want the shared samples next to the module (/work/shared/samples): %v", err)
	}
	for file, want := range map[string]float64{
		"a3mega-all-reduce-2node-16xH100.txt":                              126.75,
		"awsbench-all-reduce-2node-16xV100-v2.0-error-float-nccl-info.txt": 152.4,
		"awsome-all-reduce-2x-p5-srun-label-prefix-excerpt.txt":            74.09,
		"awsome-batch-all-reduce-p5-mpirun-tag-prefix.txt":                 16.525,
		"cscs-all-reduce-2.17.1-2x4-gh200-dedented.txt":                    20.035,
		"h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-b8-e4G-g1.txt":       6.96,
		"h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-b8-e4G-g1-J.json":    6.62805,
		"sb-all-reduce-8xA100-old-error-col-NA.txt":                        35.51, // its 0 B and 4 B rows are not counted
		"cscs-all-reduce-2.18.2-2node-gh200-unalign.txt":                   -1,
		"pkb-all-reduce-2node-k80-validation0.txt":                         -1,
		"h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-nccl-debug-info.txt": -1,
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := parse.NCCLTests(string(b))
		if errors.Is(err, parse.ErrNotRecognized) {
			t.Fatalf("%s: %v", file, err)
		}
		var s Sweep
		for _, row := range r.Rows {
			s.Points = append(s.Points, SweepPoint{Bytes: row.Size, BusBW: row.OOP.BusBW, TimeUS: row.OOP.TimeUS})
		}
		got, ok := sweepLatency(s)
		switch {
		case want < 0 && ok:
			t.Errorf("%s: latency %g µs from a sweep without small rows", file, got)
		case want >= 0 && (!ok || math.Abs(got-want) > 1e-9):
			t.Errorf("%s: latency %g µs (%v), want %g", file, got, ok, want)
		}
	}
}

// latencyRuns are runs of one sweep each whose every small row took the
// given µs (0: the sweep failed).
func latencyRuns(us ...float64) []LatencyRun {
	var runs []LatencyRun
	for _, x := range us {
		s := Sweep{Error: "mpirun exited 1"}
		if x > 0 {
			s = Sweep{}
			for b := int64(8); b <= 64<<10; b *= 2 {
				s.Points = append(s.Points, SweepPoint{Bytes: b, TimeUS: x})
			}
		}
		runs = append(runs, LatencyRun{Repeats: []Sweep{s}})
	}
	return runs
}

// TestLatencyVerdictRestsOnTheLastRun: quoted 35 µs at tolerance 0.9 (at
// most 38.9 µs); the history decides as record.Again ran it.
func TestLatencyVerdictRestsOnTheLastRun(t *testing.T) {
	for _, c := range []struct {
		name     string
		runs     []float64
		quoted   float64
		status   record.Status
		value    float64
		unstable bool
	}{
		{"one run passes", []float64{31}, 35, record.Pass, 31, false},
		{"retest 0: one failed run", []float64{50}, 35, record.Fail, 50, false},
		{"passes after a failure", []float64{50, 31}, 35, record.Pass, 31, false},
		{"fails twice", []float64{50, 45}, 35, record.Fail, 45, false},
		{"fails, passes, fails: unstable", []float64{50, 31, 45}, 35, record.Fail, 45, true},
		{"fails, passes, passes", []float64{50, 31, 32}, 35, record.Pass, 32, false},
		{"a failed sweep, then a pass", []float64{0, 31}, 35, record.Pass, 31, false},
		{"no quote: measured, not judged", []float64{50}, 0, record.Skip, 50, false},
	} {
		v := latencyVerdict("NCCL-006", "", latencyRuns(c.runs...), c.quoted, 0.9)
		if v.Status != c.status || v.Value == nil || *v.Value != c.value || v.Unit != record.UnitMicroseconds {
			t.Errorf("%s: %s %v %q", c.name, v.Status, v.Value, v.Measured)
			continue
		}
		switch {
		case len(c.runs) == 1 && v.Retest != nil:
			t.Errorf("%s: one run has no history: %+v", c.name, v.Retest)
		case len(c.runs) > 1 && (v.Retest == nil || len(v.Retest.Runs) != len(c.runs) || v.Retest.Unstable != c.unstable):
			t.Errorf("%s: history %+v", c.name, v.Retest)
		case len(c.runs) > 1 && v.Retest.Runs[0].Failed == "":
			t.Errorf("%s: the first run failed, its history says not: %+v", c.name, v.Retest.Runs[0])
		}
		if strings.Contains(v.Detail, "run 1") {
			t.Errorf("%s: the history is the report's to say, not Detail's: %q", c.name, v.Detail)
		}
		if c.quoted > 0 && (v.Rule() != "≤ 38.9 µs (35 µs quoted ÷ 0.9)") {
			t.Errorf("%s: rule %q", c.name, v.Rule())
		}
	}
}

const latencyQuote = `quote:
  gpus_per_node: 8
  intra_busbw_gbs: 450
  inter_busbw_gbs: 370
  inter_latency_us: 35
  intra_latency_us: 8
  busbw_size: 64MiB
phases:
  allreduce:
    enabled: true
    min_bytes: 64MiB
    max_bytes: 1GiB
    repeats: 1
    timeout: 1m
`

// congest makes the fleet's first node answer its small-message sweeps
// from a fabric whose every link has a latency floor of 80 µs (a
// transient: a congested switch, say) on the calls slow says, counted
// from 0, and from the sound fabric (30 µs) on the others.
func congest(f *fake.Fleet, nodes int, slow func(call int) bool) {
	var mu sync.Mutex
	call := 0
	normal := fabricHosts(nodes, "")
	hosts, _ := standins.ParseFabric(normal)
	for i := range hosts {
		hosts[i].InterUs, hosts[i].IntraUs = 80, 20
	}
	congested := standins.FormatFabric(hosts)
	f.Host("h1").On(`_perf -b 8 `, func(c *fake.Call) fake.Reply {
		mu.Lock()
		k := call
		call++
		mu.Unlock()
		if slow(k) {
			return fabricReply(c, congested, "192.0.2.11")
		}
		return fabricReply(c, normal, "192.0.2.11")
	})
}

// TestInterLatencyPassesOnItsRetest: the first small-message run over a
// congested fabric fails the quoted 35 µs; the retest passes, one more
// run confirms it and the verdict rests on that, every run recorded.
func TestInterLatencyPassesOnItsRetest(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 3, "", latencyQuote)
	congest(f, 3, func(call int) bool { return call == 0 })
	r := runFake(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-006", "")
	if v.Status != record.Pass || v.Value == nil || *v.Value > 35 || v.Retest == nil || len(v.Retest.Runs) != 3 {
		t.Fatalf("NCCL-006: %+v (retest %+v)", v, v.Retest)
	}
	if first := v.Retest.Runs[0]; first.Failed == "" || first.Value == nil || *first.Value < 79 || *first.Value > 82 {
		t.Errorf("the first run: %+v", first)
	}
	var s Sweeps
	if err := jsonOf(resultOf(t, r, "allreduce", -1), &s); err != nil || len(s.Latency) != 3 {
		t.Fatalf("recorded latency runs: %d (%v)", len(s.Latency), err)
	}
	if got := f.Host("h1").Ran(`all_reduce_perf -b 8 -e 65536 -f 2 -n 100 `); got != 3 {
		t.Errorf("%d small-message sweeps, want 3 (the first, its retest, the confirmation)", got)
	}
	if bw := verdictOf(t, r, "NCCL-002", ""); bw.Status != record.Pass || bw.Retest != nil {
		t.Errorf("NCCL-002 was not retested: %+v", bw)
	}
}

// TestInterLatencyFailedPassedFailedIsUnstable: with two retests, a run
// that fails after a passing retest makes the figure unstable: FAIL.
func TestInterLatencyFailedPassedFailedIsUnstable(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 2, "", latencyQuote+"acceptance: {retest: 2}\n")
	congest(f, 2, func(call int) bool { return call != 1 })
	r := runFake(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-006", "")
	if v.Status != record.Fail || v.Retest == nil || !v.Retest.Unstable || len(v.Retest.Runs) != 3 {
		t.Fatalf("NCCL-006: %+v (retest %+v)", v, v.Retest)
	}
}

// TestInterLatencyRetestOff: acceptance.retest 0 lets the first failure
// stand, one run recorded.
func TestInterLatencyRetestOff(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 2, "", latencyQuote+"acceptance: {retest: 0}\n")
	congest(f, 2, func(call int) bool { return call == 0 })
	r := runFake(t, inv, f, WindowKey, AllReduce)
	if v := verdictOf(t, r, "NCCL-006", ""); v.Status != record.Fail || v.Retest != nil {
		t.Fatalf("NCCL-006: %+v (retest %+v)", v, v.Retest)
	}
	if got := f.Host("h1").Ran(`all_reduce_perf -b 8 `); got != 1 {
		t.Errorf("%d small-message sweeps, want 1", got)
	}
}

// TestIntraLatencyAgainstTheQuote: each node's own small-message run,
// inside the node (-g 8), against intra_latency_us: the model's NVLink
// floor of 5 µs passes 8 µs; a quote of 4 µs fails on the run and on its
// retest.
func TestIntraLatencyAgainstTheQuote(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 2, "", latencyQuote)
	r := runFake(t, inv, f, IntraNode)
	for _, n := range []string{"h1", "h2"} {
		v := verdictOf(t, r, "NCCL-007", n)
		if v.Status != record.Pass || v.Value == nil || *v.Value > 8 || v.Retest != nil {
			t.Errorf("NCCL-007 %s: %+v", n, v)
		}
	}
	if got := f.Host("h1").Ran(`all_reduce_perf -b 8 -e 65536 .* -g 8$`); got != 1 {
		t.Errorf("%d intra-node small-message sweeps on h1, want 1", got)
	}
	f, inv = fabricFleetQuoted(t, 2, "", strings.Replace(latencyQuote, "intra_latency_us: 8", "intra_latency_us: 4", 1))
	r = runFake(t, inv, f, IntraNode)
	v := verdictOf(t, r, "NCCL-007", "h2")
	if v.Status != record.Fail || v.Retest == nil || len(v.Retest.Runs) != 2 || !v.Retest.Failed() {
		t.Errorf("NCCL-007 h2 against 4 µs: %+v (retest %+v)", v, v.Retest)
	}
}

// TestLatencyUnquotedIsNotRun: no latency in the quote: no small-message
// run (on a slow fabric it costs minutes and would judge nothing), and
// NCCL-006 says so: SKIP, not stated, and not INCOMPLETE.
func TestLatencyUnquotedIsNotRun(t *testing.T) {
	f, inv := fabricFleet(t, 2, "")
	r := runFake(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-006", "")
	if v.Status != record.Skip || v.Value != nil || v.Incomplete != "" || !strings.HasPrefix(v.Detail, "not stated in the quote") {
		t.Errorf("NCCL-006 without a quote: %+v", v)
	}
	if got := f.Host("h1").Ran(`all_reduce_perf -b 8 -e 65536 `); got != 0 {
		t.Errorf("%d small-message sweeps without a quoted latency, want none", got)
	}
}

// TestPlanSaysAQuotedLatencyWillNotBeMeasured: a quoted latency whose run
// is off is PLAN-001 (check says it), naming the key that turns it on;
// with the run on, nothing is said.
func TestPlanSaysAQuotedLatencyWillNotBeMeasured(t *testing.T) {
	off := strings.Replace(latencyQuote, "enabled: true", "enabled: false", 1)
	says := func(ws []inventory.Warning) string {
		var out []string
		for _, w := range ws {
			out = append(out, w.ID+" "+w.Message)
		}
		return strings.Join(out, "\n")
	}
	got := says(Unmeasured(fakeInventory(t, 2, off)))
	for _, want := range []string{
		"PLAN-001 quote.inter_latency_us (35) will not be measured: NCCL-006 needs phases.allreduce.enabled",
		"PLAN-001 quote.intra_latency_us (8) will not be measured: NCCL-007 needs phases.allreduce.enabled (and phases.allreduce.intra_node)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	intraOff := strings.Replace(latencyQuote, "    timeout: 1m\n", "    timeout: 1m\n    intra_node: false\n", 1)
	got = says(Unmeasured(fakeInventory(t, 2, intraOff)))
	if !strings.Contains(got, "quote.intra_latency_us (8) will not be measured") || strings.Contains(got, "inter_latency_us") {
		t.Errorf("intra-node off:\n%s", got)
	}
	if got := says(Unmeasured(fakeInventory(t, 2, latencyQuote))); strings.Contains(got, "latency") {
		t.Errorf("both runs on:\n%s", got)
	}
}
