package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/remote"
	"gpuaccept/remote/kube"
	"gpuaccept/scripts/lab"
)

func dialKube(t *testing.T, cfg remote.KubeConfig) *kube.Node {
	t.Helper()
	e, err := remote.DialNode(t.Context(), remote.Config{Name: "kn1", Kube: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e.(*kube.Node)
}

func alive(marker string) bool {
	out, _ := exec.Command("pgrep", "-f", "["+marker[:1]+"]"+marker[1:]).Output()
	return strings.TrimSpace(string(out)) != ""
}

// A resumed window finds its pod by its labels: a second executor for the
// node reaches the same pod, with what the first left in it; teardown by
// label removes it, and the API lists none of the window's pods after.
func TestKubeResumeFindsThePod(t *testing.T) {
	k := needKube(t)
	cfg := window(k, "resume")
	cs := clientset(t, k)
	first := dialKube(t, cfg)
	if err := first.Run(t.Context(), remote.Cmd{Command: "echo left > /tmp/resume-mark"}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	again := dialKube(t, cfg)
	_, p1 := first.Pod()
	_, p2 := again.Pod()
	if p1 != p2 {
		t.Fatalf("the resumed window made pod %s beside %s", p2, p1)
	}
	var out bytes.Buffer
	if err := again.Run(t.Context(), remote.Cmd{Command: "cat /tmp/resume-mark", Stdout: &out}); err != nil || out.String() != "left\n" {
		t.Fatalf("the resumed pod: %q, %v", out.String(), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names, err := remote.DeleteKubePods(ctx, cfg) // the window's way, through the seam
	if err != nil || len(names) != 1 || names[0] != p1 {
		t.Fatalf("teardown deleted %v, %v; want [%s]", names, err, p1)
	}
	if left := windowPods(t, cs, cfg); len(left) > 0 {
		t.Fatalf("after teardown the API still lists %v", left)
	}
	if err := again.Run(t.Context(), remote.Cmd{Command: "true"}); !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("a command after teardown: %v; want the node lost", err)
	}
}

// A pod that asks for more GPUs than the node advertises is not scheduled:
// Dial gives up at StartTimeout and says what the scheduler said.
func TestKubeTooManyGPUs(t *testing.T) {
	k := needKube(t)
	cfg := window(k, "toomany")
	cfg.GPUs = k.GPUs + 1
	cfg.StartTimeout = 5 * time.Second
	t.Cleanup(func() { _, _ = kube.DeletePods(context.Background(), cfg) })
	e, err := remote.DialNode(t.Context(), remote.Config{Name: "kn1", Kube: &cfg})
	if err == nil {
		e.Close()
		t.Fatal("a pod asking for more GPUs than the node has ran")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "kn1: ") ||
		!strings.Contains(err.Error(), "Insufficient nvidia.com/gpu") {
		t.Fatalf("want a timeout naming the node and the scheduler's reason, got %T %v", err, err)
	}
	t.Log(err)
}

// An API server that stops answering (SIGSTOP: its connections stay open
// and silent, as behind a cut link) loses the node within the keepalive
// bound, and the guard in the pod, whose heartbeats stopped with it, ends
// the command's whole group within its lease although nobody told it; the
// pod itself stays, and once the API is back a fresh executor finds it.
func TestKubeAPISilentIsLost(t *testing.T) {
	k := needKube(t)
	cfg := window(k, "silent")
	t.Cleanup(func() { _, _ = kube.DeletePods(context.Background(), cfg) })
	e := dialKube(t, cfg)
	_, pod := e.Pod()
	m := fmt.Sprintf("sleep 600.%06d", time.Now().UnixNano()%1000000)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(t.Context(), remote.Cmd{Command: "trap '' TERM; " + m + " & " + m + "; wait", Grace: time.Second})
	}()
	lab.Eventually(t, 10*time.Second, "the command started", func() bool { return alive(m) })
	pid, err := k.Pid("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	defer cont()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after the API went silent")
	}
	var lost *remote.ConnectionLostError
	if !errors.As(err, &lost) || lost.Node != "kn1" || !e.Lost() {
		t.Fatalf("want kn1 lost, got %T %v (Lost %v)", err, err, e.Lost())
	}
	t.Logf("lost after %s: %v", time.Since(stopped).Round(100*time.Millisecond), err)
	lab.Eventually(t, 15*time.Second, "the guard ended the command's group", func() bool { return !alive(m) })
	t.Logf("the command's processes were gone %s after the API went silent", time.Since(stopped).Round(100*time.Millisecond))
	cont()
	lab.Eventually(t, 30*time.Second, "the API answers again", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := kube.DeletePods(ctx, remote.KubeConfig{Kubeconfig: k.Kubeconfig, Labels: map[string]string{"gpuaccept/none": "x"}})
		return err == nil
	})
	again := dialKube(t, cfg)
	if _, p := again.Pod(); p != pod {
		t.Errorf("after the API came back the window's pod is %s, want %s", p, pod)
	}
	if err := again.Run(t.Context(), remote.Cmd{Command: "true"}); err != nil {
		t.Fatal(err)
	}
}

// The cluster's nodes through the seam (what an inventory's kubernetes:
// section is made of): every node of the lab's, by name, Ready, with the
// GPUs its status patch advertises; a selector chooses by label, one no
// node carries chooses none.
func TestKubeNodes(t *testing.T) {
	k := needKube(t)
	cfg := remote.KubeConfig{Kubeconfig: k.Kubeconfig}
	nodes, err := remote.ListKubeNodes(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(k.Nodes) {
		t.Fatalf("nodes %+v; want %v", nodes, k.Nodes)
	}
	for i, n := range nodes {
		if n.Name != k.Nodes[i] || !n.Ready || n.GPUs != int64(k.GPUs) || n.GPUCapacity != int64(k.GPUs) {
			t.Fatalf("nodes %+v; want %v, Ready, %d nvidia.com/gpu each", nodes, k.Nodes, k.GPUs)
		}
	}
	if nodes, err := remote.ListKubeNodes(t.Context(), cfg, map[string]string{"kubernetes.io/hostname": nodes[0].Labels["kubernetes.io/hostname"]}); err != nil || len(nodes) != 1 {
		t.Errorf("by its hostname label: %+v, %v", nodes, err)
	}
	if nodes, err := remote.ListKubeNodes(t.Context(), cfg, map[string]string{"gpuaccept/none": "x"}); err != nil || len(nodes) != 0 {
		t.Errorf("by a label no node has: %+v, %v", nodes, err)
	}
	cfg.GPUResource = "example.com/none"
	if nodes, err := remote.ListKubeNodes(t.Context(), cfg, nil); err != nil || len(nodes) != len(k.Nodes) || nodes[0].GPUs != 0 {
		t.Errorf("another GPU resource: %+v, %v", nodes, err)
	}
}

// The credential's access, as check --connect asks it of a real API (one
// SelfSubjectAccessReview per need): the lab's token user may do all a
// window asks.
func TestKubeAccess(t *testing.T) {
	k := needKube(t)
	got, err := remote.KubeAccessOf(t.Context(), remote.KubeConfig{Kubeconfig: k.Kubeconfig, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(remote.KubeNeeds) {
		t.Fatalf("%d answers for %d needs", len(got), len(remote.KubeNeeds))
	}
	for _, a := range got {
		if !a.Allowed {
			t.Errorf("may not %s: %s", a.What(), a.Reason)
		}
	}
}

// A pod whose image cannot be pulled fails to start within the kubelet's
// second try or so, naming the image and the kubelet's reason, not after
// the whole start timeout as "not running".
func TestKubeImageThatCannotBePulled(t *testing.T) {
	k := needKube(t)
	cfg := window(k, "nopull")
	cfg.Image, cfg.PullPolicy, cfg.StartTimeout = zeroPin, "IfNotPresent", 4*time.Minute
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kube.DeletePods(ctx, cfg); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	start := time.Now()
	e, err := remote.DialNode(t.Context(), remote.Config{Name: "kn1", Kube: &cfg})
	took := time.Since(start)
	if err == nil {
		e.Close()
		t.Fatal("a pod of an image no one holds started")
	}
	t.Logf("after %s: %v", took.Round(time.Second), err)
	if !strings.Contains(err.Error(), "cannot pull its image "+zeroPin) || !strings.Contains(err.Error(), "ImagePull") || took > 2*time.Minute {
		t.Errorf("after %s: %v", took.Round(time.Second), err)
	}
}

// A node the cluster does not have is said at once, not after the pod's
// start timeout as an unscheduled pod.
func TestKubeNodeTheClusterDoesNotHave(t *testing.T) {
	k := needKube(t)
	cfg := window(k, "nonode")
	cfg.Node, cfg.StartTimeout = "gpu-node-07", 2*time.Minute
	start := time.Now()
	e, err := remote.DialNode(t.Context(), remote.Config{Name: "gpu-node-07", Kube: &cfg})
	if err == nil {
		e.Close()
		t.Fatal("a pod on a node the cluster does not have")
	}
	if !strings.Contains(err.Error(), "the cluster has no node gpu-node-07") || time.Since(start) > 10*time.Second {
		t.Errorf("after %s: %v", time.Since(start).Round(time.Second), err)
	}
	list, lerr := clientset(t, k).CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "gpuaccept/window=" + cfg.Labels["gpuaccept/window"]})
	if lerr != nil || len(list.Items) != 0 {
		t.Errorf("pods made for it: %d (%v)", len(list.Items), lerr)
	}
}

// A host_path volume the node lacks (a shared mount missing there) stops
// the pod, which says so within seconds: the kubelet's FailedMount
// event, the volume's key named, not the start timeout's "not running".
// And a volume the node has is mounted where the inventory says.
func TestKubeVolumes(t *testing.T) {
	k := needKube(t)
	dir := t.TempDir()
	cfg := window(k, "volumes")
	cfg.Volumes = []remote.KubeVolume{{MountPath: "/shared", HostPath: dir}, {MountPath: "/ro", HostPath: dir, ReadOnly: true}}
	e := dialKube(t, cfg)
	var out bytes.Buffer
	if err := e.Run(t.Context(), remote.Cmd{Command: "echo from-the-pod >/shared/mark && cat /ro/mark && ! touch /ro/other 2>/dev/null", Stdout: &out}); err != nil || out.String() != "from-the-pod\n" {
		t.Errorf("the volumes in the pod: %v %q", err, out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kube.DeletePods(ctx, cfg); err != nil {
		t.Errorf("teardown: %v", err)
	}

	cfg = window(k, "novolume")
	cfg.StartTimeout = 3 * time.Minute
	cfg.Volumes = []remote.KubeVolume{{MountPath: "/shared", HostPath: "/nonexistent/gpuaccept-shared"}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kube.DeletePods(ctx, cfg); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	start := time.Now()
	ne, err := remote.DialNode(t.Context(), remote.Config{Name: "kn1", Kube: &cfg})
	took := time.Since(start)
	if err == nil {
		ne.Close()
		t.Fatal("a pod started without its host_path volume")
	}
	t.Logf("after %s: %v", took.Round(time.Second), err)
	if !strings.Contains(err.Error(), "cannot mount a volume (kubernetes.volumes)") || !strings.Contains(err.Error(), "/nonexistent/gpuaccept-shared") || took > time.Minute {
		t.Errorf("after %s: %v", took.Round(time.Second), err)
	}
}
