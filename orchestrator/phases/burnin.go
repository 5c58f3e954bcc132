package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote"
)

// Burnin is the burn-in: sustained load on every GPU of every node, with
// the window's telemetry on, for phases.burnin.duration. Each iteration of
// a node's loop runs the per-GPU compute rate (scripts/node/gemm.py: dense
// bf16 matrix products on every GPU at once), then the intra-node
// collective (all_reduce_perf, one process over the node's GPUs), then
// gpu-burn and DCGM's targeted stress where the node has them
// (burnin_loads.go), then, where the inventory asks, meets the other
// nodes for the cluster-wide all-reduce and the workload phase's job,
// which need every node at once (burnin_cluster.go), until the duration
// is spent. Each iteration's figures are kept, and each GPU's and the
// collective's drift from the first hour to the last (burnin_drift.go).
// A window lost mid burn-in resumes the time left, after the iterations
// it had finished (journaled as node notes).
var Burnin = orchestrator.Phase{
	Name:  burninPhase,
	Loads: true,
	// The fleet under load at once: the telemetry's outliers are nodes
	// under the same load, and the duration is the window's, not a wave's.
	Together: true,
	Enabled:  burninOn,
	// The duration sets the bound: phases.deadline (minutes) must never
	// cut a burn-in of hours.
	Own:      burninOn,
	Deadline: burninDeadline,
	Duration: func(inv *inventory.Inventory) time.Duration { return inv.Phases.Burnin.Duration },
	PerNode:  runBurnin,
	Judge:    judgeBurnin,
}

const burninPhase = "burnin"

func burninOn(inv *inventory.Inventory) bool { return inv.Phases.Burnin.Enabled }

// gemmStartWithin is what one run may take beyond its seconds: torch's
// import, CUDA's start on eight GPUs, the warm-up (in the lab, on a loaded
// machine, torch's import alone took ~15 s).
const gemmStartWithin = 3 * time.Minute

// burninDeadline is the duration, one iteration past it (one that starts
// just before the end is let finish: its gemm.py run and its loads).
func burninDeadline(inv *inventory.Inventory) time.Duration {
	b := inv.Phases.Burnin
	return b.Duration + gemmRunWithin(b.Compute) + burninLoadsWithin(inv)
}

// gemmRunWithin bounds one run of gemm.py.
func gemmRunWithin(c inventory.Compute) time.Duration {
	return time.Duration(max(c.Seconds, 1))*time.Second + gemmStartWithin
}

// The burn-in's record (run.json, SCHEMA.md) lives in orchestrator/workload,
// which the reports read without the window.
type (
	BurninNode  = workload.Burnin
	BurninRun   = workload.BurninRun
	GemmGPU     = workload.GemmGPU
	GemmDrift   = workload.GemmDrift
	GemmSummary = workload.GemmSummary
)

