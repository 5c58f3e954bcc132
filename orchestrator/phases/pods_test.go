package phases

import (
	"context"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote"
	"gpuaccept/remote/fake"
)

// podDial dials f's hosts as the Kubernetes transport's pods: every
// command runs in a pod whose container is the pinned image.
func podDial(f *fake.Fleet) func(context.Context, remote.Config) (remote.Executor, error) {
	return func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		e, err := f.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		return podNode{Executor: e, img: remote.PodImage{ImageID: "sha256:" + pin}}, nil
	}
}

// runPods is runFake with every node a pod.
func runPods(t *testing.T, inv *inventory.Inventory, f *fake.Fleet, middle ...orchestrator.Phase) *record.Run {
	t.Helper()
	phases := append(append([]orchestrator.Phase{Connect, Tools}, middle...), Teardown)
	rec, _, err := orchestrator.Start(t.Context(), inv, phases, orchestrator.Options{RunsDir: t.TempDir(), Dial: podDial(f), Tool: "test", Executable: tinyELF(t, 62)})
	if err != nil {
		t.Fatalf("window: %v", err)
	}
	return rec
}

// A training job "in the pinned image" on pods runs torchrun in the pod
// itself, which is that image: no container is run (a pod has no
// runtime), torchrun is asked of the pod's Python, and there is no
// container start to count.
func TestTrainingInTheWindowsImageRunsInThePods(t *testing.T) {
	inv := fakeInventory(t, 2, "image: {reference: \"registry.example/train@sha256:"+pin+"\"}\n"+
		"phases:\n  workload:\n    enabled: true\n    kind: training\n    training: {steps: 4, warmup: 1, procs_per_node: 1}\n")
	f := fakeFleet(inv)
	ft := &fakeTrainer{steps: 4, compute: map[string]time.Duration{"h1": time.Millisecond, "h2": time.Millisecond}}
	for _, h := range f.Hosts() {
		ft.answer(h)
	}
	r := runPods(t, inv, f, Training)
	var res workload.Training
	if pr := resultOf(t, r, "training", -1); jsonOf(pr, &res) != nil || pr.Outcome != record.OK || len(res.Nodes) != 2 {
		t.Fatalf("training: %+v %+v", pr, res)
	}
	if ft.launches != 2 {
		t.Errorf("%d launches in the pods, want 2", ft.launches)
	}
	for _, h := range f.Hosts() {
		if n := h.Ran(`(podman|docker) run `); n != 0 {
			t.Errorf("%s: %d container runs in a pod", h.Name(), n)
		}
	}
	for _, n := range res.Nodes {
		if n.ContainerSecs != nil {
			t.Errorf("%s: a container start of %gs counted in a pod", n.Node, *n.ContainerSecs)
		}
	}
}

// A workload image of its own on pods is not run in the window's image
// instead, nor failed: the training load test is NOT MEASURED, naming
// the pods and the key.
func TestTrainingInAWorkloadImageOnPodsIsNotMeasured(t *testing.T) {
	const other = "registry.example/own@sha256:" + "cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12cd12"
	inv := fakeInventory(t, 2, "image: {reference: \"registry.example/train@sha256:"+pin+"\"}\n"+
		"phases:\n  workload:\n    enabled: true\n    kind: training\n    image: "+other+"\n    training: {steps: 4}\n")
	f := fakeFleet(inv)
	ft := &fakeTrainer{steps: 4, compute: map[string]time.Duration{"h1": time.Millisecond, "h2": time.Millisecond}}
	for _, h := range f.Hosts() {
		ft.answer(h)
	}
	r := runPods(t, inv, f, Training)
	pr := resultOf(t, r, "training", -1)
	if pr.Outcome != record.NotMeasured || !strings.Contains(pr.Error, "the pods on h[1-2] run the window's image") ||
		!strings.Contains(pr.Error, "phases.workload.image "+other) {
		t.Fatalf("%s: %s", pr.Outcome, pr.Error)
	}
	if ft.launches != 0 {
		t.Errorf("%d launches", ft.launches)
	}
	for _, v := range r.Verdicts {
		if v.Status == record.Fail {
			t.Errorf("%s %s failed: %s", v.ID, v.Node, v.Detail)
		}
	}
}

