package inventory

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/remote"
)

// Kubernetes is a managed Kubernetes cluster whose nodes the buyer reaches
// only through the API (transport kubernetes): the window runs one pod of
// its own on each node and its commands through the API's exec.
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file (default: KUBECONFIG, else
	// ~/.kube/config, as kubectl finds it); Context one of its contexts
	// (default its current one); Namespace where the window's pods go
	// (default the context's, else default).
	Kubeconfig string `mapstructure:"kubeconfig" json:"kubeconfig,omitempty"`
	Context    string `mapstructure:"context" json:"context,omitempty"`
	Namespace  string `mapstructure:"namespace" json:"namespace,omitempty"`
	// Nodes are the Kubernetes nodes of the window, by their names in the
	// API (host ranges allowed): each is a node of the inventory named by
	// the first label of its name.
	Nodes []string `mapstructure:"nodes" json:"nodes,omitempty"`
	// NodeSelector adds every node of the cluster that carries all of
	// its labels, as the API lists them when the window starts
	// (WithKubeNodes): kubectl's equality selector, KEY=VALUE[,...] (a
	// string: viper would split a mapping's dotted label keys).
	NodeSelector string `mapstructure:"node_selector" json:"node_selector,omitempty"`
	// Tolerations let the window's pods onto tainted nodes.
	Tolerations []KubeToleration `mapstructure:"tolerations" json:"tolerations,omitempty"`
	// GPUResource is the extended resource the nodes' GPUs are advertised
	// as (default nvidia.com/gpu); each pod asks for quote.gpus_per_node
	// of it.
	GPUResource string `mapstructure:"gpu_resource" json:"gpu_resource,omitempty"`
	// ServiceAccount and ImagePullSecret name the pods' service account
	// and the secret their image is pulled with.
	ServiceAccount  string `mapstructure:"service_account" json:"service_account,omitempty"`
	ImagePullSecret string `mapstructure:"image_pull_secret" json:"image_pull_secret,omitempty"`
	// ImagePullPolicy is the pods' imagePullPolicy: Always, IfNotPresent
	// (the default) or Never (an image the nodes hold already, by the
	// reference given).
	ImagePullPolicy string `mapstructure:"image_pull_policy" json:"image_pull_policy,omitempty"`
	// Volumes are mounted into every pod of the window: a pod's own
	// filesystem goes with it, so whatever must outlive a pod or be seen
	// by every node (the failure test's checkpoints, the checkpoint
	// phase's files) lies on one of them.
	Volumes []KubeVolume `mapstructure:"volumes" json:"volumes,omitempty"`
}

// KubeVolume is a volume of the window's pods: a directory of the node
// (host_path; it must exist there, or the pod does not start, rather
// than a missing shared mount silently becoming the node's local disk)
// or a PersistentVolumeClaim of the namespace (claim; ReadWriteMany for
// one that every node shares), mounted at mount_path.
type KubeVolume struct {
	MountPath string `mapstructure:"mount_path" json:"mount_path"`
	HostPath  string `mapstructure:"host_path" json:"host_path,omitempty"`
	Claim     string `mapstructure:"claim" json:"claim,omitempty"`
	ReadOnly  bool   `mapstructure:"read_only" json:"read_only,omitempty"`
}

// KubeToleration is one toleration of the window's pods, as Kubernetes
// spells it.
type KubeToleration struct {
	Key      string `mapstructure:"key" json:"key,omitempty"`
	Operator string `mapstructure:"operator" json:"operator,omitempty"`
	Value    string `mapstructure:"value" json:"value,omitempty"`
	Effect   string `mapstructure:"effect" json:"effect,omitempty"`
	// Seconds bounds how long a NoExecute taint is tolerated.
	Seconds *int64 `mapstructure:"toleration_seconds" json:"toleration_seconds,omitempty"`
}

