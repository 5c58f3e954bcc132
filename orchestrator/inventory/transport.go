package inventory

import (
	"cmp"
	"strings"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/remote"
)

// The transports that reach a node: its settings are the inventory's
// section of the same name (ssh:); local has none; srun reaches the nodes
// of the window's own Slurm allocation by job steps from the login node
// (the slurm section); kubernetes reaches a managed cluster's nodes
// through its API, a pod of the window's on each (the kubernetes
// section). A new transport is a name here, its section, and
// its case in NodeConfig, FanOut and NeedsHostKeys: the window, its
// phases and the CLI take what these say.
const (
	TransportSSH   = "ssh"
	TransportLocal = "local"
	TransportSrun  = "srun"
	// TransportKubernetes: the node's address is its name in the API.
	TransportKubernetes = "kubernetes"
)

var transports = []string{TransportSSH, TransportLocal, TransportSrun, TransportKubernetes}

// slurm.steps: the commands the nodes start together share one job step
// (remote.SrunConfig), or each command is a step of its own.
const (
	StepsShared = "shared"
	StepsEach   = "each"
)

func knownTransport(t string) bool {
	for _, k := range transports {
		if t == k {
			return true
		}
	}
	return false
}

// TransportOf is the transport that reaches n: its own, else local for
// address: local (as before there was a transport key), else the
// inventory's, else ssh.
func (inv *Inventory) TransportOf(n Node) string {
	switch {
	case n.Transport != "":
		return n.Transport
	case n.Local():
		return TransportLocal
	case inv.Transport != "":
		return inv.Transport
	}
	return TransportSSH
}

// NodeConfig is how to reach node n: the settings of its transport's
// section, the node's own values first. keys are the window's host keys
// (NeedsHostKeys), shared by every node reached over SSH.
//
// A node reached by transport kubernetes gets no labels here: the window
// marks its pods with its run (orchestrator's Reach), and a Config
// without them is refused when dialled.
func (inv *Inventory) NodeConfig(n Node, keys *remote.HostKeys) remote.Config {
	switch inv.TransportOf(n) {
	case TransportKubernetes:
		return remote.Config{Name: n.Name, Kube: inv.KubeConfig(n, nil)}
	case TransportLocal:
		// This machine: nothing to reach, the guard's defaults.
		return remote.Config{Name: n.Name, Local: &remote.LocalConfig{}}
	case TransportSrun:
		return remote.Config{Name: n.Name, Srun: &remote.SrunConfig{
			Login: *inv.LoginConfig(keys).SSH, Job: n.SlurmJob, Node: cmp.Or(n.FabricAddress, n.Name), Addr: n.Address,
			StepArgs: inv.Slurm.StepArgs, StepEach: inv.Slurm.Steps == StepsEach,
		}}
	}
	s := inv.SSH
	user := n.User
	if user == "" {
		user = s.User
	}
	jump := s.Jump
	if len(n.Via) > 0 {
		jump = n.Via
	}
	return remote.Config{Name: n.Name, SSH: &remote.SSHConfig{
		Name: n.Name, Host: n.Address, Port: n.Port, User: user,
		IdentityFiles: s.IdentityFiles, Agent: s.Agent, Jump: jump, SSHConfig: s.Config, HostKeys: keys,
		ConnectTimeout: s.ConnectTimeout, HandshakeTimeout: s.HandshakeTimeout, SessionTimeout: s.SessionTimeout,
		KeepaliveInterval: s.KeepaliveInterval, KeepaliveMisses: s.KeepaliveMisses,
	}}
}

// LoginConfig is how to reach the Slurm login node (slurm.login), over
// SSH with the ssh section's settings: the window launches collectives
// and holds its allocation from it, and transport srun reaches every
// node through it.
func (inv *Inventory) LoginConfig(keys *remote.HostKeys) remote.Config {
	l := inv.Slurm.Login
	return inv.NodeConfig(Node{Name: LoginName, Address: l.Address, Port: l.Port, User: l.User, Transport: TransportSSH}, keys)
}

