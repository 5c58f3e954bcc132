package inventory

import (
	"path/filepath"
	"slices"
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
