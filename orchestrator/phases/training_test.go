package phases

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote/fake"
)

// TestTrainingLogReadsTheContract: ddp_train.py's step lines behind
// torchrun's prefix, each worker a stream; the warm-up left out of the
// steady figures; the peak GPU memory from the log.
func TestTrainingLogReadsTheContract(t *testing.T) {
	start := time.Now()
	l := newTrainingLog(start, nil, 2)
	l.launched("h1", true)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	l.err("h1", "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:", at(1))
	for r := range 2 {
		l.out("h1", fmt.Sprintf("[default%d]:GPUACCEPT start t=1 node=x rank=%d world=4 restart=0 resume_step=0 torch=2.6.0", r, r), at(2))
		for s := 1; s <= 6; s++ {
			l.out("h1", fmt.Sprintf("[default%d]:GPUACCEPT step t=1 node=x rank=%d world=4 step=%d step_time=0.5 compute=%g wait=0.1 samples=32 loss=0.1 mem_peak_mib=%d mem_total_mib=81559", r, r, s, 0.3+0.1*float64(r), 1000*s), at(2+float64(s)))
		}
	}
	nodes, unit := l.figures([]string{"h1", "h2"}, nil)
	if unit != "samples/s" {
		t.Errorf("unit %q", unit)
	}
	n := nodes[0]
	if n.Steps != 6 || n.StepSecs.N != 8 || n.StepSecs.P50 != 0.5 {
		t.Errorf("steps %d, steady %+v", n.Steps, n.StepSecs)
	}
	if n.ComputeSecs == nil || n.ComputeSecs.Min != 0.3 || n.ComputeSecs.Max != 0.4 || n.WaitSecs == nil || n.WaitSecs.P50 != 0.1 {
		t.Errorf("compute %+v wait %+v", n.ComputeSecs, n.WaitSecs)
	}
	// Two workers of 32 samples in 0.5 s each.
	if n.PerSec == nil || math.Abs(*n.PerSec-128) > 1e-9 {
		t.Errorf("throughput %v", n.PerSec)
	}
	if n.ContainerSecs == nil || *n.ContainerSecs > 1.1 || n.RendezvousSecs == nil || *n.RendezvousSecs > 1.1 || n.FirstStepSecs == nil || *n.FirstStepSecs < 2.9 || *n.FirstStepSecs > 3.1 {
		t.Errorf("rendezvous %v first step %v", n.RendezvousSecs, n.FirstStepSecs)
	}
	if n.GPUMemPeakMiB == nil || *n.GPUMemPeakMiB != 6000 || n.GPUMemTotalMiB == nil || *n.GPUMemTotalMiB != 81559 || n.GPUMemFrom != "log" {
		t.Errorf("memory %v of %v from %q", n.GPUMemPeakMiB, n.GPUMemTotalMiB, n.GPUMemFrom)
	}
	if h2 := nodes[1]; h2.Node != "h2" || h2.StepSecs.N != 0 || h2.PerSec != nil || h2.FirstStepSecs != nil {
		t.Errorf("a silent node has figures: %+v", h2)
	}
}