// KubeConfig is how the Kubernetes transport reaches node n: the pod on
// the Kubernetes node n.Address with the window's image and the quote's
// GPUs. labels mark the window's pods (its run); the caller gives them.
func (inv *Inventory) KubeConfig(n Node, labels map[string]string) *remote.KubeConfig {
	k := inv.Kubernetes
	c := &remote.KubeConfig{
		Kubeconfig: k.Kubeconfig, Context: k.Context, Namespace: k.Namespace,
		Node: n.Address, Image: inv.Image.Reference, GPUResource: k.GPUResource, GPUs: inv.Quote.GPUsPerNode,
		Labels: labels, ServiceAccount: k.ServiceAccount, ImagePullSecret: k.ImagePullSecret, PullPolicy: k.ImagePullPolicy,
		KeepaliveInterval: inv.SSH.KeepaliveInterval, KeepaliveMisses: inv.SSH.KeepaliveMisses,
	}
	for _, t := range k.Tolerations {
		c.Tolerations = append(c.Tolerations, remote.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect, TolerationSeconds: t.Seconds})
	}
	for _, vol := range k.Volumes {
		c.Volumes = append(c.Volumes, remote.KubeVolume{MountPath: vol.MountPath, HostPath: vol.HostPath, Claim: vol.Claim, ReadOnly: vol.ReadOnly})
	}
	return c
}

// OnKubeVolume is the volume of the window's pods that holds dir (the
// deepest mount that contains it), nil when dir lies in the pod's own
// filesystem.
func (k Kubernetes) OnKubeVolume(dir string) *KubeVolume {
	dir = path.Clean(dir)
	var best *KubeVolume
	for i, vol := range k.Volumes {
		m := path.Clean(vol.MountPath)
		if (dir == m || strings.HasPrefix(dir, m+"/")) && (best == nil || len(m) > len(best.MountPath)) {
			best = &k.Volumes[i]
		}
	}
	return best
}

// kubeNodeName is a Kubernetes node's name: a DNS subdomain (RFC 1123),
// lower case, at most 253 characters.
var kubeNodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func validKubeName(s string) bool { return len(s) <= 253 && kubeNodeName.MatchString(s) }

// resourceName is an extended resource's name: a DNS subdomain, a slash,
// a name of letters, digits, '-', '_' and '.'.
var resourceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// kubernetes checks the kubernetes section and names the nodes its
// nodes list, reached by transport kubernetes (before the nodes are
// checked, so that they are checked as any node).
func (v *validator) kubernetes() {
	k := &v.inv.Kubernetes
	const p = "kubernetes."
	defer v.kubeImage()
	if !v.given("kubernetes") {
		return
	}
	if v.given(p + "kubeconfig") {
		k.Kubeconfig = v.path(p+"kubeconfig", k.Kubeconfig)
	}
	if v.given(p+"context") && strings.TrimSpace(k.Context) == "" {
		v.problem(p+"context", "empty: give one of the kubeconfig's contexts, or leave context out for its current one")
	}
	if v.given(p+"namespace") && !dnsLabel.MatchString(k.Namespace) {
		v.problem(p+"namespace", "%q is not a namespace's name: lowercase letters, digits and '-', at most 63", short(k.Namespace))
	}
	if v.given(p+"gpu_resource") && !resourceName.MatchString(k.GPUResource) {
		v.problem(p+"gpu_resource", "%q is not an extended resource's name, e.g. nvidia.com/gpu or amd.com/gpu", short(k.GPUResource))
	}
	for _, f := range []struct{ key, val string }{{"service_account", k.ServiceAccount}, {"image_pull_secret", k.ImagePullSecret}} {
		if v.given(p+f.key) && !validKubeName(f.val) {
			v.problem(p+f.key, "%q is not a Kubernetes object's name: lowercase letters, digits, '-' and '.'", short(f.val))
		}
	}
	switch k.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		v.problem(p+"image_pull_policy", "%q is not an imagePullPolicy: Always, IfNotPresent or Never", short(k.ImagePullPolicy))
	}
	for i, t := range k.Tolerations {
		v.toleration(fmt.Sprintf("%stolerations[%d]", p, i), &k.Tolerations[i], t)
	}
	mounted := map[string]string{}
	for i, vol := range k.Volumes {
		v.kubeVolume(fmt.Sprintf("%svolumes[%d]", p, i), vol, mounted)
	}
	if v.given(p + "node_selector") {
		if _, err := ParseSelector(k.NodeSelector); err != nil {
			v.problem(p+"node_selector", "%v", err)
		}
		// The selector's nodes are known when the window starts: what
		// needs their count waits for them.
		v.nodesLater = true
	}
	v.kubeNodes()
}

