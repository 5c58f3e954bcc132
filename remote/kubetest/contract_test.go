package kubetest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
	"gpuaccept/remote/kube"
	"gpuaccept/scripts/lab"
)

// window is the settings of one test window's node on the lab cluster:
// a label of its own, test-sized keepalives, one of the node's GPUs.
func window(k *lab.Kube, name string) remote.KubeConfig {
	return remote.KubeConfig{
		Kubeconfig:        k.Kubeconfig,
		Node:              k.Node,
		Image:             k.Image,
		PullPolicy:        "Never",
		GPUs:              1,
		Labels:            map[string]string{"gpuaccept/window": fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1000000000)},
		ActiveDeadline:    10 * time.Minute,
		StartTimeout:      60 * time.Second,
		KeepaliveInterval: 500 * time.Millisecond,
		KeepaliveMisses:   3,
		GuardLease:        3 * time.Second,
	}
}

func clientset(t *testing.T, k *lab.Kube) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// windowPods lists the pods that carry the window's labels, in any state.
func windowPods(t *testing.T, cs kubernetes.Interface, cfg remote.KubeConfig) []string {
	t.Helper()
	var sel []string
	for k, v := range cfg.Labels {
		sel = append(sel, k+"="+v)
	}
	list, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// The Kubernetes executor keeps the executor contract on the lab's real
// cluster: every command is an exec in the window's pod through the API
// server and the kubelet. Its node goes away by the pod's deletion through
// the API, which is what a lost node is to this transport (the pod is the
// lease: an eviction, a drain, a preemption or someone else's cleanup all
// delete it); the executor hears it from the API within its keepalive
// bound. The node's processes are looked for on this machine, the node
// itself (pgrep in the host's PID namespace sees every pod's): a command
// that outlived its guard, or its pod, would show there.
func TestContractKube(t *testing.T) {
	k := needKube(t)
	cfg := window(k, "contract")
	cs := clientset(t, k)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kube.DeletePods(ctx, cfg); err != nil {
			t.Errorf("teardown: %v", err)
		}
		if left := windowPods(t, cs, cfg); len(left) > 0 {
			t.Errorf("teardown left the window's pods %v", left)
		}
	})
	contract.Run(t, contract.Target{
		New: func(t *testing.T) remote.Executor {
			e, err := remote.DialNode(t.Context(), remote.Config{Name: "kn1", Kube: &cfg})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Alive: func(t *testing.T, marker string) bool {
			out, _ := exec.Command("pgrep", "-f", "["+marker[:1]+"]"+marker[1:]).Output()
			return strings.TrimSpace(string(out)) != ""
		},
		Cut: func(t *testing.T, e remote.Executor) func() {
			ns, pod := e.(*kube.Node).Pod()
			if err := cs.CoreV1().Pods(ns).Delete(t.Context(), pod, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return func() {}
		},
	})
}
