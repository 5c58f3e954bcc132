package phases

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Sweeps is what the cluster-wide run found: the all-reduce's repeats,
// then one run of each extra collective.
type Sweeps struct {
	Launcher string   `json:"launcher"` // where the launcher ran
	Command  string   `json:"command"`
	Nodes    []string `json:"nodes"`
	Repeats  []Sweep  `json:"repeats"`
	// Earlier: the runs of the bandwidth figure before Repeats, when a
	// run failed and was retested (acceptance.retest): NCCL-002 rests on
	// Repeats, the last.
	Earlier [][]Sweep `json:"earlier_runs,omitempty"`
	// Latency: the small-message runs (allreduce_latency.go), one more per
	// retest; NCCL-006 rests on the last.
	Latency     []LatencyRun     `json:"latency,omitempty"`
	Collectives map[string]Sweep `json:"collectives,omitempty"`
	// Lost: nodes that stopped answering (quarantined after the phase).
	Lost map[string]string `json:"lost,omitempty"`
	// Pairs: when a sweep failed and its output named no node, the pairs
	// run to find where (allreduce_search.go).
	Pairs *Bisected `json:"pairs,omitempty"`
}

// Quarantine implements orchestrator.Quarantiner.
func (s Sweeps) Quarantine() map[string]string { return s.Lost }

// AllReduce runs nccl-tests' all_reduce_perf over every node still in the
// window, under mpirun from the first of them; each sweep is bounded by
// its own timeout, because a hung collective never fails by itself.
var AllReduce = orchestrator.Phase{
	Name:    "allreduce",
	Loads:   true,
	Enabled: func(inv *inventory.Inventory) bool { return inv.Phases.AllReduce.Enabled },
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.AllReduce.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		a := inv.Phases.AllReduce
		runs := max(a.Repeats, 1) * record.MaxRuns(inv.Acceptance.RetestOr())
		return time.Duration(runs+len(a.Collectives))*(sweepTimeout(inv)+30*time.Second) +
			time.Duration(runs)*(latencyTimeout(inv)+30*time.Second) + pairSearchBound(inv) + time.Minute
	},
	Cluster: func(ctx context.Context, w *orchestrator.Window) (any, error) {
		if few, short := needNodes(w, "a cluster-wide all-reduce", 2); short {
			return few, nil
		}
		nodes := w.Active()
		a := w.Inv.Phases.AllReduce
		if err := collectiveUnmeasured(ctx, w, nodes, "cluster all-reduce", benchTools(w)...); err != nil {
			return nil, err
		}
		j := job{nodes: nodes, ranksPerNode: a.RanksPerNode, bench: allReduceBench(a), log: "allreduce"}
		res := Sweeps{Launcher: nodes[0].Name, Command: j.command(w)}
		if a.Launcher == "srun" {
			res.Launcher = "slurm-login (srun)"
		}
		for _, n := range nodes {
			res.Nodes = append(res.Nodes, n.Name)
		}
		tol := w.Inv.Acceptance.ToleranceFor
		runs, err := retested(ctx, w, "", "inter-node all-reduce bandwidth", func(ctx context.Context, run int) ([]Sweep, error) {
			return measureSweeps(ctx, w, j, a.Repeats, nodes[0].Name)
		}, func(sweeps []Sweep) string {
			return bandwidthFailed(sweeps, w.Inv.Quote.InterBusBWGBs, tol("NCCL-002"))
		})
		res.Repeats, res.Earlier = lastRun(runs)
		if nm, ok := orchestrator.IsNotMeasured(err); ok {
			return res, nm
		}
		failed := 0
		for _, s := range res.Repeats {
			if s.Error != "" {
				failed++
			}
			if len(s.Silent) > 0 {
				// The set is broken: more sweeps over it would only hang.
				res.Lost = lostNodes(s)
			}
		}
		// The small-message run only where the quote states a latency to
		// hold it to: unquoted, it would cost the window minutes on a slow
		// fabric and judge nothing.
		if err == nil && ctx.Err() == nil && w.Inv.Quote.InterLatencyUs > 0 {
			lj := j
			lj.bench, lj.log = latencyBench(a), "allreduce-latency"
			res.Latency, err = retested(ctx, w, "", "inter-node all-reduce latency", func(ctx context.Context, run int) (LatencyRun, error) {
				return measureLatency(ctx, w, lj, a.Repeats, nodes[0].Name)
			}, func(r LatencyRun) string { return latencyFailed(r, w.Inv.Quote.InterLatencyUs, tol("NCCL-006")) })
			if n := len(res.Latency); err != nil && n > 0 {
				if reps := res.Latency[n-1].Repeats; len(reps) > 0 && len(reps[len(reps)-1].Silent) > 0 {
					res.Lost = lostNodes(reps[len(reps)-1])
				}
			}
		}
		for _, c := range a.Collectives {
			if ctx.Err() != nil || res.Lost != nil {
				break
			}
			cj := j
			cj.bench.binary, cj.bench.iters, cj.log = collectiveBinary(a.Binary, c), a.Iters, "allreduce-"+c
			w.Progress.Node(nodes[0].Name, "%s over %d nodes", c, len(nodes))
			s := cj.run(ctx, w, sweepTimeout(w.Inv))
			if res.Collectives == nil {
				res.Collectives = map[string]Sweep{}
			}
			res.Collectives[c] = s
			if len(s.Silent) > 0 {
				res.Lost = lostNodes(s)
			}
		}
		if ctx.Err() == nil && unnamedFailure(res) {
			res.Pairs = searchPairs(ctx, w, nodes)
			if res.Pairs != nil && len(res.Pairs.Lost) > 0 {
				res.Lost = res.Pairs.Lost
			}
		}
		if len(res.Repeats) > 0 && failed == len(res.Repeats) {
			return res, errors.New(res.Repeats[0].Error)
		}
		return res, nil
	},
	Judge: judgeAllReduce,
}

