// Package kube is remote's Kubernetes transport: a node of a managed
// Kubernetes cluster reached through its API with client-go, one pod of
// the window's on it, commands through the API's exec under the same guard
// as over SSH. It registers itself with package remote (RegisterKube) from
// init; a binary reaches Kubernetes nodes by importing it, and only the
// gpuaccept command and the Kubernetes tests do, since client-go more than
// doubles the size and build time of every binary that links it.
package kube

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"

	"gpuaccept/remote"
)

// Labels of every pod the transport makes, besides the window's own:
// ManagedBy is app.kubernetes.io/managed-by's value, NodeLabel names the
// node a pod is for.
const (
	ManagedBy = "gpuaccept"
	NodeLabel = "gpuaccept/node"
	container = "gpuaccept"
)

func init() { remote.RegisterKube(transport{}) }

// transport is this package as remote's Kubernetes transport.
type transport struct{}

func (transport) Dial(ctx context.Context, name string, k remote.KubeConfig) (remote.Executor, error) {
	return dial(ctx, name, k)
}

func (transport) DeletePods(ctx context.Context, k remote.KubeConfig) ([]string, error) {
	return DeletePods(ctx, k)
}

func (transport) GPUSoftware(ctx context.Context, k remote.KubeConfig) (remote.KubeGPUSoftware, error) {
	return GPUSoftware(ctx, k)
}

func (transport) Nodes(ctx context.Context, k remote.KubeConfig, selector map[string]string) ([]remote.KubeNode, error) {
	return Nodes(ctx, k, selector)
}

func (transport) Access(ctx context.Context, k remote.KubeConfig) ([]remote.KubeAccess, error) {
	_, cs, ns, err := kubeClient(k, "")
	if err != nil {
		return nil, err
	}
	return Access(ctx, cs, ns)
}

// Nodes is remote.ListKubeNodes: the cluster's nodes that carry every
// label of selector, sorted by name, with k's GPU resource counted.
func Nodes(ctx context.Context, k remote.KubeConfig, selector map[string]string) ([]remote.KubeNode, error) {
	k = k.WithDefaults()
	sel, err := labels.ValidatedSelectorFromSet(selector)
	if err != nil {
		return nil, &remote.SetupError{Err: fmt.Errorf("kubernetes: node selector: %w", err)}
	}
	_, cs, _, err := kubeClient(k, "")
	if err != nil {
		return nil, err
	}
	var out []remote.KubeNode
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: 500}
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: list nodes (selector %q): %w", sel.String(), err)
		}
		for _, n := range list.Items {
			out = append(out, kubeNode(&n, corev1.ResourceName(k.GPUResource)))
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	slices.SortFunc(out, func(a, b remote.KubeNode) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// troubleWhenTrue are the kubelet's own node conditions that say trouble
// when True. Others' conditions are not all of that kind: a node
// monitoring agent's KernelReady or AcceleratedHardwareReady (EKS) is True
// on a sound node; they are not judged.
var troubleWhenTrue = map[corev1.NodeConditionType]bool{
	corev1.NodeMemoryPressure: true, corev1.NodeDiskPressure: true, corev1.NodePIDPressure: true, corev1.NodeNetworkUnavailable: true,
}

func kubeNode(n *corev1.Node, gpu corev1.ResourceName) remote.KubeNode {
	kn := remote.KubeNode{Name: n.Name, Labels: maps.Clone(n.Labels), Unschedulable: n.Spec.Unschedulable}
	if q, ok := n.Status.Allocatable[gpu]; ok {
		kn.GPUs = q.Value()
	}
	if q, ok := n.Status.Capacity[gpu]; ok {
		kn.GPUCapacity = q.Value()
	}
	kn.NotReady = "no Ready condition"
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == corev1.NodeReady:
			kn.Ready = c.Status == corev1.ConditionTrue
			kn.NotReady = ""
			if !kn.Ready {
				kn.NotReady = strings.TrimSpace(fmt.Sprintf("Ready %s: %s %s", c.Status, c.Reason, c.Message))
			}
		case troubleWhenTrue[c.Type] && c.Status == corev1.ConditionTrue:
			kn.Pressure = append(kn.Pressure, strings.TrimSpace(string(c.Type)+": "+c.Reason))
		}
	}
	i := n.Status.NodeInfo
	kn.Kubelet, kn.Runtime, kn.Kernel, kn.OS = i.KubeletVersion, i.ContainerRuntimeVersion, i.KernelVersion, i.OSImage
	for _, t := range n.Spec.Taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		kn.Taints = append(kn.Taints, s+":"+string(t.Effect))
	}
	return kn
}

