package phases

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// Drift under sustained load: each GPU's rate, and each node's collective
// busbw, over the runs that started in the burn-in's first window against
// those in its last (medians, never one run against one run: a single run
// is as noisy as the first minute of a cold GPU).
//
// BURN-002 holds the last to the first: a drop of more than driftWarn is
// a WARN, of more than driftFail a FAIL (a GPU or link that sags as it
// heats, or as a neighbour's job arrives, is what a burn-in is run for).
const (
	driftWarn = 0.05
	driftFail = 0.10
)

// driftWindow is the span compared at each end: the first hour against
// the last for a burn-in of 2 h or more (issue 27: "the first hour
// against the last"), else a quarter of its duration, so a short burn-in
// still compares ends that do not overlap.
func driftWindow(duration time.Duration) time.Duration {
	if duration >= 2*time.Hour {
		return time.Hour
	}
	return duration / 4
}

// driftSplit is which runs started in the first window (counted from the
// first run's start) and which in the last (counted back from the last
// run's start, so the last run is always in it): the indexes of each. A
// run in both (a burn-in cut short) is the first window's only.
func driftSplit(runs []BurninRun, window time.Duration) (first, last []int) {
	if len(runs) == 0 {
		return nil, nil
	}
	t0, tn := runs[0].At, runs[len(runs)-1].At
	for i, r := range runs {
		switch {
		case r.At.Sub(t0) < window || i == 0:
			first = append(first, i)
		case tn.Sub(r.At) < window || i == len(runs)-1:
			last = append(last, i)
		}
	}
	return first, last
}

// burninDrift is each GPU's drift and the collective's over runs, with
// the window it compared.
func burninDrift(runs []BurninRun, duration time.Duration) (time.Duration, []GemmDrift, *BusBWDrift) {
	window := driftWindow(duration)
	first, last := driftSplit(runs, window)
	if len(first) == 0 || len(last) == 0 {
		return window, nil, nil
	}
	rates := func(idx []int) map[int][]float64 {
		by := map[int][]float64{}
		for _, i := range idx {
			for _, g := range runs[i].GPUs {
				if g.Error == "" {
					by[g.GPU] = append(by[g.GPU], g.TFLOPS)
				}
			}
		}
		return by
	}
	f, l := rates(first), rates(last)
	var gpus []GemmDrift
	for gpu, xs := range f {
		ys := l[gpu]
		if len(ys) == 0 {
			continue
		}
		a, b := median(xs), median(ys)
		if a <= 0 {
			continue
		}
		gpus = append(gpus, GemmDrift{GPU: gpu, First: a, Last: b, Pct: (b - a) / a * 100, FirstRuns: len(xs), LastRuns: len(ys)})
	}
	slices.SortFunc(gpus, func(a, b GemmDrift) int { return a.GPU - b.GPU })
	busbw := func(idx []int) []float64 {
		var out []float64
		for _, i := range idx {
			if c := runs[i].Collective; c != nil && c.Error == "" && c.BusBW > 0 {
				out = append(out, c.BusBW)
			}
		}
		return out
	}
	var coll *BusBWDrift
	if xs, ys := busbw(first), busbw(last); len(xs) > 0 && len(ys) > 0 {
		a, b := median(xs), median(ys)
		coll = &BusBWDrift{First: a, Last: b, Pct: (b - a) / a * 100, FirstRuns: len(xs), LastRuns: len(ys)}
	}
	return window, gpus, coll
}

