package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/remote/fake"
)

// trainer is a fake elastic training job across the fleet, keeping
// ddp_train.py's log contract (GPUACCEPT start/step/checkpoint/error
// lines): every launcher steps on its own clock; when a member is killed
// the others report the error and re-form without it, resuming from the
// last checkpoint; a relaunched member rejoins.
type trainer struct {
	every int // checkpoint every N steps
	tick  time.Duration

	mu      sync.Mutex
	nodes   []string        // in rank order
	killed  map[string]bool // whose processes failure.sh killed
	running map[string]int  // launchers running per node
	ckpt    int             // the last checkpoint rank 0 wrote
	restart int

	// countFor makes failure.sh's count take that long; counting and
	// peakCount are how many counts run at once and the most that did.
	countFor            time.Duration
	counting, peakCount int
	// killFor makes failure.sh's kill-node take that long.
	killFor time.Duration
	// torch2 models PyTorch 2.x's agent-shared store: a launcher that
	// joins after the job's first round (the victim relaunched) without
	// TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 waits for a MASTER_ADDR no one
	// writes, and the job with it: stuck, nobody steps again.
	torch2        bool
	formed, stuck bool
}

func newTrainer(nodes ...string) *trainer {
	return &trainer{every: 5, tick: 15 * time.Millisecond, nodes: nodes, killed: map[string]bool{}, running: map[string]int{}}
}

var launchFor = regexp.MustCompile(`GPUACCEPT_NODE=(\S+) .*exec python3 -m torch\.distributed\.run `)

// privateFirst: the launch line makes the job's directory the window's own
// (gpuaccept_private) before anything is written under it.
var privateFirst = regexp.MustCompile(`(?s)^cd && bash -c .*gpuaccept_private.* private (\S+) && mkdir -p (\S+) && `)

