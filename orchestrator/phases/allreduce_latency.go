package phases

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// The small-message end of the all-reduce, as latency: a bandwidth sweep
// starts at megabytes, where the wire decides, and says nothing of what a
// training step's many small collectives wait for. A short sweep of its
// own (8 B to 64 KiB) is read from its rows' out-of-place time column,
// the time one collective takes (nccl-tests' in-place time of a single
// rank is a no-op, so it is never the figure).

const (
	latencyMinBytes = 8
	latencyMaxBytes = 64 << 10
	// A row's time is the mean over the iterations: microseconds each, so
	// nccl-tests' default 20 leaves launch jitter in the mean.
	latencyIters  = 100
	latencyWarmup = 10
	// A sweep of small messages takes seconds; one that has not ended in
	// minutes hangs, and must not cost the bandwidth sweep's bound.
	latencySweepBound = 5 * time.Minute
)

// LatencyRun is one measurement of a latency figure: the small-message
// sweeps of its repeats. A retest adds a run.
type LatencyRun struct {
	Repeats []Sweep `json:"repeats"`
}

func latencyBench(a inventory.AllReduce) bench {
	b := allReduceBench(a)
	b.min, b.max, b.factor = latencyMinBytes, latencyMaxBytes, 2
	b.iters, b.wup = max(a.Iters, latencyIters), max(a.Warmup, latencyWarmup)
	return b
}

func latencyTimeout(inv *inventory.Inventory) time.Duration {
	return min(sweepTimeout(inv), latencySweepBound)
}

// sweepLatency is one sweep's latency: the median out-of-place time of
// its rows of 8 B to 64 KiB (a provider's log may start at 0 B, an
// empty collective that is no message). ok is false for a sweep that failed or
// printed no such row.
func sweepLatency(s Sweep) (us float64, ok bool) {
	if s.Error != "" {
		return 0, false
	}
	var ts []float64
	for _, p := range s.Points {
		if p.Bytes >= latencyMinBytes && p.Bytes <= latencyMaxBytes && p.TimeUS > 0 {
			ts = append(ts, p.TimeUS)
		}
	}
	if len(ts) == 0 {
		return 0, false
	}
	return fabric.SpreadOf(ts).Median, true
}

// spread is the run's figure, as bandwidth is read: the median of its
// sweeps' latencies with their spread, over n sweeps that completed.
func (r LatencyRun) spread() (sp fabric.Spread, n int) {
	var ls []float64
	for _, s := range r.Repeats {
		if l, ok := sweepLatency(s); ok {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return fabric.Spread{}, 0
	}
	return fabric.SpreadOf(ls), len(ls)
}

// latencyFailed says why a run fails the quote at tolerance tol (at most
// quoted ÷ tol), "" when it passes or nothing is quoted: the judge's rule,
// so that the phase retests exactly what the verdict would fail.
func latencyFailed(r LatencyRun, quoted, tol float64) string {
	sp, n := r.spread()
	switch {
	case n == 0:
		return "no small-message sweep completed"
	case quoted > 0 && quoted/sp.Median < tol:
		return fmt.Sprintf("%s µs, more than %s µs", usText(sp.Median), usText(quoted/tol))
	}
	return ""
}

// measureLatency runs j's small-message sweep repeats times: one run of
// the figure. It ends early, with an error, when the node set broke (a
// node stopped answering): more sweeps over it would only hang.
func measureLatency(ctx context.Context, w *orchestrator.Window, j job, repeats int, who string) (LatencyRun, error) {
	var r LatencyRun
	for rep := 1; rep <= max(repeats, 1); rep++ {
		if who != "" {
			w.Progress.Node(who, "all-reduce latency sweep %d of %d (%s to %s) over %d node(s)", rep, max(repeats, 1),
				inventory.Bytes(latencyMinBytes), inventory.Bytes(latencyMaxBytes), len(j.nodes))
		}
		s := j.run(ctx, w, latencyTimeout(w.Inv))
		if s.Judgement != nil {
			// The sweep judges only correctness here: its bandwidth gate
			// has no row of a gigabyte, and saying so is no finding.
			s.Judgement.Verdicts = slices.DeleteFunc(s.Judgement.Verdicts, func(v record.Verdict) bool { return v.ID != "NCCL-001" })
		}
		r.Repeats = append(r.Repeats, s)
		if len(s.Silent) > 0 {
			return r, fmt.Errorf("%s stopped answering", strings.Join(s.Silent, ", "))
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
	}
	return r, nil
}

// latencyVerdict judges the last of runs against quoted at tolerance tol
// (a latency passes at most quoted ÷ tol), carrying the runs' history
// when the figure was retested; an unstable history fails.
func latencyVerdict(id, node string, runs []LatencyRun, quoted, tol float64) record.Verdict {
	v := record.NewVerdict(id, node)
	v.Retest = retestOf(runs, record.UnitMicroseconds, func(r LatencyRun) (*float64, string) {
		sp, n := r.spread()
		if n == 0 {
			return nil, latencyFailed(r, quoted, tol)
		}
		return &sp.Median, latencyFailed(r, quoted, tol)
	})
	if len(runs) == 0 {
		v.Status, v.Detail = record.Fail, "no small-message sweep ran"
		return v
	}
	last := runs[len(runs)-1]
	sp, n := last.spread()
	if n == 0 {
		var problems []string
		for i, s := range last.Repeats {
			if s.Error != "" {
				problems = append(problems, fmt.Sprintf("sweep %d: %s", i+1, s.Error))
			}
		}
		v.Status, v.Detail = record.Fail, firstNonEmpty(strings.Join(problems, "; "), "no small-message sweep completed")
		return v
	}
	v.Measured = fmt.Sprintf("%s µs median of %d sweep(s) (%s..%s), %s to %s", usText(sp.Median), n, usText(sp.Min), usText(sp.Max),
		inventory.Bytes(latencyMinBytes), inventory.Bytes(latencyMaxBytes))
	v.Measure(sp.Median, record.UnitMicroseconds)
	if quoted <= 0 {
		v.Status, v.Detail = record.Skip, "not stated in the quote"
		return v
	}
	ratio := quoted / sp.Median
	v.Quoted, v.Ratio, v.Tolerance = usText(quoted)+" µs", &ratio, &tol
	v.Status = record.Pass
	if ratio < tol || v.Retest.Failed() {
		v.Status = record.Fail
	}
	return v
}

// usText is a latency in µs with four significant figures, never in
// exponent form: a lab link or a loaded host reads tens of milliseconds.
func usText(x float64) string {
	if x >= 1000 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.4g", x)
}
