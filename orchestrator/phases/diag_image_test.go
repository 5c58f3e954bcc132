package phases

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// allTools, given to answerTools, is every tool asked for.
const allTools = "*"

// answerTools makes h answer nodeHas as a node with exactly tools on its
// PATH does.
func answerTools(h *fake.Host, tools ...string) {
	h.On(`^`+regexp.QuoteMeta(hasProbe)+`$`, func(c *fake.Call) fake.Reply {
		var out strings.Builder
		for _, t := range strings.Split(string(c.Stdin), "\n") {
			if slices.Contains(tools, t) || slices.Contains(tools, allTools) {
				out.WriteString(t + "\n")
			}
		}
		return fake.Reply{Stdout: out.String()}
	})
}

// TestDiagWithoutDcgmiIsNotMeasuredAndTheNodeStays: the field report's
// H200 had no dcgmi; DIAG-001 failed "command not found" and the node was
// quarantined. Now the node's lack of dcgmi (and of an image to run it
// in) is NOT MEASURED: SKIP with the reason, the window INCOMPLETE saying
// which node lacks what, and the node still in the phases after.
func TestDiagWithoutDcgmiIsNotMeasuredAndTheNodeStays(t *testing.T) {
	inv := fakeInventory(t, 2, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100")
	answerTools(f.Host("h2")) // no dcgmi, no runtime
	f.Host("h2").Reply(`^dcgmi `, fake.Reply{Exit: 127, Stderr: "bash: line 1: dcgmi: command not found\n"})
	var mu sync.Mutex
	var after []string
	later := orchestrator.Phase{Name: "later", PerNode: func(_ context.Context, _ *orchestrator.Window, n *orchestrator.Node) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		after = append(after, n.Name)
		return nil, nil
	}}
	r := runFake(t, inv, f, Preflight, Diag, later)
	if v := verdictOf(t, r, "DIAG-001", "h1"); v.Status != record.Pass && v.Status != record.Warn {
		t.Errorf("DIAG-001 h1: %+v", v)
	}
	const why = "dcgmi not installed and phases.diag.image not set: DCGM diagnostic not measured"
	v := verdictOf(t, r, "DIAG-001", "h2")
	if v.Status != record.Skip || v.Incomplete != why {
		t.Errorf("DIAG-001 h2: %+v, want SKIP with Incomplete %q", v, why)
	}
	if r.Nodes[1].Quarantined {
		t.Errorf("h2 quarantined for a tool it lacks: %s", r.Nodes[1].Reason)
	}
	if !strings.Contains(strings.Join(after, ","), "h2") {
		t.Errorf("the phase after diag ran on %v, not on h2", after)
	}
	res := r.Result()
	if res.Outcome != record.OutcomeIncomplete || !strings.Contains(strings.Join(res.Incomplete, "\n"), "h2: "+why) {
		t.Errorf("window %s, incomplete %q; want INCOMPLETE with %q", res.Outcome, res.Incomplete, "h2: "+why)
	}
	if pr := resultOf(t, r, "diag", 1); pr.Outcome != record.NotMeasured {
		t.Errorf("h2's diag result: %+v", pr)
	}
	if n := f.Host("h2").Ran(`^dcgmi diag`); n != 0 {
		t.Errorf("h2 ran dcgmi diag %d times without having it", n)
	}
}

