package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
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
	w.rec.Kubernetes = w.newKubeRecord(*k)
	rec := w.rec.Kubernetes
	rec.Read = time.Now().UTC()
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
		// A page read before the error is no list of the cluster's.
		sw = remote.KubeGPUSoftware{}
		rec.SoftwareError = clipText(err.Error(), 300)
		w.Progress.Line("kubernetes: the cluster's pods NOT listed, so no device plugin is named: %s", rec.SoftwareError)
	}
	rec.Operator = apiList(sw.Operator)
	for _, n := range w.Nodes {
		if n.Config.Kube == nil {
			continue
		}
		api := n.Config.Kube.Node
		kn, ok := byName[api]
		rn := record.KubeNode{Name: n.Name, APIName: api, Missing: !ok}
		if ok {
			// What the API says of a node is the node's (its kubelet
			// writes its status): bounded like anything a node says.
			rn.Ready, rn.NotReady, rn.Unschedulable = kn.Ready, clipText(kn.NotReady, 200), kn.Unschedulable
			rn.Pressure, rn.Taints = apiList(kn.Pressure), apiList(kn.Taints)
			rn.Allocatable, rn.Capacity = kn.GPUs, kn.GPUCapacity
			rn.Kubelet, rn.Runtime, rn.Kernel, rn.OS = clipText(kn.Kubelet, apiText), clipText(kn.Runtime, apiText),
				clipText(kn.Kernel, apiText), clipText(kn.OS, apiText)
			rn.DevicePlugin = apiList(sw.DevicePlugins[api])
		}
		rec.Nodes = append(rec.Nodes, rn)
	}
}

// apiText and apiItems bound one string the API gives and a list of them.
const (
	apiText  = 120
	apiItems = 16
)

// apiList is l bounded: each item apiText bytes at most, apiItems items
// and a last saying how many more.
func apiList(l []string) []string {
	var out []string
	for i, x := range l {
		if i == apiItems {
			out = append(out, fmt.Sprintf("and %d more", len(l)-apiItems))
			break
		}
		out = append(out, clipText(x, apiText))
	}
	return out
}

// newKubeRecord is run.json's record of the window's cluster before
// anything was read: what finds its pods, and what the pods ask for.
func (w *Window) newKubeRecord(k remote.KubeConfig) *record.KubeCluster {
	kc := k.WithDefaults()
	return &record.KubeCluster{GPUResource: kc.GPUResource, PodGPUs: kc.GPUs, Label: KubeRunLabel + "=" + w.reach.run,
		Delete: kubectlDelete(kc, KubeRunLabel+"="+w.reach.run)}
}

// kubectlDelete is the kubectl line that deletes the window's pods, as
// the window reached the cluster: its kubeconfig, context and namespace.
func kubectlDelete(k remote.KubeConfig, label string) string {
	args := []string{"kubectl"}
	if k.Kubeconfig != "" {
		args = append(args, "--kubeconfig", remote.Quote(k.Kubeconfig))
	}
	if k.Context != "" {
		args = append(args, "--context", remote.Quote(k.Context))
	}
	if k.Namespace != "" {
		args = append(args, "-n", remote.Quote(k.Namespace))
	}
	return strings.Join(append(args, "delete", "pods", "-l", remote.Quote(label)), " ")
}

// recordPodsDeleted keeps the end of the window's pods in run.json.
func (w *Window) recordPodsDeleted(names []string, err error) {
	rec := w.rec.Kubernetes
	if rec == nil {
		k := w.reach.kubePods()
		if k == nil {
			return
		}
		rec = w.newKubeRecord(*k)
		w.rec.Kubernetes = rec
	}
	rec.PodsDeleted = append(rec.PodsDeleted, names...)
	var setup *remote.SetupError
	if errors.As(err, &setup) && !w.podReached() {
		// The kubeconfig that could not be used now made no pod either.
		rec.NotLookedFor = clipText(err.Error(), 300)
		return
	}
	if err != nil {
		rec.DeleteError = clipText(err.Error(), 300)
		return
	}
	rec.DeleteError, rec.Deleted = "", time.Now().UTC()
}