// TestTrainingLogReadsTheBuyersPattern: a step line of the buyer's own,
// without a step time (the time between lines at the coordinator, per
// step when the log says every tenth), tokens as the unit; a value that
// is no number is no figure; errors counted from tracebacks.
func TestTrainingLogReadsTheBuyersPattern(t *testing.T) {
	p, err := compileStepPattern(`iter (?P<step>\d+) .*tokens=(?P<tokens>\S+)`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l := newTrainingLog(start, p, 1)
	l.launched("g1", false)
	for i, s := range []int{10, 20, 30, 40} {
		l.out("g1", fmt.Sprintf("[default0]:iter %d loss 2.1 tokens=4096", s), start.Add(time.Duration(i+1)*2*time.Second))
	}
	l.out("g1", "[default0]:iter 50 loss 2.1 tokens=NaN", start.Add(10*time.Second))
	l.err("g1", "[default1]:Traceback (most recent call last):", start.Add(11*time.Second))
	nodes, unit := l.figures([]string{"g1"}, map[string]memFigure{"g1": {PeakMiB: ptr(70000.0), TotalMiB: ptr(81559.0)}})
	n := nodes[0]
	if unit != "tokens/s" || n.Steps != 50 {
		t.Fatalf("unit %q steps %d", unit, n.Steps)
	}
	// Steady: steps 20..50, 0.2 s a step; tokens on 20, 30, 40.
	if n.StepSecs.N != 4 || math.Abs(n.StepSecs.P50-0.2) > 1e-3 {
		t.Errorf("step %+v", n.StepSecs)
	}
	if n.PerSec == nil || math.Abs(*n.PerSec-4096/0.2) > 1 {
		t.Errorf("throughput %v", n.PerSec)
	}
	if n.Errors != 1 || len(n.ErrorLines) != 1 || n.GPUMemFrom != "nvidia-smi" || *n.GPUMemPeakMiB != 70000 {
		t.Errorf("errors %d %q, memory from %q", n.Errors, n.ErrorLines, n.GPUMemFrom)
	}
}

// TestTrainingLogIsBounded: a node that floods its log, or never ends a
// line, cannot make the coordinator hold it all.
func TestTrainingLogIsBounded(t *testing.T) {
	l := newTrainingLog(time.Now(), nil, 0)
	l.launched("h1", false)
	lw := &lineWriter{fn: func(s string) { l.out("h1", s, time.Now()) }}
	lw.Write([]byte(strings.Repeat("x", 3*maxLine)))
	if len(lw.buf) > maxLine {
		t.Errorf("a line without an end holds %d bytes", len(lw.buf))
	}
	for r := range maxStreams + 10 {
		l.out("h1", fmt.Sprintf("GPUACCEPT step rank=%d step=1 step_time=1", r), time.Now())
	}
	if got := len(l.nodes["h1"].streams); got != maxStreams {
		t.Errorf("%d streams kept", got)
	}
	for i := range 5 {
		l.out("h1", "GPUACCEPT error rank=0 step=1 msg=\x1b[31mboom "+fmt.Sprint(i)+strings.Repeat("!", 500), time.Now())
	}
	n := l.nodes["h1"]
	if n.contractErrors != 5 || len(n.errorLines) != maxErrorLines || strings.ContainsRune(n.errorLines[0], 0x1b) || len(n.errorLines[0]) > 220 {
		t.Errorf("errors %d, lines %q", n.contractErrors, n.errorLines)
	}
}

func ptr[T any](x T) *T { return &x }

// trainingRun builds one run's node figures: compute medians per node.
func trainingRun(compute map[string]float64, perSec float64) []workload.TrainingNode {
	var out []workload.TrainingNode
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		c, ok := compute[n]
		if !ok {
			continue
		}
		cd := workload.NewDist([]float64{c, c})
		out = append(out, workload.TrainingNode{Node: n, Steps: 30, StepSecs: workload.NewDist([]float64{c + 0.1}), ComputeSecs: &cd,
			PerSec: ptr(perSec), FirstStepSecs: ptr(9.0), GPUMemPeakMiB: ptr(60000.0), GPUMemTotalMiB: ptr(80000.0)})
	}
	return out
}

// TestStragglerIsJudgedOnCompute: the node whose compute median exceeds
// the nodes' median by more than the ratio, named; the rest pass.
func TestStragglerIsJudgedOnCompute(t *testing.T) {
	trial := trainingTrial{trainingRun(map[string]float64{"h1": 0.30, "h2": 0.31, "h3": 0.29, "h4": 0.60}, 100)}
	med, name, ratios := straggler(trialNodes(trial), 1.1)
	if name != "h4" || math.Abs(med-0.305) > 1e-9 || ratios["h4"] < 1.9 {
		t.Fatalf("median %g straggler %q ratios %v", med, name, ratios)
	}
	inv := fakeInventory(t, 4, "")
	inv.Phases.Workload.Training.StragglerRatio = 1.1
	if why := trialFails(inv, trial, "samples/s"); !strings.HasPrefix(why, "h4: straggler") {
		t.Errorf("trialFails = %q", why)
	}
	even := trainingTrial{trainingRun(map[string]float64{"h1": 0.30, "h2": 0.31, "h3": 0.29}, 100)}
	if why := trialFails(inv, even, "samples/s"); why != "" {
		t.Errorf("an even job fails: %q", why)
	}
}

