package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
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

// answerPodSSHD makes h's pod answer podsshd.sh with out (its server's
// pid, or why mpirun cannot reach it), recording the arguments it was
// given.
func answerPodSSHD(h *fake.Host, out string, seen func(args []string)) {
	onScript(h, "podsshd.sh", func(c *fake.Call, a []string) fake.Reply {
		if seen != nil {
			seen(a)
		}
		if len(a) != 4 {
			return fake.Reply{Exit: 1, Stderr: fmt.Sprintf("podsshd.sh: %d arguments", len(a))}
		}
		return fake.Reply{Stdout: out}
	})
}

// Collectives over pods whose image has no sshd: each pod's own
// all-reduce runs in it (mpirun needs no SSH on one node), but mpirun
// cannot start its daemons in the other pods: the cluster all-reduce and
// the bisection are NOT MEASURED with the pods named, never launched to
// fail as a broken fabric, and no pod is quarantined.
func TestCollectivesBetweenPodsWithoutSSHDAreNotMeasured(t *testing.T) {
	f, inv := fabricFleet(t, 3, "")
	for _, h := range f.Hosts() {
		answerPodSSHD(h, "unreachable no sshd in the pod's image\n", nil)
	}
	r := runPods(t, inv, f, WindowKey, IntraNode, AllReduce, Bisection)
	const why = "mpirun starts its daemons over SSH: no sshd in the pod's image on h[1-3]: "
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
	}
	for _, v := range r.Verdicts {
		if v.Status == record.Fail {
			t.Errorf("%s %s failed: %s", v.ID, v.Node, v.Detail)
		}
	}
	for _, n := range r.Nodes {
		if n.Quarantined {
			t.Errorf("%s quarantined: %s", n.Name, n.Reason)
		}
	}
}

// Pods with an sshd: each is given a host key of the coordinator's (its
// own file) and starts the window's server on the window's port for
// it, at its pod's address; every node's known_hosts holds every pod's
// key at [address]:port and its ssh_config the port, so mpirun from the
// first pod reaches the others, and the collectives are measured.
func TestCollectivesBetweenPodsGoThroughTheWindowsSSHD(t *testing.T) {
	f, inv := fabricFleet(t, 3, "")
	var mu sync.Mutex
	sshd := map[string][]string{}
	stdin := map[string]string{}
	for _, h := range f.Hosts() {
		answerPodSSHD(h, "sshd 4242\n", func(a []string) {
			mu.Lock()
			defer mu.Unlock()
			sshd[h.Name()] = a
		})
		answerWindowKey(h, func(c *fake.Call, _ []string) {
			mu.Lock()
			defer mu.Unlock()
			stdin[h.Name()] = string(c.Stdin)
		})
	}
	r := runPods(t, inv, f, WindowKey, AllReduce)
	if v := verdictOf(t, r, "NCCL-002", ""); v.Status != record.Pass {
		t.Errorf("NCCL-002: %+v", v)
	}
	ports := map[string]bool{}
	for i, n := range inv.Nodes {
		a := sshd[n.Name]
		if len(a) != 4 || a[2] != n.Address || !strings.HasPrefix(a[3], "restrict,from=") {
			t.Fatalf("%s: podsshd.sh %q", n.Name, a)
		}
		ports[a[1]] = true
		var ki KeyInstalled
		pr := resultOf(t, r, "windowkey", i)
		if err := jsonOf(pr, &ki); err != nil || ki.SSHD == nil || ki.SSHD.Port == 0 || fmt.Sprint(ki.SSHD.Port) != a[1] ||
			!strings.HasPrefix(ki.SSHD.HostKey, "SHA256:") || ki.SSHD.Unmeasured != "" {
			t.Errorf("%s: windowkey %+v %v", n.Name, ki.SSHD, err)
		}
		key, ok := f.Host(n.Name).File(".gpuaccept/" + r.ID + "/ssh/ssh_host_ed25519_key")
		if !ok || !strings.Contains(string(key.Data), "OPENSSH PRIVATE KEY") {
			t.Errorf("%s: no host key uploaded", n.Name)
		}
		for _, m := range inv.Nodes {
			in := stdin[m.Name]
			if !strings.Contains(in, "["+n.Address+"]:"+a[1]+" ssh-ed25519 ") || !strings.Contains(in, "Host "+n.Address+"\n  Port "+a[1]) {
				t.Errorf("%s's known hosts and ports lack %s's pod: %q", m.Name, n.Name, in)
			}
		}
	}
	if len(ports) != 3 {
		t.Errorf("pods on one machine would share a port: %v", ports)
	}
	raw, _ := json.Marshal(r)
	if strings.Contains(string(raw), "PRIVATE KEY") {
		t.Error("a private key in run.json")
	}
}