// GPUSoftware is remote.ReadKubeGPUSoftware: every pod of the cluster
// (all namespaces, read in pages) whose container image is a device
// plugin's (its name ends in device-plugin, as NVIDIA's, GKE's and AMD's
// do) or the NVIDIA GPU Operator's, by image and, when it is not running,
// its phase.
func GPUSoftware(ctx context.Context, k remote.KubeConfig) (remote.KubeGPUSoftware, error) {
	k = k.WithDefaults()
	out := remote.KubeGPUSoftware{DevicePlugins: map[string][]string{}}
	_, cs, _, err := kubeClient(k, "")
	if err != nil {
		return out, err
	}
	opts := metav1.ListOptions{Limit: 500}
	for pages := 0; ; pages++ {
		if pages == 200 {
			return out, fmt.Errorf("kubernetes: list pods: more than %d pods", 200*opts.Limit)
		}
		list, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return out, fmt.Errorf("kubernetes: list pods in all namespaces (for the device plugin's): %w", err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if !daemonSetPod(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				// Any tenant may start a pod named like a plugin on a
				// node; the cluster's plugins run as DaemonSets.
				continue
			}
			for _, c := range p.Spec.Containers {
				what := c.Image
				if p.Status.Phase != corev1.PodRunning {
					what += " (" + string(p.Status.Phase) + ")"
				}
				switch imageKind(c.Image) {
				case "plugin":
					if p.Spec.NodeName != "" && !slices.Contains(out.DevicePlugins[p.Spec.NodeName], what) {
						out.DevicePlugins[p.Spec.NodeName] = append(out.DevicePlugins[p.Spec.NodeName], what)
					}
				case "operator":
					if !slices.Contains(out.Operator, what) {
						out.Operator = append(out.Operator, what)
					}
				}
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	slices.Sort(out.Operator)
	return out, nil
}

// daemonSetPod: p belongs to a DaemonSet, as every device plugin and
// operator deployment runs it.
func daemonSetPod(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" || o.Kind == "ReplicaSet" && strings.Contains(o.Name, "gpu-operator") {
			return true
		}
	}
	return false
}

// imageKind is "plugin" for a GPU device plugin's image, "operator" for
// the GPU Operator's, "" for any other (the network operator's SR-IOV and
// RDMA device plugins included).
func imageKind(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	name = name[strings.LastIndex(name, "/")+1:]
	switch {
	case strings.HasSuffix(name, "device-plugin") && !strings.Contains(name, "sriov") && !strings.Contains(name, "rdma") &&
		!strings.Contains(name, "network"):
		return "plugin"
	case name == "gpu-operator":
		return "operator"
	}
	return ""
}

// quietKlog keeps client-go's own log lines (a stream copy that failed as
// its command was cancelled) off the coordinator's stderr: every error
// that matters comes back through the executor.
var quietKlog sync.Once

// kubeClient is what k's kubeconfig gives: the API's address and
// credentials, a clientset, and the namespace.
func kubeClient(k remote.KubeConfig, name string) (*rest.Config, kubernetes.Interface, string, error) {
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.Kubeconfig != "" {
		rules.ExplicitPath = k.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.Context})
	// name: the node the client is for; "" for the cluster as a whole.
	who := "kubernetes"
	if name != "" {
		who = name + ": kubernetes"
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", &remote.SetupError{Err: fmt.Errorf("%s: kubeconfig: %w", who, err)}
	}
	ns := k.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = metav1.NamespaceDefault
		}
	}
	rc.QPS, rc.Burst = 50, 100 // execs and pod checks of many nodes at once
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, "", &remote.SetupError{Err: fmt.Errorf("%s: %w", who, err)}
	}
	return rc, cs, ns, nil
}

// pullPolicies are the imagePullPolicy values Kubernetes knows.
var pullPolicies = []string{string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever)}

