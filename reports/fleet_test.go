package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/internal/browser"
	"gpuaccept/orchestrator/record"
)

// fleet describes a synthetic window over n nodes: every requirement of
// a full window judged on each, as the phases word them, with the faults
// asked for.
type fleet struct {
	n int
	// diagFail: nodes (by index) whose DCGM diagnostic fails on memory.
	diagFail []int
	// slow: nodes whose intra-node busbw is 60 % of the quote.
	slow []int
	// unresolved: nodes whose name does not resolve (buyer's side).
	unresolved []int
	// interQuoted: the inter-node busbw the quote states (0: none).
	interQuoted float64
	// workload: "inference" or "training" records the load test's
	// evidence and judges WORK-* from it ("": every WORK-* passed as
	// required); workSlow: nodes whose server is slow, or the straggler.
	workload string
	workSlow []int
}

func f64(x float64) *float64 { return &x }

// modelled are the requirements fleet words itself; clusterWide those
// judged once for the whole cluster.
var (
	modelled    = map[string]bool{"CONN-001": true, "WIN-001": true, "GPU-001": true, "GPU-002": true, "DIAG-001": true, "NCCL-001": true, "NCCL-002": true, "NCCL-003": true}
	clusterWide = map[string]bool{"NCCL-001": true, "NCCL-002": true, "NCCL-005": true, "IMG-003": true, "STAGE-003": true, "CKPT-004": true,
		"RECOV-001": true, "RECOV-002": true, "RECOV-003": true, "RECOV-004": true}
)

