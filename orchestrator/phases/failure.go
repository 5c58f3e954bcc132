package phases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// Failed is what the failure test did and measured.
type Failed struct {
	Inject     string   `json:"inject"`
	Recovery   string   `json:"recovery"`
	Victim     string   `json:"victim"`
	Rendezvous string   `json:"rendezvous"`
	Nodes      []string `json:"nodes"`
	World      int      `json:"world"` // workers of the whole job
	Dir        string   `json:"dir"`
	Command    string   `json:"command"` // the first launch on the rendezvous node
	// Torch: the PyTorch each node's launcher and workers ran.
	Torch map[string]TorchVersion `json:"torch,omitempty"`
	// CheckpointEvery: the job's checkpoint interval in steps; the steps
	// a failure loses lie anywhere from 0 to it, by where it fell.
	CheckpointEvery int `json:"checkpoint_every,omitempty"`
	// Actions: what the test did, in order, with their times.
	Actions []FailureAction `json:"actions"`
	FailureFigures
	DetectionSecs *float64 `json:"detection_seconds,omitempty"`
	ResumeSecs    *float64 `json:"resume_seconds,omitempty"`
	// Billed: every node of the job is rented while it makes no progress,
	// from the failure to resumed progress (to the end of the test when it
	// never resumed): node-seconds, GPU-hours and their price.
	BilledNodeSecs float64  `json:"billed_node_seconds"`
	BilledGPUHours float64  `json:"billed_gpu_hours"`
	BilledCost     *float64 `json:"billed_cost,omitempty"`
	Currency       string   `json:"currency,omitempty"`
	// Left: processes of the window still running on a node after the
	// test stopped the job (must be 0); -1 when the node did not answer.
	Left map[string]int `json:"left"`
	// EndedAt: when the test stopped the job (seconds since launch).
	EndedAt  float64    `json:"ended_at"`
	Events   []JobEvent `json:"events"`
	Timeline string     `json:"timeline"`
}

// FailureAction is one step of the lifecycle.
type FailureAction struct {
	At     float64 `json:"at"`
	Node   string  `json:"node,omitempty"`
	What   string  `json:"what"`
	Output string  `json:"output,omitempty"`
}

// FailurePhase runs a training job on every node under torchrun and fails
// one node once the job runs steadily, as roachtest does: setup, steady
// progress, inject, wait for the failure to show, recover, wait for
// progress to resume, clean up. Every process it starts carries the
// window's mark; the cut's restore is scheduled on the node itself.
var FailurePhase = orchestrator.Phase{
	Name:    "failure",
	Loads:   true,
	Enabled: func(inv *inventory.Inventory) bool { return inv.Phases.Failure.Enabled },
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.Failure.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return orDefault(inv.Phases.Failure.Timeout, 15*time.Minute)
	},
	Cluster: runFailure,
	Judge:   judgeFailure,
}

// failureJob is one failure test in progress.
type failureJob struct {
	w       *orchestrator.Window
	f       inventory.Failure
	log     *jobLog
	res     *Failed
	perNode int

	// torch starts the launchers (launch_torch.go).
	torch *torchLauncher

	mu  sync.Mutex
	gen int
	// deleted: the victim's pod that delete-pod deleted; podBack: a new
	// one runs there, the window's scripts in it. podWait is closed when
	// the attempt at a new pod under way ended (podErr its error);
	// podCancel ends it.
	deleted   remote.PodDeleter
	podBack   bool
	podWait   chan struct{}
	podErr    error
	podCancel context.CancelFunc
}

