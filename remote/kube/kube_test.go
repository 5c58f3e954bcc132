package kube

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/remote"
)

func TestKubeConfigRefusesWhatCannotWork(t *testing.T) {
	good := remote.KubeConfig{Kubeconfig: "/nonexistent/kubeconfig", Node: "gpu-7", Image: "img@sha256:00", Labels: map[string]string{"gpuaccept/window": "w1"}}
	for _, c := range []struct {
		name string
		mod  func(*remote.KubeConfig)
		want string
	}{
		{"no node", func(k *remote.KubeConfig) { k.Node = "" }, "no node name"},
		{"no image", func(k *remote.KubeConfig) { k.Image = "" }, "no image"},
		{"no labels", func(k *remote.KubeConfig) { k.Labels = nil }, "no labels"},
		{"bad label", func(k *remote.KubeConfig) { k.Labels = map[string]string{"a b": "c"} }, "not a Kubernetes label"},
		{"negative GPUs", func(k *remote.KubeConfig) { k.GPUs = -1 }, "-1 GPUs"},
		{"unknown pull policy", func(k *remote.KubeConfig) { k.PullPolicy = "Sometimes" }, `pull policy "Sometimes"`},
		{"no kubeconfig", func(*remote.KubeConfig) {}, "kubeconfig"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := good
			c.mod(&k)
			e, err := remote.DialNode(t.Context(), remote.Config{Name: "n1", Kube: &k})
			var se *remote.SetupError
			if e != nil || !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "n1: kubernetes: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DialNode = %v, %v; want a setup error naming n1 and saying %q", e, err, c.want)
			}
		})
	}
	c := remote.Config{Name: "n1", Kube: &good}
	if c.Address() != "gpu-7" || !strings.Contains(c.Via(), "Kubernetes API") || c.ReachWithin() < remote.DefaultPodStart {
		t.Errorf("address %q, via %q, reach within %s", c.Address(), c.Via(), c.ReachWithin())
	}
}

// The window's pod: bound to its node through the scheduler, the node's
// network and IPC, its GPUs, a deadline, the window's labels and the
// transport's own, no service account token.
func TestKubePodSpec(t *testing.T) {
	k := remote.KubeConfig{Node: "Node_A.example", Image: "reg/img@sha256:aa", GPUs: 8, GPUResource: "amd.com/gpu",
		Labels: map[string]string{"gpuaccept/window": "w1"}, ServiceAccount: "sa", ImagePullSecret: "pull",
		Tolerations: []remote.Toleration{{Key: "gpu", Operator: "Exists", Effect: "NoSchedule"}}, ActiveDeadline: 2 * time.Hour}
	k = k.WithDefaults()
	p := podSpec(k)
	s := p.Spec
	if !s.HostNetwork || !s.HostIPC || s.RestartPolicy != corev1.RestartPolicyNever || *s.ActiveDeadlineSeconds != 7200 ||
		*s.AutomountServiceAccountToken || s.ServiceAccountName != "sa" || s.ImagePullSecrets[0].Name != "pull" || len(s.Tolerations) != 1 || s.Tolerations[0] != (corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}) {
		t.Fatalf("spec %+v", s)
	}
	c := s.Containers[0]
	if c.Image != k.Image || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("container %+v", c)
	}
	if q := c.Resources.Limits["amd.com/gpu"]; q.Value() != 8 {
		t.Errorf("GPU limit %v", c.Resources.Limits)
	}
	term := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]
	if term.Key != "metadata.name" || term.Values[0] != "Node_A.example" || s.NodeName != "" {
		t.Errorf("node affinity %+v, nodeName %q", term, s.NodeName)
	}
	if p.Labels["gpuaccept/window"] != "w1" || p.Labels["app.kubernetes.io/managed-by"] != ManagedBy ||
		p.Labels[NodeLabel] != "Node_A.example" || p.GenerateName != "gpuaccept-node-a-example-" {
		t.Errorf("labels %v, generateName %q", p.Labels, p.GenerateName)
	}
	if sel := selector(k, true); !strings.Contains(sel, "gpuaccept/window=w1") || !strings.Contains(sel, NodeLabel+"=Node_A.example") {
		t.Errorf("selector %q", sel)
	}
	if len(s.Volumes) != 0 || len(c.VolumeMounts) != 0 {
		t.Errorf("volumes without kubernetes.volumes: %+v %+v", s.Volumes, c.VolumeMounts)
	}
	k.Volumes = []remote.KubeVolume{{MountPath: "/shared", HostPath: "/mnt/lustre"}, {MountPath: "/ckpt", Claim: "ckpt-rwx", ReadOnly: true}}
	s = podSpec(k).Spec
	c = s.Containers[0]
	if len(s.Volumes) != 2 || len(c.VolumeMounts) != 2 {
		t.Fatalf("volumes %+v, mounts %+v", s.Volumes, c.VolumeMounts)
	}
	if hp := s.Volumes[0].HostPath; hp == nil || hp.Path != "/mnt/lustre" || *hp.Type != corev1.HostPathDirectory ||
		!reflect.DeepEqual(c.VolumeMounts[0], corev1.VolumeMount{Name: s.Volumes[0].Name, MountPath: "/shared"}) {
		t.Errorf("host_path volume %+v mounted %+v: want a Directory that must exist", s.Volumes[0], c.VolumeMounts[0])
	}
	if pvc := s.Volumes[1].PersistentVolumeClaim; pvc == nil || pvc.ClaimName != "ckpt-rwx" || !pvc.ReadOnly ||
		!reflect.DeepEqual(c.VolumeMounts[1], corev1.VolumeMount{Name: s.Volumes[1].Name, MountPath: "/ckpt", ReadOnly: true}) || s.Volumes[0].Name == s.Volumes[1].Name {
		t.Errorf("claim volume %+v mounted %+v", s.Volumes[1], c.VolumeMounts[1])
	}
	long := strings.Repeat("n", 70)
	if l := nodeLabel(long); len(l) > 63 || l == nodeLabel(long+"x") {
		t.Errorf("nodeLabel of a long name: %q", l)
	}
}