// LoginName is the Slurm login node's name in errors and progress.
const LoginName = "slurm-login"

// NeedsHostKeys says whether anything the window reaches goes over SSH
// (a node, or the Slurm login node) and so needs ssh.known_hosts: a
// window that needs none does not read them.
func (inv *Inventory) NeedsHostKeys() bool {
	if inv.Slurm.Enabled() {
		return true
	}
	for _, n := range inv.Nodes {
		if inv.TransportOf(n) == TransportSSH {
			return true
		}
	}
	return false
}

// HostKeys are the known hosts the SSH transport checks nodes against
// (ssh.known_hosts, ssh.accept_new); nil when NeedsHostKeys says none are.
func (inv *Inventory) HostKeys() (*remote.HostKeys, error) {
	if !inv.NeedsHostKeys() {
		return nil, nil
	}
	return remote.NewHostKeys(remote.HostKeyOptions{Files: inv.SSH.KnownHosts, AcceptNew: inv.SSH.AcceptNew})
}

// FanOut is how many nodes the window works on at once (0: all): the
// width of the transport that reaches its nodes, ssh.concurrency over SSH
// and by srun with a step per command (whose steps go through the login
// node's SSH), all of them by srun with shared steps; one for the machine
// gpuaccept runs on, the only node of its window.
func (inv *Inventory) FanOut() int {
	if inv.Slurm.Allocates() {
		if inv.Transport == TransportSrun && inv.Slurm.Steps != StepsEach {
			// One job step carries the commands that start together: the
			// more nodes start at once, the fewer steps. The executor
			// bounds what still takes a step of its own.
			return 0
		}
		// Its nodes, not yet known, go over SSH through the login node.
		return inv.SSH.Concurrency
	}
	if inv.Kubernetes.NodeSelector != "" {
		// Pods on nodes the selector finds when the window starts.
		return inv.SSH.Concurrency
	}
	for _, n := range inv.Nodes {
		if t := inv.TransportOf(n); t == TransportSSH || t == TransportKubernetes {
			// The API's execs and pods as wide as SSH's sessions.
			return inv.SSH.Concurrency
		}
	}
	return 1
}

// ReachWithin is how long reaching the slowest node may take: its
// transport's bound with every step at its full length (each SSH hop's
// connect and handshake).
func (inv *Inventory) ReachWithin() time.Duration {
	var d time.Duration
	nodes := inv.Nodes
	if inv.Slurm.Allocates() && len(nodes) == 0 {
		// A node of the allocation, as it will be reached: through the
		// login node, by SSH or by a step.
		l := inv.Slurm.Login
		nodes = []Node{{Name: "allocated", Address: "allocated", Transport: inv.allocatedTransport(), SlurmJob: "1",
			Via: append(append([]string(nil), inv.SSH.Jump...), l.Address)}}
	}
	for _, n := range nodes {
		d = max(d, inv.NodeConfig(n, nil).ReachWithin())
	}
	return d
}

// allocatedTransport reaches the nodes of the window's own allocation:
// srun when the inventory says so, else SSH through the login node.
func (inv *Inventory) allocatedTransport() string {
	if inv.Transport == TransportSrun {
		return TransportSrun
	}
	return TransportSSH
}

// AllocatedNode is node n of the window's allocation (job) as the window
// reaches it: by its Slurm name at its NodeAddr, through the login node
// by SSH (the login node as the jump host) or by srun.
func (inv *Inventory) AllocatedNode(name, addr, job string) Node {
	n := Node{Name: name, Address: cmp.Or(addr, name), FabricAddress: name, Transport: inv.allocatedTransport()}
	if n.Transport == TransportSrun {
		n.SlurmJob = job
	} else {
		n.Via = append(append([]string(nil), inv.SSH.Jump...), inv.Slurm.LoginHop())
	}
	return n
}