func dial(ctx context.Context, name string, k remote.KubeConfig) (remote.Executor, error) {
	k = k.WithDefaults()
	switch {
	case k.Node == "":
		return nil, &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: no node name", name)}
	case k.Image == "":
		return nil, &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: no image for the pod", name)}
	case len(k.Labels) == 0:
		return nil, &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: no labels: the window's pods are found and removed by them", name)}
	case k.GPUs < 0:
		return nil, &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: %d GPUs", name, k.GPUs)}
	case !slices.Contains(pullPolicies, k.PullPolicy):
		return nil, &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: image pull policy %q: not one of %s", name, k.PullPolicy, strings.Join(pullPolicies, ", "))}
	}
	if errs := validLabels(k.Labels); errs != "" {
		return nil, &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: %s", name, errs)}
	}
	rc, cs, ns, err := kubeClient(k, name)
	if err != nil {
		return nil, err
	}
	e := &Node{name: name, cfg: k, rc: rc, cs: cs, ns: ns}
	startCtx, cancel := context.WithTimeout(ctx, k.StartTimeout)
	defer cancel()
	if err := e.ensurePod(startCtx); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			var te *remote.TimeoutError
			if !errors.As(err, &te) {
				err = &remote.TimeoutError{Node: name, Step: "pod running", After: k.StartTimeout}
			}
		}
		return nil, err
	}
	e.closing, e.closeAll = context.WithCancel(context.Background())
	e.lostCtx, e.lostAll = context.WithCancel(context.Background())
	e.watching.Add(1)
	go e.watch()
	return e, nil
}

// validLabels says what is wrong with the labels, "" when nothing is.
func validLabels(l map[string]string) string {
	for k, v := range l {
		if _, err := labels.Parse(k + "=" + v); err != nil || k == "" {
			return fmt.Sprintf("label %q=%q: not a Kubernetes label", k, v)
		}
	}
	return ""
}

// Node is a node reached through the Kubernetes API: the window's pod on
// it, and commands through the API's exec. A command is the same guard
// as an SSH node's (guard.sh), run by bash in the pod with the
// coordinator's control stream (heartbeats and the command's stdin) as the
// exec's stdin: a cancelled context, Close, or a stream that breaks or
// falls silent ends the command's whole process group in the pod. The
// coordinator asks the API about the pod every KeepaliveInterval: a pod
// deleted, evicted or ended, or an API that does not answer
// KeepaliveMisses times, is a lost node (*remote.ConnectionLostError, naming the
// node, saying which).
type Node struct {
	name string
	cfg  remote.KubeConfig
	rc   *rest.Config
	cs   kubernetes.Interface
	ns   string
	pod  string
	uid  string
	// ip is the pod's address once it runs: with the host network, its
	// node's own.
	ip string

	closing  context.Context
	closeAll context.CancelFunc
	lostCtx  context.Context // done once the node is lost: running commands end
	lostAll  context.CancelFunc
	watching sync.WaitGroup
	running  sync.WaitGroup
	mu       sync.Mutex
	closed   bool
	lost     *remote.ConnectionLostError
}

var (
	_ remote.Executor     = (*Node)(nil)
	_ remote.PodAddresser = (*Node)(nil)
	_ remote.PodImager    = (*Node)(nil)
	_ remote.PodDeleter   = (*Node)(nil)
)

// Name is the node's name.
func (e *Node) Name() string { return e.name }

// Addr is the pod the node is reached through: kubernetes:NAMESPACE/POD.
func (e *Node) Addr() string { return "kubernetes:" + e.ns + "/" + e.pod }

// PodIP is the pod's address as the API gave it when the pod was found
// running: on the host network, the node's own; "" when none was given.
func (e *Node) PodIP() string { return e.ip }

// Pod is the window's pod on the node: its namespace and name.
func (e *Node) Pod() (namespace, name string) { return e.ns, e.pod }

// Lost is true once the pod went away (deleted, evicted, ended) or the API
// stopped answering.
func (e *Node) Lost() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lost != nil
}

// Close ends every command still running (each guard hears its stream
// end) and waits until they have; later calls fail. The pod stays: the
// window deletes it at teardown (DeletePod).
func (e *Node) Close() error {
	e.mu.Lock()
	first := !e.closed
	e.closed = true
	e.mu.Unlock()
	if first {
		e.closeAll()
		e.running.Wait()
		e.watching.Wait()
	}
	return nil
}

func (e *Node) begin(what string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.lost != nil:
		l := *e.lost
		return &l
	case e.closed:
		return &remote.ConnectionLostError{Node: e.name, Reason: what + ": closed by gpuaccept", Err: net.ErrClosed}
	}
	e.running.Add(1)
	return nil
}

func (e *Node) markLost(reason string, err error) error {
	e.mu.Lock()
	if e.lost == nil {
		e.lost = &remote.ConnectionLostError{Node: e.name, Reason: reason, Err: err}
		e.lostAll()
	}
	l := *e.lost
	e.mu.Unlock()
	return &l
}

func (e *Node) lostErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lost == nil {
		return nil
	}
	l := *e.lost
	return &l
}