// answerDiagImage makes h a node without dcgmi whose runtime rt pulls the
// DCGM image (its ID the pin) and runs the stand-in's dcgmi diag in it;
// ran gets each run's command line.
func answerDiagImage(h *fake.Host, rt string, ran func(string)) {
	answerTools(h, rt)
	h.Reply(`^dcgmi `, fake.Reply{Exit: 127, Stderr: "bash: line 1: dcgmi: command not found\n"})
	h.Reply(`^`+rt+` images -q --no-trunc && echo '-- added'`, fake.Reply{Stdout: "sha256:0aa0\n-- added\n"})
	h.Reply(`^echo '`+rt+` sha256:[0-9a-f]+' >> '?/var/tmp/gpuaccept-[^ ]+/images'?$`, fake.Reply{})
	h.Reply(`^`+rt+` pull `, fake.Reply{Stdout: "Writing manifest to image destination\n"})
	h.Reply(`^`+rt+` image inspect `, fake.Reply{Stdout: `[{"Id": "sha256:` + other + `", "RepoDigests": ["nvcr.io/nvidia/cloud-native/dcgm@sha256:` + pin + `"]}]`})
	h.On(`^`+rt+` run `, func(c *fake.Call) fake.Reply {
		ran(c.Command)
		out, code := standinTool("h100", "dcgmi", "diag", "-r", "1", "-j")
		return fake.Reply{Stdout: out, Exit: code}
	})
}

// TestDiagRunsInThePinnedImageWhereTheNodeHasNoDcgmi: with
// phases.diag.image set, a node without dcgmi pulls the image through its
// podman (h1) or docker (h2), checks it against the pin and runs dcgmi
// diag in it with the GPUs, by the image's ID; DIAG-001 is judged from
// it, and teardown is told to look for the window's containers.
func TestDiagRunsInThePinnedImageWhereTheNodeHasNoDcgmi(t *testing.T) {
	ref := "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04@sha256:" + pin
	inv := fakeInventory(t, 2, gpuQuote+"    image: "+ref+"\n")
	f := fakeFleet(inv)
	var mu sync.Mutex
	runs := map[string]string{}
	for _, name := range []string{"h1", "h2"} {
		h := f.Host(name)
		answerAsStandin(h, "h100")
		rt := map[string]string{"h1": "podman", "h2": "docker"}[name]
		answerDiagImage(h, rt, func(cmd string) {
			mu.Lock()
			defer mu.Unlock()
			runs[name] = cmd
		})
	}
	r := runFake(t, inv, f, Preflight, Diag)
	for _, name := range []string{"h1", "h2"} {
		if v := verdictOf(t, r, "DIAG-001", name); v.Status != record.Pass && v.Status != record.Warn || !strings.HasSuffix(v.Detail, "run in "+ref) {
			t.Errorf("DIAG-001 %s: %+v", name, v)
		}
		if n := f.Host(name).Ran(` pull '?nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04@sha256:` + pin + `'? 2>&1$`); n != 1 {
			t.Errorf("%s pulled the pinned image %d times", name, n)
		}
	}
	script := "'" + diagScript + "'"
	want := map[string]string{
		"h1": "podman run --rm --label gpuaccept.run=" + r.ID + " --device nvidia.com/gpu=all --entrypoint /bin/sh sha256:" + other + " -c " + script + " dcgm-diag 1",
		"h2": "docker run --rm --label gpuaccept.run=" + r.ID + " --gpus all --entrypoint /bin/sh sha256:" + other + " -c " + script + " dcgm-diag 1",
	}
	for name, cmd := range want {
		if got := runs[name]; got != cmd {
			t.Errorf("%s ran\n%s\nwant\n%s", name, got, cmd)
		}
	}
	if n := f.Host("h1").Ran(`(?s)^GPUACCEPT_TEARDOWN_CONTAINERS=1 bash -c .* teardown `); n != 1 {
		t.Errorf("h1's teardown looked for the window's containers %d times", n)
	}
}

// TestDiagImageWithoutRuntimeIsNotMeasured: an image to run and nothing
// to run it with is NOT MEASURED too, and says so.
func TestDiagImageWithoutRuntimeIsNotMeasured(t *testing.T) {
	inv := fakeInventory(t, 1, gpuQuote+"    image: nvcr.io/nvidia/cloud-native/dcgm@sha256:"+pin+"\n")
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerTools(f.Host("h1"))
	r := runFake(t, inv, f, Preflight, Diag)
	v := verdictOf(t, r, "DIAG-001", "h1")
	if v.Status != record.Skip || !strings.Contains(v.Incomplete, "neither podman nor docker") || r.Nodes[0].Quarantined {
		t.Errorf("DIAG-001 h1: %+v (quarantined %v)", v, r.Nodes[0].Quarantined)
	}
}