func runFailure(ctx context.Context, w *orchestrator.Window) (any, error) {
	f := w.Inv.Phases.Failure
	if few, short := needNodes(w, "the node-loss failure test", 2); short {
		return few, nil
	}
	nodes := w.Active()
	victim := nodes[len(nodes)-1]
	if f.Victim != "" {
		victim = nil
		for _, n := range nodes {
			if n.Name == f.Victim {
				victim = n
			}
		}
		if victim == nil {
			return nil, fmt.Errorf("the victim %s is not in the window any more (quarantined earlier)", f.Victim)
		}
	}
	if f.Inject == "delete-pod" {
		// Said before the job runs, not after minutes of it: the victim
		// must be a pod, by default the last node in one.
		if f.Victim == "" {
			for _, n := range nodes[1:] {
				if _, ok := n.Exec().(remote.PodDeleter); ok {
					victim = n
				}
			}
		}
		if _, ok := victim.Exec().(remote.PodDeleter); !ok {
			return nil, fmt.Errorf("%s: delete-pod: the node is not reached through a pod of the window (transport kubernetes)", victim.Name)
		}
	}
	if victim == nodes[0] {
		return nil, fmt.Errorf("the victim %s would be the rendezvous node (the first in the window): failing it ends the job for good", victim.Name)
	}
	if err := failureUnmeasured(ctx, w, nodes); err != nil {
		return nil, err
	}
	res := &Failed{Inject: f.Inject, Recovery: f.Recovery, Victim: victim.Name, Rendezvous: nodes[0].Name,
		World: len(nodes) * f.ProcsPerNode, Dir: failureDir(w), Left: map[string]int{}, Currency: w.Inv.Quote.Currency,
		CheckpointEvery: f.CheckpointEvery, Torch: map[string]TorchVersion{}}
	for _, n := range nodes {
		res.Nodes = append(res.Nodes, n.Name)
	}
	job := &failureJob{w: w, f: f, log: newJobLog(time.Now()), res: res, perNode: f.ProcsPerNode}
	job.torch = &torchLauncher{w: w, python: f.Python, procs: f.ProcsPerNode, inImage: f.InImage, image: w.Inv.Image.Reference,
		containerArgs: f.ContainerArgs, basePort: f.Port, names: w.RunID(),
		onLine: job.log.add, onEnd: job.log.poke}
	err := job.run(ctx, nodes, victim)
	res.EndedAt = job.now()
	job.cleanup(nodes, victim)
	events, _ := job.log.snapshot()
	job.workerTorch(events)
	drawn := record.TimelineNodes(res.Nodes, victim.Name)
	res.Events = recordedEvents(events, drawn)
	res.FailureFigures = figures(events, res.InjectedAt, victim.Name, f.ResumeSteps)
	res.DetectionSecs, res.ResumeSecs = res.FailureFigures.DetectionSecs(), res.FailureFigures.ResumeSecs()
	job.bill(len(nodes))
	res.Timeline = textTimeline(drawn, events, res.FailureFigures, res.EndedAt, 64)
	if res.Timeline != "" && len(drawn) < len(res.Nodes) {
		res.Timeline += fmt.Sprintf("(%d of the job's %d nodes drawn: the rendezvous, the victim and the first others)\n", len(drawn), len(res.Nodes))
	}
	if res.Timeline != "" {
		w.Progress.Line("failure: steps per node over time\n%s", strings.TrimRight(res.Timeline, "\n"))
	}
	return *res, err
}

// run is the lifecycle up to resumed progress (or the reason there was
// none: an error means the test itself could not be carried out).
func (j *failureJob) run(ctx context.Context, nodes []*orchestrator.Node, victim *orchestrator.Node) error {
	f := j.f
	// Setup.
	j.probeTorch(ctx, nodes)
	j.startAll(ctx, nodes, len(nodes))
	// Steady progress: every node logs steps in a job of the full size
	// (a slow start can form a group one node short).
	if err := j.waitFor(ctx, 3*time.Minute, func(ev []JobEvent) (bool, error) {
		if err := j.endedEarly(nodes); err != nil {
			return false, err
		}
		return steady(ev, nodes, j.res.World, f.SteadySteps), nil
	}); err != nil {
		return fmt.Errorf("the job never ran steadily on every node: %w", err)
	}
	// Inject.
	if err := j.inject(ctx, victim, nodes[0]); err != nil {
		return err
	}
	// Detection, recovery, resumed progress.
	detected := false
	recovered := false
	err := j.waitFor(ctx, f.ResumeWithin+time.Minute, func(ev []JobEvent) (bool, error) {
		fig := figures(ev, j.res.InjectedAt, victim.Name, f.ResumeSteps)
		if !detected && fig.DetectedAt != nil {
			detected = true
			j.act("", "detected", fmt.Sprintf("%.1f s after the failure", *fig.DetectedAt-j.res.InjectedAt))
		}
		if detected && !recovered {
			recovered = j.recover(ctx, nodes, victim)
		}
		if fig.Resumed {
			return true, nil
		}
		if f.Recovery == "elastic" && j.allEnded(nodes, victim) {
			return false, errors.New("every survivor's launcher ended: the job did not go on without the victim")
		}
		return false, nil
	})
	if err != nil {
		j.act("", "not resumed", err.Error())
		return nil // a job that does not resume is a FAIL verdict, not a broken test
	}
	j.act("", "resumed", "")
	// The victim coming back: bounded, and only a figure.
	_ = j.waitFor(ctx, 2*time.Minute, func(ev []JobEvent) (bool, error) {
		if !recovered {
			recovered = j.recover(ctx, nodes, victim)
		}
		return figures(ev, j.res.InjectedAt, victim.Name, f.ResumeSteps).VictimBackAt != nil, nil
	})
	return nil
}

