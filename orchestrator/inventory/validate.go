package inventory

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gpuaccept/sshconfig"
)

// Defaults filled in when the inventory leaves a key out. A key written
// with a value is never defaulted: port: 0 is an error, not port 22.
const (
	DefaultTolerance   = 0.9
	DefaultDiagLevel   = 1
	DefaultConcurrency = 32
	DefaultPort        = 22
	DefaultKnownHosts  = "~/.ssh/known_hosts"
)

// validator checks a decoded inventory and fills its defaults. Problems
// go to the collector, which places them in the file.
type validator struct {
	inv *Inventory
	c   *collector
	// dir is the inventory's directory: relative paths in it are relative
	// to the file, not to wherever gpuaccept was started.
	dir string
	// origins is where each node of inv.Nodes was written, once host
	// ranges and nodes_from are expanded.
	origins []nodeOrigin
	// cfg is ssh.config's file, read once (sshConfig); nil for none.
	cfg     *sshconfig.Config
	cfgRead bool
	// nodesLost: an entry of nodes or nodes_from had a problem and named
	// no node, so the count and the names are not what was meant; what
	// depends on them stays quiet (one mistake, one error: a range count
	// mismatch also said "at least one node is required" and "the failure
	// test needs at least 2 nodes, got 0").
	nodesLost bool
	// nodesLater: nodes come when the window starts (kubernetes.
	// node_selector); what needs their count cannot be judged yet.
	nodesLater bool
}

// sshConfig is the ssh_config the dial will read (ssh.config, else
// ~/.ssh/config); nil with ssh.config none or when it cannot be read (the
// dial says so, naming the file: an inventory may be checked where its
// ssh_config is not).
func (v *validator) sshConfig() *sshconfig.Config {
	if v.cfgRead {
		return v.cfg
	}
	v.cfgRead = true
	if strings.EqualFold(v.inv.SSH.Config, "none") || v.c.blocked("ssh.config") {
		return nil
	}
	c, err := sshconfig.Load(v.inv.SSH.Config)
	if err != nil {
		return nil
	}
	v.cfg = c
	return c
}

func validate(inv *Inventory, c *collector, dir string) {
	v := &validator{inv: inv, c: c, dir: dir}
	v.top()
	v.transport()
	v.ssh()
	before := len(c.list)
	v.expandNodes()
	v.nodesLost = len(c.list) > before
	v.kubernetes()
	v.nodes()
	v.image()
	v.quote()
	v.acceptance()
	v.slurm()
	v.phases()
	v.telemetry()
	v.idle()
	v.cost()
	v.billing()
}

// given reports whether the file or the environment sets key.
func (v *validator) given(key string) bool {
	_, fromEnv := v.c.env[key]
	return fromEnv || v.c.idx.given(key)
}

// problem records a problem with key unless key already has one (a type
// error, say): one mistake, one message.
func (v *validator) problem(key, format string, args ...any) {
	if !v.c.blocked(key) {
		v.c.addf(key, format, args...)
	}
}

func (v *validator) top() {
	if strings.TrimSpace(v.inv.Provider) == "" {
		v.problem("provider", "required: who rents out the nodes, e.g. %q", "vendor-a")
	}
}

func (v *validator) ssh() {
	s := &v.inv.SSH
	if !v.given("ssh.concurrency") {
		s.Concurrency = DefaultConcurrency
	} else if s.Concurrency < 0 {
		v.problem("ssh.concurrency", "must be 0 (no limit) or more, got %d", s.Concurrency)
	}
	v.nonNegativeDuration("ssh.connect_timeout", s.ConnectTimeout)
	v.nonNegativeDuration("ssh.handshake_timeout", s.HandshakeTimeout)
	v.nonNegativeDuration("ssh.session_timeout", s.SessionTimeout)
	v.nonNegativeDuration("ssh.keepalive_interval", s.KeepaliveInterval)
	v.nonNegativeInt("ssh.keepalive_misses", s.KeepaliveMisses)
	for i := range s.IdentityFiles {
		s.IdentityFiles[i] = v.path(fmt.Sprintf("ssh.identity_files[%d]", i), s.IdentityFiles[i])
	}
	if len(s.KnownHosts) == 0 {
		s.KnownHosts = []string{v.path("ssh.known_hosts", DefaultKnownHosts)}
	} else {
		for i := range s.KnownHosts {
			s.KnownHosts[i] = v.path(fmt.Sprintf("ssh.known_hosts[%d]", i), s.KnownHosts[i])
		}
	}
	if s.Config != "" && !strings.EqualFold(s.Config, "none") {
		s.Config = v.path("ssh.config", s.Config)
	}
	for i, hop := range s.Jump {
		if msg := checkHop(hop); msg != "" {
			v.problem(fmt.Sprintf("ssh.jump[%d]", i), "%s", msg)
		}
	}
}

