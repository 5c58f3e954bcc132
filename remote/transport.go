package remote

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Config is how to reach one node: its name, and the settings of the one
// transport that reaches it, as rig's composite config holds one per
// protocol. DialNode picks the executor from the one that is set, and
// what the window needs to know of a transport beyond the Executor (how
// long reaching a node may take, how to say what reached it) it asks the
// Config, so that neither the window nor its phases learn which transport
// it is. A new transport is a field here, a case in transport() and its
// own file in this package.
type Config struct {
	// Name identifies the node in every error and progress line.
	Name string
	// Exactly one of these is set.
	SSH   *SSHConfig
	Local *LocalConfig
	Srun  *SrunConfig
	Kube  *KubeConfig
}

// transport is what every transport's settings do for the window.
type transport interface {
	dial(ctx context.Context, name string) (Executor, error)
	// reachWithin bounds how long reaching the node may take, every step
	// of it at its full bound.
	reachWithin() time.Duration
	// address is where the node is, as the inventory named it.
	address() string
	// via says how the node was reached and whether it proved who it is,
	// in a verdict's words.
	via() string
}

var errNoTransport = errors.New("no transport: give the settings of exactly one (SSH, Local, Srun, Kube)")

// transport is the one transport c sets.
func (c Config) transport() (transport, error) {
	var set []transport
	if c.SSH != nil {
		set = append(set, sshTransport{c.SSH})
	}
	if c.Local != nil {
		set = append(set, *c.Local)
	}
	if c.Srun != nil {
		set = append(set, *c.Srun)
	}
	if c.Kube != nil {
		set = append(set, *c.Kube)
	}
	switch len(set) {
	case 1:
		return set[0], nil
	case 0:
		return nil, fmt.Errorf("%s: %w", c.Name, errNoTransport)
	}
	return nil, fmt.Errorf("%s: %d transports: give the settings of exactly one", c.Name, len(set))
}

// DialNode is the one Dialer of a window: the transport c sets reaches
// the node.
func DialNode(ctx context.Context, c Config) (Executor, error) {
	t, err := c.transport()
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	return t.dial(ctx, c.Name)
}

// ReachWithin is how long reaching the node may take at most: every step
// of the transport's way there (each SSH hop's connect and handshake) at
// its full bound. Zero for a Config without one transport, which DialNode
// refuses at once.
func (c Config) ReachWithin() time.Duration {
	t, err := c.transport()
	if err != nil {
		return 0
	}
	return t.reachWithin()
}

// Address is where the node is, as the inventory names it (an SSH host or
// alias, LocalAddress): what a command on another node or a notification
// may be told.
func (c Config) Address() string {
	t, err := c.transport()
	if err != nil {
		return ""
	}
	return t.address()
}

// Via says how the node is reached and how it proved who it is ("over
// SSH, host key verified"), for the verdict that it was reached.
func (c Config) Via() string {
	t, err := c.transport()
	if err != nil {
		return ""
	}
	return t.via()
}

// SSHLogin says whether the window logs in to the node over SSH: only
// then are sshd's settings and the login's authorized_keys the window's
// to judge (SEC-001).
func (c Config) SSHLogin() bool { return c.SSH != nil }

// SSHPort is the SSH port the inventory gave the node; 0 when it gave
// none or the node is not reached over SSH. The other nodes' known_hosts
// name the node with it.
func (c Config) SSHPort() int {
	if c.SSH == nil {
		return 0
	}
	return c.SSH.Port
}

// sshTransport is SSHConfig as a transport.
type sshTransport struct{ c *SSHConfig }

func (s sshTransport) dial(ctx context.Context, name string) (Executor, error) {
	cfg := *s.c
	cfg.Name = name
	c, err := Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Every hop may take its full connect and handshake time.
func (s sshTransport) reachWithin() time.Duration {
	hops := time.Duration(len(s.c.Jump) + 1)
	connect, handshake := s.c.ConnectTimeout, s.c.HandshakeTimeout
	setDefault(&connect, DefaultConnectTimeout)
	setDefault(&handshake, DefaultHandshakeTimeout)
	return hops * (connect + handshake)
}

func (s sshTransport) address() string { return s.c.Host }

func (sshTransport) via() string { return "over SSH, host key verified" }
