package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// KubeConfig is the Kubernetes transport's settings for one node: a node
// of a managed Kubernetes cluster that the buyer reaches only through the
// API (a kubeconfig, no SSH). The window's commands run in one pod of its
// own on that node, started by DialNode and found again by its labels when
// a window resumes; the pod is the lease, deleted at teardown
// (DeleteKubePods) and given activeDeadlineSeconds so that a coordinator
// that never comes back does not leave it running.
//
// The settings are plain values: the transport itself (client-go) lives in
// package remote/kube, which only the gpuaccept command and the Kubernetes
// tests link, so that every other binary that reaches nodes stays the size
// it was (client-go made orchestrator/phases' race test binary 2.6 times
// as big).
type KubeConfig struct {
	// Kubeconfig is the kubeconfig file ("" : KUBECONFIG or
	// ~/.kube/config, as kubectl finds it); Context one of its contexts
	// ("": its current one); Namespace where the pod goes ("": the
	// context's namespace, else "default").
	Kubeconfig, Context, Namespace string
	// Node is the Kubernetes node's name; the pod is bound to it.
	Node string
	// Image is the pod's image, pinned by digest in a window
	// (repo@sha256:...); PullPolicy its imagePullPolicy, as Kubernetes
	// spells it: Always, IfNotPresent or Never ("": IfNotPresent).
	Image      string
	PullPolicy string
	// GPUResource is the extended resource the node's GPUs are advertised
	// as (default nvidia.com/gpu) and GPUs how many of them the pod asks
	// for (0: none).
	GPUResource string
	GPUs        int
	// Labels mark every object the window makes (the window's label and
	// an owner marker): a resumed window finds its pod by them together
	// with the node, and teardown deletes by them. At least one.
	Labels map[string]string
	// ServiceAccount and ImagePullSecret name the pod's service account
	// and the secret its image is pulled with ("": none).
	ServiceAccount, ImagePullSecret string
	// Tolerations let the pod onto a tainted node (GPU nodes often are).
	Tolerations []Toleration
	// Volumes are mounted into the pod.
	Volumes []KubeVolume
	// ActiveDeadline is the pod's activeDeadlineSeconds: the kubelet ends
	// it then whatever the coordinator does (default 12h).
	ActiveDeadline time.Duration
	// StartTimeout bounds how long the pod may take to be Running,
	// scheduling and the image pull included (default 5 min).
	StartTimeout time.Duration
	// KeepaliveInterval is how often the coordinator asks the API about
	// the pod and sends the guard a heartbeat; after KeepaliveMisses
	// unanswered questions the node is lost. GuardLease is how long a
	// command outlives silence from the coordinator (derived from the
	// keepalive settings as over SSH when 0).
	KeepaliveInterval time.Duration
	KeepaliveMisses   int
	GuardLease        time.Duration
}

// Toleration is one of a pod's tolerations of a node's taints, with
// Kubernetes' field names and values (Operator Equal or Exists, Effect
// NoSchedule, PreferNoSchedule, NoExecute or "" for all).
type Toleration struct {
	Key, Operator, Value, Effect string
	// TolerationSeconds bounds how long a NoExecute taint is tolerated
	// (nil: for ever).
	TolerationSeconds *int64
}

// KubeVolume is one volume of the pod: a directory of the node
// (HostPath, which must exist: hostPath type Directory) or a
// PersistentVolumeClaim of the namespace (Claim), at MountPath.
type KubeVolume struct {
	MountPath, HostPath, Claim string
	ReadOnly                   bool
}

// Defaults of KubeConfig.
const (
	DefaultGPUResource    = "nvidia.com/gpu"
	DefaultActiveDeadline = 12 * time.Hour
	DefaultPodStart       = 5 * time.Minute
	DefaultPullPolicy     = "IfNotPresent"
)

// WithDefaults is k with every setting it left out given its default.
func (k KubeConfig) WithDefaults() KubeConfig {
	setDefault(&k.ActiveDeadline, DefaultActiveDeadline)
	setDefault(&k.StartTimeout, DefaultPodStart)
	setDefault(&k.KeepaliveInterval, DefaultKeepaliveInterval)
	if k.KeepaliveMisses <= 0 {
		k.KeepaliveMisses = DefaultKeepaliveMisses
	}
	k.GuardLease = SSHConfig{KeepaliveInterval: k.KeepaliveInterval, KeepaliveMisses: k.KeepaliveMisses, GuardLease: k.GuardLease}.guardLease()
	k.GPUResource = cmp.Or(k.GPUResource, DefaultGPUResource)
	k.PullPolicy = cmp.Or(k.PullPolicy, DefaultPullPolicy)
	return k
}