// TestTrainingVerdicts: with no target set a figure is recorded and not
// judged (as an unquoted figure); a target set is held per node; repeats
// are medians; errors fail WORK-011; a retested throughput carries its
// history.
func TestTrainingVerdicts(t *testing.T) {
	inv := fakeInventory(t, 3, "")
	inv.Phases.Workload.Training.StragglerRatio = 1.1
	f := trialNodes(trainingTrial{
		trainingRun(map[string]float64{"h1": 0.3}, 90),
		trainingRun(map[string]float64{"h1": 0.3}, 100),
		trainingRun(map[string]float64{"h1": 0.3}, 400),
	})[0]
	v := trainingThroughputVerdict(inv, f, "samples/s")
	if v.Status != record.Skip || v.Value == nil || *v.Value != 100 || !strings.Contains(v.Detail, "no target set (acceptance.workload.samples_per_s)") ||
		!strings.Contains(v.Measured, "median of 3 runs (90..400)") {
		t.Errorf("no target: %s %v %q %q", v.Status, v.Value, v.Measured, v.Detail)
	}
	inv.Acceptance.Workload.SamplesPerSec = 150
	if v := trainingThroughputVerdict(inv, f, "samples/s"); v.Status != record.Fail || v.Quoted != "≥ 150 samples/s" {
		t.Errorf("below the target: %s %q", v.Status, v.Quoted)
	}
	inv.Acceptance.Workload.MemoryHeadroom = 0.3
	if v := trainingHeadroomVerdict(inv, f); v.Status != record.Fail || *v.Value != 25 {
		t.Errorf("headroom: %s %v %q", v.Status, v.Value, v.Measured)
	}
	inv.Acceptance.Workload.Ready = 5 * time.Second
	if v := trainingReadyVerdict(inv, f); v.Status != record.Fail || *v.Value != 9 {
		t.Errorf("ready: %s %v", v.Status, v.Value)
	}
	// A node with no step line and no error: the target set cannot be
	// judged (INCOMPLETE), never a PASS or a FAIL.
	silent := nodeFigure{Node: "h2", Step: math.NaN(), StepAll: math.NaN(), PerSec: math.NaN(), FirstStep: math.NaN(), Peak: math.NaN(), Total: math.NaN()}
	if v := trainingThroughputVerdict(inv, silent, "samples/s"); v.Status != record.Skip || v.Incomplete == "" {
		t.Errorf("silent node: %s %q", v.Status, v.Incomplete)
	}
	silent.Failed, silent.ErrorLines = true, []string{"error: RuntimeError: Connection closed by peer"}
	if v := trainingThroughputVerdict(inv, silent, "samples/s"); v.Status != record.Fail || !strings.Contains(v.Detail, "Connection closed") {
		t.Errorf("a job that failed: %s %q", v.Status, v.Detail)
	}
	bad := trainingRun(map[string]float64{"h1": 0.3}, 100)
	bad[0].Errors, bad[0].ErrorLines = 2, []string{"error: boom"}
	if v := trainingErrorsVerdict(inv, []trainingTrial{{bad}}, "h1"); v.Status != record.Fail || v.Detail != "error: boom" {
		t.Errorf("errors: %s %q", v.Status, v.Detail)
	}
	inv.Acceptance.Workload.SamplesPerSec = 95
	h := retestOf([]trainingTrial{{trainingRun(map[string]float64{"h1": 0.3}, 90)}, {trainingRun(map[string]float64{"h1": 0.3}, 120)}},
		record.UnitPerSecond, func(tr trainingTrial) (*float64, string) { return nodeThroughput(inv, tr, "h1", "samples/s") })
	if h == nil || len(h.Runs) != 2 || h.Runs[0].Failed == "" || h.Runs[1].Failed != "" || h.Failed() {
		t.Errorf("retest history %+v", h)
	}
}

// fakeTrainer answers the training job's launch on fake hosts: each node
// steps at its own compute time (slow makes one a straggler), all wait
// for the slowest in the all-reduce, as DDP does.
type fakeTrainer struct {
	steps    int
	compute  map[string]time.Duration
	mu       sync.Mutex
	launches int
	commands []string
}