// answer makes h run the job's launcher and failure.sh's operations.
func (tr *trainer) answer(h *fake.Host) {
	h.On(`exec python3 -m torch\.distributed\.run .*"\$f" --ckpt-dir`, func(c *fake.Call) fake.Reply {
		m := toolPath.FindStringSubmatch(c.Command)
		if m == nil || m[3] != "ddp_train.py" || launchFor.FindStringSubmatch(c.Command) == nil {
			return fake.Reply{Exit: 2, Stderr: "fake: not the job's launch line: " + c.Command}
		}
		if reply, ok := pushedCheck(c, m[1], "ddp_train.py"); !ok {
			return reply
		}
		if p := privateFirst.FindStringSubmatch(c.Command); p == nil || shellWords(p[2])[0] != shellWords(p[1])[0]+"/failure/ckpt" {
			return fake.Reply{Exit: 2, Stderr: "fake: the job's directory is not made private first: " + c.Command}
		}
		return tr.launch(c)
	})
	h.On(`exec python3 -c .*import torch, torch\.distributed\.run`, func(c *fake.Call) fake.Reply {
		if tr.torch2 {
			return fake.Reply{Stdout: "torch 2.11.0+cu130\n"}
		}
		return fake.Reply{Stdout: "torch 1.13.0a0\n"}
	})
	onScript(h, "failure.sh", func(c *fake.Call, a []string) fake.Reply {
		node := c.Host.Name()
		if a[0] == "count" && tr.countFor > 0 {
			tr.mu.Lock()
			tr.counting++
			tr.peakCount = max(tr.peakCount, tr.counting)
			tr.mu.Unlock()
			time.Sleep(tr.countFor)
			tr.mu.Lock()
			tr.counting--
			tr.mu.Unlock()
		}
		if a[0] == "kill-node" && tr.killFor > 0 {
			time.Sleep(tr.killFor)
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		switch a[0] {
		case "kill-node":
			if tr.running[node] == 0 {
				return fake.Reply{Stdout: "error no process of the window runs here\n", Exit: 1}
			}
			tr.killed[node] = true
			return fake.Reply{Stdout: fmt.Sprintf("killed 4242 python3 -m torch.distributed.run (%s)\n", node)}
		case "count":
			return fake.Reply{Stdout: fmt.Sprintf("%d\n", tr.running[node])}
		}
		return fake.Reply{Stdout: "error unknown operation " + a[0] + "\n", Exit: 2}
	})
}

func (tr *trainer) launch(c *fake.Call) fake.Reply {
	node := c.Host.Name()
	tr.mu.Lock()
	tr.killed[node] = false
	tr.running[node]++
	rank := 0
	for i, n := range tr.nodes {
		if n == node {
			rank = i
		}
	}
	world, step, restart := len(tr.nodes), tr.ckpt, tr.restart
	if tr.torch2 && tr.formed && !strings.Contains(c.Command, noSharedStore) {
		tr.stuck = true
	}
	tr.formed = true
	tr.mu.Unlock()
	defer func() {
		tr.mu.Lock()
		tr.running[node]--
		tr.mu.Unlock()
	}()
	say := func(format string, args ...any) {
		fmt.Fprintf(c.Stdout, "[default0]:GPUACCEPT "+format+"\n", args...)
	}
	v := ""
	if tr.torch2 {
		v = " torch=2.11.0+cu130"
	}
	say("start t=%d node=%s rank=%d world=%d restart=%d resume_step=%d%s", time.Now().Unix(), node, rank, world, restart, step, v)
	lost := map[string]bool{}
	t := time.NewTicker(tr.tick)
	defer t.Stop()
	for {
		select {
		case <-c.Ctx.Done():
			return fake.Reply{Signal: "TERM"}
		case <-t.C:
		}
		tr.mu.Lock()
		if tr.killed[node] {
			tr.mu.Unlock()
			return fake.Reply{Signal: "KILL"}
		}
		if tr.stuck {
			tr.mu.Unlock()
			continue
		}
		var gone []string
		for _, n := range tr.nodes {
			if tr.killed[n] && !lost[n] {
				gone = append(gone, n)
			}
		}
		tr.mu.Unlock()
		if len(gone) > 0 {
			// A peer died: the collective fails, the agent re-forms the
			// group without it and resumes from the last checkpoint.
			say("error t=%d node=%s rank=%d step=%d msg=RuntimeError: Connection closed by peer (%s)", time.Now().Unix(), node, rank, step, strings.Join(gone, ","))
			for _, n := range gone {
				lost[n] = true
			}
			tr.mu.Lock()
			if tr.restart == restart {
				tr.restart++
			}
			restart, step = tr.restart, tr.ckpt
			world = len(tr.nodes) - len(lost)
			tr.mu.Unlock()
			say("start t=%d node=%s rank=%d world=%d restart=%d resume_step=%d", time.Now().Unix(), node, rank, world, restart, step)
			continue
		}
		step++
		say("step t=%d node=%s rank=%d world=%d step=%d loss=0.5", time.Now().Unix(), node, rank, world, step)
		if rank == 0 && step%tr.every == 0 {
			tr.mu.Lock()
			tr.ckpt = step
			tr.mu.Unlock()
			say("checkpoint t=%d node=%s rank=0 step=%d", time.Now().Unix(), node, step)
		}
	}
}

// killTest is the failure test both fake-job tests run.
const killTest = `phases:
  failure:
    enabled: true
    dir: /shared
    procs_per_node: 1
    steady_steps: 5
    resume_steps: 3
    resume_within: 30s
    timeout: 1m
`

// TestFailureKillsANodeAndTheJobResumes: the node-kill test over the fake
// job: steady on 3 nodes, the victim (the last) killed, the survivors
// detect it and resume from the checkpoint, the victim rejoins; RECOV-*
// carry the figures, and nothing is left running.
func TestFailureKillsANodeAndTheJobResumes(t *testing.T) {
	inv := fakeInventory(t, 3, killTest)
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3")
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	r := runFake(t, inv, f, FailurePhase)
	res := resultOf(t, r, "failure", -1)
	if res.Outcome != record.OK {
		t.Fatalf("failure phase: %+v", res)
	}
	if v := verdictOf(t, r, "RECOV-001", ""); v.Status != record.Pass || v.Value == nil {
		t.Errorf("RECOV-001: %+v", v)
	}
	if v := verdictOf(t, r, "RECOV-002", ""); v.Status != record.Pass || v.Value == nil || *v.Value > 5 {
		t.Errorf("RECOV-002 (steps lost within the checkpoint interval): %+v", v)
	}
	if v := verdictOf(t, r, "RECOV-003", "h3"); v.Status != record.Pass || v.Value == nil {
		t.Errorf("RECOV-003 (h3 back in the job): %+v", v)
	}
	if v := verdictOf(t, r, "RECOV-004", ""); v.Status != record.Pass {
		t.Errorf("RECOV-004: %+v", v)
	}
	if n := f.Host("h3").Ran(`failure\.sh".* bash "\$f" kill-node `); n < 1 {
		t.Errorf("h3 was never killed: %q", f.Host("h3").Commands())
	}
	// torch 1.13's torchrun has no --local_addr.
	if n := f.Host("h3").Ran(`--local_addr`); n != 0 {
		t.Errorf("a 1.13 launch given --local_addr: %q", f.Host("h3").Commands())
	}
	for _, h := range f.Hosts() {
		if h.Running() != 0 {
			t.Errorf("%s: %d command(s) still running after the window", h.Name(), h.Running())
		}
	}
}

// TestFailureVictimRejoinsOnTorch2: on PyTorch 2.x the relaunched victim
// comes back into the job (field run on 2.11: it hung in the rendezvous
// with the survivors until the phase ran out), and every launch line, on
// the node and in the image, turns the agent-shared store off.
func TestFailureVictimRejoinsOnTorch2(t *testing.T) {
	inv := fakeInventory(t, 3, killTest)
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3")
	tr.torch2 = true
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	r := runFake(t, inv, f, FailurePhase)
	if v := verdictOf(t, r, "RECOV-003", "h3"); v.Status != record.Pass {
		t.Errorf("RECOV-003 (h3 back in the job): %+v", v)
	}
	if n := f.Host("h3").Ran(`export .*` + regexp.QuoteMeta(noSharedStore) + `.*exec python3 -m torch\.distributed\.run `); n < 2 {
		t.Errorf("h3's launches without %s: %q", noSharedStore, f.Host("h3").Commands())
	}
	// 2.x's launchers name their node by its address, not the host name.
	if n := f.Host("h3").Ran(`torch\.distributed\.run .*--local_addr=192\.0\.2\.13 `); n < 2 {
		t.Errorf("h3's 2.x launches without its address: %q", f.Host("h3").Commands())
	}
	// The versions are in the record and in what the buyer reads.
	var res Failed
	if err := json.Unmarshal(resultOf(t, r, "failure", -1).Data, &res); err != nil {
		t.Fatalf("failure result: %v", err)
	}
	for _, n := range []string{"h1", "h2", "h3"} {
		if v := res.Torch[n]; v.Launcher != "2.11.0+cu130" || v.Workers != "2.11.0+cu130" {
			t.Errorf("%s: torch %+v", n, v)
		}
	}
	if v := verdictOf(t, r, "RECOV-001", ""); !strings.Contains(v.Detail, "(PyTorch 2.11.0+cu130 on h[1-3])") {
		t.Errorf("RECOV-001 does not say which PyTorch: %q", v.Detail)
	}
}

// TestFailureCleanupCountsEveryNodeAtOnce: the leftover count runs on the
// nodes side by side (a 1,000-node window counted one node after another
// until its two minutes ran out, and every node "did not answer"), and
// RECOV-004 still has every node's count.
func TestFailureCleanupCountsEveryNodeAtOnce(t *testing.T) {
	inv := fakeInventory(t, 6, killTest)
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3", "h4", "h5", "h6")
	tr.countFor = 150 * time.Millisecond
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	r := runFake(t, inv, f, FailurePhase)
	if v := verdictOf(t, r, "RECOV-004", ""); v.Status != record.Pass {
		t.Errorf("RECOV-004: %+v", v)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.peakCount < 2 {
		t.Errorf("at most %d count(s) ran at once: the cleanup went node by node", tr.peakCount)
	}
}

// TestFailureCleanupCountsAfterASlowStop: stopping the job that outlasts
// its time leaves the leftover count its own (at 1,000 loaded nodes the
// stop spent a budget both shared, and the count asked no node).
func TestFailureCleanupCountsAfterASlowStop(t *testing.T) {
	stop := cleanupStop
	cleanupStop = 100 * time.Millisecond
	t.Cleanup(func() { cleanupStop = stop })
	inv := fakeInventory(t, 3, killTest)
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3")
	tr.killFor = 300 * time.Millisecond
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	r := runFake(t, inv, f, FailurePhase)
	var res Failed
	if err := json.Unmarshal(resultOf(t, r, "failure", -1).Data, &res); err != nil {
		t.Fatalf("failure result: %v", err)
	}
	for _, n := range []string{"h1", "h2", "h3"} {
		if c, ok := res.Left[n]; !ok || c < 0 {
			t.Errorf("%s: left %d (recorded %v): the count did not ask it", n, c, ok)
		}
	}
	if v := verdictOf(t, r, "RECOV-004", ""); strings.Contains(v.Measured, "did not answer") {
		t.Errorf("RECOV-004: %+v", v)
	}
	if n := f.Host("h1").Ran(`failure\.sh".* bash "\$f" count `); n < 1 {
		t.Errorf("h1 was never counted (%d commands ran on it)", len(f.Host("h1").Commands()))
	}
}

// TestLeftoversAreGroupedAsHostRanges: RECOV-004 names the nodes that did
// not answer and those with processes left as host ranges, one clause per
// answer, not one a node.
func TestLeftoversAreGroupedAsHostRanges(t *testing.T) {
	res := Failed{Left: map[string]int{}}
	for i := 1; i <= 1000; i++ {
		n := fmt.Sprintf("gpu-%04d", i)
		res.Nodes = append(res.Nodes, n)
		switch {
		case i <= 990:
			res.Left[n] = -1
		case i <= 995:
			res.Left[n] = 2
		case i < 1000:
			res.Left[n] = 0
		} // gpu-1000: no answer recorded at all
	}
	res.Left["gpu-0500"] = 1
	v := leftVerdict(res, record.NewVerdict("RECOV-004", ""))
	want := "gpu-[0001-0499,0501-0990,1000] did not answer; gpu-0500: 1 process(es); gpu-[0991-0995]: 2 process(es)"
	if v.Status != record.Fail || v.Measured != want {
		t.Errorf("RECOV-004: %s %q\nwant %q", v.Status, v.Measured, want)
	}
	for n := range res.Left {
		res.Left[n] = 0
	}
	res.Left["gpu-1000"] = 0
	if v := leftVerdict(res, record.NewVerdict("RECOV-004", "")); v.Status != record.Pass {
		t.Errorf("nothing left: %s %q", v.Status, v.Measured)
	}
}

// deletablePod is a fake host's executor as a pod the window may delete
// through the API: deleting it ends every process in it (the trainer's
// launcher there), drops its connections (the executor is lost) and
// takes its files (the pushed scripts) with it; the next dial is a new
// pod on the same node.
type deletablePod struct {
	podNode
	h       *fake.Host
	tr      *trainer
	deleted *int
	pod     string
}

func (p deletablePod) PodGone(context.Context) (bool, error) { return *p.deleted > 0, nil }

// Addr is the pod's, a new one for each dial, as the API names pods.
func (p deletablePod) Addr() string { return "kubernetes:default/" + p.pod }

func (p deletablePod) DeletePod(context.Context) (string, error) {
	p.tr.mu.Lock()
	p.tr.killed[p.h.Name()] = true
	p.tr.mu.Unlock()
	*p.deleted++
	for path := range p.h.Files() {
		p.h.Remove(path)
	}
	p.h.Drop("pod gpuaccept-" + p.h.Name() + " deleted by the window")
	return p.pod, nil
}

// TestFailureDeletePodBringsANewPod: delete-pod on pods: the victim's pod
// is deleted through the API, the survivors go on from the checkpoint,
// the window makes a new pod on the victim's node, pushes its scripts
// there again (the old pod's went with it) and the victim's launcher
// rejoins from it; nothing is left running.
func TestFailureDeletePodBringsANewPod(t *testing.T) {
	inv := fakeInventory(t, 3, killTest)
	// The fake's nodes are dialled as pods here; the inventory refuses
	// delete-pod for nodes it reaches over SSH (bad-failure-delete-pod).
	inv.Phases.Failure.Inject = "delete-pod"
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3")
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	var mu sync.Mutex
	deleted, dials := 0, 0
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		e, err := f.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		if c.Name == "h3" {
			dials++
		}
		pod := fmt.Sprintf("gpuaccept-%s-%d", c.Name, dials)
		mu.Unlock()
		pn := podNode{Executor: e, img: remote.PodImage{ImageID: "sha256:" + pin}}
		return deletablePod{podNode: pn, h: f.Host(c.Name), tr: tr, deleted: &deleted, pod: pod}, nil
	}
	rec, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, FailurePhase, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: dial, Tool: "test"})
	if err != nil {
		t.Fatalf("window: %v", err)
	}
	var res Failed
	if pr := resultOf(t, rec, "failure", -1); jsonOf(pr, &res) != nil || pr.Outcome != record.OK {
		t.Fatalf("failure phase: %+v", pr)
	}
	mu.Lock()
	defer mu.Unlock()
	if deleted != 1 || dials < 2 {
		t.Errorf("h3's pod deleted %d time(s), dialled %d time(s): want once, and again after", deleted, dials)
	}
	for _, id := range []string{"RECOV-001", "RECOV-004"} {
		if v := verdictOf(t, rec, id, ""); v.Status != record.Pass {
			t.Errorf("%s: %+v", id, v)
		}
	}
	if v := verdictOf(t, rec, "RECOV-003", "h3"); v.Status != record.Pass {
		t.Errorf("RECOV-003 (h3 back in the job, from its new pod): %+v", v)
	}
	if n := f.Host("h3").Ran(`tar -x -o -f ` + archiveName); n != 2 {
		t.Errorf("h3's scripts unpacked %d time(s), want 2 (the new pod's too)", n)
	}
	var what []string
	for _, a := range res.Actions {
		what = append(what, a.What+": "+a.Output)
	}
	said := strings.Join(what, "\n")
	for _, want := range []string{"delete-pod: pod gpuaccept-h3-1 deleted through the Kubernetes API", "new pod: kubernetes:default/gpuaccept-h3-2", "scripts pushed again"} {
		if !strings.Contains(said, want) {
			t.Errorf("the actions do not say %q:\n%s", want, said)
		}
	}
	for _, h := range f.Hosts() {
		if h.Running() != 0 {
			t.Errorf("%s: %d command(s) still running after the window", h.Name(), h.Running())
		}
	}
}