// A pod's address, as the API gives it, is how the other nodes reach it:
// its node's name in the API may resolve nowhere inside a pod.
func TestPodsAreReachedAtTheirAddress(t *testing.T) {
	inv := fakeInventory(t, 2, fabricQuote)
	f := fakeFleet(inv)
	var mu sync.Mutex
	addr := map[string]string{}
	for _, h := range f.Hosts() {
		answerWindowKey(h, nil)
		answerPodSSHD(h, "sshd 1\n", func(a []string) {
			mu.Lock()
			defer mu.Unlock()
			addr[h.Name()] = a[2]
		})
	}
	ips := map[string]string{"h1": "10.9.0.1", "h2": "10.9.0.2"}
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		e, err := f.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		return podNode{Executor: e, ip: ips[c.Name]}, nil
	}
	if _, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, WindowKey, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: dial, Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	if addr["h1"] != "10.9.0.1" || addr["h2"] != "10.9.0.2" {
		t.Errorf("the pods' servers listen at %v, want their pods' addresses", addr)
	}
}

// What a pod's image lacks or refuses takes no pod out of the window: a
// windowkey.sh that fails there (an image without a tool it needs) and a
// server that will not start leave the collectives NOT MEASURED with the
// pods' words, eight reasons said as five and the rest's pods; but a
// podsshd.sh that finds the window's directory or arguments not the
// window's (exit 3) fails its pod as a hostile node.
func TestPodsWhoseSSHDCannotServe(t *testing.T) {
	f, inv := fabricFleet(t, 9, "")
	for i, h := range f.Hosts() {
		switch h.Name() {
		case "h1":
			onScript(h, "windowkey.sh", func(*fake.Call, []string) fake.Reply {
				return fake.Reply{Exit: 1, Stderr: "date: invalid date '@1796000000'\n"}
			})
		case "h9":
			answerPodSSHD(h, "", nil)
			onScript(h, "podsshd.sh", func(*fake.Call, []string) fake.Reply {
				return fake.Reply{Exit: 3, Stderr: "podsshd: /root/.gpuaccept/x/ssh is not the window's directory\n"}
			})
		default:
			onScript(h, "podsshd.sh", func(*fake.Call, []string) fake.Reply {
				return fake.Reply{Exit: 1, Stderr: fmt.Sprintf("podsshd: sshd did not start: Bind to port %d failed: Address already in use.\n", 20000+i)}
			})
		}
	}
	r := runPods(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-002", "")
	if v.Status != record.Skip || !strings.Contains(v.Incomplete, "the window's key was not installed: date: invalid date") ||
		strings.Count(v.Incomplete, "Address already in use") != 4 || !strings.Contains(v.Incomplete, "and more on h[6-8]") ||
		!strings.Contains(v.Incomplete, "; sshd did not start: Bind to port 20001 failed: Address already in use. on h2;") {
		t.Errorf("NCCL-002: %+v", v)
	}
	for _, n := range r.Nodes {
		if n.Quarantined != (n.Name == "h9") {
			t.Errorf("%s quarantined %v: %s", n.Name, n.Quarantined, n.Reason)
		}
	}
}

// A window whose collectives do not go over several pods with mpirun
// opens no server in any pod: one pod alone runs its all-reduce itself,
// though the key phase runs there.
func TestNoPodSSHDWithoutCollectives(t *testing.T) {
	f, inv := fabricFleet(t, 1, "")
	for _, h := range f.Hosts() {
		answerPodSSHD(h, "sshd 1\n", nil)
	}
	runPods(t, inv, f, WindowKey)
	for _, h := range f.Hosts() {
		if n := h.Ran(`podsshd\.sh".* bash "\$f"`); n != 0 {
			t.Errorf("%s: a server started for no collective", h.Name())
		}
		// The phase ran there, only no server.
		if n := h.Ran(`windowkey\.sh".* bash "\$f"`); n != 1 {
			t.Errorf("%s: windowkey.sh ran %d times, want 1", h.Name(), n)
		}
	}
}

// replacedPod is a fake host's executor as a pod: Addr names the pod,
// which each dial makes anew, as the API does once a pod was deleted.
type replacedPod struct {
	podNode
	pod string
}

func (p replacedPod) Addr() string { return "kubernetes:default/" + p.pod }

// A pod deleted between phases (an eviction) is made again at the next
// phase's redial, and the window's scripts are pushed into the new pod
// before that phase runs one: it is not refused as a missing or tampered
// copy (exit 96), nor is the node quarantined for it.
func TestAReplacedPodGetsTheScriptsAgain(t *testing.T) {
	inv := fakeInventory(t, 2, "image: {reference: \"registry.example/train@sha256:"+pin+"\"}\n")
	f := fakeFleet(inv)
	var mu sync.Mutex
	dials := map[string]int{}
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		e, err := f.Dial(ctx, c)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dials[c.Name]++
		pod := fmt.Sprintf("gpuaccept-%s-%d", c.Name, dials[c.Name])
		mu.Unlock()
		return replacedPod{podNode: podNode{Executor: e, img: remote.PodImage{ImageID: "sha256:" + pin}}, pod: pod}, nil
	}
	h2 := f.Host("h2")
	onScript(h2, "failure.sh", func(*fake.Call, []string) fake.Reply { return fake.Reply{Stdout: "ran\n"} })
	onScript(f.Host("h1"), "failure.sh", func(*fake.Call, []string) fake.Reply { return fake.Reply{Stdout: "ran\n"} })
	evict := orchestrator.Phase{Name: "evict", Deadline: func(*inventory.Inventory) time.Duration { return time.Minute },
		Cluster: func(ctx context.Context, w *orchestrator.Window) (any, error) {
			// The pod goes, and everything in it with it.
			for path := range h2.Files() {
				h2.Remove(path)
			}
			h2.Drop("pod gpuaccept-h2-1 was deleted")
			return nil, nil
		}}
	uses := orchestrator.Phase{Name: "uses", Deadline: func(*inventory.Inventory) time.Duration { return time.Minute },
		PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
			return runOn(ctx, w, n, toolCmd(w.RunID(), n.Name, "failure.sh", "count"))
		}}
	rec, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, evict, uses, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: dial, Tool: "test"})
	if err != nil {
		t.Fatalf("window: %v", err)
	}
	for i := range 2 {
		if pr := resultOf(t, rec, "uses", i); pr.Outcome != record.OK {
			t.Errorf("node %d after its pod was replaced: %s %s", i, pr.Outcome, pr.Error)
		}
	}
	if n := h2.Ran(`tar -x -o -f ` + archiveName); n != 2 {
		t.Errorf("h2's scripts unpacked %d time(s), want 2 (its new pod's too)", n)
	}
	if n := f.Host("h1").Ran(`tar -x -o -f ` + archiveName); n != 1 {
		t.Errorf("h1's scripts unpacked %d time(s), want 1 (its pod stayed)", n)
	}
}