func (ft *fakeTrainer) answer(h *fake.Host) {
	h.On(`import torch\.distributed\.run' >/dev/null`, func(*fake.Call) fake.Reply { return fake.Reply{} })
	h.On(`exec python3 -m torch\.distributed\.run .*"\$f" --ckpt-dir`, func(c *fake.Call) fake.Reply {
		m := toolPath.FindStringSubmatch(c.Command)
		if m == nil || m[3] != "ddp_train.py" {
			return fake.Reply{Exit: 2, Stderr: "fake: not the job's launch line"}
		}
		if reply, ok := pushedCheck(c, m[1], "ddp_train.py"); !ok {
			return reply
		}
		ft.mu.Lock()
		ft.launches++
		ft.commands = append(ft.commands, c.Command)
		ft.mu.Unlock()
		node := c.Host.Name()
		slowest := time.Duration(0)
		for _, d := range ft.compute {
			slowest = max(slowest, d)
		}
		fmt.Fprintf(c.Stderr, "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:\n")
		fmt.Fprintf(c.Stdout, "[default0]:GPUACCEPT start t=1 node=%s rank=0 world=3 restart=0 resume_step=0\n", node)
		for s := 1; s <= ft.steps; s++ {
			select {
			case <-c.Ctx.Done():
				return fake.Reply{Signal: "TERM"}
			case <-time.After(slowest):
			}
			own := ft.compute[node].Seconds()
			fmt.Fprintf(c.Stdout, "[default0]:GPUACCEPT step t=1 node=%s rank=0 world=3 step=%d step_time=%.4f compute=%.4f wait=%.4f samples=32\n",
				node, s, slowest.Seconds(), own, slowest.Seconds()-own)
		}
		return fake.Reply{}
	})
}

// TestTrainingNamesTheStraggler: the phase over fake hosts, one node's
// compute twice the others': it is named, WORK-009 fails there (after
// its retest: both runs kept), the others pass, throughput is recorded
// without a target.
func TestTrainingNamesTheStraggler(t *testing.T) {
	inv := fakeInventory(t, 3, `phases:
  workload:
    enabled: true
    kind: training
    training: {steps: 8, warmup: 2, procs_per_node: 1}
`)
	f := fakeFleet(inv)
	ft := &fakeTrainer{steps: 8, compute: map[string]time.Duration{"h1": 10 * time.Millisecond, "h2": 10 * time.Millisecond, "h3": 25 * time.Millisecond}}
	for _, h := range f.Hosts() {
		ft.answer(h)
	}
	r := runFake(t, inv, f, Training)
	pr := resultOf(t, r, "training", -1)
	var res workload.Training
	if err := jsonOf(pr, &res); err != nil || pr.Outcome != record.OK {
		t.Fatalf("training: %+v %v", pr, err)
	}
	if res.Straggler != "h3" || res.World != 3 || len(res.Nodes) != 3 || len(res.Runs) != 2 || ft.launches != 6 {
		t.Fatalf("straggler %q world %d nodes %d runs %d launches %d: %s", res.Straggler, res.World, len(res.Nodes), len(res.Runs), ft.launches, res.Error)
	}
	for _, c := range ft.commands {
		if !strings.Contains(c, "--steps=8") || !strings.Contains(c, "--ckpt-every=0") || !strings.Contains(c, "--redirects=1 --tee=1") {
			t.Errorf("launch: %s", c)
		}
	}
	v := verdictOf(t, r, "WORK-009", "h3")
	if v.Status != record.Fail || !strings.HasPrefix(v.Measured, "straggler: median compute") || v.Retest == nil || len(v.Retest.Runs) != 2 {
		t.Errorf("h3: %s %q %+v", v.Status, v.Measured, v.Retest)
	}
	for _, n := range []string{"h1", "h2"} {
		if v := verdictOf(t, r, "WORK-009", n); v.Status != record.Pass {
			t.Errorf("%s: %s %q", n, v.Status, v.Measured)
		}
		if v := verdictOf(t, r, "WORK-008", n); v.Status != record.Skip || v.Value == nil || *v.Value <= 0 {
			t.Errorf("%s throughput: %s %v %q", n, v.Status, v.Value, v.Detail)
		}
		if v := verdictOf(t, r, "WORK-011", n); v.Status != record.Pass {
			t.Errorf("%s errors: %s %q", n, v.Status, v.Measured)
		}
	}
}

