package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

// A window through the API on the lab's node, its pod given the stand-ins
// of an 8-GPU H100 node (nvidia-smi, dcgmi, ibstat; run.json says
// simulated): preflight, the diagnostic and the image phase run in the pod.
// The window reads what the cluster says of its node before the first
// phase: KUBE-002 passes while the node offers the quote's eight GPUs, as
// nvidia-smi in the pod counts them, and names the device plugin's pod on
// it (an image the lab does not hold, so it stays Pending, as a plugin that
// cannot start would); IMG-001 holds the pod's imageID to the pin. Once the
// plugin offers seven, KUBE-002 names the node, whose pod asking for eight
// is then never scheduled (CONN-001). Either way the window's pods are gone
// at its end, run.json lists them and KUBE-003 passes.
func TestWindowNamesTheNodeThatOffersFewerGPUs(t *testing.T) {
	k := needKube(t)
	cs := clientset(t, k)
	// The device plugin as clusters run it, a DaemonSet's pod on the node;
	// beside it a pod any tenant could start there, named like one and
	// not a DaemonSet's, which is no plugin of the node's.
	labels := map[string]string{"app": "nvidia-device-plugin-daemonset-lab"}
	plugin := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "nvidia-device-plugin-daemonset-lab", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// On the window's node only: the lab has more.
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"kubernetes.io/hostname": k.Node},
				Containers: []corev1.Container{{
					Name: "nvidia-device-plugin", Image: "localhost/nvidia/k8s-device-plugin:v0.17.0", ImagePullPolicy: corev1.PullNever,
				}}}},
		},
	}
	if _, err := cs.AppsV1().DaemonSets("default").Create(t.Context(), plugin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spoof := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "k8s-device-plugin-spoof", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: k.Node, Containers: []corev1.Container{{
			Name: "plugin", Image: "localhost/nvidia/k8s-device-plugin:v9.9.9-spoof", ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(t.Context(), spoof, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// SetGPUs keeps the count it set: the count the other tests expect
	// is the cluster's first.
	gpus := k.GPUs
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cs.AppsV1().DaemonSets("default").Delete(ctx, plugin.Name, *metav1.NewDeleteOptions(0))
		_ = cs.CoreV1().Pods("default").Delete(ctx, spoof.Name, *metav1.NewDeleteOptions(0))
		if err := k.SetGPUs(ctx, gpus); err != nil {
			t.Errorf("the node's %d GPUs again: %v", gpus, err)
		}
	})
	lab.Eventually(t, time.Minute, "the DaemonSet's pod on the node", func() bool {
		l, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + labels["app"]})
		return err == nil && len(l.Items) == 1
	})
	if err := k.SetGPUs(t.Context(), 8); err != nil {
		t.Fatal(err)
	}
	standin := filepath.Join(t.TempDir(), "standin")
	if err := lab.BuildStandin(t.Context(), standin); err != nil {
		t.Fatal(err)
	}
	// The pin: the lab image by its manifest's digest, a name the nodes
	// hold it by (kube.sh tags it so, as a pull by digest leaves it), so
	// containerd reports REPO@sha256:MANIFEST as the pod's imageID; the
	// inventory's own image_pull_policy Never, nothing overridden.
	pin := k.ImageRef[strings.LastIndexByte(k.ImageRef, '@')+1:]
	dir := t.TempDir()
	path := writeInventory(t, dir, k, `image: {reference: "`+k.ImageRef+`", smoke: [echo, "GPU 0: the lab's stand-in"]}
simulated: true
quote: {gpus_per_node: 8}
`, "  nodes: ["+k.Node+"]\n  image_pull_policy: Never\n")
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		kc := *c.Kube
		kc.StartTimeout = 20 * time.Second
		c.Kube = &kc
		e, err := remote.DialNode(ctx, c)
		if err != nil {
			return nil, err
		}
		if err := installStandins(ctx, e, standin, "h100"); err != nil {
			e.Close()
			return nil, err
		}
		return e, nil
	}
	window := func(t *testing.T) *record.Run {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		rec, runDir, err := orchestrator.Start(ctx, inv, phases.All(), orchestrator.Options{
			RunsDir: filepath.Join(dir, "runs"), Dial: dial, Selection: &orchestrator.Selection{Only: []string{"preflight", "diag", "image"}},
		})
		if rec == nil {
			t.Fatalf("no run: %v", err)
		}
		k8s := rec.Kubernetes
		if k8s == nil || len(k8s.Nodes) != 1 || k8s.ReadError != "" || k8s.Nodes[0].APIName != k.Node || k8s.Nodes[0].Kubelet != "v1.31.4" ||
			!strings.HasPrefix(k8s.Nodes[0].Runtime, "containerd://") || !k8s.Nodes[0].Ready {
			t.Fatalf("run.json kubernetes %+v (%s)", k8s, runDir)
		}
		list, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: k8s.Label})
		if err != nil || len(list.Items) != 0 {
			t.Errorf("after the window the API lists %d pods with %s (%v)", len(list.Items), k8s.Label, err)
		}
		return rec
	}
	verdict := func(rec *record.Run, id string) record.Verdict {
		for _, v := range rec.Verdicts {
			if v.ID == id {
				return v
			}
		}
		t.Fatalf("no %s in %+v", id, rec.Verdicts)
		return record.Verdict{}
	}

	rec := window(t)
	v := verdict(rec, "KUBE-002")
	t.Logf("eight GPUs: KUBE-002 %s %s | %s", v.Status, v.Measured, v.Detail)
	if v.Status != record.Pass || v.Measured != "nvidia.com/gpu: 8 allocatable of 8" ||
		!strings.Contains(v.Detail, "as quoted, all allocatable; the pod's 8 as nvidia-smi saw them; device plugin localhost/nvidia/k8s-device-plugin:v0.17.0 (Pending)") ||
		strings.Contains(v.Detail, "spoof") {
		t.Errorf("eight GPUs: KUBE-002 %s %s | %s", v.Status, v.Measured, v.Detail)
	}
	if v := verdict(rec, "KUBE-003"); v.Status != record.Pass || len(rec.Kubernetes.PodsDeleted) != 1 {
		t.Errorf("eight GPUs: KUBE-003 %s %s | %s (%v)", v.Status, v.Measured, v.Detail, rec.Kubernetes.PodsDeleted)
	}
	// Preflight and the diagnostic ran in the pod, on its stand-ins.
	for _, id := range []string{"GPU-002", "DIAG-001"} {
		if v := verdict(rec, id); v.Status != record.Pass {
			t.Errorf("%s %s %s | %s", id, v.Status, v.Measured, v.Detail)
		}
	}
	if !rec.Simulated {
		t.Error("run.json of stand-ins not marked simulated")
	}
	if v := verdict(rec, "KUBE-001"); v.Status != record.Pass {
		t.Errorf("KUBE-001 %s | %s", v.Status, v.Detail)
	}
	if v := verdict(rec, "IMG-002"); v.Status != record.Pass || !strings.Contains(v.Measured, "GPU 0: the lab's stand-in") {
		t.Errorf("IMG-002 %s %s | %s", v.Status, v.Measured, v.Detail)
	}
	// The pod is the container: its imageID is the pin, nothing pulled.
	v = verdict(rec, "IMG-001")
	t.Logf("IMG-001 %s %s | %s", v.Status, v.Measured, v.Detail)
	if v.Status != record.Pass || !strings.HasPrefix(v.Measured, "the pod's imageID sha256:"+strings.TrimPrefix(pin, "sha256:")[:12]) {
		t.Errorf("IMG-001 %s %s | %s", v.Status, v.Measured, v.Detail)
	}

	if err := k.SetGPUs(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	rec = window(t)
	v = verdict(rec, "KUBE-002")
	t.Logf("seven GPUs: KUBE-002 %s %s | %s", v.Status, v.Measured, v.Detail)
	if v.Status != record.Fail || v.Node != inv.Nodes[0].Name || !strings.Contains(v.Detail, "pods can ask for 7; the quote says 8") {
		t.Errorf("seven GPUs: KUBE-002 %s %s | %s", v.Status, v.Measured, v.Detail)
	}
	if v := verdict(rec, "CONN-001"); v.Status != record.Fail || !strings.Contains(v.Detail, "nvidia.com/gpu") {
		t.Errorf("seven GPUs: CONN-001 %s | %s", v.Status, v.Detail)
	}
}

// installStandins gives the pod behind e the stand-in binary and the
// wrappers of profile's tools (scripts/standins), on its PATH: what the
// lab's hosts have, so that the window's phases run in the pod as on them.
func installStandins(ctx context.Context, e remote.Executor, bin, profile string) error {
	if err := e.Run(ctx, remote.Cmd{Command: "mkdir -p /usr/local/bin"}); err != nil {
		return fmt.Errorf("%s: stand-ins: %w", e.Name(), err)
	}
	if _, err := e.Upload(ctx, bin, lab.TestImageStandin, remote.TransferOptions{Mode: 0o755}); err != nil {
		return fmt.Errorf("%s: stand-ins: %w", e.Name(), err)
	}
	dir, err := os.MkdirTemp("", "kube-standins-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := standins.Install(dir, profile, []string{lab.TestImageStandin}); err != nil {
		return err
	}
	tools, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, f := range tools {
		if f.Name() == standins.ProfileFile {
			continue
		}
		if _, err := e.Upload(ctx, filepath.Join(dir, f.Name()), "/usr/local/bin/"+f.Name(), remote.TransferOptions{Mode: 0o755}); err != nil {
			return fmt.Errorf("%s: stand-ins: %w", e.Name(), err)
		}
	}
	return nil
}