// ParseSelector reads kubectl's equality selector, KEY=VALUE[,KEY=VALUE...]
// (== for = too): the labels a node must carry, each key once.
func ParseSelector(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty: give KEY=VALUE[,KEY=VALUE...], e.g. nvidia.com/gpu.present=true")
	}
	out := map[string]string{}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		key, val, ok := strings.Cut(term, "=")
		val = strings.TrimPrefix(val, "=")
		key = strings.TrimSpace(key)
		switch {
		case !ok || strings.HasSuffix(key, "!"):
			return nil, fmt.Errorf("%q: each term is KEY=VALUE (only equality: a node carries every label given)", short(term))
		case !labelKey.MatchString(key) || len(key) > 253+1+63:
			return nil, fmt.Errorf("%q is not a label's key: [PREFIX/]NAME, NAME at most 63 letters, digits, '-', '_' and '.'", short(key))
		case val != "" && !labelValue.MatchString(val):
			return nil, fmt.Errorf("%s: %q is not a label's value: at most 63 letters, digits, '-', '_' and '.'", key, short(val))
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s given twice", key)
		}
		out[key] = val
	}
	return out, nil
}

// The syntax of a label's key and value, as Kubernetes checks them.
var (
	labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelKey   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
)

// kubeImage asks for the image that transport kubernetes runs its pods
// from, and for nodes to reach where the section is given.
func (v *validator) kubeImage() {
	reached := v.nodesLater
	for _, n := range v.inv.Nodes {
		reached = reached || v.inv.TransportOf(n) == TransportKubernetes
	}
	switch {
	case reached && v.inv.Image.Reference == "" && !v.c.blocked("image.reference"):
		v.problem("image.reference", "required with transport kubernetes: the window's pod on each node runs it, pinned (NAME[:TAG]@sha256:<64 hex digits>)")
	case !reached && v.given("kubernetes") && !v.nodesLost:
		v.problem("kubernetes", "set, but no node is reached by transport kubernetes: list them in kubernetes.nodes, or set transport: kubernetes")
	}
	if reached && v.inv.Quote.GPUsPerNode <= 0 && !v.c.blocked("quote.gpus_per_node") {
		// A pod that asks for no GPU is given none: the window would
		// test nodes without their GPUs.
		v.problem("quote.gpus_per_node", "required with transport kubernetes: each pod asks for that many %s, and gets no GPU without it",
			cmp.Or(v.inv.Kubernetes.GPUResource, remote.DefaultGPUResource))
	}
}

// kubeVolume checks one of kubernetes.volumes; mounted holds the mount
// paths seen so far, by key.
func (v *validator) kubeVolume(key string, vol KubeVolume, mounted map[string]string) {
	m := vol.MountPath
	switch {
	case m == "":
		v.problem(key+".mount_path", "required: where the volume appears in each pod (an absolute path)")
	case !path.IsAbs(m) || path.Clean(m) != m || m == "/":
		v.problem(key+".mount_path", "%q is not an absolute, clean path below / (e.g. /shared)", short(m))
	case mounted[m] != "":
		v.problem(key+".mount_path", "%s is mounted by %s already", m, mounted[m])
	default:
		mounted[m] = key
	}
	switch {
	case vol.HostPath == "" && vol.Claim == "":
		v.problem(key, "give host_path (a directory of the node) or claim (a PersistentVolumeClaim of the namespace)")
	case vol.HostPath != "" && vol.Claim != "":
		v.problem(key, "both host_path and claim: a volume is one or the other")
	case vol.HostPath != "" && (!path.IsAbs(vol.HostPath) || path.Clean(vol.HostPath) != vol.HostPath):
		v.problem(key+".host_path", "%q is not an absolute, clean path of the node", short(vol.HostPath))
	case vol.Claim != "" && !validKubeName(vol.Claim):
		v.problem(key+".claim", "%q is not a PersistentVolumeClaim's name: lowercase letters, digits, '-' and '.'", short(vol.Claim))
	}
}

