package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

// The failure test's kill through the API, on two of the lab's nodes: a
// PyTorch 2.x job (Debian 13's root filesystem mounted over the pods'
// /usr, a volume of kubernetes.volumes) runs under torchrun in the pods;
// the second node's pod is deleted through the API once the job runs
// steadily. The survivor goes on from the last checkpoint (on a volume
// both pods mount), the window makes a new pod on the victim's node,
// pushes its scripts there again, and the victim's launcher rejoins from
// it. Afterwards no pod of the window is left.
func TestFailureDeletePod(t *testing.T) {
	k := needKube(t)
	if len(k.Nodes) < 2 {
		t.Skipf("the lab's cluster has one node (%v): kube.sh up --nodes 2", k.Nodes)
	}
	tv, err := lab.Torch2Rootfs(t.Context(), "")
	if err != nil {
		t.Skipf("the PyTorch 2.x root filesystem: %v", err)
	}
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeInventory(t, dir, k, `image: {reference: "`+k.ImageRef+`"}
simulated: true
quote: {gpus_per_node: 1, price_per_gpu_hour: 2.5}
phases:
  failure:
    enabled: true
    inject: delete-pod
    recovery: elastic
    dir: /shared
    procs_per_node: 1
    steady_steps: 5
    resume_steps: 3
    hidden: 64
    step_time: 300ms
    resume_within: 3m
    timeout: 8m
`, fmt.Sprintf(`  nodes: [%s, %s]
  image_pull_policy: Never
  volumes:
    - {mount_path: /usr, host_path: %s/usr, read_only: true}
    - {mount_path: /shared, host_path: %s}
`, k.Nodes[0], k.Nodes[1], tv.Rootfs, shared))
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dials := map[string]int{}
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		mu.Lock()
		dials[c.Name]++
		mu.Unlock()
		return remote.DialNode(ctx, c)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	rec, runDir, err := orchestrator.Start(ctx, inv, phases.All(), orchestrator.Options{
		RunsDir: filepath.Join(dir, "runs"), Dial: dial, Selection: &orchestrator.Selection{Only: []string{"failure"}},
		Progress: orchestrator.NewProgress(logWriter{t}, false),
	})
	if rec == nil {
		t.Fatalf("no run: %v", err)
	}
	t.Logf("python3-torch %s; the window took %s", tv.Version, time.Since(start).Round(time.Second))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// orchestrator.Start leaves the raw logs as they were written (the
		// command packs them into the bundle).
		for _, n := range inv.Nodes {
			b, err := os.ReadFile(filepath.Join(runDir, "raw", n.Name, "failure.log"))
			if err != nil {
				t.Logf("raw/%s/failure.log: %v", n.Name, err)
				continue
			}
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("raw/%s/failure.log (end):\n%s", n.Name, b)
		}
	})
	var f phases.Failed
	found := false
	for _, p := range rec.Phases {
		if p.Outcome != record.OK && p.Error != "" {
			t.Logf("%s on node %d: %s %s", p.Phase, p.Index, p.Outcome, p.Error)
		}
		if p.Phase == "failure" && len(p.Data) > 0 {
			found = json.Unmarshal(p.Data, &f) == nil
			if p.Outcome != record.OK {
				t.Errorf("failure phase: %s %s", p.Outcome, p.Error)
			}
		}
	}
	if !found {
		t.Fatalf("no failure result (%s)", runDir)
	}
	var acts []string
	for _, a := range f.Actions {
		acts = append(acts, fmt.Sprintf("%6.1f %s %s: %s", a.At, a.Node, a.What, a.Output))
	}
	t.Logf("actions:\n%s\n%s", strings.Join(acts, "\n"), f.Timeline)
	said := strings.Join(acts, "\n")
	victim := inv.Nodes[1].Name
	for _, want := range []string{victim + " delete-pod: pod gpuaccept-", victim + " new pod: kubernetes:default/gpuaccept-", "scripts pushed again"} {
		if !strings.Contains(said, want) {
			t.Errorf("the actions do not say %q", want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if dials[victim] < 2 {
		t.Errorf("%s dialled %d time(s): its new pod was never made", victim, dials[victim])
	}
	for _, id := range []string{"RECOV-001", "RECOV-003", "RECOV-004"} {
		v := verdictNamed(rec, id)
		t.Logf("%s %s %s | %s", id, v.Status, v.Measured, v.Detail)
		if v.Status != record.Pass {
			t.Errorf("%s: %s %s (%s)", id, v.Status, v.Measured, runDir)
		}
	}
	if v := f.Torch[victim]; !strings.HasPrefix(v.Launcher, "2.") {
		t.Errorf("%s ran PyTorch %+v, not the 2.x mounted into its pods", victim, v)
	}
	list, err := clientset(t, k).CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: rec.Kubernetes.Label})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after the window the API lists %d pods with %s (%v)", len(list.Items), rec.Kubernetes.Label, err)
	}
	if v := verdictNamed(rec, "KUBE-003"); v.Status != record.Pass {
		t.Errorf("KUBE-003 %s %s | %s", v.Status, v.Measured, v.Detail)
	}
}