// The failure test in the pinned image on pods asks the pods for the
// Python and torch, not for a runtime: a pod without torch names it.
func TestFailureTestOnPodsAsksThePodsForTorch(t *testing.T) {
	inv := fakeInventory(t, 3, "image: {reference: \"registry.example/train@sha256:"+pin+"\"}\n"+killTest)
	f := fakeFleet(inv)
	for _, h := range f.Hosts() {
		h.Reply(`^command -v -- python3 `, fake.Reply{})
	}
	f.Host("h3").Reply(`^command -v -- python3 `, fake.Reply{Stdout: "no-module\n"})
	r := runPods(t, inv, f, FailurePhase)
	const why = "python3 cannot import torch on h3: node-kill failure test not measured"
	for _, id := range []string{"RECOV-001", "RECOV-002", "RECOV-003"} {
		if v := verdictOf(t, r, id, ""); v.Status != record.Skip || v.Incomplete != why {
			t.Errorf("%s: %+v", id, v)
		}
	}
	for _, h := range f.Hosts() {
		if n := h.Ran(`(podman|docker) run `); n != 0 {
			t.Errorf("%s: %d container runs in a pod", h.Name(), n)
		}
	}
}

// The inference server and DCGM's image need a container of their own,
// which a pod cannot start: NOT MEASURED with the pod named as why,
// never FAIL, and no node quarantined.
func TestContainersOfTheirOwnInPodsAreNotMeasured(t *testing.T) {
	inv := infInventory(t, 2, "    error_rate: 0.01\n", "  diag: {image: \"registry.example/dcgm@sha256:"+pin+"\"}\n")
	f := fakeFleet(inv)
	for _, h := range f.Hosts() {
		answerTools(h)
		h.Reply(`^dcgmi `, fake.Reply{Exit: 127, Stderr: "bash: line 1: dcgmi: command not found\n"})
	}
	r := runPods(t, inv, f, Diag, Inference)
	for _, n := range []string{"h1", "h2"} {
		if v := verdictOf(t, r, "DIAG-001", n); v.Status != record.Skip || !strings.Contains(v.Incomplete, "dcgmi not in the pod's image") {
			t.Errorf("DIAG-001 %s: %+v", n, v)
		}
		for _, id := range inferenceIDs {
			if v := verdictOf(t, r, id, n); v.Status != record.Skip || !strings.Contains(v.Incomplete, "a pod starts no container of its own") {
				t.Errorf("%s %s: %+v", id, n, v)
			}
		}
	}
	for _, n := range r.Nodes {
		if n.Quarantined {
			t.Errorf("%s quarantined: %s", n.Name, n.Reason)
		}
	}
}

// Collectives over pods: each pod's own all-reduce runs in it (mpirun
// needs no SSH on one node), but mpirun cannot start its daemons in the
// other pods, which have no SSH server: the cluster all-reduce and the
// bisection are NOT MEASURED with the pods named, never launched to fail
// as a broken fabric, and the window's key goes to no pod.
func TestCollectivesBetweenPodsAreNotMeasured(t *testing.T) {
	f, inv := fabricFleet(t, 3, "")
	r := runPods(t, inv, f, WindowKey, IntraNode, AllReduce, Bisection)
	const why = "mpirun cannot reach the pods on h[1-3]: it starts its daemons over SSH, and gpuaccept starts no SSH server in a pod yet: "
	if v := verdictOf(t, r, "NCCL-002", ""); v.Status != record.Skip || v.Incomplete != why+"cluster all-reduce not measured" {
		t.Errorf("NCCL-002: %+v", v)
	}
	if v := verdictOf(t, r, "NCCL-004", ""); v.Status != record.Skip || v.Incomplete != why+"pairwise bisection not measured" {
		t.Errorf("NCCL-004: %+v", v)
	}
	for _, n := range []string{"h1", "h2", "h3"} {
		if v := verdictOf(t, r, "NCCL-003", n); v.Status != record.Pass {
			t.Errorf("NCCL-003 %s: %+v", n, v)
		}
	}
	for _, h := range f.Hosts() {
		if n := h.Ran(`-H |--host |hostfile`); n != 0 {
			t.Errorf("%s: %d collectives launched over the pods", h.Name(), n)
		}
		if n := h.Ran(`windowkey\.sh".* bash "\$f"`); n != 0 {
			t.Errorf("%s: the window's key installed in a pod", h.Name())
		}
	}
	for _, v := range r.Verdicts {
		if v.Status == record.Fail {
			t.Errorf("%s %s failed: %s", v.ID, v.Node, v.Detail)
		}
	}
}