func (v *validator) toleration(key string, t *KubeToleration, c KubeToleration) {
	switch c.Operator {
	case "":
		t.Operator = "Equal"
		if c.Key == "" {
			v.problem(key+".key", "required with operator Equal (operator Exists without a key tolerates every taint)")
		}
	case "Equal":
		if c.Key == "" {
			v.problem(key+".key", "required with operator Equal (operator Exists without a key tolerates every taint)")
		}
	case "Exists":
		if c.Value != "" {
			v.problem(key+".value", "%q with operator Exists, which matches a taint's key whatever its value: leave value out", short(c.Value))
		}
	default:
		v.problem(key+".operator", "must be Equal or Exists, got %q", short(c.Operator))
	}
	switch c.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		v.problem(key+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute (or left out for every effect), got %q", short(c.Effect))
	}
	if c.Seconds != nil {
		switch {
		case c.Effect != "NoExecute":
			v.problem(key+".toleration_seconds", "only with effect NoExecute: it bounds how long the pod stays on a node so tainted")
		case *c.Seconds < 0:
			v.problem(key+".toleration_seconds", "must be ≥ 0, got %d", *c.Seconds)
		}
	}
}

// kubeNodes adds a node of the inventory for each name of
// kubernetes.nodes: named by the first label of its Kubernetes name,
// which is its address, reached by transport kubernetes.
func (v *validator) kubeNodes() {
	const key = "kubernetes.nodes"
	for i, entry := range v.inv.Kubernetes.Nodes {
		ek := fmt.Sprintf("%s[%d]", key, i)
		names := []string{entry}
		if ranged(entry) {
			var err error
			if names, err = hostlist.Expand(entry); err != nil {
				v.rangeProblem(ek, entry, err)
				v.nodesLost = true
				continue
			}
		}
		for _, name := range names {
			if !validKubeName(name) {
				v.problem(ek, "%q is not a Kubernetes node's name: lowercase letters, digits, '-' and '.'", short(name))
				v.nodesLost = true
				continue
			}
			first, _, _ := strings.Cut(name, ".")
			member := ""
			if len(names) > 1 {
				member = name
			}
			v.inv.Nodes = append(v.inv.Nodes, Node{Name: first, Address: name, Transport: TransportKubernetes})
			v.origins = append(v.origins, nodeOrigin{key: ek, member: member})
		}
	}
}

// WithKubeNodes is inv with the nodes kubernetes.node_selector chooses, as
// the cluster's API lists them now: each named by the first label of its
// name, reached by transport kubernetes, its zone, region and rack from
// its topology.kubernetes.io labels. A node the inventory names already
// (by its name in the API) is not added twice. inv itself without a
// selector. The window, `check --connect` and `exec` call it before they
// reach a node; `check` alone reads no API.
func (inv *Inventory) WithKubeNodes(ctx context.Context) (*Inventory, error) {
	if inv.Kubernetes.NodeSelector == "" {
		return inv, nil
	}
	where := fmt.Sprintf("%s: kubernetes.node_selector %s", inv.Path, inv.Kubernetes.NodeSelector)
	sel, err := ParseSelector(inv.Kubernetes.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	listed, err := remote.ListKubeNodes(ctx, *inv.KubeConfig(Node{}, nil), sel)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	out := *inv
	out.Nodes = slices.Clone(inv.Nodes)
	names := map[string]string{}
	known := map[string]bool{}
	for _, n := range out.Nodes {
		names[n.Name] = n.Address
		if inv.TransportOf(n) == TransportKubernetes {
			known[n.Address] = true
		}
	}
	added := 0
	for _, kn := range listed {
		if known[kn.Name] {
			continue
		}
		name, _, _ := strings.Cut(kn.Name, ".")
		if other, dup := names[name]; dup {
			return nil, fmt.Errorf("%s: node %s is named %s, as %s is: name one of them in nodes with a name of its own", where, kn.Name, name, other)
		}
		if !dnsLabel.MatchString(name) {
			return nil, fmt.Errorf("%s: node %s: %q is no node name gpuaccept takes (a DNS label)", where, kn.Name, name)
		}
		names[name] = kn.Name
		out.Nodes = append(out.Nodes, Node{Name: name, Address: kn.Name, Transport: TransportKubernetes, Labels: topologyLabels(kn.Labels)})
		added++
	}
	if added == 0 && len(inv.Nodes) == 0 {
		return nil, fmt.Errorf("%s: the cluster has no such node", where)
	}
	return &out, nil
}

// topologyLabels are a node's place as Kubernetes' well-known labels say
// it, under the names the reports and the bisection group by.
func topologyLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for key, name := range map[string]string{
		"topology.kubernetes.io/zone": "zone", "topology.kubernetes.io/region": "region", "topology.kubernetes.io/rack": "rack",
	} {
		if v := l[key]; v != "" {
			out[name] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
