package inventory

import (
	"strings"
	"time"

	"gpuaccept/remote"
)

// The transports that reach a node: its settings are the inventory's
// section of the same name (ssh:); local has none. A new transport is a
// name here, its section, and its case in NodeConfig, FanOut and
// NeedsHostKeys: the window, its phases and the CLI take what these say.
const (
	TransportSSH   = "ssh"
	TransportLocal = "local"
)

var transports = []string{TransportSSH, TransportLocal}

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
func (inv *Inventory) NodeConfig(n Node, keys *remote.HostKeys) remote.Config {
	if inv.TransportOf(n) == TransportLocal {
		// This machine: nothing to reach, the guard's defaults.
		return remote.Config{Name: n.Name, Local: &remote.LocalConfig{}}
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
// width of the transport that reaches its nodes, ssh.concurrency over
// SSH; one for the machine gpuaccept runs on, the only node of its
// window.
func (inv *Inventory) FanOut() int {
	if inv.Slurm.Allocates() {
		// Its nodes, not yet known, go over SSH through the login node.
		return inv.SSH.Concurrency
	}
	for _, n := range inv.Nodes {
		if inv.TransportOf(n) == TransportSSH {
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
		// login node.
		l := inv.Slurm.Login
		nodes = []Node{{Name: "allocated", Address: "allocated", Transport: TransportSSH,
			Via: append(append([]string(nil), inv.SSH.Jump...), l.Address)}}
	}
	for _, n := range nodes {
		d = max(d, inv.NodeConfig(n, nil).ReachWithin())
	}
	return d
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
	if t := v.inv.Transport; t != "" && !knownTransport(t) {
		v.problem("transport", "must be %s, got %q", transportChoice(), short(t))
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