// KubeTransport is what package remote/kube does for this one: remote
// owns the seam (Config, DialNode, the window's teardown), remote/kube
// the client-go code behind it, registered from its init.
type KubeTransport interface {
	// Dial finds or makes the window's pod on k.Node and returns the
	// executor that runs commands in it; errors name the node (name).
	Dial(ctx context.Context, name string, k KubeConfig) (Executor, error)
	// DeletePods deletes every pod of the window (k's labels, on any
	// node, in k's namespace), waits until the API lists none and returns
	// the names it deleted.
	DeletePods(ctx context.Context, k KubeConfig) ([]string, error)
	// Nodes lists the cluster's nodes that carry every label of selector
	// (all of them for none), with k.GPUResource counted.
	Nodes(ctx context.Context, k KubeConfig, selector map[string]string) ([]KubeNode, error)
	// GPUSoftware is what the API shows of the software that gives pods
	// their GPUs: the device plugin's pods by node, the GPU Operator's.
	GPUSoftware(ctx context.Context, k KubeConfig) (KubeGPUSoftware, error)
	// Access asks the API, for k's credential, whether it may do each of
	// KubeNeeds (a SelfSubjectAccessReview each), in KubeNeeds' order.
	Access(ctx context.Context, k KubeConfig) ([]KubeAccess, error)
}

// KubeNeed is one thing a window asks of the API: Verb on Resource
// (Subresource of it, when set), in the window's namespace or, Cluster, in
// every namespace at once. Required: without it no window runs; otherwise
// Without says what is not measured.
type KubeNeed struct {
	Verb, Resource, Subresource string
	// OrVerb does as well as Verb: client-go's exec asks get (its
	// WebSocket) before create (SPDY).
	OrVerb            string
	Cluster, Required bool
	Without           string
}

// What is "verb resource[/subresource]", as kubectl auth can-i takes it,
// with "in every namespace" when Cluster.
func (n KubeNeed) What() string {
	s := n.Verb
	if n.OrVerb != "" {
		s += " (or " + n.OrVerb + ")"
	}
	s += " " + n.Resource
	if n.Subresource != "" {
		s += "/" + n.Subresource
	}
	if n.Cluster && n.Resource != "nodes" {
		s += " in every namespace"
	}
	return s
}

// KubeNeeds are what a window asks of the API (inventories/README.md
// names the same): its pods in its namespace, and to read the nodes and
// every namespace's pods for the Kubernetes facts.
var KubeNeeds = []KubeNeed{
	{Verb: "create", Resource: "pods", Required: true},
	{Verb: "get", Resource: "pods", Required: true},
	{Verb: "list", Resource: "pods", Required: true},
	{Verb: "delete", Resource: "pods", Required: true},
	{Verb: "create", OrVerb: "get", Resource: "pods", Subresource: "exec", Required: true},
	{Verb: "list", Resource: "nodes", Cluster: true, Without: "KUBE-001 and KUBE-002 not measured, and kubernetes.node_selector finds no node"},
	{Verb: "list", Resource: "pods", Cluster: true, Without: "the GPU device plugin and GPU Operator not named (KUBE-002)"},
}

// KubeAccess is the API's answer to one KubeNeed: Allowed, and the
// authorizer's reason when it gave one.
type KubeAccess struct {
	KubeNeed
	Allowed bool
	Reason  string
}

// KubeGPUSoftware is the GPU software a cluster runs as pods, by the
// images of their containers (the image's tag is its version): the
// device plugin's on each node (DevicePlugins, by node name) and the GPU
// Operator's anywhere. A cluster that lets the buyer list no pods beyond
// the namespace shows none of it (the error says so).
type KubeGPUSoftware struct {
	DevicePlugins map[string][]string
	Operator      []string
}

// KubeNode is a node of the cluster as its API describes it: what an
// inventory's nodes are made of and what preflight holds to the quote.
type KubeNode struct {
	Name   string
	Labels map[string]string
	// GPUs is how many of the GPU resource the node's device plugin
	// advertises as allocatable, GPUCapacity as its capacity.
	GPUs, GPUCapacity int64
	// Ready is the node's Ready condition; Unschedulable its cordon.
	Ready, Unschedulable bool
	// Taints as kubectl shows them: key[=value]:effect.
	Taints []string
	// NotReady is the Ready condition's reason and message when it is not
	// True ("no Ready condition" when it has none); Pressure the kubelet's
	// conditions that are True and should not be (MemoryPressure,
	// DiskPressure, PIDPressure, NetworkUnavailable).
	NotReady string
	Pressure []string
	// What the node's kubelet reports of itself (status.nodeInfo).
	Kubelet, Runtime, Kernel, OS string
}