// TestCollectivesWithoutTheirToolsAreNotMeasured: h2 has no
// all_reduce_perf and h3 no mpirun. The intra-node test is NOT MEASURED
// on h2 alone; the cluster all-reduce and the bisection are NOT MEASURED
// with the nodes and tools named, nothing is launched that would fail on
// them, nothing fails and nobody is quarantined.
func TestCollectivesWithoutTheirToolsAreNotMeasured(t *testing.T) {
	f, inv := fabricFleet(t, 4, "")
	answerTools(f.Host("h2"), "mpirun")
	answerTools(f.Host("h3"), "all_reduce_perf")
	r := runFake(t, inv, f, WindowKey, IntraNode, AllReduce, Bisection)
	for _, v := range r.Verdicts {
		if v.Status == record.Fail {
			t.Errorf("a missing tool failed %s %s: %s", v.ID, v.Node, v.Detail)
		}
	}
	if v := verdictOf(t, r, "NCCL-003", "h2"); v.Status != record.Skip ||
		v.Incomplete != "all_reduce_perf not installed (phases.allreduce.binary): intra-node all-reduce not measured" {
		t.Errorf("NCCL-003 h2: %+v", v)
	}
	if v := verdictOf(t, r, "NCCL-003", "h1"); v.Status != record.Pass {
		t.Errorf("NCCL-003 h1: %+v", v)
	}
	const lack = "mpirun not installed on h3; all_reduce_perf not installed on h2: "
	if v := verdictOf(t, r, "NCCL-002", ""); v.Status != record.Skip || v.Incomplete != lack+"cluster all-reduce not measured" {
		t.Errorf("NCCL-002: %+v", v)
	}
	if v := verdictOf(t, r, "NCCL-004", ""); v.Status != record.Skip || v.Incomplete != lack+"pairwise bisection not measured" {
		t.Errorf("NCCL-004: %+v", v)
	}
	if n := f.Host("h1").Ran(`(^|; )mpirun `); n != 0 {
		t.Errorf("h1 launched %d collectives over nodes that lack their tools", n)
	}
	for _, n := range r.Nodes {
		if n.Quarantined {
			t.Errorf("%s quarantined: %s", n.Name, n.Reason)
		}
	}
	if res := r.Result(); res.Outcome != record.OutcomeIncomplete {
		t.Errorf("window %s: %q", res.Outcome, res.Incomplete)
	}
}

// TestFailureTestWithoutPythonOrTorchIsNotMeasured: h2 has no python3 and
// h3's cannot import torch. The failure test does not start a job that
// would fail as a failed recovery: RECOV-001..003 are NOT MEASURED with
// the nodes named, and no node is quarantined.
func TestFailureTestWithoutPythonOrTorchIsNotMeasured(t *testing.T) {
	inv := fakeInventory(t, 3, killTest)
	f := fakeFleet(inv)
	tr := newTrainer("h1", "h2", "h3")
	for _, h := range f.Hosts() {
		tr.answer(h)
		h.Reply(`^command -v -- python3 `, fake.Reply{})
	}
	f.Host("h2").Reply(`^command -v -- python3 `, fake.Reply{Stdout: "no-python\n"})
	f.Host("h3").Reply(`^command -v -- python3 `, fake.Reply{Stdout: "no-module\n"})
	r := runFake(t, inv, f, FailurePhase)
	const why = "python3 not installed on h2; python3 cannot import torch on h3: node-kill failure test not measured"
	for _, id := range []string{"RECOV-001", "RECOV-002", "RECOV-003"} {
		if v := verdictOf(t, r, id, ""); v.Status != record.Skip || v.Incomplete != why {
			t.Errorf("%s: %+v", id, v)
		}
	}
	for _, h := range f.Hosts() {
		if n := h.Ran(`torch\.distributed\.run`); n != 0 {
			t.Errorf("%s: the job was started %d times", h.Name(), n)
		}
	}
	if res := r.Result(); res.Outcome != record.OutcomeIncomplete || len(res.Failed) > 0 {
		t.Errorf("window %s: failed %v, incomplete %q", res.Outcome, res.Failed, res.Incomplete)
	}
}