// podGone says why the pod can no longer run commands; "" while it can.
func podGone(p *corev1.Pod, uid string) string {
	switch {
	case uid != "" && string(p.UID) != uid:
		return "pod " + p.Name + " was deleted and another of the same name made"
	case p.DeletionTimestamp != nil:
		return "pod " + p.Name + " is being deleted"
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		why := "pod " + p.Name + " ended (" + string(p.Status.Phase)
		if p.Status.Reason != "" {
			why += ": " + p.Status.Reason // Evicted, DeadlineExceeded
		}
		if p.Status.Message != "" {
			why += ": " + remote.Shorten(p.Status.Message, 200)
		}
		return why + ")"
	}
	return ""
}

// check asks the API about the pod once: the reason it is gone ("" if it
// is not), or the API's error.
func (e *Node) check(ctx context.Context) (gone string, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.KeepaliveInterval+2*time.Second)
	defer cancel()
	p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, e.pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "pod " + e.pod + " was deleted", nil
	case err != nil:
		return "", err
	}
	return podGone(p, e.uid), nil
}

// PodImage implements remote.PodImager: the window's container in the pod
// as the API's status says it.
func (e *Node) PodImage(ctx context.Context) (remote.PodImage, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, e.pod, metav1.GetOptions{})
	if err != nil {
		return remote.PodImage{}, fmt.Errorf("%s: kubernetes: pod %s: %w", e.name, e.pod, err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != container {
			continue
		}
		pi := remote.PodImage{Image: c.Image, ImageID: c.ImageID, Created: p.CreationTimestamp.Time, Restarts: int(c.RestartCount)}
		if r := c.State.Running; r != nil {
			pi.Started = r.StartedAt.Time
		}
		return pi, nil
	}
	return remote.PodImage{}, fmt.Errorf("%s: kubernetes: pod %s has no status of its container %s", e.name, e.pod, container)
}

// watch asks about the pod every KeepaliveInterval until Close: the node
// is lost when the pod is gone or the API misses KeepaliveMisses answers
// in a row.
func (e *Node) watch() {
	defer e.watching.Done()
	t := time.NewTicker(e.cfg.KeepaliveInterval)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-e.closing.Done():
			return
		case <-e.lostCtx.Done():
			return
		case <-t.C:
		}
		gone, err := e.check(e.closing)
		switch {
		case e.closing.Err() != nil:
			return
		case gone != "":
			e.markLost(gone, nil)
			return
		case err != nil:
			misses++
			if misses >= e.cfg.KeepaliveMisses {
				e.markLost(fmt.Sprintf("the Kubernetes API did not answer %d times in a row", misses), err)
				return
			}
		default:
			misses = 0
		}
	}
}

// selector finds the window's pods: its labels and the transport's own.
func selector(k remote.KubeConfig, withNode bool) string {
	l := maps.Clone(k.Labels)
	l["app.kubernetes.io/managed-by"] = ManagedBy
	if withNode {
		l[NodeLabel] = nodeLabel(k.Node)
	}
	return labels.SelectorFromSet(l).String()
}

// nodeLabel is a node's name as a label value (63 characters at most):
// the name itself, or its start and a hash when longer.
func nodeLabel(node string) string {
	if len(node) <= 63 && !strings.ContainsAny(node, ":/") {
		return node
	}
	s := sha256.Sum256([]byte(node))
	return strings.Trim(node[:min(len(node), 50)], ".-_") + "-" + hex.EncodeToString(s[:6])
}

// ensurePod finds the window's pod on the node (a resumed window) or makes
// it, and waits until it runs.
func (e *Node) ensurePod(ctx context.Context) error {
	pods := e.cs.CoreV1().Pods(e.ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector(e.cfg, true)})
	if err != nil {
		return e.apiError(ctx, "list the window's pods", err)
	}
	for _, p := range list.Items {
		if podGone(&p, "") == "" && (p.Spec.NodeName == "" || p.Spec.NodeName == e.cfg.Node) {
			e.pod, e.uid = p.Name, string(p.UID)
			return e.waitRunning(ctx)
		}
		// Ended (its deadline, an eviction): the lease is over, a new one
		// is made. Gone already is fine.
		if p.DeletionTimestamp == nil {
			if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return e.apiError(ctx, "delete the ended pod "+p.Name, err)
			}
		}
	}
	// A node the cluster does not have would leave the pod unscheduled
	// until StartTimeout: said at once where the credential may read
	// nodes (where it may not, the scheduler's reason says it later).
	if _, err := e.cs.CoreV1().Nodes().Get(ctx, e.cfg.Node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: kubernetes: the cluster has no node %s", e.name, e.cfg.Node)
	}
	p, err := pods.Create(ctx, podSpec(e.cfg), metav1.CreateOptions{})
	if err != nil {
		return e.apiError(ctx, "create the pod", err)
	}
	e.pod, e.uid = p.Name, string(p.UID)
	return e.waitRunning(ctx)
}