func lostNodes(s Sweep) map[string]string {
	m := map[string]string{}
	for _, n := range s.Silent {
		m[n] = "stopped answering during a collective"
	}
	return m
}

func sweepTimeout(inv *inventory.Inventory) time.Duration {
	return orDefault(inv.Phases.AllReduce.Timeout, 15*time.Minute)
}

// judgeAllReduce: correctness over every sweep, bandwidth as the median of
// the sweeps' medians with their spread.
func judgeAllReduce(w *orchestrator.Window) []record.Verdict {
	var s Sweeps
	r, ok := w.Result("allreduce", -1, &s)
	if !w.Inv.Phases.AllReduce.Enabled || !ok {
		return nil
	}
	ids := []string{"NCCL-001", "NCCL-002", "NCCL-006"}
	if len(w.Inv.Phases.AllReduce.Collectives) > 0 {
		ids = append(ids, "NCCL-005")
	}
	if vs, ok := unmeasuredVerdicts(r, "", ids...); ok {
		return vs
	}
	if vs, few := tooFewVerdicts(w, "allreduce", ids...); few {
		return vs
	}
	correct, bw := record.NewVerdict("NCCL-001", ""), record.NewVerdict("NCCL-002", "")
	correct.Status, correct.Measured = record.Pass, "0 wrong"
	medians, problems, last := summarize(s.Repeats, &correct, "")
	wrongEarlier(s.Earlier, &correct, "")
	tol := w.Inv.Acceptance.ToleranceFor("NCCL-002")
	bw.Retest = bandwidthRetest(append(slices.Clone(s.Earlier), s.Repeats), w.Inv.Quote.InterBusBWGBs, tol)
	lat := interLatencyVerdict(w, s, r)
	var silent []string
	for _, sw := range s.Repeats {
		silent = append(silent, sw.Silent...)
	}
	if len(silent) > 0 {
		correct.Node = strings.Join(uniq(silent), ",")
	}
	if len(s.Repeats) == 0 {
		// Nothing ran (no node left, say): nothing was computed right.
		correct.Status, correct.Measured, correct.Detail = record.Skip, "no sweep ran", r.Error
	}
	// What the pairs found of a failure nothing named.
	found := ""
	if s.Pairs != nil {
		found = searchText(*s.Pairs, len(s.Nodes))
		if correct.Status == record.Fail {
			correct.Detail = join(correct.Detail, found)
		}
		if correct.Node == "" {
			correct.Node = strings.Join(s.Pairs.SlowNodes, ",")
		}
	}
	out := []record.Verdict{correct}
	if len(medians) == 0 || last == nil {
		bw.Status, bw.Detail = record.Fail, join(firstNonEmpty(r.Error, strings.Join(problems, "; "), "no sweep completed"), found)
		bw.Node = correct.Node
		out = append(out, bw, lat)
		if v := collectivesVerdict(s); v.ID != "" {
			out = append(out, v)
		}
		return out
	}
	sp := fabric.SpreadOf(medians)
	bw.Measured = fmt.Sprintf("%.4g GB/s median of %d sweep(s) (%.4g..%.4g); wire rate %.4g GB/s per GPU", sp.Median, len(medians), sp.Min, sp.Max,
		fabric.WireRate(sp.Median, last.Hosts, last.Ranks))
	bw.Measure(sp.Median, record.UnitGBs)
	againstQuote(&bw, sp.Median, w.Inv.Quote.InterBusBWGBs, tol)
	if bw.Retest.Failed() {
		bw.Status = record.Fail
	}
	if alg := algorithmsOf(s.Repeats); alg != "" {
		bw.Detail = join(bw.Detail, alg)
	}
	out = append(out, bw, lat)
	if v := collectivesVerdict(s); v.ID != "" {
		out = append(out, v)
	}
	return out
}

