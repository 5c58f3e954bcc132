package inventory

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gpuaccept/remote"
)

const kubeImage = "registry.invalid/acc@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// The nodes of a managed cluster: those kubernetes.nodes names (a range
// too), each by the first label of its name in the API, and a node of
// nodes: with transport kubernetes by its own name; each is reached by
// the Kubernetes transport with the section's settings, the pinned image
// and the quote's GPUs, and needs neither an SSH user nor host keys.
func TestKubernetesNodes(t *testing.T) {
	inv, err := parseText(t, `provider: vendor-k
image: {reference: "`+kubeImage+`"}
quote: {gpus_per_node: 8}
nodes: [{name: gpu-00, transport: kubernetes}]
kubernetes:
  kubeconfig: rental.kubeconfig
  context: rental
  namespace: acceptance
  nodes: ["gpu-[01-02].pool-a.example"]
  gpu_resource: amd.com/gpu
  service_account: acceptance
  image_pull_secret: pull
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}, {key: maint, value: "yes", effect: NoExecute, toleration_seconds: 60}]
`)
	if err != nil {
		t.Fatal(err)
	}
	var names, addrs []string
	for _, n := range inv.Nodes {
		names, addrs = append(names, n.Name), append(addrs, n.Address)
		if inv.TransportOf(n) != TransportKubernetes {
			t.Errorf("%s: transport %q", n.Name, inv.TransportOf(n))
		}
	}
	if want := []string{"gpu-00", "gpu-01", "gpu-02"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	if want := []string{"gpu-00", "gpu-01.pool-a.example", "gpu-02.pool-a.example"}; !slices.Equal(addrs, want) {
		t.Fatalf("addresses %v, want %v", addrs, want)
	}
	cfg := inv.NodeConfig(inv.Nodes[1], nil)
	k := cfg.Kube
	if cfg.Name != "gpu-01" || k == nil || cfg.SSH != nil || k.Node != "gpu-01.pool-a.example" || k.Image != kubeImage || k.GPUs != 8 ||
		k.GPUResource != "amd.com/gpu" || k.Namespace != "acceptance" || k.Context != "rental" || k.ServiceAccount != "acceptance" ||
		k.ImagePullSecret != "pull" || k.Kubeconfig != filepath.Join(filepath.Dir(inv.Path), "rental.kubeconfig") {
		t.Fatalf("config %+v, kube %+v", cfg, k)
	}
	if len(k.Tolerations) != 2 || k.Tolerations[0] != (remote.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}) ||
		k.Tolerations[1].Operator != "Equal" || k.Tolerations[1].TolerationSeconds == nil || *k.Tolerations[1].TolerationSeconds != 60 {
		t.Errorf("tolerations %+v", k.Tolerations)
	}
	if inv.NeedsHostKeys() || inv.FanOut() != DefaultConcurrency || cfg.Address() != "gpu-01.pool-a.example" {
		t.Errorf("host keys %v, fan-out %d, address %q", inv.NeedsHostKeys(), inv.FanOut(), cfg.Address())
	}
}