// path expands ~ and resolves a relative path against the inventory's
// directory. The file need not exist yet: the dial step says so, per node.
func (v *validator) path(key, p string) string {
	if strings.TrimSpace(p) == "" {
		v.problem(key, "empty path")
		return p
	}
	expanded, err := expandHome(p)
	if err != nil {
		v.problem(key, "%v", err)
		return p
	}
	if !filepath.IsAbs(expanded) {
		expanded = filepath.Join(v.dir, expanded)
	}
	return expanded
}

func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", fmt.Errorf("%q: ~user is not supported; write the full path", short(p))
		}
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot expand ~ in %q: %v", short(p), err)
	}
	return filepath.Join(home, p[1:]), nil
}

// checkHop reads a ProxyJump hop as the remote package will:
// [user@]host[:port], one hop per list entry.
func checkHop(hop string) string {
	bad := func(why string) string {
		return fmt.Sprintf("expected [user@]host[:port], got %q: %s", short(hop), why)
	}
	h := strings.TrimPrefix(hop, "ssh://")
	switch {
	case strings.TrimSpace(h) == "":
		return bad("empty")
	case strings.Contains(h, ","):
		return bad("one hop per list entry, in order")
	case strings.ContainsAny(h, " \t"):
		return bad("contains whitespace")
	}
	if i := strings.LastIndex(h, "@"); i >= 0 {
		if i == 0 {
			return bad("no user before @")
		}
		h = h[i+1:]
	}
	host := h
	if hh, p, err := net.SplitHostPort(h); err == nil {
		host = hh
		if port, err := strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return bad("port must be 1..65535")
		}
	}
	if host == "" {
		return bad("no host")
	}
	return ""
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (v *validator) nodes() {
	if len(v.inv.Nodes) == 0 {
		// slurm.allocate given but not decoded (a value of the wrong
		// type in it) is still the allocation: its own error says what.
		if v.inv.Slurm.Allocate != nil || v.given("slurm.allocate") || v.nodesLater {
			return // the allocation's nodes, or the selector's, known once the window starts
		}
		if !v.nodesLost && !v.c.blocked("nodes_from") && !v.c.blocked("nodes[0].name") {
			v.problem("nodes", "at least one node is required (nodes:, or nodes_from: a file of host names or a nodelist)")
		}
		return
	}
	names := map[string]int{}
	for i := range v.inv.Nodes {
		v.node(i, names)
	}
	v.localNodes()
	v.users()
	v.duplicateEndpoints()
}

func (v *validator) node(i int, names map[string]int) {
	n := &v.inv.Nodes[i]
	key, who := v.keyOf(i), v.who(i)
	switch {
	case n.Name == "":
		v.problem(key+".name", "required: a short unique name such as gpu-01, used in reports and file names")
	case !dnsLabel.MatchString(n.Name):
		v.problem(key+".name", "%s%q is not a DNS label: use lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit", who, short(n.Name))
	default:
		if j, dup := names[n.Name]; dup {
			v.problem(key+".name", "%sduplicate name: %s is also called %q", who, v.keyOf(j), n.Name)
		} else {
			names[n.Name] = i
		}
	}
	v.nodeTransport(i)
	if hn := v.sshConfig().Get(n.Name, "HostName"); n.Address == "" && n.Name != "" && hn != "" {
		// ssh_config's Host entry for the name: dialled by the name, as
		// `ssh gpu-01` is (its Port, User and keys apply); the other
		// nodes reach it at its HostName, which they resolve themselves.
		n.Address = n.Name
		if n.FabricAddress == "" && checkAddress(hn) == "" && !strings.Contains(hn, "%") {
			n.FabricAddress = hn
		}
	}
	if msg := checkAddress(n.Address); msg != "" {
		if n.Address == "" {
			msg += " (or a Host entry with a HostName for the name in ssh_config)"
		}
		v.problem(key+".address", "%s%s", who, msg)
	}
	// An absent port stays 0: the dial then takes ssh_config's Port for
	// the address, else 22, as ssh does.
	if v.given(key+".port") && (n.Port < 1 || n.Port > 65535) {
		v.problem(key+".port", "%smust be 1..65535, got %d", who, n.Port)
	}
	if v.given(key + ".fabric_address") {
		if _, _, err := net.SplitHostPort(n.FabricAddress); err == nil {
			v.problem(key+".fabric_address", "%s%q: an address without a port (the nodes reach each other on their SSH port)", who, short(n.FabricAddress))
		} else if msg := checkAddress(n.FabricAddress); msg != "" {
			v.problem(key+".fabric_address", "%s%s", who, msg)
		}
	}
}

