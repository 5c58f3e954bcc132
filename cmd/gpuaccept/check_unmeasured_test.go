package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
	"gpuaccept/scripts/standins"
)

// torchPython is a node's python3 with PyTorch.
const torchPython = `#!/bin/sh
if [ "$1" = --version ]; then echo "Python 3.11.2"; exit 0; fi
echo "2.6.0 12.4"
`

// noTorchPython is a node's python3 without PyTorch, whose error is
// longer than the tools' answer column.
const noTorchPython = `#!/bin/sh
if [ "$1" = --version ]; then echo "Python 3.11.2"; exit 0; fi
echo "ModuleNotFoundError: No module named 'torch' (this node's Python has no PyTorch installed)" >&2
exit 1
`

// TestCheckConnectSaysWhatWillNotBeMeasured: before the window, check
// --connect says per node (host ranges) what the plan cannot measure for
// a tool the node lacks (gpu-02 and gpu-03 have no dcgmi and the
// inventory no DCGM image; gpu-03's Python has no torch), shows a long
// answer whole, and prints all of it as JSON with -o json.
func TestCheckConnectSaysWhatWillNotBeMeasured(t *testing.T) {
	dir := t.TempDir()
	profiles := []string{"h100", "h100-no-dcgm", "h100-no-dcgm"}
	servers := probedNodes(t, dir, 3, func(i int, bin string) bool {
		if err := standins.Install(bin, profiles[i], []string{binary, "standin"}); err != nil {
			t.Fatal(err)
		}
		py := torchPython
		if i == 2 {
			py = noTorchPython
		}
		os.WriteFile(filepath.Join(bin, "python3"), []byte(py), 0o755)
		return true
	})
	var nodes strings.Builder
	for i, srv := range servers {
		fmt.Fprintf(&nodes, "  - {name: gpu-%02d, address: %s, port: %d}\n", i+1, srv.Host(), srv.Port())
	}
	inv := filepath.Join(dir, "inv.yaml")
	os.WriteFile(inv, []byte(`provider: vendor-a
ssh: {user: root, identity_files: [id], known_hosts: [known_hosts], config: none, connect_timeout: 5s}
quote: {gpu_model: NVIDIA H100 80GB HBM3, gpus_per_node: 8, price_per_gpu_hour: 2.5}
phases:
  failure: {enabled: true, dir: /shared}
  workload: {enabled: true, kind: training}
nodes:
`+nodes.String()), 0o644)

	t.Setenv("COLUMNS", "100")
	res := gpuaccept(t, dir, "check", "--connect", inv)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	// A line too wide continues 4 columns further in than it began.
	flat := regexp.MustCompile(`\n {23}`).ReplaceAllString(res.stdout, " ")
	for _, want := range []string{
		"not measured (a tool the node lacks; the window would end INCOMPLETE):\n",
		"  gpu-[02-03]: no dcgmi and phases.diag.image not set: DIAG-001 will not be measured\n",
		"  gpu-03: python3 cannot import torch: RECOV-001..003 will not be measured\n",
		"  gpu-03: python3 cannot run torchrun: WORK-001, WORK-008..011 will not be measured\n",
		"torchrun         torch.distributed.run, torch 2.6.0",
		"fails (exit 1): ModuleNotFoundError: No module named 'torch' (this node's Python has no PyTorch installed)\n" +
			"                   on gpu-03\n",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("no %q in\n%s", want, res.stdout)
		}
	}
	for _, line := range strings.Split(res.stdout, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("wider than 100 columns: %q", line)
		}
	}

	res = gpuaccept(t, dir, "check", "--connect", "-o", "json", inv)
	if res.code != 0 {
		t.Fatalf("-o json: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var got struct {
		Warnings []struct{ ID string } `json:"warnings"`
		Reached  int                   `json:"reached"`
		Nodes    []struct {
			Name        string            `json:"name"`
			Reached     bool              `json:"reached"`
			Tools       map[string]string `json:"tools"`
			NotMeasured []string          `json:"not_measured"`
		} `json:"nodes"`
		Tools       []toolGroup   `json:"tools"`
		NotReached  []reasonGroup `json:"not_reached"`
		NotMeasured []reasonGroup `json:"not_measured"`
		Bound       struct {
			Seconds float64  `json:"seconds"`
			Cost    *float64 `json:"cost"`
		} `json:"bound"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, res.stdout)
	}
	if got.Reached != 3 || len(got.Nodes) != 3 || got.Nodes[1].Tools["dcgmi"] != "missing" || got.Nodes[0].Tools["dcgmi"] == "missing" ||
		len(got.Warnings) == 0 || got.NotReached == nil || got.Bound.Seconds <= 0 || got.Bound.Cost == nil || len(got.Tools) == 0 {
		t.Errorf("-o json: %+v\n%s", got, res.stdout)
	}
	want := reasonGroup{Nodes: "gpu-[02-03]", Count: 2, Reason: "no dcgmi and phases.diag.image not set: DIAG-001 will not be measured"}
	if len(got.NotMeasured) != 3 || got.NotMeasured[0] != want || len(got.Nodes[2].NotMeasured) != 3 {
		t.Errorf("-o json not_measured: %+v; gpu-03: %q", got.NotMeasured, got.Nodes[2].NotMeasured)
	}
}

// An az:// blob with a SAS token is fetched with curl or wget (its token
// stays out of azcopy's command line), so that is what check --connect
// asks of the node; a prefix without a token still needs azcopy.
func TestWillNotMeasureAzureSources(t *testing.T) {
	inv := &inventory.Inventory{}
	inv.Phases.Staging.Enabled = true
	inv.Phases.Staging.Sources = []inventory.StagingSource{{Name: "blob", URL: "az://acct/c/weights.bin?sv=2024&sig=x"}}
	on := []orchestrator.Phase{{Name: "staging", Enabled: func(*inventory.Inventory) bool { return true }}}
	if got := willNotMeasure(inv, on, nil, map[string]bool{"curl": true}, false); len(got) != 0 {
		t.Errorf("a node with curl, a SAS blob: %q, want nothing", got)
	}
	if got := strings.Join(willNotMeasure(inv, on, nil, map[string]bool{"azcopy": true}, false), "\n"); !strings.Contains(got, "no curl or wget for az:// sources") {
		t.Errorf("a node with azcopy only, a SAS blob: %q", got)
	}
	inv.Phases.Staging.Sources[0].URL = "az://acct/c/data/"
	if got := strings.Join(willNotMeasure(inv, on, nil, map[string]bool{"curl": true}, false), "\n"); !strings.Contains(got, "no azcopy for az:// sources") {
		t.Errorf("a node without azcopy, a prefix: %q", got)
	}
}

// The inference server runs in a container: a node with neither podman nor
// docker is said before the window, one with either is not.
func TestWillNotMeasureInferenceWithoutARuntime(t *testing.T) {
	inv := &inventory.Inventory{}
	on := []orchestrator.Phase{{Name: "inference", Enabled: func(*inventory.Inventory) bool { return true }}}
	none := map[string]string{"podman": "missing", "docker": "missing"}
	if got := strings.Join(willNotMeasure(inv, on, none, nil, false), "\n"); !strings.Contains(got, "neither podman nor docker to start the inference server: WORK-001..007") {
		t.Errorf("no runtime: %q", got)
	}
	for _, rt := range []string{"podman", "docker"} {
		tools := map[string]string{"podman": "missing", "docker": "missing", rt: "4.3.1"}
		if got := willNotMeasure(inv, on, tools, nil, false); len(got) != 0 {
			t.Errorf("with %s: %q, want nothing", rt, got)
		}
	}
}

// The sampler needs nvidia-smi: a node without it is said before the
// window (its GPU health under load not measured), one with it is not,
// and a window with telemetry off says nothing.
func TestWillNotMeasureTelemetryWithoutNvidiaSmi(t *testing.T) {
	inv := &inventory.Inventory{}
	on := []orchestrator.Phase{{Name: "telemetry", Enabled: func(inv *inventory.Inventory) bool { return inv.Telemetry.On() }}}
	none := map[string]string{"nvidia-smi": "missing"}
	got := strings.Join(willNotMeasure(inv, on, none, nil, false), "\n")
	if !strings.Contains(got, "no nvidia-smi: telemetry") || !strings.Contains(got, "HEALTH-011") || len(got) > 100 {
		t.Errorf("no nvidia-smi: %q", got)
	}
	if got := willNotMeasure(inv, on, map[string]string{"nvidia-smi": "driver 580.159.04"}, nil, false); len(got) != 0 {
		t.Errorf("with nvidia-smi: %q, want nothing", got)
	}
	off := false
	inv.Telemetry.Enabled = &off
	if got := willNotMeasure(inv, on, none, nil, false); len(got) != 0 {
		t.Errorf("telemetry off: %q, want nothing", got)
	}
}

// A pod (transport kubernetes) is the window's image: before the window
// check says what a pod cannot do that a host with the same tools could
// (start the inference server's or DCGM's container, run a workload image
// of its own, be reached by mpirun without an sshd in its image), and does
// not ask it for a runtime to run a job "in the image", which runs in it.
func TestWillNotMeasureOnPods(t *testing.T) {
	inv := &inventory.Inventory{Nodes: []inventory.Node{{Name: "a"}, {Name: "b"}}}
	inv.Image.Reference, inv.Image.Runtime = "registry.example/train@sha256:"+strings.Repeat("ab", 32), "podman"
	inv.Phases.AllReduce.Launcher, inv.Phases.AllReduce.Binary = "mpirun", "all_reduce_perf"
	inv.Phases.Failure.Python, inv.Phases.Workload.Training.Python = "python3", "python3"
	all := func(*inventory.Inventory) bool { return true }
	on := []orchestrator.Phase{{Name: "diag", Enabled: all}, {Name: "allreduce", Enabled: all}, {Name: "image", Enabled: all},
		{Name: "failure", Enabled: all}, {Name: "inference", Enabled: all}}
	tools := map[string]string{"podman": "missing", "docker": "missing", "dcgmi": "missing", "mpirun": "4.1.4", "all_reduce_perf": "/usr/bin/all_reduce_perf",
		"python3": "3.11.2", "torch": "2.6.0", "torchrun": "2.6.0"}
	got := strings.Join(willNotMeasure(inv, on, tools, nil, true), "\n")
	for _, want := range []string{
		"no dcgmi in the pod's image, and a pod runs no phases.diag.image: DIAG-001",
		"no sshd in the pod's image (mpirun reaches the other pods through it): NCCL-001, NCCL-002 and NCCL-006",
		"a pod starts no container of its own for the inference server",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "podman") || strings.Contains(got, "RECOV") {
		t.Errorf("a pod asked for a runtime, or its job in the image:\n%s", got)
	}
	if got := strings.Join(willNotMeasure(inv, on, tools, map[string]bool{"sshd": true, "ssh": true}, true), "\n"); strings.Contains(got, "ssh") {
		t.Errorf("a pod with sshd and ssh:\n%s", got)
	}
	if got := strings.Join(willNotMeasure(inv, on, tools, map[string]bool{"sshd": true}, true), "\n"); !strings.Contains(got, "no ssh client in the pod's image") {
		t.Errorf("a pod with sshd, no ssh:\n%s", got)
	}
	// The same tools on a host: the runtime is what it lacks.
	got = strings.Join(willNotMeasure(inv, on, tools, nil, false), "\n")
	if !strings.Contains(got, "no podman (image.runtime)") || !strings.Contains(got, "RECOV-001..003") || strings.Contains(got, "sshd") {
		t.Errorf("a host:\n%s", got)
	}
	inv.Phases.Workload.Image = "registry.example/own@sha256:" + strings.Repeat("cd", 32)
	training := []orchestrator.Phase{{Name: "training", Enabled: all}}
	if got := strings.Join(willNotMeasure(inv, training, tools, nil, true), "\n"); !strings.Contains(got, "a pod runs image.reference, not phases.workload.image") {
		t.Errorf("a workload image of its own on a pod: %q", got)
	}
}

// check --connect says what the Kubernetes credential may not do, one
// line each with what it costs (the whole window, or the facts), and
// fails only for what no window can run without.
func TestKubeAccessSaysWhatItCosts(t *testing.T) {
	inv := &inventory.Inventory{}
	inv.Kubernetes.Namespace = "gpu"
	var access []remote.KubeAccess
	for _, n := range remote.KubeNeeds {
		access = append(access, remote.KubeAccess{KubeNeed: n, Allowed: !n.Cluster})
	}
	var b strings.Builder
	printKubeAccess(&b, inv, kubeAccessed{list: access})
	want := "kubernetes access (namespace gpu):\n" +
		"  may not list nodes: KUBE-001 and KUBE-002 not measured, and kubernetes.node_selector finds no node\n" +
		"  may not list pods in every namespace: the GPU device plugin and GPU Operator not named (KUBE-002)\n"
	if b.String() != want {
		t.Errorf("a namespace admin:\n%s\nwant\n%s", b.String(), want)
	}
	if no := kubeDenied(access); no != "" {
		t.Errorf("a namespace admin can run a window, not %q", no)
	}
	access[4].Allowed, access[4].Reason = false, "RBAC: \x1b[31mforbidden"
	b.Reset()
	printKubeAccess(&b, inv, kubeAccessed{list: access})
	if !strings.Contains(b.String(), "  may not create (or get) pods/exec: no window can run (RBAC: ") || strings.Contains(b.String(), "\x1b") {
		t.Errorf("no exec:\n%q", b.String())
	}
	if no := kubeDenied(access); no != "create (or get) pods/exec" {
		t.Errorf("kubeDenied %q", no)
	}
	for i := range access {
		access[i].Allowed = true
	}
	b.Reset()
	printKubeAccess(&b, inv, kubeAccessed{list: access})
	if !strings.HasPrefix(b.String(), "kubernetes access: all a window asks") {
		t.Errorf("all allowed: %q", b.String())
	}
}
