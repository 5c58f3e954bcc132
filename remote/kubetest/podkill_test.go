package kubetest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/remote/kube"
)

// A pod deleted through the API in the middle of a phase (an eviction, a
// preemption, someone's cleanup): the phase hears it from the API within
// the keepalive bound and names that node lost with the pod's fate, the
// other node's work goes on to its end, and the window's end deletes the
// pod left and lists none. The node is not dialled again into a new pod
// of the window's behind the record's back.
func TestPodDeletedMidPhase(t *testing.T) {
	k := needKube(t)
	if len(k.Nodes) < 2 {
		t.Skipf("the lab's cluster has one node (%v): kube.sh up --nodes 2", k.Nodes)
	}
	dir := t.TempDir()
	path := writeInventory(t, dir, k, "image: {reference: \""+zeroPin+"\"}\nquote: {gpus_per_node: 1}\n",
		"  nodes: ["+k.Nodes[0]+", "+k.Nodes[1]+"]\n")
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cs := clientset(t, k)
	pods := make(chan *kube.Node, 2)
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		kc := *c.Kube
		kc.Image, kc.PullPolicy, kc.StartTimeout = k.Image, "Never", time.Minute
		kc.KeepaliveInterval, kc.KeepaliveMisses = time.Second, 3
		c.Kube = &kc
		e, err := remote.DialNode(ctx, c)
		if err == nil {
			select {
			case pods <- e.(*kube.Node):
			default: // a later dial (teardown's) is no pod of the phase
			}
		}
		return e, err
	}
	// A phase that works 20 s on every node, the second node's pod deleted
	// 3 s in.
	started := make(chan struct{}, 2)
	long := orchestrator.Phase{Name: "long", Deadline: func(*inventory.Inventory) time.Duration { return 2 * time.Minute },
		PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
			started <- struct{}{}
			return nil, n.Exec().Run(ctx, remote.Cmd{Command: "sleep 20; echo done"})
		}}
	go func() {
		for range 2 {
			select {
			case <-started:
			case <-t.Context().Done():
				return
			}
		}
		time.Sleep(3 * time.Second)
		for range 2 {
			e := <-pods
			if e.Name() != inv.Nodes[1].Name {
				continue
			}
			ns, pod := e.Pod()
			if err := cs.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete %s: %v", pod, err)
			}
			t.Logf("deleted %s's pod %s", e.Name(), pod)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	rec, runDir, _ := orchestrator.Start(ctx, inv, []orchestrator.Phase{phases.Connect, phases.Tools, long, phases.Teardown, phases.Deletion},
		orchestrator.Options{RunsDir: filepath.Join(dir, "runs"), Dial: dial, Progress: orchestrator.NewProgress(logWriter{t}, false)})
	if rec == nil {
		t.Fatal("no run")
	}
	t.Logf("the window took %s", time.Since(start).Round(time.Second))
	var first, second record.PhaseResult
	for _, p := range rec.Phases {
		if p.Phase == "long" && p.Index == 0 {
			first = p
		}
		if p.Phase == "long" && p.Index == 1 {
			second = p
		}
	}
	if first.Outcome != record.OK {
		t.Errorf("%s's phase: %s %s (%s)", inv.Nodes[0].Name, first.Outcome, first.Error, runDir)
	}
	if second.Outcome == record.OK || !strings.Contains(second.Error, "deleted") {
		t.Errorf("%s's phase after its pod's deletion: %s %q (%s)", inv.Nodes[1].Name, second.Outcome, second.Error, runDir)
	}
	// Deleted 3 s into a 20 s command: heard within the keepalive bound
	// (3 misses of 1 s) and the pod's grace, well before the command's end.
	if d := second.Ended.Sub(second.Started); d > 15*time.Second {
		t.Errorf("%s's loss took %s to hear", inv.Nodes[1].Name, d)
	}
	if rec.Kubernetes == nil {
		t.Fatal("no kubernetes record")
	}
	list, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: rec.Kubernetes.Label})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after the window the API lists %d pods with %s (%v)", len(list.Items), rec.Kubernetes.Label, err)
	}
	if v := verdictNamed(rec, "KUBE-003"); v.Status != record.Pass {
		t.Errorf("KUBE-003 %s %s | %s", v.Status, v.Measured, v.Detail)
	}
}

// verdictNamed is rec's verdict id (the first), or a zero one.
func verdictNamed(rec *record.Run, id string) record.Verdict {
	for _, v := range rec.Verdicts {
		if v.ID == id {
			return v
		}
	}
	return record.Verdict{}
}