// podSpec is the window's pod for the node: the node's host network and
// IPC, its GPUs requested, a deadline, and a PID 1 that sleeps until it is
// told to stop.
func podSpec(k remote.KubeConfig) *corev1.Pod {
	l := maps.Clone(k.Labels)
	l["app.kubernetes.io/managed-by"] = ManagedBy
	l[NodeLabel] = nodeLabel(k.Node)
	deadline := int64(k.ActiveDeadline / time.Second)
	grace := int64(5)
	no := false
	c := corev1.Container{
		Name:            container,
		Image:           k.Image,
		ImagePullPolicy: corev1.PullPolicy(k.PullPolicy),
		// PID 1 ignores TERM unless it handles it: this one ends at once.
		Command: []string{"sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"},
	}
	if k.GPUs > 0 {
		q := *resource.NewQuantity(int64(k.GPUs), resource.DecimalSI)
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceName(k.GPUResource): q}
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceName(k.GPUResource): q}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "gpuaccept-" + podNamePart(k.Node) + "-", Labels: l},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostNetwork:                   true,
			HostIPC:                       true,
			DNSPolicy:                     corev1.DNSClusterFirstWithHostNet,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			ServiceAccountName:            k.ServiceAccount,
			AutomountServiceAccountToken:  &no,
			Tolerations:                   tolerations(k.Tolerations),
			// Bound to the node through the scheduler, which checks its
			// taints and GPUs and says why when they do not fit.
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{k.Node},
					}}}},
				},
			}},
		},
	}
	for i, v := range k.Volumes {
		name := fmt.Sprintf("gpuaccept-volume-%d", i)
		vol := corev1.Volume{Name: name}
		if v.Claim != "" {
			vol.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.Claim, ReadOnly: v.ReadOnly}
		} else {
			// Directory: a shared mount missing on the node stops the
			// pod, where the default would make an empty directory of
			// the node's own disk in its place.
			dir := corev1.HostPathDirectory
			vol.HostPath = &corev1.HostPathVolumeSource{Path: v.HostPath, Type: &dir}
		}
		p.Spec.Volumes = append(p.Spec.Volumes, vol)
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: name, MountPath: v.MountPath, ReadOnly: v.ReadOnly})
	}
	if k.ImagePullSecret != "" {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: k.ImagePullSecret}}
	}
	return p
}

func tolerations(ts []remote.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		out = append(out, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds,
		})
	}
	return out
}

// podNamePart is a node's name as part of a pod's name: lower case
// letters, digits and dashes, 40 characters at most.
func podNamePart(node string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(node) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.TrimPrefix(strings.Trim(b.String(), "-"), "gpuaccept-") // the pod's name starts with it already
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-")
	}
	return cmp.Or(s, "node")
}

