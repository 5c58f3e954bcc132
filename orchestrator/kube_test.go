package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// KUBE-002 holds what pods can ask for to what the device plugin found
// and to the quote, and the pod's GPUs as nvidia-smi saw them to what the
// pod asked for: each disagreement is named in one line with the plugin's
// image; with no quote to hold it to it is no PASS.
func TestKubeGPUVerdict(t *testing.T) {
	plugin := []string{"nvcr.example/nvidia/k8s-device-plugin:v0.17.0"}
	smi := func(n int) json.RawMessage { return json.RawMessage(`{"gpu_count":` + itoa(int64(n)) + `}`) }
	k := &record.KubeCluster{GPUResource: "nvidia.com/gpu", PodGPUs: 8}
	for _, c := range []struct {
		name        string
		alloc, capa int64
		quoted      int
		facts       json.RawMessage
		want        record.Status
		detail      []string
	}{
		{"as quoted and seen", 8, 8, 8, smi(8), record.Pass, []string{"as quoted, all allocatable; the pod's 8 as nvidia-smi saw them", "k8s-device-plugin:v0.17.0"}},
		{"one held back", 7, 8, 8, smi(8), record.Fail, []string{"pods can ask for 7", "1 of the 8 its device plugin found are not allocatable", "the quote says 8"}},
		{"plugin found fewer", 4, 4, 8, smi(8), record.Fail, []string{"pods can ask for 4; the quote says 8;"}},
		{"no resource", 0, 0, 8, nil, record.Fail, []string{"pods can ask for 0", "the quote says 8"}},
		{"the pod got fewer", 8, 8, 8, smi(4), record.Fail, []string{"the pod asked for 8 and nvidia-smi in it saw 4"}},
		{"smi not measured", 8, 8, 8, nil, record.Skip, []string{"nvidia-smi's count in the pod not measured"}},
		{"nothing to hold", 8, 8, 0, smi(8), record.Skip, []string{"nothing to hold it to"}},
	} {
		n := record.KubeNode{Name: "gpu-01", APIName: "gpu-01.pool", Allocatable: c.alloc, Capacity: c.capa, DevicePlugin: plugin}
		v := kubeGPUVerdict(n, k, inventory.Quote{GPUsPerNode: c.quoted}, c.facts)
		if v.ID != "KUBE-002" || v.Node != "gpu-01" || v.Status != c.want {
			t.Errorf("%s: %s %s %s | %s", c.name, v.ID, v.Status, v.Measured, v.Detail)
			continue
		}
		for _, d := range c.detail {
			if !strings.Contains(v.Detail, d) {
				t.Errorf("%s: detail %q lacks %q", c.name, v.Detail, d)
			}
		}
		if want := "nvidia.com/gpu: " + itoa(c.alloc) + " allocatable of " + itoa(c.capa); v.Measured != want {
			t.Errorf("%s: measured %q, want %q", c.name, v.Measured, want)
		}
	}
	none := kubeGPUVerdict(record.KubeNode{Name: "gpu-02", Allocatable: 8, Capacity: 8}, k, inventory.Quote{GPUsPerNode: 8}, nil)
	if !strings.Contains(none.Detail, "no device plugin pod seen on it") {
		t.Errorf("no plugin: %s", none.Detail)
	}
	unread := *k
	unread.SoftwareError = "pods is forbidden: User \"buyer\" cannot list resource \"pods\" at the cluster scope"
	if v := kubeGPUVerdict(record.KubeNode{Name: "gpu-02", Allocatable: 8, Capacity: 8}, &unread, inventory.Quote{GPUsPerNode: 8}, nil); !strings.Contains(v.Detail, "its device plugin not read") {
		t.Errorf("pods not listed: %s", v.Detail)
	}
	gone := kubeGPUVerdict(record.KubeNode{Name: "gpu-03", APIName: "gpu-03.pool", Missing: true}, k, inventory.Quote{GPUsPerNode: 8}, nil)
	if gone.Status != record.Skip || gone.Incomplete == "" {
		t.Errorf("a node the API does not list: %+v", gone)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// KUBE-001 fails a node not Ready, cordoned or under pressure, naming
// each; a fit node passes with its taints and versions said; a node the
// API does not list is not judged (the inventory may have misnamed it).
func TestKubeReadyVerdict(t *testing.T) {
	fit := record.KubeNode{Name: "gpu-01", Ready: true, Taints: []string{"nvidia.com/gpu=present:NoSchedule"}, Kubelet: "v1.31.4", Runtime: "containerd://1.6.20"}
	if v := kubeReadyVerdict(fit); v.Status != record.Pass || !strings.Contains(v.Detail, "taints nvidia.com/gpu=present:NoSchedule") || !strings.Contains(v.Detail, "kubelet v1.31.4, containerd://1.6.20") {
		t.Errorf("fit: %s %s", v.Status, v.Detail)
	}
	for _, c := range []struct {
		n    record.KubeNode
		want string
	}{
		{record.KubeNode{Name: "a", NotReady: "Ready False: KubeletNotReady PLEG is not healthy"}, "not Ready (Ready False: KubeletNotReady PLEG is not healthy)"},
		{record.KubeNode{Name: "b", Ready: true, Unschedulable: true}, "unschedulable: the scheduler places no new pod on it"},
		{record.KubeNode{Name: "c", Ready: true, Pressure: []string{"DiskPressure: KubeletHasDiskPressure"}}, "DiskPressure: KubeletHasDiskPressure"},
	} {
		if v := kubeReadyVerdict(c.n); v.Status != record.Fail || !strings.Contains(v.Detail, c.want) {
			t.Errorf("%s: %s %s, want FAIL with %q", c.n.Name, v.Status, v.Detail, c.want)
		}
	}
	if v := kubeReadyVerdict(record.KubeNode{Name: "d", APIName: "d.pool", Missing: true}); v.Status != record.Skip || v.Incomplete == "" ||
		!strings.Contains(v.Detail, "the API lists no node d.pool") {
		t.Errorf("not listed: %+v", v)
	}
	long := apiList(append(make([]string, 20), strings.Repeat("é", 100)))
	if len(long) != apiItems+1 || long[apiItems] != "and 5 more" {
		t.Errorf("apiList of 21: %d items, last %q", len(long), long[len(long)-1])
	}
	if c := clipText(strings.Repeat("é", 100), apiText); !utf8.ValidString(c) || len(c) > apiText+len("…") {
		t.Errorf("clipText cut a character: %q", c)
	}
}

// A window whose Kubernetes nodes could not be read (here: this binary
// has no Kubernetes transport) records why, and KUBE-001/002 are NOT
// MEASURED on each of them, never PASS or FAIL; KUBE-003 follows the
// pods' deletion as run.json records it.
func TestJudgeKube(t *testing.T) {
	inv := &inventory.Inventory{Transport: inventory.TransportKubernetes, Quote: inventory.Quote{GPUsPerNode: 8},
		Kubernetes: inventory.Kubernetes{Kubeconfig: "/k/config", Context: "lab", Namespace: "gpu"},
		Nodes:      []inventory.Node{{Name: "gpu-01", Address: "gpu-01.pool"}, {Name: "gpu-02", Address: "gpu-02.pool"}}}
	w, err := newWindow(inv, "/runs/20261206T190000Z-k-0001", Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.rec = &record.Run{ID: "20261206T190000Z-k-0001"}
	w.readKube(t.Context())
	k := w.rec.Kubernetes
	if k == nil || !strings.Contains(k.ReadError, "no Kubernetes transport") || k.GPUResource != "nvidia.com/gpu" || k.Label != KubeRunLabel+"=20261206T190000Z-k-0001" {
		t.Fatalf("read: %+v", k)
	}
	vs := w.judgeKube()
	if len(vs) != 5 {
		t.Fatalf("%d verdicts: %+v", len(vs), vs)
	}
	for _, v := range vs[:4] {
		if v.Status != record.Skip || v.Incomplete == "" || !strings.Contains(v.Detail, "no Kubernetes transport") {
			t.Errorf("%s %s: %s %s (incomplete %q)", v.ID, v.Node, v.Status, v.Detail, v.Incomplete)
		}
	}
	if v := vs[4]; v.ID != "KUBE-003" || v.Status != record.Skip {
		t.Errorf("before any deletion: %+v", v)
	}
	// A kubeconfig that could not be used made no pod and found none:
	// not measured, not a warning that pods were left.
	w.recordPodsDeleted(nil, &remote.SetupError{Err: errTest("kubernetes: kubeconfig /k/config: no such file")})
	if v := w.judgeKube()[4]; v.Status != record.Skip || v.Measured != "not looked for" || v.Incomplete == "" ||
		!strings.Contains(v.Detail, "no such file") {
		t.Errorf("an unusable kubeconfig: %s %q %q (incomplete %q)", v.Status, v.Measured, v.Detail, v.Incomplete)
	}
	// The same error once a pod was made (a kubeconfig rotated during the
	// window): pods may be left, said with the kubectl line.
	w.rec.Phases = append(w.rec.Phases, record.PhaseResult{Phase: "connect", Index: 0, Node: "gpu-01", Outcome: record.OK})
	w.recordPodsDeleted(nil, &remote.SetupError{Err: errTest("kubernetes: kubeconfig /k/config: no such file")})
	if v := w.judgeKube()[4]; v.Status != record.Warn || !strings.Contains(v.Detail, "delete pods -l") {
		t.Errorf("an unusable kubeconfig after a pod was made: %s %q", v.Status, v.Detail)
	}
	w.recordPodsDeleted(nil, errTest("pods \"gpuaccept-gpu-01\" is forbidden"))
	if v := w.judgeKube()[4]; v.Status != record.Warn || !strings.Contains(v.Detail, "kubectl --kubeconfig /k/config --context lab -n gpu delete pods -l gpuaccept/run=20261206T190000Z-k-0001") {
		t.Errorf("not deleted: %s %s", v.Status, v.Detail)
	}
	w.recordPodsDeleted([]string{"gpuaccept-gpu-01-x", "gpuaccept-gpu-02-y"}, nil)
	if v := w.judgeKube()[4]; v.Status != record.Pass || v.Measured != "2 pod(s) deleted" || k.Deleted.IsZero() || time.Since(k.Deleted) > time.Minute {
		t.Errorf("deleted: %s %s %s", v.Status, v.Measured, v.Detail)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// A resumed window whose selector chose its nodes goes on over the nodes
// it recorded, in their order, after the inventory's own: not over those
// the API would list now. Without a selector the inventory is unchanged.
func TestResumeKeepsTheSelectorsNodes(t *testing.T) {
	inv := &inventory.Inventory{Kubernetes: inventory.Kubernetes{NodeSelector: "pool=a"},
		Nodes: []inventory.Node{{Name: "named", Address: "named.pool-b", Transport: inventory.TransportKubernetes}}}
	recorded := []record.Node{
		{Index: 0, Name: "named", Address: "named.pool-b"},
		{Index: 1, Name: "gpu-02", Address: "gpu-02.pool-a", Labels: map[string]string{"zone": "z1"}},
		{Index: 2, Name: "gpu-01", Address: "gpu-01.pool-a"},
	}
	got := recordedKubeNodes(inv, recorded)
	if len(got.Nodes) != 3 || len(inv.Nodes) != 1 {
		t.Fatalf("nodes %+v (inventory's now %+v)", got.Nodes, inv.Nodes)
	}
	for i, n := range got.Nodes {
		if n.Name != recorded[i].Name || n.Address != recorded[i].Address || n.Transport != inventory.TransportKubernetes {
			t.Errorf("node %d: %+v, want %+v", i, n, recorded[i])
		}
	}
	if got.Nodes[1].Labels["zone"] != "z1" {
		t.Errorf("labels %v", got.Nodes[1].Labels)
	}
	plain := &inventory.Inventory{Nodes: []inventory.Node{{Name: "a", Address: "10.0.0.1"}}}
	if recordedKubeNodes(plain, recorded) != plain {
		t.Error("an inventory without a selector was changed")
	}
}