func TestKubePodGone(t *testing.T) {
	now := metav1.Now()
	for _, c := range []struct {
		p    corev1.Pod
		want string
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, ""},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "other"}}, "another of the same name"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", DeletionTimestamp: &now}}, "being deleted"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			"ended (Failed: Evicted: low on memory)"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}}, "DeadlineExceeded"},
	} {
		if got := podGone(&c.p, "u"); c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("podGone(%+v) = %q, want %q", c.p.Status, got, c.want)
		}
	}
}

// A node as the inventory and preflight read it: the GPU resource the
// window asks for (not another one), readiness, cordon and taints.
func TestKubeNodeFromTheAPI(t *testing.T) {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-a.zone1", Labels: map[string]string{"topology.kubernetes.io/zone": "z1"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Value: "acceptance", Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "amd.com/gpu": resource.MustParse("2")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	got := kubeNode(&n, "nvidia.com/gpu")
	if got.Name != "gpu-a.zone1" || got.Labels["topology.kubernetes.io/zone"] != "z1" || got.GPUs != 7 || got.GPUCapacity != 8 ||
		!got.Ready || !got.Unschedulable || strings.Join(got.Taints, ",") != "nvidia.com/gpu:NoSchedule,dedicated=acceptance:NoExecute" {
		t.Errorf("%+v", got)
	}
	n.Status.Conditions = nil
	if got := kubeNode(&n, "amd.com/gpu"); got.GPUs != 0 || got.GPUCapacity != 2 || got.Ready {
		t.Errorf("amd.com/gpu, no conditions: %+v", got)
	}
	if _, err := Nodes(t.Context(), remote.KubeConfig{Kubeconfig: "/nonexistent"}, map[string]string{"a b": "c"}); err == nil || !strings.Contains(err.Error(), "node selector") {
		t.Errorf("a selector that is no label: %v", err)
	}
}

// The device plugin and the GPU Operator are known by their images' names,
// whichever registry, tag or digest: NVIDIA's, GKE's and AMD's plugins.
func TestImageKind(t *testing.T) {
	for image, want := range map[string]string{
		"nvcr.io/nvidia/k8s-device-plugin:v0.17.0":                      "plugin",
		"gke.gcr.io/nvidia-gpu-device-plugin@sha256:0123":               "plugin",
		"rocm/k8s-device-plugin":                                        "plugin",
		"registry.local:5000/nvidia/k8s-device-plugin:v0.14.1-ubi8":     "plugin",
		"nvcr.io/nvidia/gpu-operator:v24.9.0":                           "operator",
		"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.0":    "",
		"registry.local:5000/device-plugin-docs/server:1":               "",
		"nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04":      "",
		"localhost/gpuaccept-kube:1":                                    "",
		"ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.7": "",
		"mellanox/k8s-rdma-shared-dev-plugin:1.5.1":                     "",
	} {
		if got := imageKind(image); got != want {
			t.Errorf("imageKind(%q) = %q, want %q", image, got, want)
		}
	}
}
