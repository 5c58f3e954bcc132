package phases

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote"
)

// Training is the training load test: one multi-node job over every node
// still in the window under torchrun with the window's rendezvous (the
// buyer's command, or the built-in DDP job), measured from its log on
// every node: time to the first step, steady step time and throughput,
// the straggler, GPU memory at the peak, errors and restarts. The job
// runs phases.workload.repeats times, and again while acceptance.retest
// allows when a throughput or straggler figure fails.
var Training = orchestrator.Phase{
	Name:    "training",
	Loads:   true,
	Enabled: trainingOn,
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.Workload.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		if t := inv.Phases.Workload.Timeout; t > 0 {
			return t
		}
		return time.Duration(trainingJobs(inv)) * trainingJobWithin
	},
	Cluster: runTraining,
	Judge:   judgeTraining,
}

func trainingOn(inv *inventory.Inventory) bool {
	return inv.Phases.Workload.Enabled && inv.Phases.Workload.Kind == "training"
}

// trainingJobWithin is one job's built-in bound: the image's start, the
// rendezvous and 30 steps of a real model take minutes, not more.
const trainingJobWithin = 15 * time.Minute

// trainingJobs is the most jobs the phase may run: every repeat, for
// each run the retest rule allows.
func trainingJobs(inv *inventory.Inventory) int {
	return max(inv.Phases.Workload.Repeats, 1) * record.MaxRuns(inv.Acceptance.RetestOr())
}

// trainingDir holds the job's launcher logs on each node, on its own disk.
func trainingDir(w *orchestrator.Window) string {
	return "/var/tmp/gpuaccept-" + w.RunID() + "-training/job"
}

// trainingTrial is one measurement of the job: phases.workload.repeats
// runs of it, each node's figures per run.
type trainingTrial [][]workload.TrainingNode

func runTraining(ctx context.Context, w *orchestrator.Window) (any, error) {
	wl := w.Inv.Phases.Workload
	tr := wl.Training
	if few, short := needNodes(w, "the training load test", 1); short {
		return few, nil
	}
	nodes := w.Active()
	if err := trainingUnmeasured(ctx, w, nodes); err != nil {
		return nil, err
	}
	t := &trainingJob{w: w, tr: tr, nodes: nodes, procs: trainingProcs(w.Inv)}
	res := workload.Training{World: len(nodes) * t.procs, StragglerRatio: tr.StragglerRatio, Repeats: max(wl.Repeats, 1)}
	if tr.StepPattern != "" {
		p, err := compileStepPattern(tr.StepPattern)
		if err != nil {
			return nil, err
		}
		t.pattern = p
	}
	// Each job gets an equal share of the phase's time, so that a hung one
	// leaves the retests theirs.
	deadline, ok := ctx.Deadline()
	within := trainingJobWithin
	if ok {
		within = max(time.Until(deadline)/time.Duration(trainingJobs(w.Inv)), time.Minute)
	}
	var jobErr error
	trials, err := retested(ctx, w, "", "training", func(ctx context.Context, run int) (trainingTrial, error) {
		var trial trainingTrial
		for range res.Repeats {
			jctx, cancel := context.WithTimeout(ctx, within)
			nodes, unit, cmd, err := t.job(jctx, within)
			cancel()
			if res.Command == "" {
				res.Command = cmd
			}
			if unit != "" {
				res.Unit = unit
			}
			trial = append(trial, nodes)
			if err != nil {
				jobErr = err
			}
			if ctx.Err() != nil {
				return trial, ctx.Err()
			}
		}
		return trial, nil
	}, func(trial trainingTrial) string { return trialFails(w.Inv, trial, res.Unit) })
	for _, trial := range trials {
		res.Runs = append(res.Runs, trial...)
	}
	if len(res.Runs) > 0 {
		res.Nodes = res.Runs[len(res.Runs)-1]
	}
	if len(trials) > 0 {
		figs := trialNodes(trials[len(trials)-1])
		med, strag, _ := straggler(figs, tr.StragglerRatio)
		res.MedianStepSecs, res.Straggler = med, strag
		if len(figs) > 0 {
			res.StragglerBasis = figs[0].Basis
		}
	}
	if len(res.Runs) == 1 {
		res.Runs = nil
	}
	if err == nil {
		err = jobErr
	}
	if err != nil {
		res.Error = err.Error()
	}
	w.Progress.Line("training: %s", trainingLine(res))
	return res, err
}