func steady(ev []JobEvent, nodes []*orchestrator.Node, world, want int) bool {
	steps := map[string]int{}
	for _, e := range ev {
		if e.Kind == "step" && e.World == world {
			steps[e.Node]++
		}
	}
	for _, n := range nodes {
		if steps[n.Name] < want {
			return false
		}
	}
	return true
}

func (j *failureJob) now() float64 { return time.Since(j.log.start).Seconds() }

func (j *failureJob) act(node, what, out string) {
	a := FailureAction{At: j.now(), Node: node, What: what, Output: strings.TrimSpace(out)}
	j.mu.Lock()
	j.res.Actions = append(j.res.Actions, a)
	j.mu.Unlock()
	msg := "failure: " + what
	if a.Output != "" {
		msg += ": " + firstLine(a.Output)
	}
	if node != "" {
		j.w.Progress.Node(node, "%s", msg)
	} else {
		j.w.Progress.Line("%s", msg)
	}
}

// waitFor re-checks cond at every job event (and every second) until it
// holds, fails, or within has passed.
func (j *failureJob) waitFor(ctx context.Context, within time.Duration, cond func([]JobEvent) (bool, error)) error {
	by := time.Now().Add(within)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ev, next := j.log.snapshot()
		ok, err := cond(ev)
		if err != nil || ok {
			return err
		}
		if time.Now().After(by) {
			return fmt.Errorf("not within %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		case <-tick.C:
		}
	}
}

// startAll launches torchrun on nodes for a job of size nodes (elastic:
// it may shrink by the victim).
func (j *failureJob) startAll(ctx context.Context, nodes []*orchestrator.Node, size int) {
	j.mu.Lock()
	j.gen++
	gen := j.gen
	j.mu.Unlock()
	for _, n := range nodes {
		j.start(ctx, n, size, gen)
	}
}

// start launches one node's torchrun, its output streamed into the job log.
func (j *failureJob) start(ctx context.Context, n *orchestrator.Node, size, gen int) {
	cmd := j.command(n, size, gen)
	if j.res.Command == "" {
		j.res.Command = cmd
	}
	j.act(n.Name, fmt.Sprintf("launched (generation %d, %d node(s))", gen, size), "")
	j.torch.start(ctx, n, cmd)
}

