package phases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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

// injectWithin bounds the command that kills the victim.
const injectWithin = time.Minute

// cutPause is how long failure.sh waits between saying it cuts and
// cutting (so that its line leaves first).
const cutPause = 500 * time.Millisecond

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

// inject fails the victim and sets InjectedAt to when it took effect, as
// near as the coordinator can tell: a kill when its command returns, a cut
// when the node says it is about to go (plus the pause it makes first).
func (j *failureJob) inject(ctx context.Context, victim, rdzv *orchestrator.Node) error {
	f := j.f
	switch f.Inject {
	case "kill-worker", "kill-node", "reboot":
		// The kill happens as the node says it: its first line's arrival,
		// not the command's return (a loaded node takes seconds to end
		// the session). So a long deadline costs the figure nothing, and a
		// loaded node gets the time to find the job: at 1,000 simulated
		// nodes on two cores the kill command outlasted 20 s.
		var at float64
		out, err := j.nodeLines(ctx, victim, injectWithin, func(line string) {
			if at == 0 && (strings.HasPrefix(line, "killed ") || strings.HasPrefix(line, "rebooting ")) {
				at = j.now()
			}
		}, f.Inject)
		if at == 0 {
			at = j.now()
		}
		j.res.InjectedAt = at
		j.act(victim.Name, f.Inject, out)
		if err != nil && f.Inject != "reboot" {
			return fmt.Errorf("%s: %s: %w: %s", victim.Name, f.Inject, err, strings.TrimSpace(out))
		}
	case "delete-pod":
		pd, ok := victim.Exec().(remote.PodDeleter)
		if !ok {
			return fmt.Errorf("%s: delete-pod: the node is not reached through a pod of the window (transport kubernetes)", victim.Name)
		}
		dctx, cancel := context.WithTimeout(ctx, injectWithin)
		pod, err := pd.DeletePod(dctx)
		cancel()
		// From the API's word: the pod's processes end within its grace
		// period after it, which is part of what the failure costs.
		j.res.InjectedAt = j.now()
		if err != nil {
			j.act(victim.Name, f.Inject, err.Error())
			return fmt.Errorf("%s: delete-pod: %w", victim.Name, err)
		}
		j.mu.Lock()
		j.deleted = pd
		j.mu.Unlock()
		j.act(victim.Name, f.Inject, "pod "+pod+" deleted through the Kubernetes API")
	case "cut":
		secs := strconv.Itoa(int(f.CutFor.Seconds()))
		// The session dies with the link: the line before the cut is the
		// proof that it happened.
		var at float64
		out, _ := j.nodeLines(ctx, victim, 5*time.Second, func(line string) {
			if strings.HasPrefix(line, "cut dev=") {
				at = j.now() + cutPause.Seconds()
			}
		}, "cut", secs, remote.Quote(j.w.FabricHost(rdzv)))
		j.res.InjectedAt = at
		j.act(victim.Name, "cut for "+f.CutFor.String(), out)
		if !strings.Contains(out, "cut dev=") {
			return fmt.Errorf("%s: the cut did not happen: %s", victim.Name, strings.TrimSpace(out))
		}
	}
	return nil
}

// recover brings the victim back as the policy says; true once done.
func (j *failureJob) recover(ctx context.Context, nodes []*orchestrator.Node, victim *orchestrator.Node) bool {
	f := j.f
	// The victim answers again: at once after a kill, after the cut ends,
	// after a reboot (bounded by the phase's deadline).
	if f.Inject == "cut" && j.now() < j.res.InjectedAt+f.CutFor.Seconds() {
		return false
	}
	if err := j.answers(ctx, victim); err != nil {
		// Gone for good, as far as this test can wait: a relaunch goes on
		// without it.
		if f.Recovery == "relaunch" && j.now() > j.res.InjectedAt+f.CutFor.Seconds()+60 {
			var survivors []*orchestrator.Node
			for _, n := range nodes {
				if n != victim {
					survivors = append(survivors, n)
				}
			}
			j.stopAll(ctx, survivors)
			j.act(victim.Name, "relaunching without it", err.Error())
			j.startAll(ctx, survivors, len(survivors))
			return true
		}
		return false
	}
	switch f.Recovery {
	case "elastic":
		// The victim's launcher rejoins the same elastic job (kill-worker:
		// torchrun restarted the worker itself). Its old launcher may not
		// have returned yet when the survivors already noticed (found with
		// the fake job, whose survivors notice at once): then not yet, and
		// again at the next event, or the victim would never rejoin.
		if f.Inject != "kill-worker" {
			if done, _ := j.ended(victim); !done {
				return false
			}
			j.mu.Lock()
			gen := j.gen
			j.mu.Unlock()
			j.start(ctx, victim, len(nodes), gen)
		}
	case "relaunch":
		// Stop what is left of the job everywhere, then start it again on
		// every node (the victim answers again).
		j.stopAll(ctx, nodes)
		j.startAll(ctx, nodes, len(nodes))
	}
	return true
}

// answers is nil once the victim answers again: its processes counted,
// in a new pod on its node after delete-pod.
func (j *failureJob) answers(ctx context.Context, victim *orchestrator.Node) error {
	if j.f.Inject == "delete-pod" {
		if err := j.podAgain(ctx, victim); err != nil {
			return err
		}
	}
	_, err := j.node(ctx, victim, 10*time.Second, "count")
	return err
}