// waitRunning waits until the pod runs, failing at once on what will not
// get better by waiting (an image that cannot be had, a pod that ended).
func (e *Node) waitRunning(ctx context.Context) error {
	pods := e.cs.CoreV1().Pods(e.ns)
	why := "not scheduled yet"
	var pullFailing, lastMountLook time.Time
	for {
		p, err := pods.Get(ctx, e.pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return &remote.ConnectionLostError{Node: e.name, Reason: "pod " + e.pod + " was deleted while it started"}
		case err != nil && ctx.Err() == nil:
			return e.apiError(ctx, "pod "+e.pod, err)
		case err == nil:
			if gone := podGone(p, e.uid); gone != "" {
				return fmt.Errorf("%s: kubernetes: %s", e.name, gone)
			}
			if p.Status.Phase == corev1.PodRunning && containerReady(p) {
				e.ip = cmp.Or(p.Status.PodIP, p.Status.HostIP)
				return nil
			}
			w, fatal := podWaiting(p)
			if fatal {
				return fmt.Errorf("%s: kubernetes: pod %s cannot start: %s", e.name, e.pod, w)
			}
			if w != "" {
				why = w
			}
			if strings.HasPrefix(w, "ContainerCreating") && time.Since(lastMountLook) > 5*time.Second {
				// A volume that cannot be mounted shows only in the pod's
				// events: a node without the host_path directory never
				// gets one, said now rather than at StartTimeout.
				lastMountLook = time.Now()
				if msg := e.failedMount(ctx); msg != "" {
					for i, v := range e.cfg.Volumes {
						if strings.Contains(msg, fmt.Sprintf("%q", fmt.Sprintf("gpuaccept-volume-%d", i))) {
							msg = fmt.Sprintf("kubernetes.volumes[%d] (%s at %s): %s", i, cmp.Or(v.HostPath, "claim "+v.Claim), v.MountPath, msg)
						}
					}
					if strings.Contains(msg, "hostPath type check failed") {
						return fmt.Errorf("%s: kubernetes: pod %s cannot mount a volume (kubernetes.volumes): %s", e.name, e.pod, msg)
					}
					why = "ContainerCreating: " + msg
				}
			}
			// The kubelet retries a failed pull with a growing back-off;
			// a pull still failing a while after the first is the image
			// the pod was given, said now rather than at StartTimeout.
			switch pulling := strings.HasPrefix(w, "ErrImagePull") || strings.HasPrefix(w, "ImagePullBackOff"); {
			case !pulling:
				pullFailing = time.Time{}
			case pullFailing.IsZero():
				pullFailing = time.Now()
			case time.Since(pullFailing) > pullGivesUp:
				return fmt.Errorf("%s: kubernetes: pod %s cannot pull its image %s (image.reference, kubernetes.image_pull_policy %s): %s",
					e.name, e.pod, e.cfg.Image, e.cfg.PullPolicy, w)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &remote.TimeoutError{Node: e.name, Step: "pod " + e.ns + "/" + e.pod + " not running (" + why + ")", After: e.cfg.StartTimeout}
			}
			return fmt.Errorf("%s: kubernetes: pod %s not running (%s): %w", e.name, e.pod, why, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// failedMount is what the pod's newest FailedMount event says ("" when
// none, or when the credential may not read events).
func (e *Node) failedMount(ctx context.Context) string {
	ev, err := e.cs.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + e.pod + ",reason=FailedMount"})
	if err != nil || len(ev.Items) == 0 {
		return ""
	}
	last := ev.Items[0]
	for _, x := range ev.Items[1:] {
		if x.LastTimestamp.After(last.LastTimestamp.Time) {
			last = x
		}
	}
	return remote.Shorten(last.Message, 300)
}

// pullGivesUp is how long a pod's image pull may go on failing: the
// kubelet's back-off has retried it twice or more by then.
const pullGivesUp = 45 * time.Second

func containerReady(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.State.Running != nil
		}
	}
	return false
}

// podWaiting is why the pod is not running yet, and whether that is
// final: an image that cannot be pulled or a spec the kubelet refuses.
func podWaiting(p *corev1.Pod) (why string, fatal bool) {
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			why = w.Reason
			if w.Message != "" {
				why += ": " + remote.Shorten(w.Message, 300)
			}
			switch w.Reason {
			case "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return why, true
			}
			return why, false
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return "not scheduled: " + remote.Shorten(c.Message, 300), false
		}
	}
	return "", false
}

// apiError is an error of the API on the way to the pod: the context's,
// a lost API, or the API's refusal as it said it.
func (e *Node) apiError(ctx context.Context, step string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: kubernetes: %s: %w", e.name, step, ctx.Err())
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return &remote.SetupError{Err: fmt.Errorf("%s: kubernetes: %s: %w", e.name, step, err)}
	case isConnError(err):
		return &remote.ConnectionLostError{Node: e.name, Reason: "kubernetes: " + step + ": the API cannot be reached", Err: err}
	}
	return fmt.Errorf("%s: kubernetes: %s: %w", e.name, step, err)
}