// trainingProcs is the workers per node: the inventory's, else the quote's
// GPUs per node, else one.
func trainingProcs(inv *inventory.Inventory) int {
	if p := inv.Phases.Workload.Training.ProcsPerNode; p > 0 {
		return p
	}
	return max(inv.Quote.GPUsPerNode, 1)
}

// trainingJob runs the training job over the window's nodes.
type trainingJob struct {
	w       *orchestrator.Window
	tr      inventory.WorkloadTraining
	nodes   []*orchestrator.Node
	procs   int
	pattern *stepPattern

	mu  sync.Mutex
	gen int
}

// job runs the job once on every node and reads each node's figures from
// what it logged; err says why the job did not run to its end.
func (t *trainingJob) job(ctx context.Context, within time.Duration) (nodes []workload.TrainingNode, unit, cmd string, err error) {
	t.mu.Lock()
	t.gen++
	gen := t.gen
	t.mu.Unlock()
	w := t.w
	wl := w.Inv.Phases.Workload
	col := newTrainingLog(time.Now(), t.pattern, t.tr.Warmup)
	image := firstNonEmpty(wl.Image, w.Inv.Image.Reference)
	l := &torchLauncher{w: w, python: t.tr.Python, procs: t.procs, inImage: t.tr.InImage, image: image,
		containerArgs: wl.ContainerArgs, basePort: t.tr.Port, salt: "/training", names: w.RunID() + "-training",
		labels: []string{"gpuaccept.window=" + w.RunID()}, onLine: col.out, onErrLine: col.err, onEnd: col.poke}
	mem := newJobMemSampler(w, t.nodes)
	mctx, stopMem := context.WithCancel(ctx)
	go mem.run(mctx)
	for _, n := range t.nodes {
		c := t.command(l, n, gen)
		if cmd == "" {
			cmd = c
		}
		col.launched(n.Name, l.imageID(n) != "")
		l.start(ctx, n, c)
	}
	if gen == 1 {
		w.Progress.Line("training: the job launched on %s (%d worker(s))", hostlist.Compress(names(t.nodes)), len(t.nodes)*t.procs)
	}
	err = t.wait(ctx, l, col, within)
	stopMem()
	left := t.stop(l)
	nodes, unit = col.figures(names(t.nodes), mem.peaks())
	for i, n := range t.nodes {
		if done, lerr := l.ended(n); done && lerr != nil && !left[n.Name] {
			nodes[i].Errors++
			nodes[i].ErrorLines = appendBounded(nodes[i].ErrorLines, launcherError(lerr))
		}
	}
	return nodes, unit, cmd, err
}

// command is the torchrun line for n: a job of a fixed size, no restarts
// (a restart is counted, not hidden), the buyer's command or the checked
// ddp_train.py.
func (t *trainingJob) command(l *torchLauncher, n *orchestrator.Node, gen int) string {
	dir := trainingDir(t.w)
	args := l.torchrunArgs(n, fmt.Sprint(len(t.nodes)), 0, gen, fmt.Sprintf("%s/logs/%s-g%d", dir, n.Name, gen))
	// The workers' stdout comes teed with its rank's prefix; their stderr
	// (where a buyer's job may log its steps) is the launcher's own,
	// unprefixed, and read too. torch 1.13's torchrun fails in to_map
	// with stderr redirected as well (--redirects=3, found in the lab).
	check := ""
	if len(t.tr.Command) > 0 {
		args = append(args, "--no_python")
		for _, c := range t.tr.Command {
			args = append(args, remote.Quote(c))
		}
	} else {
		hidden, batch := orInt(t.tr.Hidden, 1024), orInt(t.tr.Batch, 32)
		args = append(args, `"$f"`, "--ckpt-dir", remote.Quote(fmt.Sprintf("%s/ckpt-g%d", dir, gen)), "--ckpt-every=0",
			fmt.Sprintf("--steps=%d", t.tr.Steps), fmt.Sprintf("--hidden=%d", hidden), fmt.Sprintf("--batch=%d", batch),
			"--timeout=300", "--step-time=0")
		check = toolCheck(t.w.RunID(), n.Name, "ddp_train.py") + " "
	}
	env := []string{"GPUACCEPT_NODE=" + remote.Quote(n.Name), "LOGLEVEL=INFO", "PYTHONUNBUFFERED=1", noSharedStore}
	if id := l.imageID(n); id != "" {
		args = l.inImageArgs(n, gen, id, path.Dir(dir), env, args)
	}
	return shellLine(dir, dir+"/logs", check, env, args)
}

