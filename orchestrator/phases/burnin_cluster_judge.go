package phases

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// roundFigure is one round's figure of one load, as the verdicts read it.
type roundFigure struct {
	At    time.Time
	Nodes int
	Value float64 // busbw GB/s, or the job's median step in seconds
	Error string
}

// roundsVerdicts are BURN-004 (the cluster all-reduce) and BURN-005 (the
// workload's job), one each for the cluster, where the inventory loops
// them: every round gave a figure, and it did not drift the wrong way
// from the burn-in's first window to its last (as BURN-002 holds a
// node's).
func roundsVerdicts(w *orchestrator.Window) []record.Verdict {
	b := w.Inv.Phases.Burnin
	var cluster, job []roundFigure
	none := map[string]*LoadUnmeasured{}
	for _, n := range w.Nodes {
		var res BurninNode
		if _, ok := w.Result(burninPhase, n.Index, &res); !ok {
			continue
		}
		for _, r := range res.Runs {
			if c := r.Cluster; c != nil {
				cluster = append(cluster, roundFigure{At: r.At, Nodes: c.Nodes, Value: c.BusBW, Error: c.Error})
			}
			if j := r.Workload; j != nil {
				job = append(job, roundFigure{At: r.At, Nodes: j.Nodes, Value: j.MedianStepSecs, Error: j.Error})
			}
		}
		for _, m := range res.NotMeasured {
			if none[m.Load] == nil {
				none[m.Load] = &m
			}
		}
	}
	var out []record.Verdict
	if b.ClusterAllReduce {
		out = append(out, roundsVerdict("BURN-004", cluster, none[loadClusterAllReduce], b.Duration, "busbw", "GB/s", true))
	}
	if b.Workload {
		out = append(out, roundsVerdict("BURN-005", job, none[loadWorkload], b.Duration, "median step", "s", false))
	}
	return out
}

// roundsVerdict judges one load's rounds; higher says whether a higher
// figure is the better (busbw) or the worse (a step's time).
func roundsVerdict(id string, rounds []roundFigure, none *LoadUnmeasured, duration time.Duration, what, unit string, higher bool) record.Verdict {
	v := record.NewVerdict(id, "")
	v.Unit = record.UnitTimesFirst
	slices.SortFunc(rounds, func(a, b roundFigure) int { return a.At.Compare(b.At) })
	if len(rounds) == 0 {
		switch {
		case none != nil && none.Asked:
			notMeasured(&v, none.Reason)
		case none != nil:
			v.Status, v.Measured, v.Detail = record.Skip, "not run", none.Reason
		default:
			v.Status, v.Measured, v.Detail = record.Skip, "not run", "no burn-in iteration reached a cluster round"
		}
		return v
	}
	var failed []string
	var figs []float64
	// The drift reads each round's figure as a run's collective: as a
	// rate, so that a step that grew longer is a drop. Only rounds over
	// as many nodes as the first are compared: a round without a node
	// that left the burn-in moves less data and waits for fewer peers,
	// and its figure would fake a drift or hide one.
	var runs []BurninRun
	nodes, full, shrank := 0, rounds[0].Nodes, 0
	for i, r := range rounds {
		nodes = max(nodes, r.Nodes)
		if r.Nodes != full && shrank == 0 {
			shrank = i + 1
		}
		if r.Error != "" || !finite(r.Value) || r.Value <= 0 {
			failed = append(failed, fmt.Sprintf("round %d (%s, %d nodes): %s", i+1, r.At.Format(time.TimeOnly), r.Nodes,
				clip(firstNonEmpty(r.Error, "no figure"), 80)))
			continue
		}
		figs = append(figs, r.Value)
		rate := r.Value
		if !higher {
			rate = 1 / r.Value
		}
		if r.Nodes == full {
			runs = append(runs, BurninRun{At: r.At, Collective: &BurninCollective{BusBW: rate}})
		}
	}
	v.Measured = fmt.Sprintf("%d round(s) of up to %d nodes", len(rounds), nodes)
	if len(figs) > 0 {
		v.Measured += fmt.Sprintf(", %s %.4g %s", what, median(figs), unit)
	}
	// Split by the rounds' own times, failed ones included, so that a
	// window's ends are the burn-in's.
	window := driftWindow(duration)
	_, _, drift := burninDrift(runs, duration)
	span := driftSpan(window)
	if drift != nil {
		x := 1 + drift.Pct/100
		v.Value = &x
		first, last := drift.First, drift.Last
		if !higher {
			first, last = 1/first, 1/last
		}
		v.Measured += fmt.Sprintf(", %+.1f %% (%.4g to %.4g %s)", drift.Pct, first, last, unit)
	}
	switch {
	case len(failed) > 0:
		v.Status = record.Fail
		v.Detail = fmt.Sprintf("%d of %d round(s) failed: %s", len(failed), len(rounds), strings.Join(firstFew(failed), "; "))
	case drift == nil:
		v.Status = record.Pass
		v.Detail = "every round passed; too few to compare " + span
	case drift.Pct < -driftFail*100:
		v.Status, v.Detail = record.Fail, fmt.Sprintf("%s worse by more than %.0f %%, %s", what, driftFail*100, span)
	case drift.Pct < -driftWarn*100:
		v.Status, v.Detail = record.Warn, fmt.Sprintf("%s worse by more than %.0f %%, %s", what, driftWarn*100, span)
	default:
		v.Status, v.Detail = record.Pass, fmt.Sprintf("every round passed, %s within %.0f %%, %s", what, driftWarn*100, span)
	}
	if shrank > 0 {
		v.Detail += fmt.Sprintf("; from round %d on, %d of %d nodes (the others left the burn-in): the drift compares the %d-node rounds only",
			shrank, rounds[len(rounds)-1].Nodes, full, full)
	}
	if none != nil && none.Asked {
		v.Incomplete = none.Reason
	}
	return v
}