func TestParseSelector(t *testing.T) {
	got, err := ParseSelector(" nvidia.com/gpu.present=true, pool==a,empty=")
	if err != nil || len(got) != 3 || got["nvidia.com/gpu.present"] != "true" || got["pool"] != "a" || got["empty"] != "" {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"", "pool", "pool!=a", "pool=a,pool=b", "a b=c", "pool=a b", "x/y/z=1"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// fakeCluster answers ListKubeNodes from a list, as the API would for a
// selector of one label.
type fakeCluster struct{ nodes []remote.KubeNode }

func (fakeCluster) Dial(context.Context, string, remote.KubeConfig) (remote.Executor, error) {
	return nil, errors.New("not dialled here")
}

func (fakeCluster) DeletePods(context.Context, remote.KubeConfig) ([]string, error) { return nil, nil }

func (fakeCluster) Access(context.Context, remote.KubeConfig) ([]remote.KubeAccess, error) {
	return nil, errors.New("not asked")
}

func (fakeCluster) GPUSoftware(context.Context, remote.KubeConfig) (remote.KubeGPUSoftware, error) {
	return remote.KubeGPUSoftware{}, nil
}

func (f fakeCluster) Nodes(_ context.Context, _ remote.KubeConfig, sel map[string]string) ([]remote.KubeNode, error) {
	var out []remote.KubeNode
	for _, n := range f.nodes {
		match := true
		for k, v := range sel {
			match = match && n.Labels[k] == v
		}
		if match {
			out = append(out, n)
		}
	}
	return out, nil
}

// The selector's nodes join the inventory's when the window starts: by
// the first label of their names, their zone and rack from the topology
// labels, a node named already not twice; two first labels alike, or no
// node at all, are errors naming the file and the selector.
func TestWithKubeNodes(t *testing.T) {
	gpu := map[string]string{"gpu": "yes", "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/rack": "r7"}
	remote.RegisterKube(fakeCluster{nodes: []remote.KubeNode{
		{Name: "gpu-1.pool-a", Labels: gpu}, {Name: "gpu-2.pool-a", Labels: map[string]string{"gpu": "yes"}},
		{Name: "cpu-1.pool-a", Labels: map[string]string{"gpu": "no"}}, {Name: "gpu-1.pool-b", Labels: map[string]string{"gpu": "twin"}},
	}})
	load := func(extra string) *Inventory {
		t.Helper()
		inv, err := parseText(t, `provider: vendor-k
image: {reference: "`+kubeImage+`"}
quote: {gpus_per_node: 8}
phases: {failure: {enabled: true, dir: /shared}}
kubernetes:
  volumes: [{mount_path: /shared, claim: shared}]
  node_selector: "gpu=`+extra+`"
  nodes: [gpu-2.pool-a]
`)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	inv := load("yes")
	got, err := inv.WithKubeNodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 2 || got.Nodes[0].Address != "gpu-2.pool-a" || got.Nodes[1].Name != "gpu-1" || got.Nodes[1].Address != "gpu-1.pool-a" ||
		got.TransportOf(got.Nodes[1]) != TransportKubernetes || got.Nodes[1].Labels["zone"] != "z1" || got.Nodes[1].Labels["rack"] != "r7" || len(inv.Nodes) != 1 {
		t.Fatalf("nodes %+v (the inventory's %d)", got.Nodes, len(inv.Nodes))
	}
	inv.Kubernetes.NodeSelector = "gpu in (yes,twin)"
	if _, err := inv.WithKubeNodes(t.Context()); err == nil || !strings.Contains(err.Error(), "kubernetes.node_selector") {
		t.Errorf("a selector that is no equality: %v", err)
	}
	inv.Kubernetes.NodeSelector = "topology.kubernetes.io/zone=z1"
	inv.Nodes = append(inv.Nodes, Node{Name: "gpu-1", Address: "10.0.0.9"})
	if _, err := inv.WithKubeNodes(t.Context()); err == nil || !strings.Contains(err.Error(), "node gpu-1.pool-a is named gpu-1, as 10.0.0.9 is") {
		t.Errorf("a name taken: %v", err)
	}
	none := load("none")
	none.Nodes = nil
	if _, err := none.WithKubeNodes(t.Context()); err == nil || !strings.HasPrefix(err.Error(), none.Path+": kubernetes.node_selector gpu=none: ") {
		t.Errorf("no node: %v", err)
	}
}

// OnKubeVolume finds the deepest mount that holds a directory, and none
// for one beside a mount whose name it merely begins with.
func TestOnKubeVolume(t *testing.T) {
	k := Kubernetes{Volumes: []KubeVolume{{MountPath: "/data", Claim: "a"}, {MountPath: "/data/ckpt", HostPath: "/mnt/c"}, {MountPath: "/x/", Claim: "b"}}}
	for dir, want := range map[string]string{
		"/data": "/data", "/data/run": "/data", "/data/ckpt/run": "/data/ckpt", "/data/ckpt": "/data/ckpt",
		"/datasets/run": "", "/": "", "/data/../etc": "", "/x/y": "/x/", "/tmp/data": "",
	} {
		got := ""
		if v := k.OnKubeVolume(dir); v != nil {
			got = v.MountPath
		}
		if got != want {
			t.Errorf("OnKubeVolume(%q) = %q, want %q", dir, got, want)
		}
	}
}