// podReached: some node of transport kubernetes was connected, in a pod
// of the window's.
func (w *Window) podReached() bool {
	for _, n := range w.Nodes {
		if n.Config.Kube == nil {
			continue
		}
		if r, ok := w.Result("connect", n.Index, nil); ok && r.Outcome == record.OK {
			return true
		}
	}
	return false
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
		out = append(out, kubeReadyVerdict(n), kubeGPUVerdict(n, rec, w.Inv.Quote, w.rec.NodeFacts(n.Name)))
	}
	v := record.NewVerdict("KUBE-003", "")
	switch {
	case rec.NotLookedFor != "" && rec.Deleted.IsZero() && rec.DeleteError == "":
		v.Status, v.Measured = record.Skip, "not looked for"
		v.Detail = clipText("the kubeconfig could not be used, to make pods or to look for them: "+rec.NotLookedFor+"; to be sure: "+rec.Delete, 400)
		v.Incomplete = "the window's pods not looked for"
	case rec.DeleteError != "":
		v.Status, v.Measured = record.Warn, "pods left"
		v.Detail = clipText(fmt.Sprintf("NOT all deleted (%s): %s", rec.DeleteError, rec.Delete), 400)
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
		// A name in kubernetes.nodes the cluster does not know may be the
		// inventory's slip as well as a node gone: CONN-001 fails it, this
		// is not judged.
		v.Status, v.Measured, v.Detail = record.Skip, "not listed", "the API lists no node "+n.APIName
		v.Incomplete = "Kubernetes node " + n.APIName + " not listed"
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
// (allocatable) held to what its device plugin found (capacity) and to
// the quote's GPUs per node, and the pod's GPUs as nvidia-smi in it saw
// them (preflight) held to what the pod asked for: inside a pod nvidia-smi
// sees the GPUs the device plugin gave it, not the node's.
func kubeGPUVerdict(n record.KubeNode, k *record.KubeCluster, q inventory.Quote, facts json.RawMessage) record.Verdict {
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
	seen, quoted, asked := int64(f.GPUCount), int64(q.GPUsPerNode), int64(k.PodGPUs)
	v.Measured = fmt.Sprintf("%s: %d allocatable of %d", k.GPUResource, n.Allocatable, n.Capacity)
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
	if seen > 0 && asked > 0 && seen != asked {
		wrong = append(wrong, fmt.Sprintf("the pod asked for %d and nvidia-smi in it saw %d", asked, seen))
	}
	plugin := "no device plugin pod seen on it"
	switch {
	case k.SoftwareError != "":
		plugin = "its device plugin not read (the cluster's pods could not be listed)"
	case len(n.DevicePlugin) > 0:
		plugin = "device plugin " + strings.Join(n.DevicePlugin, ", ")
	}
	smi := fmt.Sprintf("the pod's %d as nvidia-smi saw them", seen)
	if seen == 0 {
		smi = "nvidia-smi's count in the pod not measured (preflight)"
	}
	switch {
	case len(wrong) > 0:
		v.Status = record.Fail
		v.Detail = fmt.Sprintf("pods can ask for %d; %s; %s", n.Allocatable, strings.Join(wrong, ", "), plugin)
	case quoted == 0:
		// What the node offers pods is held to nothing: no PASS.
		v.Status, v.Detail = record.Skip, "nothing to hold it to: no quote.gpus_per_node; "+smi+"; "+plugin
	case seen == 0:
		// Half of it held: no PASS over what was not measured.
		v.Status, v.Detail = record.Skip, "as quoted, all allocatable; "+smi+"; "+plugin
		v.Incomplete = "nvidia-smi's count of the GPUs in the pod not measured"
	default:
		v.Status, v.Detail = record.Pass, "as quoted, all allocatable; "+smi+"; "+plugin
	}
	v.Detail = clipText(v.Detail, 400)
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