// podAgain brings the victim of delete-pod back as the cluster would
// bring back a job's pod: a new pod of the window on the same node (as a
// resumed window makes one), the window's scripts pushed there again and
// its private directory made anew (the old pod's went with it). The pod
// is made in the background, bounded by the time the job has to resume:
// a node that takes no new pod (cordoned, NotReady) must not hold up the
// recovery loop, whose relaunch goes on without the victim after a
// minute. nil once the pod is there; the error until then.
func (j *failureJob) podAgain(ctx context.Context, victim *orchestrator.Node) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.podBack {
		return nil
	}
	if j.podWait == nil {
		wait := make(chan struct{})
		pctx, cancel := context.WithTimeout(ctx, j.f.ResumeWithin)
		j.podWait, j.podCancel = wait, cancel
		go func() {
			defer close(wait)
			defer cancel()
			// The window's Reconnect makes the pod and runs the tools
			// phase in it (Phase.Provisions) before it returns.
			e, err := j.w.Reconnect(pctx, victim)
			if err != nil {
				j.act(victim.Name, "no new pod ready", err.Error())
			} else {
				j.act(victim.Name, "new pod", fmt.Sprintf("%s: the window's scripts pushed again, private directory %s", e.Addr(), stateDir(victim)))
			}
			j.mu.Lock()
			j.podErr, j.podBack = err, err == nil
			j.mu.Unlock()
			j.log.poke()
		}()
	}
	select {
	case <-j.podWait:
		// Failed: tried again at the next call.
		err := j.podErr
		j.podWait = nil
		return fmt.Errorf("no new pod: %w", err)
	default:
		return errors.New("its new pod is not ready yet")
	}
}

// endPodAgain ends an attempt at a new pod still under way and waits for
// it: nothing of the test may run past it.
func (j *failureJob) endPodAgain() {
	j.mu.Lock()
	wait, cancel := j.podWait, j.podCancel
	j.mu.Unlock()
	if wait != nil {
		cancel()
		<-wait
	}
}

// stopAll stops the job on nodes for a relaunch.
func (j *failureJob) stopAll(ctx context.Context, nodes []*orchestrator.Node) {
	j.each(ctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		out, _ := j.node(ctx, n, 20*time.Second, "kill-node")
		j.act(n.Name, "stopped for the relaunch", out)
	})
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

// Each step of the cleanup has its own time, as teardown's phases do: at
// 1,000 loaded nodes stopping the job spent the one budget they shared,
// and the leftover count then asked no node (every node "did not answer",
// a RECOV-004 FAIL that measured nothing).
var (
	cleanupStop  = 2 * time.Minute
	cleanupCount = time.Minute
)

// cleanup stops the job everywhere, restores a cut that is still pending
// and counts what is left.
func (j *failureJob) cleanup(nodes []*orchestrator.Node, victim *orchestrator.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupStop)
	defer cancel()
	if j.f.Inject == "cut" {
		// Reachable again (the restore on the node fired): then nothing is
		// pending; otherwise say so.
		if _, err := j.node(ctx, victim, 10*time.Second, "restore"); err != nil {
			j.act(victim.Name, "not reachable at cleanup; its restore is scheduled on the node", err.Error())
		}
	}
	j.endPodAgain()
	j.mu.Lock()
	deleted := j.deleted
	if j.podBack {
		deleted = nil
	}
	j.mu.Unlock()
	if deleted != nil {
		// Its pod was deleted and none made again. Counting in it would
		// make a pod there only to count nothing: the window's processes
		// went with the deleted one, once the API no longer has it.
		gctx, gcancel := context.WithTimeout(ctx, 15*time.Second)
		gone, err := deleted.PodGone(gctx)
		gcancel()
		left, said := 0, "its pod was deleted and none made again; the API has it no more, nor its processes"
		switch {
		case err != nil:
			left, said = -1, "its deleted pod could not be looked for: "+err.Error()
		case !gone:
			left, said = -1, "its deleted pod is still there (terminating): its processes not counted"
		}
		j.mu.Lock()
		j.res.Left[victim.Name] = left
		j.mu.Unlock()
		j.act(victim.Name, "not counted", said)
		nodes = slices.DeleteFunc(slices.Clone(nodes), func(n *orchestrator.Node) bool { return n == victim })
	}
	j.each(ctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		out, err := j.node(ctx, n, 20*time.Second, "kill-node")
		if err == nil && strings.TrimSpace(out) != "" {
			j.act(n.Name, "job stopped", out)
		}
	})
	if !j.torch.stop(ctx) {
		j.act("", "cleanup", fmt.Sprintf("stopping the job outlasted its %v; counting what is left", cleanupStop))
	}
	cctx, ccancel := context.WithTimeout(context.Background(), cleanupCount)
	defer ccancel()
	j.each(cctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		out, err := j.node(ctx, n, 10*time.Second, "count")
		c, perr := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || perr != nil {
			c = -1
		}
		j.mu.Lock()
		j.res.Left[n.Name] = c
		j.mu.Unlock()
	})
}

// bill prices the time the job made no progress.
func (j *failureJob) bill(nodes int) {
	end := j.res.EndedAt
	if j.res.ResumedAt != nil {
		end = *j.res.ResumedAt
	}
	secs := max(end-j.res.InjectedAt, 0)
	j.res.BilledNodeSecs = secs * float64(nodes)
	j.res.BilledGPUHours = j.res.BilledNodeSecs * float64(max(j.w.Inv.Quote.GPUsPerNode, 1)) / 3600
	if p := j.w.Inv.Quote.PricePerGPUHr; p > 0 {
		c := j.res.BilledGPUHours * p
		j.res.BilledCost = &c
	}
}