// driftVerdict is BURN-002 for one node from its burn-in's record.
func driftVerdict(node string, res BurninNode) record.Verdict {
	v := record.NewVerdict("BURN-002", node)
	v.Unit = record.UnitTimesFirst
	span := driftSpan(time.Duration(res.DriftWindowS * float64(time.Second)))
	var asked []string
	for _, m := range res.NotMeasured {
		// The cluster rounds' loads are BURN-004's and BURN-005's.
		if m.Asked && m.Load != loadClusterAllReduce && m.Load != loadWorkload {
			asked = append(asked, m.Reason)
		}
	}
	if len(asked) > 0 {
		// Asked for and not run: what was judged stands, the window says
		// what it could not measure.
		v.Incomplete = strings.Join(asked, "; ")
	}
	// The worst drop of all the node's figures.
	worst, what, figures := 0.0, "", ""
	judged := 0
	// A simulated window's gemm on the CPU (the lab's) is no GPU's rate,
	// and a loaded CPU's swings of 30-45 % between runs are not a drift.
	onCPU := slices.ContainsFunc(res.Runs, func(r BurninRun) bool {
		return slices.ContainsFunc(r.GPUs, func(g GemmGPU) bool { return g.On == "cpu" })
	})
	for _, d := range res.Drift {
		if onCPU {
			continue
		}
		judged++
		if judged == 1 || d.Pct < worst {
			worst, what = d.Pct, fmt.Sprintf("GPU %d", d.GPU)
			figures = fmt.Sprintf("%.4g to %.4g TFLOP/s (medians of %d and %d run(s))", d.First, d.Last, d.FirstRuns, d.LastRuns)
		}
	}
	if c := res.CollectiveDrift; c != nil {
		judged++
		if judged == 1 || c.Pct < worst {
			worst, what = c.Pct, "intra-node all-reduce"
			figures = fmt.Sprintf("%.4g to %.4g GB/s busbw (medians of %d and %d run(s))", c.First, c.Last, c.FirstRuns, c.LastRuns)
		}
	}
	if judged == 0 {
		v.Status, v.Measured = record.Skip, "not judged"
		v.Detail = fmt.Sprintf("%d run(s): too few to compare %s (one run in each, apart, at least)", len(res.Runs), span)
		if onCPU && len(res.Drift) > 0 {
			v.Detail = "the gemm's rate on the CPU (simulated) is not held to drift, and no collective's figures to compare"
		}
		return v
	}
	// The value is last over first, not the percent: gpuaccept diff
	// holds a figure to its baseline relatively, and a drift of -0.3 %
	// against -0.6 % is no regression of 100 %.
	x := 1 + worst/100
	v.Value = &x
	v.Measured = fmt.Sprintf("%s %+.1f %%: %s", what, worst, figures)
	switch {
	case worst < -driftFail*100:
		v.Status = record.Fail
		v.Detail = fmt.Sprintf("dropped more than %.0f %%, %s", driftFail*100, span)
	case worst < -driftWarn*100:
		v.Status = record.Warn
		v.Detail = fmt.Sprintf("dropped more than %.0f %%, %s", driftWarn*100, span)
	default:
		v.Status = record.Pass
		v.Detail = fmt.Sprintf("%d figure(s) within %.0f %%, %s", judged, driftWarn*100, span)
	}
	if onCPU && len(res.Drift) > 0 {
		v.Detail += "; the gemm's rate on the CPU (simulated) is not held to drift"
	}
	if res.CollectiveDrift == nil && !slices.ContainsFunc(res.NotMeasured, func(m LoadUnmeasured) bool { return m.Load == loadCollectives }) &&
		slices.ContainsFunc(res.Runs, func(r BurninRun) bool { return r.Collective != nil }) {
		v.Detail += "; the collective's drift not judged (too few figures)"
	}
	return v
}

// driftSpan says which ends a drift compared, as the verdicts say it:
// "the first hour against the last", or for a shorter burn-in "the first
// quarter (2.5s) against the last" (a demo's quarter is seconds).
func driftSpan(window time.Duration) string {
	if window == time.Hour {
		return "the first hour against the last"
	}
	if window >= time.Minute {
		window = window.Round(time.Second)
	} else {
		window = window.Round(100 * time.Millisecond)
	}
	return fmt.Sprintf("the first quarter (%s) against the last", window)
}