// ReachBoundGiven says whether the inventory bounds reaching a node
// itself (ssh.connect_timeout, ssh.handshake_timeout for a node reached
// over SSH), so that connect's deadline is its own and not
// phases.deadline.
func (inv *Inventory) ReachBoundGiven() bool {
	if inv.SSH.ConnectTimeout <= 0 && inv.SSH.HandshakeTimeout <= 0 {
		return false
	}
	for _, n := range inv.Nodes {
		if inv.TransportOf(n) == TransportSSH {
			return true
		}
	}
	return false
}

// transport checks the inventory's transport.
func (v *validator) transport() {
	t := v.inv.Transport
	switch {
	case t != "" && !knownTransport(t):
		v.problem("transport", "must be %s, got %q", transportChoice(), short(t))
	case t == TransportSrun && !v.inv.Slurm.Allocates():
		v.problem("transport", "srun reaches the nodes of the window's own Slurm allocation: set slurm.allocate (and slurm.login)")
	case len(v.inv.Slurm.StepArgs) > 0 && t != TransportSrun:
		v.problem("slurm.step_args", "set without transport: srun: only its steps take them")
	}
	s := &v.inv.Slurm.Steps
	given := *s
	*s = strings.ToLower(*s)
	switch {
	case *s != "" && *s != StepsShared && *s != StepsEach:
		v.problem("slurm.steps", "must be %s or %s, got %q", StepsShared, StepsEach, short(given))
	case *s != "" && t != TransportSrun:
		v.problem("slurm.steps", "set without transport: srun: only its steps are shared or not")
	}
}

// nodeTransport checks node i's transport against its address, and gives
// a node reached locally its address: the machine gpuaccept runs on has
// no other.
func (v *validator) nodeTransport(i int) {
	n := &v.inv.Nodes[i]
	key, who := v.keyOf(i), v.who(i)
	if n.Transport != "" && !knownTransport(n.Transport) {
		v.problem(key+".transport", "%smust be %s, got %q", who, transportChoice(), short(n.Transport))
		return
	}
	if n.Transport == TransportSrun {
		v.problem(key+".transport", "%ssrun reaches only the nodes of the window's own allocation, which the inventory does not list: set transport: srun at the top level with slurm.allocate", who)
		return
	}
	if v.inv.TransportOf(*n) == TransportKubernetes {
		if n.Address == "" {
			n.Address = n.Name // the node's name in the API
		}
		if !validKubeName(n.Address) {
			v.problem(key+".address", "%s%q is not a Kubernetes node's name (transport kubernetes reaches a node by its name in the API): lowercase letters, digits, '-' and '.'", who, short(n.Address))
		}
		return
	}
	switch {
	case n.Transport == TransportSSH && n.Local():
		v.problem(key+".transport", "%saddress local is the machine gpuaccept runs on, reached without SSH: remove transport, or give the address to reach over SSH", who)
	case v.inv.TransportOf(*n) != TransportLocal:
	case n.Address == "":
		n.Address = remote.LocalAddress
	case !n.Local():
		where := key + ".transport"
		if n.Transport == "" {
			where = "transport"
		}
		v.problem(key+".address", "%s%q: %s is local, the machine gpuaccept runs on, reached at no address: remove address, or give address: local",
			who, short(n.Address), where)
	}
}

func transportChoice() string { return strings.Join(transports, " or ") }

// PlannedNodes is how many nodes the window will have: the inventory's,
// or as many as its own Slurm allocation asks for.
func (inv *Inventory) PlannedNodes() int {
	a := inv.Slurm.Allocate
	if len(inv.Nodes) > 0 || a == nil {
		return len(inv.Nodes)
	}
	if a.NodeList != "" {
		if names, err := hostlist.Expand(a.NodeList); err == nil {
			return len(names)
		}
	}
	return a.Nodes
}