// interLatencyVerdict is NCCL-006: the last latency run against the
// quote. A phase that ended before the latency ran (the set broke in the
// bandwidth sweeps) failed it; a record without latency runs of a build
// that measured none did not measure it.
func interLatencyVerdict(w *orchestrator.Window, s Sweeps, r record.PhaseResult) record.Verdict {
	q := w.Inv.Quote.InterLatencyUs
	if len(s.Latency) > 0 {
		return latencyVerdict("NCCL-006", "", s.Latency, q, w.Inv.Acceptance.ToleranceFor("NCCL-006"))
	}
	v := record.NewVerdict("NCCL-006", "")
	switch {
	case len(s.Lost) > 0 || r.Error != "":
		v.Status, v.Detail = record.Fail, "not run: "+firstNonEmpty(r.Error, "nodes stopped answering in the bandwidth sweeps")
		v.Node = strings.Join(slices.Sorted(maps.Keys(s.Lost)), ",")
	case q > 0:
		v.Status, v.Measured = record.Skip, "not measured"
		v.Incomplete = "NOT MEASURED: no small-message sweep ran (quote.inter_latency_us is stated)"
	default:
		v.Status, v.Measured, v.Detail = record.Skip, "not measured", "not stated in the quote (quote.inter_latency_us): the small-message run is made only to hold it to one"
	}
	return v
}

