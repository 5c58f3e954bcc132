package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// What a managed Kubernetes cluster says of the window's nodes: read by
// the coordinator from the API before the first phase (again when the
// window resumes), since the buyer rents what the scheduler hands out, and
// a node the device plugin offers fewer GPUs of than it has is billed for
// GPUs no pod can ask for.

// kubeReadBudget bounds the reading of the nodes and the cluster's pods.
const kubeReadBudget = time.Minute

// readKube records the API's view of the window's Kubernetes nodes in
// run.json (record.KubeCluster); nothing without such a node.
func (w *Window) readKube(ctx context.Context) {
	k := w.reach.kubePods()
	if k == nil {
		return
	}
	kc := k.WithDefaults()
	rec := &record.KubeCluster{Read: time.Now().UTC(), GPUResource: kc.GPUResource, Label: KubeRunLabel + "=" + w.reach.run}
	if old := w.rec.Kubernetes; old != nil {
		rec.PodsDeleted, rec.DeleteError, rec.Deleted = old.PodsDeleted, old.DeleteError, old.Deleted
	}
	w.rec.Kubernetes = rec
	ctx, cancel := context.WithTimeout(ctx, kubeReadBudget)
	defer cancel()
	listed, err := remote.ListKubeNodes(ctx, *k, nil)
	if err != nil {
		rec.ReadError = clipText(err.Error(), 300)
		w.Progress.Line("kubernetes: the API's nodes NOT read: %s", rec.ReadError)
		return
	}
	byName := map[string]remote.KubeNode{}
	for _, n := range listed {
		byName[n.Name] = n
	}
	sw, err := remote.ReadKubeGPUSoftware(ctx, *k)
	if err != nil {
		rec.SoftwareError = clipText(err.Error(), 300)
	}
	rec.Operator = sw.Operator
	for _, n := range w.Nodes {
		if n.Config.Kube == nil {
			continue
		}
		api := n.Config.Kube.Node
		kn, ok := byName[api]
		rn := record.KubeNode{Name: n.Name, APIName: api, Missing: !ok}
		if ok {
			rn.Ready, rn.NotReady, rn.Unschedulable = kn.Ready, clipText(kn.NotReady, 200), kn.Unschedulable
			rn.Pressure, rn.Taints = kn.Pressure, kn.Taints
			rn.Allocatable, rn.Capacity = kn.GPUs, kn.GPUCapacity
			rn.Kubelet, rn.Runtime, rn.Kernel, rn.OS = kn.Kubelet, kn.Runtime, kn.Kernel, kn.OS
			rn.DevicePlugin = sw.DevicePlugins[api]
		}
		rec.Nodes = append(rec.Nodes, rn)
	}
}

// recordPodsDeleted keeps the end of the window's pods in run.json.
func (w *Window) recordPodsDeleted(names []string, err error) {
	rec := w.rec.Kubernetes
	if rec == nil {
		rec = &record.KubeCluster{Label: KubeRunLabel + "=" + w.reach.run}
		if k := w.reach.kubePods(); k != nil {
			rec.GPUResource = k.WithDefaults().GPUResource
		}
		w.rec.Kubernetes = rec
	}
	rec.PodsDeleted = append(rec.PodsDeleted, names...)
	if err != nil {
		rec.DeleteError = clipText(err.Error(), 300)
		return
	}
	rec.DeleteError, rec.Deleted = "", time.Now().UTC()
}

// judgeKube is, for each Kubernetes node, KUBE-001 (ready, schedulable,
// under no pressure) and KUBE-002 (the GPUs pods can ask for as many as
// the device plugin found, as quoted and as nvidia-smi saw), and KUBE-003
// for the cluster: the window's pods gone.
func (w *Window) judgeKube() []record.Verdict {
	rec := w.rec.Kubernetes
	if rec == nil {
		return nil
	}
	var out []record.Verdict
	if rec.ReadError != "" {
		for _, n := range w.Nodes {
			if n.Config.Kube == nil {
				continue
			}
			for _, id := range []string{"KUBE-001", "KUBE-002"} {
				v := record.NewVerdict(id, n.Name)
				v.Status, v.Measured, v.Detail = record.Skip, "not read", "the API's nodes could not be read: "+rec.ReadError
				v.Incomplete = "Kubernetes nodes not read: " + clipText(rec.ReadError, 200)
				out = append(out, v)
			}
		}
	}
	for _, n := range rec.Nodes {
		out = append(out, kubeReadyVerdict(n), kubeGPUVerdict(n, rec.GPUResource, w.Inv.Quote, w.rec.NodeFacts(n.Name)))
	}
	v := record.NewVerdict("KUBE-003", "")
	switch {
	case rec.DeleteError != "":
		v.Status, v.Measured = record.Warn, "pods left"
		v.Detail = clipText(fmt.Sprintf("NOT all deleted (%s): kubectl delete pods -l %s", rec.DeleteError, rec.Label), 300)
	case rec.Deleted.IsZero():
		v.Status, v.Measured, v.Detail = record.Skip, "not deleted yet", "the window did not reach its end"
	default:
		v.Status, v.Measured = record.Pass, fmt.Sprintf("%d pod(s) deleted", len(rec.PodsDeleted))
		v.Detail = "the API lists none with " + rec.Label
	}
	return append(out, v)
}

