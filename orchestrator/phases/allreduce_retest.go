package phases

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/record"
)

// A bandwidth figure (NCCL-002, NCCL-003) is the median of its repeats'
// medians; a run of the figure is all its repeats, so a retest measures
// the figure as the first run did and the verdict rests on a whole run,
// never on the best sweep of two.

// cleanMedians are the medians of the sweeps that ran clean.
func cleanMedians(sweeps []Sweep) []float64 {
	var ms []float64
	for _, s := range sweeps {
		if s.Error == "" && s.Judgement != nil {
			ms = append(ms, s.Judgement.BusBW.Median)
		}
	}
	return ms
}

// bandwidthFailed says why a run of sweeps fails the quote at tolerance
// tol (at least tol × quoted), "" when it passes or nothing is quoted:
// the judge's rule (againstQuote).
func bandwidthFailed(sweeps []Sweep, quoted, tol float64) string {
	ms := cleanMedians(sweeps)
	if len(ms) == 0 {
		return "no sweep completed"
	}
	if med := fabric.SpreadOf(ms).Median; quoted > 0 && med/quoted < tol {
		return fmt.Sprintf("%.4g GB/s, less than %.4g GB/s", med, tol*quoted)
	}
	return ""
}

// bandwidthRetest is the history of a retested bandwidth figure.
func bandwidthRetest(runs [][]Sweep, quoted, tol float64) *record.Retest {
	return retestOf(runs, record.UnitGBs, func(sweeps []Sweep) (*float64, string) {
		why := bandwidthFailed(sweeps, quoted, tol)
		ms := cleanMedians(sweeps)
		if len(ms) == 0 {
			return nil, why
		}
		med := fabric.SpreadOf(ms).Median
		return &med, why
	})
}

// measureSweeps runs j repeats times: one run of a bandwidth figure. It
// ends early, with an error, when the node set broke. who, when not "",
// is the node the progress lines name.
func measureSweeps(ctx context.Context, w *orchestrator.Window, j job, repeats int, who string) ([]Sweep, error) {
	var out []Sweep
	for rep := 1; rep <= repeats; rep++ {
		if who != "" {
			w.Progress.Node(who, "all-reduce sweep %d of %d over %d nodes", rep, repeats, len(j.nodes))
		}
		s := j.run(ctx, w, sweepTimeout(w.Inv))
		if who != "" && s.Error != "" {
			w.Progress.Node(who, "all-reduce sweep %d: %s", rep, s.Error)
		}
		out = append(out, s)
		if s.NotMeasured != "" {
			// The image lacks the benchmark: no repeat would find it.
			return out, orchestrator.Unmeasured(j.bench.binary, "%s", s.NotMeasured)
		}
		if len(s.Silent) > 0 {
			return out, fmt.Errorf("%s stopped answering", strings.Join(s.Silent, ", "))
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// lastRun splits a figure's runs into the one its verdict rests on and
// the earlier ones.
func lastRun(runs [][]Sweep) (last []Sweep, earlier [][]Sweep) {
	if len(runs) == 0 {
		return nil, nil
	}
	return runs[len(runs)-1], runs[:len(runs)-1]
}

// wrongEarlier fails correct when an earlier run (a retested figure's
// first) computed wrong results: a retest re-measures speed, and a
// collective that once summed wrong is not made right by a later run.
func wrongEarlier(earlier [][]Sweep, correct *record.Verdict, what string) {
	if correct.Status == record.Fail {
		return
	}
	for i, run := range earlier {
		for k, sw := range run {
			if sw.Judgement == nil {
				continue
			}
			if f := failedCorrectness(sw.Judgement); f != nil {
				correct.Status, correct.Detail = record.Fail, f.Detail
				correct.Measured = fmt.Sprintf("run %d, sweep %d: %s%s", i+1, k+1, f.Measured, what)
				return
			}
		}
	}
}