// summarize reads a run's repeats: correct fails on any wrong result or
// failed sweep (what says so is noted after what), medians are those of
// the sweeps that ran clean, last the last clean judgement.
func summarize(sweeps []Sweep, correct *record.Verdict, what string) (medians []float64, problems []string, last *fabric.Judgement) {
	for i, sw := range sweeps {
		if sw.Error != "" {
			problems = append(problems, fmt.Sprintf("sweep %d: %s", i+1, sw.Error))
		}
		if sw.Judgement == nil {
			continue
		}
		if f := failedCorrectness(sw.Judgement); f != nil {
			correct.Status, correct.Measured, correct.Detail = record.Fail, fmt.Sprintf("sweep %d: %s%s", i+1, f.Measured, what), f.Detail
		}
		if sw.Error == "" {
			medians = append(medians, sw.Judgement.BusBW.Median)
			last = sw.Judgement
		}
	}
	if len(problems) > 0 && correct.Status == record.Pass {
		correct.Status, correct.Measured, correct.Detail = record.Fail, fmt.Sprintf("%d of %d sweeps failed%s", len(problems), len(sweeps), what), strings.Join(problems, "; ")
	}
	var hung []string
	for i, sw := range sweeps {
		if sw.ExitHung != "" && sw.Error == "" {
			hung = append(hung, fmt.Sprintf("sweep %d: %s (judged on what it printed; its ranks were ended)", i+1, sw.ExitHung))
		}
	}
	if len(hung) > 0 && correct.Status == record.Pass {
		// The results were right, but a job that cannot end is a fault a
		// training run meets at every exit.
		correct.Status, correct.Measured = record.Warn, fmt.Sprintf("0 wrong; %d of %d sweeps' launcher hung at exit%s", len(hung), len(sweeps), what)
		correct.Detail = join(correct.Detail, strings.Join(hung, "; "))
	}
	return medians, problems, last
}

// againstQuote sets a bandwidth verdict from the measured median and the
// quoted figure (SKIP when the quote says nothing).
func againstQuote(v *record.Verdict, measured, quoted, tol float64) {
	if quoted <= 0 {
		v.Status, v.Detail = record.Skip, join(v.Detail, "not stated in the quote")
		return
	}
	ratio := measured / quoted
	v.Quoted, v.Ratio, v.Tolerance = fmt.Sprintf("%.4g GB/s", quoted), &ratio, &tol
	v.Status = record.Pass
	if ratio < tol {
		v.Status = record.Fail
	}
}

// collectivesVerdict: the extra collectives ran and computed right.
func collectivesVerdict(s Sweeps) record.Verdict {
	if len(s.Collectives) == 0 {
		return record.Verdict{}
	}
	v := record.NewVerdict("NCCL-005", "")
	v.Status = record.Pass
	var measured, problems, unmeasured []string
	for _, c := range inventory.Collectives {
		sw, ok := s.Collectives[c]
		if !ok {
			continue
		}
		if sw.NotMeasured != "" {
			unmeasured = append(unmeasured, sw.NotMeasured)
			continue
		}
		if sw.Judgement != nil {
			measured = append(measured, fmt.Sprintf("%s %.4g GB/s", c, sw.Judgement.BusBW.Median))
			if f := failedCorrectness(sw.Judgement); f != nil {
				problems = append(problems, c+": "+f.Measured)
			}
		}
		if sw.Error != "" {
			problems = append(problems, c+": "+sw.Error)
		}
	}
	v.Measured = strings.Join(measured, ", ")
	switch {
	case len(problems) > 0:
		v.Status, v.Detail = record.Fail, strings.Join(append(problems, unmeasured...), "; ")
	case len(unmeasured) > 0:
		// A collective the image lacks is not measured: never a PASS
		// over it, never a FAIL.
		notMeasured(&v, strings.Join(unmeasured, "; "))
		v.Measured = orElse(strings.Join(measured, ", "), v.Measured)
	}
	return v
}

func failedCorrectness(j *fabric.Judgement) *record.Verdict {
	for _, v := range j.Verdicts {
		if v.ID == "NCCL-001" && v.Status == record.Fail {
			return &v
		}
	}
	return nil
}

// algorithmsOf says which algorithm NCCL was told to use and chose.
func algorithmsOf(sw []Sweep) string {
	for _, s := range sw {
		if len(s.Choices) > 0 {
			var parts []string
			for _, c := range s.Choices {
				parts = append(parts, c.String())
			}
			return "NCCL: " + strings.Join(parts, "; ")
		}
	}
	return ""
}

func uniq(xs []string) []string {
	var out []string
	for _, x := range xs {
		dup := false
		for _, y := range out {
			dup = dup || x == y
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