// kubeReadyVerdict is KUBE-001 for n: a node not Ready, cordoned or under
// pressure is one the cluster's own scheduler would not (or should not)
// give work to.
func kubeReadyVerdict(n record.KubeNode) record.Verdict {
	v := record.NewVerdict("KUBE-001", n.Name)
	if n.Missing {
		v.Status, v.Measured, v.Detail = record.Fail, "not listed", "the API lists no node "+n.APIName
		return v
	}
	var short, wrong []string
	if !n.Ready {
		short, wrong = append(short, "NotReady"), append(wrong, "not Ready ("+n.NotReady+")")
	}
	if n.Unschedulable {
		short, wrong = append(short, "cordoned"), append(wrong, "unschedulable: the scheduler places no new pod on it")
	}
	for _, p := range n.Pressure {
		kind, _, _ := strings.Cut(p, ":")
		short, wrong = append(short, kind), append(wrong, p)
	}
	v.Measured = "Ready"
	if len(wrong) > 0 {
		v.Measured = clipText(strings.Join(short, ", "), 100)
		v.Status, v.Detail = record.Fail, clipText(strings.Join(wrong, "; "), 300)
		return v
	}
	v.Status, v.Detail = record.Pass, "Ready and schedulable, no pressure"
	if len(n.Taints) > 0 {
		v.Detail += "; taints " + strings.Join(n.Taints, ", ")
	}
	if n.Kubelet != "" {
		v.Detail += "; kubelet " + n.Kubelet + ", " + n.Runtime
	}
	v.Detail = clipText(v.Detail, 300)
	return v
}

// kubeGPUVerdict is KUBE-002 for n: the GPU resource it offers pods
// (allocatable) held to what its device plugin found (capacity), the
// quote's GPUs per node and nvidia-smi's count from preflight.
func kubeGPUVerdict(n record.KubeNode, resource string, q inventory.Quote, facts json.RawMessage) record.Verdict {
	v := record.NewVerdict("KUBE-002", n.Name)
	if n.Missing {
		v.Status, v.Measured, v.Detail = record.Skip, "not listed", "the API lists no node "+n.APIName
		v.Incomplete = "Kubernetes node " + n.APIName + " not listed"
		return v
	}
	var f struct {
		GPUCount int `json:"gpu_count"`
	}
	if len(facts) > 0 {
		_ = json.Unmarshal(facts, &f)
	}
	seen, quoted := int64(f.GPUCount), int64(q.GPUsPerNode)
	v.Measured = fmt.Sprintf("%s: %d allocatable of %d", resource, n.Allocatable, n.Capacity)
	if quoted > 0 {
		v.Quoted = fmt.Sprint(quoted)
	}
	var wrong []string
	if n.Allocatable < n.Capacity {
		wrong = append(wrong, fmt.Sprintf("%d of the %d its device plugin found are not allocatable (unhealthy or held back)", n.Capacity-n.Allocatable, n.Capacity))
	}
	if quoted > 0 && n.Allocatable != quoted {
		wrong = append(wrong, fmt.Sprintf("the quote says %d", quoted))
	}
	if seen > 0 && n.Allocatable != seen {
		wrong = append(wrong, fmt.Sprintf("nvidia-smi saw %d", seen))
	}
	plugin := "no device plugin pod seen on it"
	if len(n.DevicePlugin) > 0 {
		plugin = "device plugin " + strings.Join(n.DevicePlugin, ", ")
	}
	switch {
	case len(wrong) > 0:
		v.Status = record.Fail
		v.Detail = fmt.Sprintf("pods can ask for %d; %s; %s", n.Allocatable, strings.Join(wrong, ", "), plugin)
	case quoted == 0 && seen == 0:
		v.Status, v.Detail = record.Skip, "nothing to hold it to: no quote.gpus_per_node, and nvidia-smi's count not measured (preflight); "+plugin
	case seen == 0:
		v.Status, v.Detail = record.Pass, "as quoted (nvidia-smi's count not measured); "+plugin
	default:
		v.Status, v.Detail = record.Pass, "as quoted and as nvidia-smi saw; "+plugin
	}
	v.Detail = clipText(v.Detail, 300)
	return v
}

// recordedKubeNodes is inv, whose nodes kubernetes.node_selector adds, with
// the nodes the window recorded when it started in their place: a resumed
// window goes on over its own nodes, in their order (run.json's indexes),
// not over those the API lists now; a node gone from the cluster since is
// then a node the window cannot reach, said as such.
func recordedKubeNodes(inv *inventory.Inventory, recorded []record.Node) *inventory.Inventory {
	if inv.Kubernetes.NodeSelector == "" {
		return inv
	}
	out := *inv
	out.Nodes = slices.Clone(inv.Nodes)
	named := map[string]bool{}
	for _, n := range inv.Nodes {
		named[n.Name] = true
	}
	for _, rn := range recorded {
		if !named[rn.Name] {
			out.Nodes = append(out.Nodes, inventory.Node{Name: rn.Name, Address: rn.Address, Transport: inventory.TransportKubernetes, Labels: rn.Labels})
		}
	}
	return &out
}