// TestTrainingWithoutTorchrunIsNotMeasured: a node whose Python cannot
// import torchrun: the job does not start, and every WORK verdict says
// NOT MEASURED, never FAIL.
func TestTrainingWithoutTorchrunIsNotMeasured(t *testing.T) {
	inv := fakeInventory(t, 2, "phases:\n  workload: {enabled: true, kind: training}\n")
	f := fakeFleet(inv)
	ft := &fakeTrainer{steps: 3, compute: map[string]time.Duration{"h1": time.Millisecond, "h2": time.Millisecond}}
	ft.answer(f.Host("h1"))
	f.Host("h2").On(`import torch\.distributed\.run' >/dev/null`, func(*fake.Call) fake.Reply { return fake.Reply{Stdout: "no-module\n"} })
	r := runFake(t, inv, f, Training)
	if pr := resultOf(t, r, "training", -1); pr.Outcome != record.NotMeasured || !strings.Contains(pr.Error, "cannot import torch.distributed.run (torchrun) on h2") {
		t.Fatalf("%s: %s", pr.Outcome, pr.Error)
	}
	for _, id := range trainingIDs {
		if v := verdictOf(t, r, id, ""); v.Status != record.Skip || v.Incomplete == "" {
			t.Errorf("%s: %s %q", id, v.Status, v.Incomplete)
		}
	}
	if ft.launches != 0 {
		t.Errorf("%d launches", ft.launches)
	}
}

// TestTrainingRunsInTheWorkloadsImage: phases.workload.image runs the job
// in a container of that image (pulled by its pinned reference), the
// script mounted, the window's labels on it, torchrun inside.
func TestTrainingRunsInTheWorkloadsImage(t *testing.T) {
	const ref = "registry.example/train@sha256:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	inv := fakeInventory(t, 2, "phases:\n  workload:\n    enabled: true\n    kind: training\n    image: "+ref+"\n    training: {steps: 4, warmup: 1, procs_per_node: 1}\n")
	f := fakeFleet(inv)
	var mu sync.Mutex
	var runs []string
	for _, h := range f.Hosts() {
		h.On(`--version`, func(*fake.Call) fake.Reply { return fake.Reply{Stdout: "docker version 27\n"} })
		h.On(`exec docker run --rm --network host .* python3 -m torch\.distributed\.run `, func(c *fake.Call) fake.Reply {
			mu.Lock()
			runs = append(runs, c.Command)
			mu.Unlock()
			for s := 1; s <= 4; s++ {
				fmt.Fprintf(c.Stdout, "[default0]:GPUACCEPT step t=1 node=%s rank=0 world=2 step=%d step_time=0.1 compute=0.08 wait=0.02 samples=8\n", c.Host.Name(), s)
			}
			return fake.Reply{}
		})
	}
	r := runFake(t, inv, f, Training)
	var res workload.Training
	if pr := resultOf(t, r, "training", -1); jsonOf(pr, &res) != nil || pr.Outcome != record.OK || len(res.Nodes) != 2 || res.Nodes[0].StepSecs.N != 3 {
		t.Fatalf("training: %+v %+v", pr, res)
	}
	if len(runs) != 2 {
		t.Fatalf("%d container runs", len(runs))
	}
	for _, c := range runs {
		for _, want := range []string{"--label gpuaccept.window=", "--label gpuaccept.run=", `-v "$f":/gpuaccept/ddp_train.py:ro`, " " + ref + " python3 -m torch.distributed.run",
			"/gpuaccept/ddp_train.py --ckpt-dir"} {
			if !strings.Contains(c, want) {
				t.Errorf("no %q in %s", want, c)
			}
		}
	}
	if n := res.Nodes[0]; n.ContainerSecs == nil {
		t.Errorf("no seconds to the container: %+v", n)
	}
}