func runBurnin(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
	b := w.Inv.Phases.Burnin
	res := &BurninNode{DurationS: b.Duration.Seconds(), Seconds: b.Compute.Seconds, Size: b.Compute.Size}
	if !b.Compute.On() {
		// The loop is timed by gemm.py's runs (a run that ends early is
		// caught by its seconds); the other loads ride on it.
		return nil, orchestrator.Unmeasured("gemm.py", "phases.burnin.compute.enabled is false: the burn-in's loop is paced by the compute rate's runs: burn-in not measured")
	}
	// Before any way out: a member of the rounds that left without a word
	// would hold every other node at the next meeting.
	var rounds *clusterRounds
	var noRounds []LoadUnmeasured
	if b.ClusterAllReduce || b.Workload {
		bc, err := burninRoundsFor(ctx, w)
		if err != nil {
			return nil, err
		}
		noRounds = bc.none
		if rounds = bc.rounds; rounds != nil {
			defer rounds.leave(n)
		}
	}
	// A window lost mid burn-in resumes the time left: the runs it had
	// finished, and the load time they took, are in the journal's notes.
	earlier, total, done := burninNotedAll(n.Noted)
	res.Resumed, res.RunsTotal = len(earlier), total
	if why := n.Noted(burninFailedKey); why != "" {
		// The earlier try failed on this node: the resume keeps that
		// verdict rather than run the time left on a node that failed.
		res.Runs, res.ElapsedS, res.Error = earlier, done.Seconds(), why
		res.Compute = gemmSummary(res.Runs)
		res.DriftWindowS, res.Drift, res.CollectiveDrift = driftOf(res.Runs, b.Duration)
		if len(res.Runs) == 0 {
			return nil, errors.New(why)
		}
		return res, errors.New(why)
	}
	if len(earlier) > 0 {
		w.Progress.Node(n.Name, "burn-in: %d run(s) and %s done before the window was resumed; %s left",
			len(earlier), done.Round(time.Second), max(b.Duration-done, 0).Round(time.Second))
	}
	// Which loads run after gemm.py is asked once; each one the node
	// lacks is said once, and the loop goes on with the rest.
	loads, missing, err := burninLoads(ctx, w, n)
	if err != nil {
		return nil, err
	}
	res.NotMeasured = append(missing, noRounds...)
	for _, m := range res.NotMeasured {
		w.Progress.Node(n.Name, "burn-in: not measured: %s", m.Reason)
	}
	start := time.Now()
	// The notes: every iteration of the first drift window, then one each
	// duration/burninNotes (a resume runs again what was not noted).
	notes, lastNote := len(earlier), done
	var first time.Time
	if len(earlier) > 0 {
		first = earlier[0].At
	}
	window := driftWindow(b.Duration)
	res.Runs, res.RunsTotal, err = burninLoopFrom(ctx, b.Duration, time.Duration(b.Compute.Seconds)*time.Second, time.Now, earlier, total, done,
		func(ctx context.Context) (BurninRun, error) {
			r, err := gemmOnce(ctx, w, n, b.Compute)
			if len(r.GPUs) > 0 {
				w.Progress.Node(n.Name, "burn-in: %s", gemmLine(r.GPUs))
			}
			if err == nil {
				loads.run(ctx, w, n, &r)
				// Cut short in its loads (Ctrl-C, a lost coordinator):
				// the iteration is not whole, so it is not journaled; a
				// resume runs it again rather than keep a collective
				// that "failed" because it was ended.
				err = ctx.Err()
			}
			if err == nil && rounds != nil {
				// Cut short at the meeting, the iteration is not whole
				// either (meet says ctx's error).
				err = meetRound(ctx, w, n, rounds, &r)
			}
			return r, err
		},
		func(i int, r BurninRun, elapsed time.Duration) {
			if first.IsZero() {
				first = r.At
			}
			if burninNoteDue(r, first, window, elapsed, lastNote, b.Duration) {
				burninNote(w, n, notes, i+1, r, elapsed)
				notes, lastNote = notes+1, elapsed
			}
		})
	res.ElapsedS = (done + time.Since(start)).Seconds()
	res.DriftWindowS, res.Drift, res.CollectiveDrift = driftOf(res.Runs, b.Duration)
	res.Compute = gemmSummary(res.Runs)
	if _, nm := orchestrator.IsNotMeasured(err); err != nil && ctx.Err() == nil && !nm {
		_ = w.Note(n, burninFailedKey, clip(err.Error(), 400))
	}
	if err != nil {
		if _, nm := orchestrator.IsNotMeasured(err); nm && len(res.Runs) == 0 {
			return nil, err
		}
		res.Error = err.Error()
	}
	if len(res.Runs) == 0 {
		return nil, err
	}
	return res, err
}

// burninFailedKey notes why a node's burn-in failed (not why it was cut
// short): a resume does not run it again.
const burninFailedKey = "burnin.failed"

// burninRunKey is the note of a node's i-th finished iteration: its gemm.py
// run, the collective's figure and the stress tools' exits after it, and
// the load time spent when it ended (burninNoted reads them back), so a
// resumed window keeps whole iterations.
func burninRunKey(i int) string { return fmt.Sprintf("burnin.run.%d", i) }

type burninNoteValue struct {
	ElapsedS float64 `json:"elapsed_s"`
	// Runs: how many iterations had ended then, in all (past the first
	// drift window, not each is journaled: burninNoteDue).
	Runs int       `json:"runs,omitempty"`
	Run  BurninRun `json:"run"`
}