// checkAddress accepts what ssh would: an IP address, a host name or an
// ssh_config alias; the usual slips (a port or a user in it) are named.
func checkAddress(a string) string {
	switch {
	case a == "":
		return "required: the node's IP address or host name"
	case strings.ContainsAny(a, " \t\r\n"):
		return fmt.Sprintf("%q contains whitespace", short(a))
	case strings.Contains(a, "@"):
		return fmt.Sprintf("%q: give the user in user, not in the address", short(a))
	case strings.HasPrefix(a, "["):
		return fmt.Sprintf("%q: write an IPv6 address without brackets", short(a))
	case strings.Contains(a, "/"):
		return fmt.Sprintf("%q is not an IP address or host name", short(a))
	}
	if host, port, err := net.SplitHostPort(a); err == nil {
		return fmt.Sprintf("%q: give the port in port (address: %s, port: %s)", short(a), host, port)
	}
	if !ValidHost(a) {
		return fmt.Sprintf("%q is not an IP address or host name (letters, digits, '-', '_' and '.'; an IP literal)", short(a))
	}
	return ""
}

// hostName is a DNS name or an ssh_config alias of the same characters.
var hostName = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$`)

// ValidHost says whether a is an address gpuaccept will put on a command
// line (mpirun's -H, srun's --nodelist, a node's known_hosts): a host name
// or an IP literal, nothing a shell could read as more. The one pattern,
// in one place.
func ValidHost(a string) bool {
	if net.ParseIP(a) != nil {
		return true
	}
	return len(a) <= 253 && hostName.MatchString(a)
}

// users fills each node's user from ssh.user, else from the User
// ssh_config gives its address (as ssh would take it, and so that the
// record names the account), or says who has none.
func (v *validator) users() {
	nodes := v.inv.Nodes
	var cfg *sshconfig.Config
	if v.inv.SSH.User == "" {
		cfg = v.sshConfig()
	}
	var missing []int
	overSSH := 0 // the nodes reached over SSH (a local one has its user)
	for i := range nodes {
		if t := v.inv.TransportOf(nodes[i]); t == TransportLocal || t == TransportKubernetes {
			continue // its user is the one running gpuaccept (localNodes), or the pod's
		}
		overSSH++
		if nodes[i].User == "" {
			if v.inv.SSH.User != "" {
				nodes[i].User = v.inv.SSH.User
				continue
			}
			if u := cfg.Get(nodes[i].Address, "User"); u != "" && !strings.ContainsAny(u, "%$ \t") {
				nodes[i].User = u
				continue
			}
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return
	}
	where := ""
	if cfg != nil && cfg.Path != "" {
		where = ", or a User for them in " + cfg.Path
	}
	if len(missing) == overSSH {
		v.problem("ssh.user", "required: set ssh.user, or user on every node%s", where)
		return
	}
	for _, i := range missing {
		v.problem(v.keyOf(i)+".user", "%srequired: ssh.user is not set, so every node needs a user%s", v.who(i), where)
	}
}

// duplicateEndpoints flags two nodes that are one machine: the window
// would count its GPUs twice.
func (v *validator) duplicateEndpoints() {
	seen := map[string]int{}
	for i, n := range v.inv.Nodes {
		key := v.keyOf(i)
		if v.inv.TransportOf(n) == TransportLocal || checkAddress(n.Address) != "" || v.c.blocked(key+".address") || v.c.blocked(key+".port") {
			continue
		}
		port := n.Port
		if port == 0 {
			port = DefaultPort
		}
		ep := net.JoinHostPort(strings.ToLower(n.Address), strconv.Itoa(port))
		if j, dup := seen[ep]; dup {
			v.problem(key+".address", "%s%s is also %s (%q): each node needs its own address and port", v.who(i), ep, v.keyOf(j), v.inv.Nodes[j].Name)
			continue
		}
		seen[ep] = i
	}
}

func (v *validator) nonNegativeInt(key string, n int) {
	if n < 0 {
		v.problem(key, "must not be negative, got %d", n)
	}
}

func (v *validator) nonNegativeNumber(key string, f float64) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		v.problem(key, "must be a finite number, got %v", f)
	case f < 0:
		v.problem(key, "must not be negative, got %v", f)
	}
}

func (v *validator) nonNegativeDuration(key string, d time.Duration) {
	if d < 0 {
		v.problem(key, "must not be negative, got %v", d)
	}
}
