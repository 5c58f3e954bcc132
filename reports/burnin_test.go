package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// burninRun is a window of nodes with 8 GPUs each and two burn-in runs:
// slow's GPU 3 computes 20% slower than the genuine H200's 668.7 TFLOP/s.
func burninRun(nodes int, slow string) *record.Run {
	r := &record.Run{ID: "20261205T080000Z-burnin"}
	for i := range nodes {
		name := fmt.Sprintf("gpu-%04d", i+1)
		r.Nodes = append(r.Nodes, record.Node{Index: i, Name: name})
		b := workload.Burnin{DurationS: 600, ElapsedS: 590, Seconds: 60, Size: 8192}
		var sum workload.GemmSummary
		for k := range 2 {
			run := workload.BurninRun{}
			for g := range 8 {
				x := 668.7 - float64((i*8+g)%13)*0.4 - float64(k)*1.5
				if name == slow && g == 3 {
					x *= 0.8
				}
				run.GPUs = append(run.GPUs, workload.GemmGPU{GPU: g, TFLOPS: x, Iters: 1000, Secs: 60, On: "cuda", Device: "NVIDIA H200"})
				if k == 1 {
					sum.GPUs = append(sum.GPUs, workload.GemmGPU{GPU: g, TFLOPS: x + 0.75, On: "cuda", Device: "NVIDIA H200"})
					b.Drift = append(b.Drift, workload.GemmDrift{GPU: g, First: x + 1.5, Last: x, Pct: -1.5 / (x + 1.5) * 100})
				}
			}
			bw := 450.0 - float64(k)
			if name == slow && k == 1 {
				bw = 300
			}
			run.Collective = &workload.BurninCollective{BusBW: bw, GateBytes: 1 << 30, Ranks: 8, Secs: 4}
			run.Loads = []workload.BurninLoad{{Load: "gpu_burn", Tool: "gpu_burn", Secs: 60}}
			if name == slow && k == 1 {
				run.Loads[0].Error, run.Loads[0].Faulty = "1 of 8 GPU(s) FAULTY", []int{3}
			}
			b.Runs = append(b.Runs, run)
		}
		first, last := 450.0, b.Runs[1].Collective.BusBW
		b.DriftWindowS = 150
		b.CollectiveDrift = &workload.BusBWDrift{First: first, Last: last, Pct: (last - first) / first * 100, FirstRuns: 1, LastRuns: 1}
		b.Compute = &sum
		r.Phases = append(r.Phases, withData(phase(burninPhase, name, i, record.OK, 100, 600, ""), mustJSON(b)))
	}
	return r
}

func TestComputeTableNamesTheSlowGPU(t *testing.T) {
	w := newWorkloadView(burninRun(2, "gpu-0002"))
	if len(w.Compute) != 16 || w.ComputeHeader[0] != "Node" {
		t.Fatalf("%d rows, want a row per node and GPU (16)", len(w.Compute))
	}
	row := w.Compute[8+3]
	if row[0] != "gpu-0002" || row[1] != "3" || row[2] != "NVIDIA H200" || !strings.HasPrefix(row[4], "0.8") {
		t.Errorf("gpu-0002 GPU 3: %q", row)
	}
	if !strings.Contains(row[6], "%") || !strings.HasPrefix(row[5], "2: ") {
		t.Errorf("runs and drift: %q", row)
	}
	var b bytes.Buffer
	if err := Markdown(&b, burninRun(2, "gpu-0002")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "## Burn-in: compute rate") {
		t.Errorf("report.md has no compute-rate table:\n%s", b.String())
	}
}

// TestComputeTableAt1000Nodes: 8,000 GPUs are the ten slowest and a
// spread line, the slow one first.
func TestComputeTableAt1000Nodes(t *testing.T) {
	w := newWorkloadView(burninRun(1000, "gpu-0777"))
	if len(w.Compute) != workloadWorst {
		t.Fatalf("%d rows, want %d", len(w.Compute), workloadWorst)
	}
	if r := w.Compute[0]; r[0] != "gpu-0777" || r[1] != "3" {
		t.Errorf("slowest row %q, want gpu-0777 GPU 3", r)
	}
	text := strings.Join(w.ComputeNote, " ")
	if !strings.Contains(text, "of 8000") || !strings.Contains(text, "over 8000") || !strings.Contains(text, "(gpu-0777 GPU 3)") {
		t.Errorf("notes: %s", text)
	}
	for _, n := range w.ComputeNote {
		if len(n) > 200 {
			t.Errorf("a note of %d characters: %s", len(n), n)
		}
	}
	var b bytes.Buffer
	if err := HTML(&b, burninRun(1000, "gpu-0777"), nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "<table id=\"compute\">"); got != 1 {
		t.Errorf("report.html: %d compute tables", got)
	}
}

// TestBurnLoadsTableShowsTheCollectivePerIteration: a row per node with
// each iteration's busbw, its drift and the stress runs; at 1,000 nodes the
// ten whose collective dropped most, the slow one first.
func TestBurnLoadsTableShowsTheCollectivePerIteration(t *testing.T) {
	w := newWorkloadView(burninRun(2, "gpu-0002"))
	if len(w.BurnLoads) != 2 {
		t.Fatalf("%d rows, want one per node", len(w.BurnLoads))
	}
	row := w.BurnLoads[1]
	if row[0] != "gpu-0002" || row[1] != "2" || row[2] != "450, 300" || !strings.Contains(row[3], "450 → 300 (-33.3 %") {
		t.Errorf("gpu-0002: %q", row)
	}
	if !strings.Contains(row[4], "gpu_burn 2 run(s), 1 failed (iteration 2: 1 of 8 GPU(s) FAULTY)") {
		t.Errorf("stress: %q", row[4])
	}
	if note := strings.Join(w.BurnLoadsNote, " "); !strings.Contains(note, "first 2.5 min") {
		t.Errorf("note: %s", note)
	}
	var b bytes.Buffer
	if err := Markdown(&b, burninRun(2, "gpu-0002")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "## Burn-in: collective and stress per iteration") {
		t.Errorf("report.md has no loads table:\n%s", b.String())
	}
	w = newWorkloadView(burninRun(1000, "gpu-0777"))
	if len(w.BurnLoads) != workloadWorst || w.BurnLoads[0][0] != "gpu-0777" {
		t.Errorf("1,000 nodes: %d rows, first %q", len(w.BurnLoads), w.BurnLoads[0])
	}
	b.Reset()
	if err := HTML(&b, burninRun(3, "gpu-0002"), nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), `<table id="burnin-loads">`); got != 1 {
		t.Errorf("report.html: %d loads tables", got)
	}
	if got := busbwSeries(make([]workload.BurninRun, 20)); got != none {
		t.Errorf("no collective ran: %q", got)
	}
}