// burninNote journals run r as the k-th note of n's burn-in, total runs
// and elapsed of load having ended.
func burninNote(w *orchestrator.Window, n *orchestrator.Node, k, total int, r BurninRun, elapsed time.Duration) {
	b, err := json.Marshal(burninNoteValue{ElapsedS: elapsed.Seconds(), Runs: total, Run: r})
	if err == nil {
		_ = w.Note(n, burninRunKey(k), string(b))
	}
}

// burninNoted: the runs an earlier try of this window finished on n, in
// order, and the load time they had taken. A note that does not read
// (an older build's, a torn journal) ends the list there.
func burninNoted(n *orchestrator.Node) ([]BurninRun, time.Duration) {
	runs, _, done := burninNotedAll(n.Noted)
	return runs, done
}

// burninNotedBy is burninNoted of the notes noted gives by key (a node's,
// or what `gpuaccept status` read of the journal).
func burninNotedBy(noted func(key string) string) ([]BurninRun, time.Duration) {
	runs, _, done := burninNotedAll(noted)
	return runs, done
}

// burninNotedAll is burninNotedBy with how many runs had ended in all
// (the last note's count; notes of an older build count one each).
func burninNotedAll(noted func(key string) string) ([]BurninRun, int, time.Duration) {
	var runs []BurninRun
	var done time.Duration
	total := 0
	for i := 0; ; i++ {
		v := noted(burninRunKey(i))
		var nv burninNoteValue
		// (An elapsed time past any burn-in's is no note of ours: a
		// Duration would overflow.)
		if v == "" || json.Unmarshal([]byte(v), &nv) != nil || nv.ElapsedS < 0 || nv.ElapsedS > 1e8 || len(nv.Run.GPUs) == 0 ||
			nv.Runs < 0 || nv.Runs > 1e7 {
			return runs, total, done
		}
		runs = append(runs, nv.Run)
		done = time.Duration(nv.ElapsedS * float64(time.Second))
		total = max(total+1, nv.Runs)
	}
}

// burninLoop runs once again and again while another run fits in
// duration (at least once: a burn-in shorter than one run still measures
// the rate), after the runs an earlier try finished (earlier, which took
// done of the duration). A run that ends before its seconds did not
// multiply for them (gemm.py waits them out): the loop stops there rather
// than spin. kept hears of each run that finished with a figure, with its
// index and the load time spent so far.
func burninLoop(ctx context.Context, duration, run time.Duration, now func() time.Time, earlier []BurninRun,
	done time.Duration, once func(context.Context) (BurninRun, error), kept func(int, BurninRun, time.Duration)) ([]BurninRun, error) {
	runs, _, err := burninLoopFrom(ctx, duration, run, now, earlier, len(earlier), done, once, kept)
	return runs, err
}

// burninLoopFrom is burninLoop after total runs in all (earlier may be
// fewer: the ones kept), keeping the runs within burninKeep (thinRuns).
// kept hears each run's index among them all. It returns the runs kept
// and how many ran in all.
func burninLoopFrom(ctx context.Context, duration, run time.Duration, now func() time.Time, earlier []BurninRun, total int,
	done time.Duration, once func(context.Context) (BurninRun, error), kept func(int, BurninRun, time.Duration)) ([]BurninRun, int, error) {
	runs := slices.Clone(earlier)
	window := driftWindow(duration)
	start := now()
	for len(runs) == 0 || done+now().Sub(start)+run <= duration {
		if err := ctx.Err(); err != nil {
			return runs, total, err
		}
		began := now()
		r, err := once(ctx)
		if len(r.GPUs) > 0 {
			runs = append(runs, r)
			total++
		}
		if err != nil {
			return runs, total, err
		}
		if took := now().Sub(began); took < run {
			return runs, total, fmt.Errorf("gemm.py ended after %s, before its %s of products", took.Round(time.Millisecond), run)
		}
		// Only a run that is whole is carried over by a resume.
		if kept != nil {
			kept(total-1, r, done+now().Sub(start))
		}
		runs = thinRuns(runs, window)
	}
	return runs, total, nil
}

