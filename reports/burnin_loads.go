package reports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// seriesShown bounds the per-iteration figures a cell lists: the first
// and the last few (a day's burn-in of one-minute runs is 1,440 of them;
// run.json has them all).
const seriesShown = 6

// burnLoadRow is one node's loads over the burn-in's iterations.
type burnLoadRow struct {
	Node  string
	B     workload.Burnin
	Worst float64 // the collective's drift, % (0 without one): the sort key past fleetRows
}

// burnLoads fills the burn-in's loads table: one row per node with the
// collective's busbw per iteration, its drift, the stress tools' runs and
// what the node could not run; past fleetRows, the nodes whose collective
// dropped most.
func (w *workloadView) burnLoads(run *record.Run) {
	var all []burnLoadRow
	for _, n := range run.Nodes {
		var b workload.Burnin
		if !hasData(run, burninPhase, n.Name, &b) || len(b.Runs) == 0 {
			continue
		}
		r := burnLoadRow{Node: n.Name, B: b}
		if b.CollectiveDrift != nil {
			r.Worst = b.CollectiveDrift.Pct
		}
		all = append(all, r)
	}
	if len(all) == 0 {
		return
	}
	w.BurnLoadsHeader = []string{"Node", "Iterations", "All-reduce busbw per iteration, GB/s", "Busbw drift, first window to last",
		"Stress tools", "Not measured"}
	shown := all
	if len(all) > fleetRows {
		shown = slices.Clone(all)
		slices.SortStableFunc(shown, func(a, b burnLoadRow) int { return cmp.Compare(a.Worst, b.Worst) })
		shown = shown[:workloadWorst]
		w.BurnLoadsNote = append(w.BurnLoadsNote, fmt.Sprintf("The %d nodes whose collective dropped most, of %d; every one is in run.json.",
			workloadWorst, len(all)))
	}
	window := 0.0
	for _, r := range shown {
		b := r.B
		window = max(window, b.DriftWindowS)
		drift := none
		if d := b.CollectiveDrift; d != nil {
			drift = fmt.Sprintf("%s → %s (%+.1f %%; %d → %d run(s))", fig(d.First), fig(d.Last), d.Pct, d.FirstRuns, d.LastRuns)
		}
		var lacks []string
		for _, m := range b.NotMeasured {
			lacks = append(lacks, m.Reason)
		}
		w.BurnLoads = append(w.BurnLoads, []string{r.Node, fmt.Sprint(len(b.Runs)), busbwSeries(b.Runs), drift,
			firstOf(stressText(b.Runs), none), firstOf(strings.Join(lacks, "; "), none)})
	}
	w.BurnLoadsNote = append(w.BurnLoadsNote, fmt.Sprintf("Each iteration runs gemm.py, then the intra-node all-reduce "+
		"(one process over the node's GPUs), then gpu-burn and DCGM's targeted stress where installed. Drift compares "+
		"the medians of the runs in the first %s with those in the last (BURN-002: a drop past 5 %% warns, past 10 %% fails).",
		windowText(window)))
}

// busbwSeries is a node's collective busbw per iteration: "450, 449, ..
// 301" (the first and last seriesShown), "-" for an iteration without a
// figure.
func busbwSeries(runs []workload.BurninRun) string {
	var xs []string
	some := false
	for _, r := range runs {
		switch c := r.Collective; {
		case c == nil:
			xs = append(xs, none)
		case c.Error != "" || c.BusBW <= 0:
			xs, some = append(xs, "failed"), true
		default:
			xs, some = append(xs, fig(c.BusBW)), true
		}
	}
	if !some {
		return none
	}
	if len(xs) > 2*seriesShown {
		xs = slices.Concat(xs[:seriesShown], []string{fmt.Sprintf("(%d more)", len(xs)-2*seriesShown)}, xs[len(xs)-seriesShown:])
	}
	return strings.Join(xs, ", ")
}

// stressText is a node's stress runs by tool: "gpu_burn 5 run(s), 1
// failed (iteration 3: 2 of 8 GPU(s) FAULTY)".
func stressText(runs []workload.BurninRun) string {
	type tally struct {
		n, failed int
		first     string
	}
	by := map[string]*tally{}
	var order []string
	for i, r := range runs {
		for _, l := range r.Loads {
			t := by[l.Tool]
			if t == nil {
				t = &tally{}
				by[l.Tool] = t
				order = append(order, l.Tool)
			}
			t.n++
			if l.Error != "" {
				t.failed++
				if t.first == "" {
					t.first = fmt.Sprintf("iteration %d: %s", i+1, l.Error)
				}
			}
		}
	}
	var parts []string
	for _, tool := range order {
		t := by[tool]
		s := fmt.Sprintf("%s %d run(s), all exit 0", tool, t.n)
		if t.failed > 0 {
			s = fmt.Sprintf("%s %d run(s), %d failed (%s)", tool, t.n, t.failed, t.first)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// windowText is a drift window in words: "hour", "15 s", "15 min".
func windowText(s float64) string {
	switch {
	case s == 3600:
		return "hour"
	case s >= 120:
		return fmt.Sprintf("%.4g min", s/60)
	case s > 0:
		return fmt.Sprintf("%.3g s", s)
	}
	return "quarter"
}