// launcherError says how a launcher ended, without its command line (the
// raw log has it, and the node's last words).
func launcherError(err error) string {
	var ee *remote.ExitError
	switch {
	case errors.As(err, &ee) && ee.Signal != "":
		return "launcher killed by SIG" + ee.Signal
	case errors.As(err, &ee):
		return fmt.Sprintf("launcher exited %d", ee.Status)
	}
	return "launcher: " + clip(err.Error(), 200)
}

func orInt(x, def int) int {
	if x > 0 {
		return x
	}
	return def
}

// wait lasts until every launcher ended, the buyer's job has run its
// duration in steady state, or ctx ends.
func (t *trainingJob) wait(ctx context.Context, l *torchLauncher, col *trainingLog, within time.Duration) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		running := 0
		for _, n := range t.nodes {
			if done, _ := l.ended(n); !done {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		if d := t.tr.Duration; d > 0 && col.steadyFor() >= d {
			return nil
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("the job did not end within %s on %d node(s)", within.Round(time.Second), running)
			}
			return ctx.Err()
		case <-col.next():
		case <-tick.C:
		}
	}
}

// Cleanup budgets, each step its own (as the failure test's).
var (
	trainingStop = time.Minute
	trainingKill = 30 * time.Second
)

// stop ends what is left of the job: the launchers' sessions (their
// guards end the process groups), then every process of the window on a
// node whose launcher had not ended by itself. left names those nodes.
func (t *trainingJob) stop(l *torchLauncher) map[string]bool {
	left := map[string]bool{}
	for _, n := range t.nodes {
		if done, _ := l.ended(n); !done {
			left[n.Name] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), trainingStop)
	defer cancel()
	l.stop(ctx)
	if len(left) == 0 {
		return left
	}
	var them []*orchestrator.Node
	for _, n := range t.nodes {
		if left[n.Name] {
			them = append(them, n)
		}
	}
	kctx, kcancel := context.WithTimeout(context.Background(), trainingKill)
	defer kcancel()
	remote.Each(kctx, len(them), remote.FanOut{Limit: t.w.FanOut()}, func(ctx context.Context, i int) (struct{}, error) {
		n := them[i]
		e, err := t.w.Reconnect(ctx, n)
		if err != nil {
			return struct{}{}, err
		}
		// Without the window's mark: kill-node must not kill itself.
		words := []string{"kill-node", remote.Quote(t.w.RunID()), remote.Quote(stateDir(n))}
		return struct{}{}, e.Run(ctx, remote.Cmd{Command: toolCmd(t.w.RunID(), n.Name, "failure.sh", words...)})
	})
	return left
}

func names(nodes []*orchestrator.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func appendBounded(lines []string, s string) []string {
	if len(lines) >= maxErrorLines {
		return lines
	}
	return append(lines, s)
}

// maxErrorLines: the first few error lines a node's record keeps.
const maxErrorLines = 5

// trainingLine is the progress line of the phase's end.
func trainingLine(res workload.Training) string {
	if len(res.Nodes) == 0 {
		return firstNonEmpty(res.Error, "no node measured")
	}
	var parts []string
	if res.MedianStepSecs > 0 {
		parts = append(parts, fmt.Sprintf("median %s %.3g s over %d node(s)", res.StragglerBasis, res.MedianStepSecs, len(res.Nodes)))
	}
	if res.Straggler != "" {
		parts = append(parts, "straggler "+res.Straggler)
	}
	if res.Error != "" {
		parts = append(parts, clip(res.Error, 120))
	}
	if len(parts) == 0 {
		return "no steady step logged"
	}
	return strings.Join(parts, "; ")
}