func (f fleet) run() *record.Run {
	name := func(i int) string {
		if f.n >= 100 {
			return fmt.Sprintf("gpu-%04d", i+1)
		}
		return fmt.Sprintf("gpu-%02d", i+1)
	}
	in := func(list []int, i int) bool {
		for _, x := range list {
			if x == i {
				return true
			}
		}
		return false
	}
	r := &record.Run{
		Schema: record.Schema, ID: fmt.Sprintf("20261201T080000Z-vendor-a-%d", f.n), Tool: "gpuaccept v0.4.0",
		Provider: "vendor-a", Region: "us-east-2", Window: "2026-12-01 08:00-12:00 UTC",
		Started: t0, Ended: t0.Add(3 * time.Hour),
		Quote: json.RawMessage(fmt.Sprintf(`{"gpu_model":"NVIDIA H100 80GB HBM3","gpus_per_node":8,"intra_busbw_gbs":450,"inter_busbw_gbs":%g}`, f.interQuoted)),
	}
	v := func(id string, node string, s record.Status, measured, detail string) record.Verdict {
		x := record.NewVerdict(id, node)
		x.Status, x.Measured, x.Detail = s, measured, detail
		return x
	}
	reached := 0
	var trained []string
	straggler := ""
	for i := range f.n {
		n := record.Node{Index: i, Name: name(i), Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}
		if in(f.unresolved, i) {
			n.Address = n.Name + ".vendor-a.internal"
			n.Quarantined, n.Reason = true, "connect failed: "+n.Name+": connect to "+n.Name+".vendor-a.internal:22: no such host"
			c := v("CONN-001", n.Name, record.Skip, "not reached: name resolution", n.Reason)
			c.Incomplete = "not reached for a reason on the buyer's side (name resolution): connect to <address>:22: no such host"
			r.Nodes = append(r.Nodes, n)
			r.Verdicts = append(r.Verdicts, c, v("WIN-001", n.Name, record.Skip, "", n.Reason))
			for _, id := range []string{"GPU-001", "GPU-002", "DIAG-001", "NCCL-003"} {
				r.Verdicts = append(r.Verdicts, v(id, n.Name, record.Skip, "", n.Reason))
			}
			continue
		}
		reached++
		if in(f.diagFail, i) {
			n.Quarantined, n.Reason = true, "diag failed: dcgmi diag -r 3 failed: Memory"
		}
		r.Nodes = append(r.Nodes, n)
		r.Verdicts = append(r.Verdicts,
			v("CONN-001", n.Name, record.Pass, "connected", ""),
			v("GPU-001", n.Name, record.Pass, "NVIDIA H100 80GB HBM3", ""),
			v("GPU-002", n.Name, record.Pass, "8", ""))
		r.Verdicts[len(r.Verdicts)-2].Quoted = "NVIDIA H100 80GB HBM3"
		r.Verdicts[len(r.Verdicts)-1].Quoted = "8"
		if n.Quarantined {
			r.Verdicts = append(r.Verdicts,
				v("DIAG-001", n.Name, record.Fail, "failed", "dcgmi diag -r 3: Memory"),
				v("WIN-001", n.Name, record.Fail, "quarantined", n.Reason),
				v("NCCL-003", n.Name, record.Skip, "", n.Reason))
			continue
		}
		r.Verdicts = append(r.Verdicts, v("DIAG-001", n.Name, record.Pass, "passed (level 3, 24 tests)", ""),
			v("WIN-001", n.Name, record.Pass, "took part in every phase", ""))
		// The rest of a full window's requirements, passed as the phases
		// word them.
		switch f.workload {
		case "inference":
			slow := 1.0
			if in(f.workSlow, i) {
				slow = 1.9
			}
			ev := inferenceEvidence(n.Name, slow, 0)
			r.Phases = append(r.Phases, withData(phase(inferencePhase, n.Name, i, record.OK, 600, 400, ""), mustJSON(ev)))
			r.Verdicts = append(r.Verdicts, inferenceVerdicts(n.Name, ev)...)
		case "training":
			trained = append(trained, n.Name)
			if in(f.workSlow, i) {
				straggler = n.Name
			}
		}
		for _, q := range record.Catalog() {
			if f.workload != "" && record.FamilyOf(q.ID) == "WORK" || transportOwn(q.ID) {
				// (These fleets name their nodes and reach them over SSH:
				// no Slurm allocation, no Kubernetes API.)
				continue
			}
			if !modelled[q.ID] && !clusterWide[q.ID] {
				r.Verdicts = append(r.Verdicts, v(q.ID, n.Name, record.Pass, "as required", ""))
			}
		}
		bw := 452.0 + float64(i%7)
		if in(f.slow, i) {
			bw = 270 + float64(i%5)
		}
		nc := v("NCCL-003", n.Name, record.Pass, fmt.Sprintf("%.1f GB/s median of 3 sweep(s)", bw), "NCCL: Ring/Simple (64MiB..8GiB)")
		nc.Quoted, nc.Ratio, nc.Tolerance = "450 GB/s", f64(bw/450), f64(0.9)
		nc.Measure(bw, record.UnitGBs)
		if bw/450 < 0.9 {
			nc.Status = record.Fail
		}
		r.Verdicts = append(r.Verdicts, nc)
	}
	if reached > 1 {
		inter := v("NCCL-002", "", record.Pass, "371.2 GB/s median of 3 sweep(s)", "NCCL: Ring/Simple (64MiB..8GiB)")
		inter.Measure(371.2, record.UnitGBs)
		if f.interQuoted > 0 {
			inter.Quoted, inter.Ratio, inter.Tolerance = fmt.Sprintf("%g GB/s", f.interQuoted), f64(371.2/f.interQuoted), f64(0.9)
			if 371.2/f.interQuoted < 0.9 {
				inter.Status = record.Fail
			}
		} else {
			inter.Status, inter.Detail = record.Skip, "not stated in the quote"
		}
		r.Verdicts = append(r.Verdicts, inter, v("NCCL-001", "", record.Pass, "0 wrong", ""))
		for _, q := range record.Catalog() {
			if clusterWide[q.ID] && !modelled[q.ID] && !transportOwn(q.ID) {
				r.Verdicts = append(r.Verdicts, v(q.ID, "", record.Pass, "as required", ""))
			}
		}
	}
	if len(trained) > 0 {
		tr := trainingEvidence(trained, straggler)
		r.Phases = append(r.Phases, withData(phase(trainingPhase, "", -1, record.OK, 600, 120, ""), mustJSON(tr)))
		r.Verdicts = append(r.Verdicts, trainingVerdicts(tr)...)
	}
	cost := 2.49 * 8 * 3 * float64(f.n)
	accepted := reached - len(f.diagFail) - len(f.slow)
	r.Ledger = &record.Ledger{Currency: "USD", Granularity: "1m", PricePerGPUHour: 2.49, TotalCost: cost,
		Unit: "accepted node", AcceptedUnits: float64(accepted)}
	if accepted > 0 {
		r.Ledger.CostPerUnit = f64(cost / float64(accepted))
	}
	return r
}