func isConnError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Run runs cmd in the pod under the guard, through the API's exec, and
// waits for it.
func (e *Node) Run(ctx context.Context, cmd remote.Cmd) error {
	for k := range cmd.Env {
		if !remote.IsEnvName(k) {
			return fmt.Errorf("%s: environment variable name %q is not a valid shell name", e.name, k)
		}
	}
	if err := e.begin(remote.Shorten(cmd.Command, 60)); err != nil {
		return err
	}
	defer e.running.Done()
	grace := cmd.Grace
	if grace <= 0 {
		grace = remote.DefaultGrace
	}
	mark := newEndMark()
	argv := append([]string{"bash", "-c", execWrap, "gpuaccept-exec", mark}, remote.GuardArgs(cmd, e.cfg.GuardLease, grace)[1:]...)
	ex, err := e.executor(argv)
	if err != nil {
		return fmt.Errorf("%s: kubernetes: exec: %w", e.name, err)
	}
	tail := remote.NewStderrTail()
	var stderr io.Writer = tail
	if cmd.Stderr != nil {
		stderr = io.MultiWriter(cmd.Stderr, tail)
	}
	stdout := cmd.Stdout
	if stdout == nil {
		stdout = io.Discard
	}
	outEnd, errEnd := newEndWriter(stdout, mark), newEndWriter(stderr, mark)
	// The guard's control stream is the exec's stdin, whatever cmd.Stdin
	// is: its end is the guard's signal to stop the command, and once the
	// command ended, the wrapper's to end the exec.
	pr, pw := io.Pipe()
	endControl, stopControl := remote.ControlStream(pw, e.cfg.KeepaliveInterval, cmd.Stdin)
	streamCtx, cancelStream := context.WithCancel(context.Background())
	defer cancelStream()
	waited := make(chan error, 1)
	go func() {
		waited <- ex.StreamWithContext(streamCtx, remotecommand.StreamOptions{Stdin: pr, Stdout: outEnd, Stderr: errEnd})
	}()
	go func() {
		// Both streams read to their marks: the exec may end.
		for _, seen := range []chan struct{}{outEnd.seen, errEnd.seen} {
			select {
			case <-seen:
			case <-streamCtx.Done():
				return
			}
		}
		endControl()
	}()
	var werr error
	var ended string
	select {
	case werr = <-waited:
	case <-ctx.Done():
		ended = "ctx"
	case <-e.closing.Done():
		ended = "closed"
	case <-e.lostCtx.Done():
		ended = "lost"
	}
	if ended != "" {
		// The stream's end is the guard's signal to stop the command's
		// group; wait for the guard to report, so that when Run returns the
		// pod is clean. A lost node has no guard to wait for.
		endControl()
		if ended != "lost" {
			select {
			case <-waited:
			case <-time.After(grace + 5*time.Second):
			case <-e.lostCtx.Done():
			}
		}
		cancelStream()
		stopControl()
		pr.CloseWithError(io.ErrClosedPipe)
		switch ended {
		case "ctx":
			return fmt.Errorf("%s: %s: %w", e.name, remote.Shorten(cmd.Command, 120), ctx.Err())
		case "closed":
			return &remote.ConnectionLostError{Node: e.name, Reason: remote.Shorten(cmd.Command, 60) + ": closed by gpuaccept", Err: net.ErrClosed}
		}
		return e.lostErr()
	}
	stopControl()
	pr.CloseWithError(io.ErrClosedPipe)
	if outEnd.done && errEnd.done {
		// The command ended, and its status is the one its end lines
		// carry: the exec's own may have been lost (endmark.go).
		werr = nil
		if outEnd.status != 0 {
			werr = utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", outEnd.status), Code: outEnd.status}
		}
	}
	err = e.runError(ctx, cmd.Command, werr, tail.String())
	var ee *remote.ExitError
	if err != nil && !errors.As(err, &ee) {
		outEnd.flush()
		errEnd.flush()
		return err
	}
	// The command ended: both its streams must have reached their marks.
	for _, w := range []struct {
		name string
		w    *endWriter
	}{{"stdout", outEnd}, {"stderr", errEnd}} {
		if !w.w.done {
			// The exec ended before its process did: the runtime's copy
			// lost the stream's end.
			outEnd.flush()
			errEnd.flush()
			return &remote.ConnectionLostError{Node: e.name, Reason: remote.Shorten(cmd.Command, 60) +
				": the exec's " + w.name + " ended before the command's end: output lost", Err: io.ErrUnexpectedEOF}
		}
	}
	return err
}

// runError is the end of an exec: nil, the command's exit (a status of
// 129-192 is the guard dying by the command's signal, as the guard makes
// it), or a lost node when the stream broke or the command was killed
// because the pod went away.
func (e *Node) runError(ctx context.Context, command string, err error, stderrTail string) error {
	if err == nil {
		return nil
	}
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		ee := &remote.ExitError{Node: e.name, Command: command, Status: ce.Code, StderrTail: stderrTail}
		if ce.Code > 128 && ce.Code <= 192 {
			// The pod's end kills every process in it: that is the node's
			// loss, not the command's signal.
			if gone, _ := e.check(ctx); gone != "" {
				return e.markLost(gone, nil)
			}
			ee.Status, ee.Signal = -1, strings.TrimPrefix(unix.SignalName(syscall.Signal(ce.Code-128)), "SIG")
			if ee.Signal == "" {
				ee.Status, ee.Signal = ce.Code, ""
			}
		}
		return ee
	}
	if lerr := e.lostErr(); lerr != nil {
		return lerr
	}
	gone, cerr := e.check(ctx)
	switch {
	case gone != "":
		return e.markLost(gone, nil)
	case cerr != nil && isConnError(cerr):
		return e.markLost("the Kubernetes API cannot be reached", cerr)
	}
	// The pod is there and the API answers: the stream itself broke (an
	// API server restarted). The command's guard has ended it; the node
	// may be reached again.
	return &remote.ConnectionLostError{Node: e.name, Reason: remote.Shorten(command, 60) + ": the exec stream broke", Err: err}
}

