package remote

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"gpuaccept/sshconfig"
)

// SSHConfig is the SSH transport's settings for one node. Zero values
// mean "not given": they are filled from ssh_config and then from
// defaults, so explicit inventory values always win.
type SSHConfig struct {
	// Name identifies the node in every error and progress line.
	Name string
	// Host is an address or an ssh_config alias (whose HostName is used).
	Host string
	Port int
	User string
	// IdentityFiles are private keys (OpenSSH or PEM, unencrypted; use the
	// agent for keys with a passphrase).
	IdentityFiles []string
	// Agent uses the ssh-agent at SSH_AUTH_SOCK when set.
	Agent bool
	// Jump is the ProxyJump chain, first hop first: "[user@]host[:port]".
	// Each hop is resolved through ssh_config like the node itself.
	Jump []string
	// SSHConfig is an ssh_config file; "" reads ~/.ssh/config when it
	// exists, "none" reads nothing.
	SSHConfig string
	// HostKeys verifies the node; required.
	HostKeys *HostKeys

	ConnectTimeout   time.Duration // TCP connect, per hop
	HandshakeTimeout time.Duration // SSH handshake + auth, per hop
	SessionTimeout   time.Duration // opening a channel (golang/go#26643)
	// KeepaliveInterval and KeepaliveMisses bound how long a dead node or
	// a dropped network goes unnoticed: after Misses unanswered keepalives
	// in a row the connection is closed and every call on it fails.
	KeepaliveInterval time.Duration
	KeepaliveMisses   int
	// GuardLease is how long a remote command outlives silence from the
	// coordinator before the guard kills it. Zero: derived from the
	// keepalive settings.
	GuardLease time.Duration
}

// Defaults chosen for rented nodes across the internet: generous enough for
// a slow jump host, short enough that a dead node costs seconds, not the
// TCP stack's minutes.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultHandshakeTimeout  = 15 * time.Second
	DefaultSessionTimeout    = 15 * time.Second
	DefaultKeepaliveInterval = 5 * time.Second
	DefaultKeepaliveMisses   = 3
)

// endpoint is one resolved hop: where to dial and as whom.
type endpoint struct {
	alias         string // what the user wrote (ssh_config Host match key)
	host          string // what we dial
	port          int
	user          string
	identityFiles []string
}

func (e endpoint) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// resolved is an SSHConfig with ssh_config and defaults applied.
type resolved struct {
	SSHConfig
	target endpoint
	jumps  []endpoint
}

func (c SSHConfig) resolve() (*resolved, error) {
	if c.Host == "" {
		return nil, fmt.Errorf("%s: no host address", c.nodeName())
	}
	if c.HostKeys == nil {
		return nil, fmt.Errorf("%s: no known_hosts configured", c.nodeName())
	}
	sc, err := loadSSHConfig(c.SSHConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.nodeName(), err)
	}
	r := &resolved{SSHConfig: c}
	r.Name = c.nodeName()
	r.target = configEndpoint(sc, c.Host, c.Port, c.User, c.IdentityFiles)
	jumps := c.Jump
	if len(jumps) == 0 {
		if pj := sc.Get(c.Host, "ProxyJump"); pj != "" && !strings.EqualFold(pj, "none") {
			jumps = strings.Split(pj, ",")
		}
	}
	for _, j := range jumps {
		user, host, port, err := parseHop(strings.TrimSpace(j))
		if err != nil {
			return nil, fmt.Errorf("%s: jump host %q: %w", r.Name, j, err)
		}
		// A hop without its own identity uses the node's, as users expect
		// when the inventory lists one key for the whole window.
		ep := configEndpoint(sc, host, port, user, nil)
		if len(ep.identityFiles) == 0 {
			ep.identityFiles = r.target.identityFiles
		}
		r.jumps = append(r.jumps, ep)
	}
	setDefault(&r.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&r.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&r.SessionTimeout, DefaultSessionTimeout)
	setDefault(&r.KeepaliveInterval, DefaultKeepaliveInterval)
	if r.KeepaliveMisses <= 0 {
		r.KeepaliveMisses = DefaultKeepaliveMisses
	}
	r.GuardLease = r.guardLease()
	return r, nil
}

// guardLease is how long the guard lets its command outlive silence from
// the coordinator: GuardLease when given, else derived from the keepalive
// settings (their defaults where they are not given).
func (c SSHConfig) guardLease() time.Duration {
	if c.GuardLease > 0 {
		return c.GuardLease
	}
	setDefault(&c.KeepaliveInterval, DefaultKeepaliveInterval)
	if c.KeepaliveMisses <= 0 {
		c.KeepaliveMisses = DefaultKeepaliveMisses
	}
	// Heartbeats travel every interval; allow one more than the misses
	// the coordinator itself tolerates, and never less than 10s so a
	// busy link does not kill healthy work.
	return max(c.KeepaliveInterval*time.Duration(c.KeepaliveMisses+1), 10*time.Second)
}

func (c SSHConfig) nodeName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Host
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// parseHop reads ProxyJump's "[user@]host[:port]" (and ssh://user@host:port).
func parseHop(s string) (user, host string, port int, err error) {
	s = strings.TrimPrefix(s, "ssh://")
	if s == "" {
		return "", "", 0, fmt.Errorf("empty")
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		user, s = s[:i], s[i+1:]
	}
	host = s
	if h, p, splitErr := net.SplitHostPort(s); splitErr == nil {
		host = h
		port, err = strconv.Atoi(p)
		if err != nil || port <= 0 || port > 65535 {
			return "", "", 0, fmt.Errorf("bad port %q", p)
		}
	}
	if host == "" {
		return "", "", 0, fmt.Errorf("no host")
	}
	return user, host, port, nil
}

// sshConfig is the ssh_config the dial reads.
type sshConfig = sshconfig.Config

func loadSSHConfig(path string) (*sshConfig, error) { return sshconfig.Load(path) }

// endpoint resolves alias: explicit values first, then ssh_config, then
// OpenSSH's defaults.
func configEndpoint(s *sshConfig, alias string, port int, user string, identities []string) endpoint {
	e := endpoint{alias: alias, host: alias, port: port, user: user}
	if hn := s.Get(alias, "HostName"); hn != "" {
		e.host = strings.ReplaceAll(hn, "%h", alias)
	}
	if e.port == 0 {
		if p, err := strconv.Atoi(s.Get(alias, "Port")); err == nil && p > 0 {
			e.port = p
		} else {
			e.port = 22
		}
	}
	if e.user == "" {
		e.user = s.Get(alias, "User")
	}
	if e.user == "" {
		e.user = localUser()
	}
	ids := identities
	if len(ids) == 0 {
		ids = s.GetAll(alias, "IdentityFile")
	}
	for _, id := range ids {
		e.identityFiles = append(e.identityFiles, expandTokens(id, e))
	}
	return e
}

// expandTokens handles the ssh_config tokens that make sense for identity
// file names.
func expandTokens(s string, e endpoint) string {
	home, _ := os.UserHomeDir()
	r := strings.NewReplacer("%%", "%", "%d", home, "%h", e.host, "%n", e.alias,
		"%p", strconv.Itoa(e.port), "%r", e.user, "%u", localUser())
	return expandHome(r.Replace(s))
}

func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}