func summaryOf(t *testing.T, run *record.Run, o SummaryOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := Summary(&b, run, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fits fails the test for any line wider than width.
func fits(t *testing.T, name, s string, width int) {
	t.Helper()
	for i, l := range strings.Split(s, "\n") {
		if n := len([]rune(l)); n > width {
			t.Errorf("%s: line %d is %d columns wide, more than %d:\n%s", name, i+1, n, width, l)
		}
	}
}

// The summary at 4 nodes, one window of each outcome, held to goldens; at
// every width from 60 to 160 no line is wider than asked.
func TestSummaryAtFourNodes(t *testing.T) {
	for _, c := range []struct {
		name    string
		f       fleet
		outcome string
	}{
		{"accepted", fleet{n: 4, interQuoted: 370}, record.OutcomeAccepted},
		{"not-accepted", fleet{n: 4, interQuoted: 420, diagFail: []int{3}, slow: []int{2}}, record.OutcomeNotAccepted},
		{"incomplete", fleet{n: 4, interQuoted: 370, unresolved: []int{1, 2}}, record.OutcomeIncomplete},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := c.f.run()
			if got := run.Result().Outcome; got != c.outcome {
				t.Fatalf("outcome %s, want %s", got, c.outcome)
			}
			s := summaryOf(t, run, SummaryOptions{})
			golden(t, "summary-4-"+c.name+".txt", []byte(s))
			fits(t, c.name, s, DefaultWidth)
			last := strings.Split(strings.TrimSpace(s), "\n")
			if !strings.HasPrefix(last[len(last)-1], c.outcome) && !strings.HasPrefix(last[len(last)-2], c.outcome) {
				t.Errorf("the outcome %s does not end the summary", c.outcome)
			}
			for w := 60; w <= 160; w += 7 {
				fits(t, fmt.Sprintf("%s at %d", c.name, w), summaryOf(t, run, SummaryOptions{Width: w}), w)
			}
		})
	}
}

// At 1,000 nodes: all passing is under 40 lines; with failures on many
// nodes the reasons are grouped by host range and bounded; every line
// fits 100 columns.
func TestSummaryAtAThousandNodes(t *testing.T) {
	pass := summaryOf(t, fleet{n: 1000, interQuoted: 370}.run(), SummaryOptions{})
	golden(t, "summary-1000-accepted.txt", []byte(pass))
	fits(t, "all passing", pass, DefaultWidth)
	if n := strings.Count(pass, "\n"); n >= 40 {
		t.Errorf("all passing at 1,000 nodes is %d lines:\n%s", n, pass)
	}
	var diag, slow, gone []int
	for i := 0; i < 1000; i++ {
		switch {
		case i%97 == 5:
			diag = append(diag, i)
		case i%89 == 3:
			slow = append(slow, i)
		case i >= 960 && i < 992:
			gone = append(gone, i) // a rack behind a name that does not resolve
		}
	}
	bad := summaryOf(t, fleet{n: 1000, interQuoted: 370, diagFail: diag, slow: slow, unresolved: gone}.run(), SummaryOptions{})
	golden(t, "summary-1000-not-accepted.txt", []byte(bad))
	fits(t, "failing", bad, DefaultWidth)
	if n := strings.Count(bad, "\n"); n >= 50 {
		t.Errorf("1,000 nodes with failures is %d lines:\n%s", n, bad)
	}
	for _, want := range []string{
		"11 nodes gpu-[0006,0103,0200,0297,0394,0491,0588,0685,0782,0879,0976]: DIAG-001 failed: dcgmi diag -r 3:",
		"30 nodes gpu-[0961-0975,0977-0982,0984-0992]: not reached for a reason on the buyer's side (name resolution)",
		"12 nodes gpu-[0004,0093,0182,0271,0360,0449,0538,0627,0716,0805,0894,0983]: NCCL-003 270 GB/s..274 GB/s",
	} {
		if !strings.Contains(strings.Join(strings.Fields(bad), " "), want) {
			t.Errorf("no %q in\n%s", want, bad)
		}
	}
	if strings.Contains(bad, "WIN-001") && strings.Contains(bad, "gpu-0006: WIN-001") {
		t.Errorf("a quarantined node's WIN-001 repeats the failure that quarantined it:\n%s", bad)
	}
}

// A 256-node window's report.html prints with the result and the whole
// card on its first page, however long the rest.
func TestReportOf256NodesPrints(t *testing.T) {
	var diag []int
	for i := 3; i < 256; i += 37 {
		diag = append(diag, i)
	}
	run := fleet{n: 256, interQuoted: 370, diagFail: diag, slow: []int{100, 101}}.run()
	var b bytes.Buffer
	if err := HTML(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), HTMLName)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	browser.CheckPrint(t, path, "report-256-nodes.pdf", 1000)
}

// transportOwn: requirements judged only where the nodes are a Slurm
// allocation's or a Kubernetes cluster's.
func transportOwn(id string) bool {
	return record.FamilyOf(id) == "SLURM" || record.FamilyOf(id) == "KUBE"
}