// command is the torchrun line for n: elastic jobs may shrink by one node
// and restart their workers; a relaunched job has a fixed size.
func (j *failureJob) command(n *orchestrator.Node, size, gen int) string {
	f := j.f
	nnodes := strconv.Itoa(size)
	restarts := 0
	if f.Recovery == "elastic" {
		nnodes = fmt.Sprintf("%d:%d", max(size-1, 1), size)
		restarts = 3
	}
	dir := failureDir(j.w)
	args := j.torch.torchrunArgs(n, nnodes, restarts, gen, fmt.Sprintf("%s/logs/%s-g%d", dir, n.Name, gen))
	if len(f.Command) > 0 {
		args = append(args, "--no_python")
		for _, c := range f.Command {
			args = append(args, remote.Quote(c))
		}
	} else {
		// $f: the node's checked copy (toolCheck).
		args = append(args, `"$f"`,
			"--ckpt-dir", remote.Quote(dir+"/ckpt"), fmt.Sprintf("--ckpt-every=%d", f.CheckpointEvery),
			fmt.Sprintf("--hidden=%d", f.Hidden), fmt.Sprintf("--timeout=%g", f.CollectiveTimeout.Seconds()),
			fmt.Sprintf("--step-time=%g", f.StepTime.Seconds()))
	}
	// The node's copy of the script is checked as every pushed one is.
	check := ""
	if len(f.Command) == 0 {
		check = toolCheck(j.w.RunID(), n.Name, "ddp_train.py") + " "
	}
	env := []string{"GPUACCEPT_NODE=" + remote.Quote(n.Name), "GPUACCEPT_CKPT_DIR=" + remote.Quote(dir+"/ckpt"), "LOGLEVEL=INFO", "PYTHONUNBUFFERED=1",
		noSharedStore}
	if id := j.torch.imageID(n); id != "" {
		args = j.torch.inImageArgs(n, gen, id, dir, env, args)
	}
	return shellLine(dir, dir+"/ckpt", check, env, args)
}

// failureDir holds the job's checkpoints and launcher logs.
func failureDir(w *orchestrator.Window) string {
	return strings.TrimRight(w.Inv.Phases.Failure.Dir, "/") + "/gpuaccept-" + w.RunID() + "/failure"
}

// endedEarly: a launcher that ended before the failure was injected.
func (j *failureJob) endedEarly(nodes []*orchestrator.Node) error {
	for _, n := range nodes {
		if done, err := j.ended(n); done {
			return fmt.Errorf("%s: the launcher ended before the failure: %v (raw/%s/failure.log.gz in the bundle)", n.Name, err, n.Name)
		}
	}
	return nil
}

// allEnded: every survivor's launcher is gone.
func (j *failureJob) allEnded(nodes []*orchestrator.Node, victim *orchestrator.Node) bool {
	for _, n := range nodes {
		if done, _ := j.ended(n); n != victim && !done {
			return false
		}
	}
	return true
}

// ended says whether n's latest launcher has exited, and how.
func (j *failureJob) ended(n *orchestrator.Node) (bool, error) { return j.torch.ended(n) }

// node runs failure.sh op on n, without the window's mark (kill-node must
// not kill the command itself).
func (j *failureJob) node(ctx context.Context, n *orchestrator.Node, timeout time.Duration, op string, args ...string) (string, error) {
	return j.nodeLines(ctx, n, timeout, nil, op, args...)
}

// nodeLines is node with each output line also passed to onLine as it
// arrives.
func (j *failureJob) nodeLines(ctx context.Context, n *orchestrator.Node, timeout time.Duration, onLine func(string), op string, args ...string) (string, error) {
	e, err := j.w.Reconnect(ctx, n)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Both streams go into one capture, which an executor writes from two
	// goroutines (the Kubernetes exec's did, under the race detector), and
	// which a node printing without end does not fill.
	out := NewCapture(captureHead, captureTail)
	var stdout io.Writer = out
	lines := &lineWriter{fn: func(string) {}}
	if onLine != nil {
		lines.fn = onLine
		stdout = io.MultiWriter(out, lines)
	}
	words := append([]string{remote.Quote(op), remote.Quote(j.w.RunID()), remote.Quote(stateDir(n))}, args...)
	err = e.Run(cctx, remote.Cmd{Command: toolCmd(j.w.RunID(), n.Name, "failure.sh", words...), Stdout: stdout, Stderr: out})
	lines.flush()
	return string(out.Bytes()), err
}

// each runs fn on every node at once, as many at a time as the window's
// fan-out (w.FanOut): one node after another, a 1,000-node cleanup spent its
// two minutes stopping the job and then counted no node's processes
// (every node "did not answer").
func (j *failureJob) each(ctx context.Context, nodes []*orchestrator.Node, fn func(context.Context, *orchestrator.Node)) {
	remote.Each(ctx, len(nodes), remote.FanOut{Limit: j.w.FanOut()}, func(ctx context.Context, i int) (struct{}, error) {
		fn(ctx, nodes[i])
		return struct{}{}, nil
	})
}