var kubeTransport atomic.Pointer[KubeTransport]

// RegisterKube makes t the Kubernetes transport of this binary; package
// remote/kube calls it from its init.
func RegisterKube(t KubeTransport) { kubeTransport.Store(&t) }

// ErrNoKube is why a Kubernetes node cannot be reached by a binary that
// does not link package remote/kube.
var ErrNoKube = errors.New("this build of gpuaccept has no Kubernetes transport (package remote/kube is not linked)")

func registeredKube() (KubeTransport, bool) {
	t := kubeTransport.Load()
	if t == nil {
		return nil, false
	}
	return *t, true
}

func (k KubeConfig) dial(ctx context.Context, name string) (Executor, error) {
	t, ok := registeredKube()
	if !ok {
		return nil, &SetupError{Err: fmt.Errorf("%s: kubernetes: %w", name, ErrNoKube)}
	}
	return t.Dial(ctx, name, k)
}

// DeleteKubePods deletes every pod of the window that k's labels mark, in
// k's namespace, and waits until the API lists none: the teardown of a
// window, a resumed one or one whose coordinator was killed included,
// since no executor is needed. It returns the names it deleted.
func DeleteKubePods(ctx context.Context, k KubeConfig) ([]string, error) {
	t, ok := registeredKube()
	if !ok {
		return nil, &SetupError{Err: fmt.Errorf("kubernetes: %w", ErrNoKube)}
	}
	return t.DeletePods(ctx, k)
}

// ListKubeNodes lists the nodes of k's cluster that carry every label of
// selector, through the registered transport.
func ListKubeNodes(ctx context.Context, k KubeConfig, selector map[string]string) ([]KubeNode, error) {
	t, ok := registeredKube()
	if !ok {
		return nil, &SetupError{Err: fmt.Errorf("kubernetes: %w", ErrNoKube)}
	}
	return t.Nodes(ctx, k, selector)
}

// KubeAccessOf asks k's cluster, through the registered transport, what
// k's credential may do of KubeNeeds.
func KubeAccessOf(ctx context.Context, k KubeConfig) ([]KubeAccess, error) {
	t, ok := registeredKube()
	if !ok {
		return nil, &SetupError{Err: fmt.Errorf("kubernetes: %w", ErrNoKube)}
	}
	return t.Access(ctx, k)
}

// ReadKubeGPUSoftware asks k's cluster for the GPU software its pods run,
// through the registered transport.
func ReadKubeGPUSoftware(ctx context.Context, k KubeConfig) (KubeGPUSoftware, error) {
	t, ok := registeredKube()
	if !ok {
		return KubeGPUSoftware{}, &SetupError{Err: fmt.Errorf("kubernetes: %w", ErrNoKube)}
	}
	return t.GPUSoftware(ctx, k)
}

func (k KubeConfig) reachWithin() time.Duration {
	return cmp.Or(k.StartTimeout, DefaultPodStart) + 30*time.Second
}

func (k KubeConfig) address() string { return k.Node }

func (k KubeConfig) via() string {
	return "through the Kubernetes API (a pod of the window's on node " + k.Node + "), no host key of its own"
}

// PodAddresser is an executor whose node is a pod with an address of its
// own in the cluster (the Kubernetes transport's, on the host network: its
// node's address), by which the other pods reach it: a node's name in the
// API often resolves nowhere inside a pod.
type PodAddresser interface {
	PodIP() string
}

// PodDeleter is an executor whose node is a pod that the window may
// delete through the cluster's API (the failure test's delete-pod):
// DeletePod asks for the deletion, returns once the API has taken it
// (the pod's processes end within its grace period) and names the pod.
// The executor is lost from then on; dialling the node again makes a new
// pod there.
type PodDeleter interface {
	DeletePod(ctx context.Context) (pod string, err error)
	// PodGone says whether the API no longer has the pod (the one this
	// executor reached, not another of its name): its processes are gone
	// with it.
	PodGone(ctx context.Context) (bool, error)
}

// PodImager is an executor whose commands run in a container that a
// cluster started from an image (the Kubernetes transport's pod): the
// image phase checks what the runtime says it runs, since the pod is the
// container.
type PodImager interface {
	PodImage(ctx context.Context) (PodImage, error)
}

// PodImage is the runtime's word on a pod's container: the image as
// asked for, its imageID (REPO@sha256:DIGEST for a pulled image, the
// config digest sha256:ID for one only present locally), when the pod was
// made and when the container started (the API's whole seconds).
type PodImage struct {
	Image, ImageID   string
	Created, Started time.Time
	// Restarts is the container's restart count: Started is then its
	// last start's, not the pod's first.
	Restarts int
}
