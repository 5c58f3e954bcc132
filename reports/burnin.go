package reports

import (
	"cmp"
	"fmt"
	"slices"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// burninPhase has one result per node whose data is a workload.Burnin.
const burninPhase = "burnin"

// computeRow is one GPU of one node: its rate (the median of its runs,
// what BURN-001 judged) and how its runs spread.
type computeRow struct {
	Node          string
	GPU           workload.GemmGPU
	Runs          int
	Min, Max      float64
	Drift         *workload.GemmDrift
	Elapsed, Plan float64
}

// computeOf is every measured GPU of the run, in node and GPU order.
func computeOf(run *record.Run) []computeRow {
	var out []computeRow
	for _, n := range run.Nodes {
		var b workload.Burnin
		if !hasData(run, burninPhase, n.Name, &b) || b.Compute == nil {
			continue
		}
		for _, g := range b.Compute.GPUs {
			r := computeRow{Node: n.Name, GPU: g, Elapsed: b.ElapsedS, Plan: b.DurationS}
			for _, run := range b.Runs {
				for _, x := range run.GPUs {
					if x.GPU != g.GPU || x.Error != "" {
						continue
					}
					if r.Runs == 0 || x.TFLOPS < r.Min {
						r.Min = x.TFLOPS
					}
					r.Max = max(r.Max, x.TFLOPS)
					r.Runs++
				}
			}
			for i := range b.Drift {
				if b.Drift[i].GPU == g.GPU {
					r.Drift = &b.Drift[i]
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// compute fills the compute-rate table: a row per node and GPU, the ten
// slowest GPUs and a spread line past fleetRows.
func (w *workloadView) compute(run *record.Run) {
	all := computeOf(run)
	if len(all) == 0 {
		return
	}
	var rates []float64
	var names []string
	cpu := false
	for _, r := range all {
		rates = append(rates, r.GPU.TFLOPS)
		names = append(names, fmt.Sprintf("%s GPU %d", r.Node, r.GPU.GPU))
		cpu = cpu || r.GPU.On == "cpu"
	}
	fleet := median(rates)
	w.ComputeHeader = []string{"Node", "GPU", "Device", "TFLOP/s (median)", "× fleet median", "Runs: min .. max",
		"Drift, first window to last (medians)"}
	shown := all
	if len(all) > fleetRows {
		shown = slices.Clone(all)
		slices.SortStableFunc(shown, func(a, b computeRow) int { return cmp.Compare(a.GPU.TFLOPS, b.GPU.TFLOPS) })
		shown = shown[:workloadWorst]
		w.ComputeNote = append(w.ComputeNote, fmt.Sprintf("The %d slowest GPUs of %d; every one is in run.json.",
			workloadWorst, len(all)))
	}
	for _, r := range shown {
		ratio := none
		if fleet > 0 {
			ratio = fmt.Sprintf("%.2f", r.GPU.TFLOPS/fleet)
		}
		drift := none
		if r.Drift != nil {
			drift = fmt.Sprintf("%s → %s (%+.1f %%)", fig(r.Drift.First), fig(r.Drift.Last), r.Drift.Pct)
		}
		device := firstOf(r.GPU.Device, none)
		if r.GPU.On == "cpu" {
			device = "cpu (simulated)"
		}
		w.Compute = append(w.Compute, []string{r.Node, fmt.Sprint(r.GPU.GPU), device, fig(r.GPU.TFLOPS), ratio,
			fmt.Sprintf("%d: %s .. %s", r.Runs, fig(r.Min), fig(r.Max)), drift})
	}
	if len(all) > fleetRows {
		w.ComputeNote = append(w.ComputeNote, spreadLine("Compute rate, GPUs", record.UnitTFLOPS, names, rates))
	}
	what := "Dense bf16 matrix products on every GPU of a node at once (scripts/node/gemm.py)"
	if cpu {
		what += "; in this simulated window on the CPU, which is no GPU's rate"
	}
	w.ComputeNote = append(w.ComputeNote, fmt.Sprintf("%s. Fleet median %s; a GPU below 0.9 × it is named by BURN-001.",
		what, record.Figure(fleet, record.UnitTFLOPS)))
}