// gemmOnce runs gemm.py once on every GPU of n.
func gemmOnce(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, c inventory.Compute) (BurninRun, error) {
	rctx, cancel := context.WithTimeout(ctx, gemmRunWithin(c))
	defer cancel()
	at := time.Now()
	out, err := runOn(rctx, w, n, gemmCommand(w, n, c))
	r := BurninRun{At: at.UTC(), GPUs: parseGemm(string(out))}
	if why := gemmUnmeasured(string(out), err, c.Python); why != "" {
		return r, orchestrator.Unmeasured(c.Python, "%s: compute rate not measured", why)
	}
	if err == nil && !gemmDone(string(out)) {
		err = errors.New("gemm.py ended without its done line")
	}
	if err != nil {
		return r, fmt.Errorf("gemm.py: %w", err)
	}
	for _, g := range r.GPUs {
		if g.Error != "" {
			return r, fmt.Errorf("gemm.py: GPU %d: %s", g.GPU, g.Error)
		}
	}
	if len(r.GPUs) == 0 {
		return r, errors.New("gemm.py printed no GPU's figure")
	}
	return r, nil
}

// gemmCommand runs the pushed gemm.py with the node's Python; a simulated
// window (the lab, the demo: no CUDA) lets it measure the CPU, labelled.
func gemmCommand(w *orchestrator.Window, n *orchestrator.Node, c inventory.Compute) string {
	py := remote.Quote(c.Python)
	args := []string{fmt.Sprintf("--seconds=%d", c.Seconds), fmt.Sprintf("--size=%d", c.Size)}
	if w.Inv.Simulated {
		args = append(args, "--allow-cpu")
	}
	// Errors on stdout: the last line says why there is no figure.
	return "command -v -- " + py + " >/dev/null 2>&1 || { echo no-python; exit 3; }; " +
		toolCheck(w.RunID(), n.Name, "gemm.py") + " PYTHONUNBUFFERED=1 exec " + py + ` "$f" ` + strings.Join(args, " ") + " 2>&1"
}

// gemmUnmeasured says why gemm.py could not measure (no Python, no torch,
// no CUDA: exit 3), "" when it could.
func gemmUnmeasured(out string, err error, python string) string {
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Status != 3 {
		return ""
	}
	last := lastLine(out)
	switch {
	case last == "no-python":
		return python + " not installed"
	case strings.HasPrefix(last, "no torch"):
		return python + " cannot import torch"
	case strings.HasPrefix(last, "no CUDA device"):
		return "PyTorch sees no CUDA device (" + clip(gemmText(last), 80) + ")"
	}
	return ""
}

// gemmLine is a run's figures in a progress line: "GPU 0-7 661.2-668.9
// TFLOP/s" or, on the CPU, "cpu 0.021 TFLOP/s".
func gemmLine(gs []GemmGPU) string {
	lo, hi, n := 0.0, 0.0, 0
	on := ""
	for _, g := range gs {
		if g.Error != "" {
			continue
		}
		if n == 0 || g.TFLOPS < lo {
			lo = g.TFLOPS
		}
		hi = max(hi, g.TFLOPS)
		n++
		if g.On == "cpu" {
			on = " on the CPU (simulated)"
		}
	}
	if n == 0 {
		return "no figure"
	}
	if lo == hi {
		return fmt.Sprintf("%d GPU(s) %.4g TFLOP/s%s", n, lo, on)
	}
	return fmt.Sprintf("%d GPU(s) %.4g-%.4g TFLOP/s%s", n, lo, hi, on)
}

// BurninPlan is the burn-in's note in the plan `check` prints: what it
// loads, and what it does not do yet (it must fit beside the phase's
// name and deadline in 100 columns).
func BurninPlan(inv *inventory.Inventory) string {
	b := inv.Phases.Burnin
	if !b.Compute.On() {
		return "compute rate off: nothing loads the GPUs"
	}
	loads := ""
	if inventory.On(b.Collectives) {
		loads += ", intra-node all-reduce"
	}
	if b.GPUBurn.Wanted() || b.DCGMStress.Wanted() {
		loads += ", stress where installed"
	}
	if b.ClusterAllReduce {
		loads += ", cluster all-reduce"
	}
	if b.Workload {
		loads += ", training job"
	}
	return fmt.Sprintf("gemm.py %d s a run%s", b.Compute.Seconds, loads)
}

// driftOf is burninDrift in the record's units.
func driftOf(runs []BurninRun, duration time.Duration) (float64, []GemmDrift, *BusBWDrift) {
	window, gpus, coll := burninDrift(runs, duration)
	return window.Seconds(), gpus, coll
}