// execWrap runs the guard (its arguments after the mark) as the exec's
// process, then ends stdout and stderr with the mark and the guard's
// status and waits for the end
// of its stdin before it ends: the coordinator ends the stream once it has
// read both marks, so the exec does not end while the runtime still holds
// output (endmark.go). Reading stdin to its end also drains what a command
// left unread: containerd 1.6 holds an exec open until its copy of stdin
// returns. A minute bounds the wait. The guard has the exec's stderr; the
// wrapper's own (bash's notice of a guard that died by a signal) goes
// nowhere. The guard's status is the exec's. The command starts in the
// home directory, as over SSH: a relative path (an upload's, the window's
// .gpuaccept) names the same file for every command, whatever the image's
// working directory.
const execWrap = `m=$1; shift; cd 2>/dev/null; exec 3>&2 2>/dev/null; bash -c "$@" 2>&3; r=$?
printf '%s %d\n' "$m" $r; printf '%s %d\n' "$m" $r >&3; exec 3>&-
timeout 60 cat <&0 >/dev/null; exit $r`

// executor is an exec of argv in the pod: over WebSocket, falling back to
// SPDY for an API server that does not upgrade to it (before 1.30), as
// kubectl does.
func (e *Node) executor(argv []string) (remotecommand.Executor, error) {
	req := e.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(e.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container, Command: argv, Stdin: true, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.rc, http.MethodGet, req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.rc, http.MethodPost, req.URL())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// Upload copies a local file to remotePath in the pod, as UploadFrom.
func (e *Node) Upload(ctx context.Context, local, remotePath string, o remote.TransferOptions) (remote.TransferResult, error) {
	return remote.UploadLocalFile(ctx, e, local, remotePath, o)
}

// UploadFrom sends the bytes as an exec's stdin; the pod checks their
// size and sha256 before the file takes its place (remote.UploadByCommand).
func (e *Node) UploadFrom(ctx context.Context, src io.ReaderAt, size int64, remotePath string, o remote.TransferOptions) (remote.TransferResult, error) {
	if err := e.begin("upload " + remotePath); err != nil {
		return remote.TransferResult{}, err
	}
	defer e.running.Done()
	return remote.UploadByCommand(ctx, e, src, size, remotePath, o)
}

// DeletePod implements remote.PodDeleter: this pod, by its UID (never
// another made since under its name), deleted with its own grace period,
// as an eviction does; its commands end with it. The executor is lost
// from the API's answer on, so that the node's next dial makes a new pod
// rather than waiting for the watch to notice.
func (e *Node) DeletePod(ctx context.Context) (string, error) {
	uid := types.UID(e.uid)
	err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, e.pod, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or only its name is left to another pod.
	case err != nil:
		return e.pod, e.apiError(ctx, "delete pod "+e.pod, err)
	}
	e.markLost("pod "+e.pod+" deleted by the window", nil)
	return e.pod, nil
}

// PodGone implements remote.PodDeleter: the API has no pod of this name,
// or only another one made since under it.
func (e *Node) PodGone(ctx context.Context) (bool, error) {
	p, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, e.pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("%s: kubernetes: pod %s: %w", e.name, e.pod, err)
	}
	return string(p.UID) != e.uid, nil
}

// DeletePods is remote.DeleteKubePods: every pod of the window (cfg's
// labels, on every node) in cfg's namespace deleted, and the API listing
// none.
func DeletePods(ctx context.Context, cfg remote.KubeConfig) ([]string, error) {
	if len(cfg.Labels) == 0 {
		return nil, &remote.SetupError{Err: errors.New("kubernetes: no labels to find the window's pods by")}
	}
	_, cs, ns, err := kubeClient(cfg, "")
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector(cfg, false)})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list the window's pods: %w", err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names, deletePods(ctx, cs, ns, "kubernetes", names)
}

func deletePods(ctx context.Context, cs kubernetes.Interface, ns, who string, names []string) error {
	pods := cs.CoreV1().Pods(ns)
	for _, n := range names {
		if err := pods.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: kubernetes: delete pod %s: %w", who, n, err)
		}
	}
	for _, n := range names {
		for {
			_, err := pods.Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: kubernetes: pod %s still there: %w", who, n, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}
