package kubetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// An inventory's kubernetes section reaches the lab's node as a window
// does (orchestrator.Probe, what `check --connect` runs): the node chosen
// by node_selector through the API (the kubelet's own kubernetes.io/hostname
// label: the lab has two nodes), named by the first label of its name, a pod of the run's own on it
// with the quote's GPUs, the command run in it, and the run's pods deleted
// before Probe returns, the API listing none with its label. The pod's
// image is the lab's (imported, never pulled), given by the Dialer: the
// inventory pins one by digest, which the lab's containerd does not hold.
func TestProbeThroughTheInventory(t *testing.T) {
	k := needKube(t)
	path := writeInventory(t, t.TempDir(), k, "transport: kubernetes\nimage: {reference: \""+zeroPin+"\"}\nquote: {gpus_per_node: 2}\n",
		"  node_selector: kubernetes.io/hostname="+k.Node+"\n")
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Nodes) != 0 {
		t.Fatalf("nodes before the API was asked: %+v", inv.Nodes)
	}
	if inv, err = inv.WithKubeNodes(t.Context()); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(k.Node, ".")
	if len(inv.Nodes) != 1 || inv.Nodes[0].Name != first || inv.Nodes[0].Address != k.Node {
		t.Fatalf("nodes %+v", inv.Nodes)
	}
	var mu sync.Mutex
	var dialled []remote.KubeConfig
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		kc := *c.Kube
		kc.Image, kc.PullPolicy = k.Image, "Never"
		kc.StartTimeout = time.Minute
		mu.Lock()
		dialled = append(dialled, kc)
		mu.Unlock()
		c.Kube = &kc
		return remote.DialNode(ctx, c)
	}
	res, err := orchestrator.Probe(t.Context(), inv, orchestrator.Options{Dial: dial}, "echo probed; echo $((1+1))", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !res[0].Dialled || res[0].Err != nil || string(res[0].Out) != "probed\n2\n" || !strings.HasPrefix(res[0].Addr, "kubernetes:default/gpuaccept-") {
		t.Fatalf("probe %+v (%v)", res, res[0].Err)
	}
	if len(dialled) != 1 || dialled[0].Node != k.Node || dialled[0].GPUs != 2 || !strings.HasPrefix(dialled[0].Labels[orchestrator.KubeRunLabel], "probe-") {
		t.Fatalf("dialled %+v", dialled)
	}
	list, err := clientset(t, k).CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{
		LabelSelector: orchestrator.KubeRunLabel + "=" + dialled[0].Labels[orchestrator.KubeRunLabel],
	})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("after the probe the API lists %d of its pods (%v)", len(list.Items), err)
	}
}