// delete-pod on a node that is not a pod is an error of the test, not a
// failure of the node.
func TestFailureDeletePodOfAHostIsAnError(t *testing.T) {
	inv := fakeInventory(t, 2, killTest)
	inv.Phases.Failure.Inject = "delete-pod"
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2")
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	rec := runFake(t, inv, f, FailurePhase)
	if pr := resultOf(t, rec, "failure", -1); pr.Outcome == record.OK || !strings.Contains(pr.Error, "not reached through a pod") {
		t.Errorf("failure phase: %s %q", pr.Outcome, pr.Error)
	}
}

// delete-pod where the node takes no new pod (cordoned, say): the
// survivors go on without the victim, the attempts at a new pod do not
// hold up the recovery, RECOV-003 warns that it did not come back, and
// the leftover count asks the API whether the deleted pod is gone rather
// than making a pod there to count in.
func TestFailureDeletePodWithoutANewPod(t *testing.T) {
	inv := fakeInventory(t, 3, killTest)
	inv.Phases.Failure.Inject = "delete-pod"
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3")
	for _, h := range f.Hosts() {
		tr.answer(h)
	}
	var mu sync.Mutex
	deleted, dials := 0, 0
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		mu.Lock()
		if c.Name == "h3" {
			dials++
			if deleted > 0 {
				mu.Unlock()
				return nil, fmt.Errorf("h3: kubernetes: pod gpuaccept-h3-%d not running (not scheduled: 0/3 nodes are available)", dials)
			}
		}
		mu.Unlock()
		e, err := f.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		pn := podNode{Executor: e, img: remote.PodImage{ImageID: "sha256:" + pin}}
		return deletablePod{podNode: pn, h: f.Host(c.Name), tr: tr, deleted: &deleted, pod: "gpuaccept-" + c.Name + "-1"}, nil
	}
	rec, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, FailurePhase},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: dial, Tool: "test"})
	if err != nil {
		t.Fatalf("window: %v", err)
	}
	var res Failed
	if pr := resultOf(t, rec, "failure", -1); jsonOf(pr, &res) != nil {
		t.Fatalf("failure phase: %+v", pr)
	}
	if v := verdictOf(t, rec, "RECOV-001", ""); v.Status != record.Pass {
		t.Errorf("RECOV-001 (the survivors went on): %+v", v)
	}
	if v := verdictOf(t, rec, "RECOV-003", "h3"); v.Status != record.Warn {
		t.Errorf("RECOV-003 (h3 never back): %+v", v)
	}
	if v := verdictOf(t, rec, "RECOV-004", ""); v.Status != record.Pass || res.Left["h3"] != 0 {
		t.Errorf("RECOV-004 (h3's deleted pod gone, asked of the API): %+v, left %v", v, res.Left)
	}
	var said []string
	for _, a := range res.Actions {
		said = append(said, a.What+": "+a.Output)
	}
	if all := strings.Join(said, "\n"); !strings.Contains(all, "no new pod ready") || !strings.Contains(all, "not counted: its pod was deleted and none made again") {
		t.Errorf("the actions:\n%s", all)
	}
}