// TestImageOnANodeWithoutTheRuntimeIsNotMeasured: h2 has no podman. Its
// image is NOT MEASURED (IMG-001/002 SKIP with the reason), it is not
// left out of the window, and h1's image is checked as ever.
func TestImageOnANodeWithoutTheRuntimeIsNotMeasured(t *testing.T) {
	inv := fakeInventory(t, 2, "image:\n  reference: registry.example/train@sha256:"+pin+"\n  runtime: podman\n")
	f := fakeFleet(inv)
	answerImagePull(f.Host("h1"), pin)
	answerTools(f.Host("h2"))
	r := runFake(t, inv, f, Image)
	if v := verdictOf(t, r, "IMG-001", "h1"); v.Status != record.Pass {
		t.Errorf("IMG-001 h1: %+v", v)
	}
	const why = "podman not installed (image.runtime): the pinned image not measured"
	for _, id := range []string{"IMG-001", "IMG-002"} {
		if v := verdictOf(t, r, id, "h2"); v.Status != record.Skip || v.Incomplete != why {
			t.Errorf("%s h2: %+v", id, v)
		}
	}
	if r.Nodes[1].Quarantined {
		t.Errorf("h2 quarantined: %s", r.Nodes[1].Reason)
	}
}

// A node whose DCGM is installed but whose host engine is not running
// answers with dcgmi's own connection error (its words as DCGM prints
// them): the node's setup leaves DIAG-001 NOT MEASURED, not failed, and
// the node is not quarantined.
func TestDiagWithoutAHostEngineIsNotMeasured(t *testing.T) {
	inv := fakeInventory(t, 2, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100")
	f.Host("h2").Reply(`^dcgmi diag `, fake.Reply{Exit: 1, Stdout: "Error: unable to establish a connection to the specified host: localhost\n" +
		"Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"})
	r := runFake(t, inv, f, Preflight, Diag)
	v := verdictOf(t, r, "DIAG-001", "h2")
	if v.Status != record.Skip || !strings.Contains(v.Incomplete, "could not reach DCGM's host engine") || !strings.Contains(v.Incomplete, "start nv-hostengine") {
		t.Errorf("DIAG-001 h2: %+v, want SKIP, not measured, saying why and what to do", v)
	}
	if r.Nodes[1].Quarantined {
		t.Errorf("h2 quarantined for a host engine that is not running: %s", r.Nodes[1].Reason)
	}
	if res := r.Result(); res.Outcome != record.OutcomeIncomplete {
		t.Errorf("window %s, want INCOMPLETE", res.Outcome)
	}
}

// phases.deadline is the default bound of a phase without its own, but the
// diagnostic's level sets its bound: a 30m default must not cut a level 3
// run (its own bound, 60m), which would fail and quarantine sound nodes.
func TestPhasesDeadlineDoesNotCutADeepDiagnostic(t *testing.T) {
	inv := fakeInventory(t, 1, gpuQuote)
	inv.Phases.Deadline = 30 * time.Minute
	inv.Phases.Diag.Level = 3
	if got := orchestrator.PhaseDeadline(&Diag, inv); got != time.Hour {
		t.Errorf("level 3 under phases.deadline 30m: %s, want 1h", got)
	}
	inv.Phases.Diag.Level = 1
	if got := orchestrator.PhaseDeadline(&Diag, inv); got != 30*time.Minute {
		t.Errorf("level 1 under phases.deadline 30m: %s, want the default, 30m", got)
	}
}
