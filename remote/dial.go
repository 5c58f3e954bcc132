package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Client is one live SSH connection to a node, possibly through jump hosts.
// It is safe for concurrent use. Once the connection is lost every call on
// it fails with a *ConnectionLostError naming the node.
type Client struct {
	cfg  *resolved
	conn *ssh.Client
	live *liveConn // the transport of the final hop, for liveness
	hops []*ssh.Client
	// agentConn is the ssh-agent socket, closed with the client.
	agentConn net.Conn

	done      chan struct{}
	closeOnce sync.Once
	lost      atomic.Pointer[ConnectionLostError]
	wg        sync.WaitGroup
	// hostKey is the key the final hop presented (and the known_hosts
	// check accepted).
	hostKey ssh.PublicKey
}

// Name is the node's name as used in errors.
func (c *Client) Name() string { return c.cfg.Name }

// Addr is the host:port that was finally dialled.
func (c *Client) Addr() string { return c.cfg.target.addr() }

// Dial connects to the node described by cfg. Every step is bounded: TCP
// connect and handshake per hop by their timeouts, and the whole by ctx.
func Dial(ctx context.Context, cfg SSHConfig) (*Client, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	c := &Client{cfg: r, done: make(chan struct{})}
	auth, err := c.authMethods()
	if err != nil {
		return nil, &SetupError{Err: err}
	}
	var via *ssh.Client
	hops := append(append([]endpoint{}, r.jumps...), r.target)
	for i, ep := range hops {
		last := i == len(hops)-1
		client, live, err := c.dialHop(ctx, via, ep, auth)
		if err != nil {
			c.closeHops()
			if c.agentConn != nil {
				c.agentConn.Close()
			}
			if !last {
				return nil, withNode(r.Name, "jump host "+ep.addr(), err)
			}
			return nil, withNode(r.Name, "", err)
		}
		if last {
			c.conn, c.live = client, live
		} else {
			c.hops = append(c.hops, client)
		}
		via = client
	}
	c.wg.Add(2)
	go c.watch()
	go c.keepalive()
	return c, nil
}

// authMethods gathers identity files first, then the agent, as OpenSSH
// tries them.
func (c *Client) authMethods() (map[string]hopAuth, error) {
	var agentSigners func() ([]ssh.Signer, error)
	if c.cfg.Agent {
		if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
			conn, err := net.DialTimeout("unix", sock, c.cfg.ConnectTimeout)
			if err != nil {
				return nil, fmt.Errorf("%s: ssh-agent at SSH_AUTH_SOCK=%s: %w", c.cfg.Name, sock, err)
			}
			c.agentConn = conn
			agentSigners = agent.NewClient(conn).Signers
		}
	}
	// Jump hops may use other keys than the node; parse each file once.
	methods := map[string]hopAuth{}
	signers := map[string]ssh.Signer{}
	for _, ep := range append(append([]endpoint{}, c.cfg.jumps...), c.cfg.target) {
		files := ep.identityFiles
		explicit := len(files) > 0
		if !explicit && agentSigners == nil {
			files = defaultIdentityFiles()
		}
		var list []ssh.Signer
		for _, f := range files {
			s, ok := signers[f]
			if !ok {
				var err error
				s, err = loadIdentity(f)
				if err != nil {
					if !explicit && errors.Is(err, os.ErrNotExist) {
						continue // OpenSSH skips absent default keys silently
					}
					return nil, fmt.Errorf("%s: identity file: %w", c.cfg.Name, err)
				}
				signers[f] = s
			}
			list = append(list, s)
		}
		if len(list) == 0 && agentSigners == nil {
			return nil, fmt.Errorf("%s: no way to authenticate to %s: give identity files or run an ssh-agent (SSH_AUTH_SOCK)",
				c.cfg.Name, ep.addr())
		}
		methods[ep.addr()] = hopAuth{signers: list, agent: agentSigners}
	}
	return methods, nil
}

// hopAuth is how the coordinator proves who it is to one hop: identity
// files first, then the agent, as OpenSSH tries them.
type hopAuth struct {
	signers []ssh.Signer
	agent   func() ([]ssh.Signer, error)
}

// methods are the auth methods of one connection; signed hears the
// first signature, which the client makes only once the server accepted
// the key (what the server says after that is its account phase's).
func (h hopAuth) methods(signed *atomic.Bool) []ssh.AuthMethod {
	var m []ssh.AuthMethod
	if len(h.signers) > 0 {
		m = append(m, ssh.PublicKeys(noting(h.signers, signed)...))
	}
	if h.agent != nil {
		m = append(m, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			s, err := h.agent()
			return noting(s, signed), err
		}))
	}
	return m
}

// noting wraps signers so that signing sets signed, keeping what each can
// do (RSA keys sign with SHA-2 only through SignWithAlgorithm).
func noting(signers []ssh.Signer, signed *atomic.Bool) []ssh.Signer {
	out := make([]ssh.Signer, 0, len(signers))
	for _, s := range signers {
		n := notingSigner{Signer: s, signed: signed}
		as, ok := s.(ssh.AlgorithmSigner)
		if !ok {
			out = append(out, n)
			continue
		}
		w := notingAlgSigner{notingSigner: n, alg: as}
		if ms, ok := s.(ssh.MultiAlgorithmSigner); ok {
			if m, err := ssh.NewSignerWithAlgorithms(w, ms.Algorithms()); err == nil {
				out = append(out, m)
				continue
			}
		}
		out = append(out, w)
	}
	return out
}

type notingSigner struct {
	ssh.Signer
	signed *atomic.Bool
}

func (n notingSigner) Sign(r io.Reader, data []byte) (*ssh.Signature, error) {
	n.signed.Store(true)
	return n.Signer.Sign(r, data)
}

type notingAlgSigner struct {
	notingSigner
	alg ssh.AlgorithmSigner
}

func (n notingAlgSigner) SignWithAlgorithm(r io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	n.signed.Store(true)
	return n.alg.SignWithAlgorithm(r, data, algorithm)
}

func defaultIdentityFiles() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	var files []string
	for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		files = append(files, filepath.Join(home, ".ssh", n))
	}
	return files
}

func loadIdentity(path string) (ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%s is protected by a passphrase: load it into ssh-agent (ssh-add %s) and enable the agent", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// dialHop opens TCP (directly, or as a channel through the previous hop)
// and runs the SSH handshake under its own deadline: a node that accepts
// TCP and then says nothing must not hold the window.
func (c *Client) dialHop(ctx context.Context, via *ssh.Client, ep endpoint, auth map[string]hopAuth) (*ssh.Client, *liveConn, error) {
	addr := ep.addr()
	connectCtx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	var raw net.Conn
	var err error
	if via == nil {
		d := net.Dialer{KeepAlive: 30 * time.Second}
		raw, err = d.DialContext(connectCtx, "tcp", addr)
	} else {
		raw, err = via.DialContext(connectCtx, "tcp", addr)
	}
	if err != nil {
		if connectCtx.Err() != nil && ctx.Err() == nil {
			return nil, nil, &TimeoutError{Node: c.cfg.Name, Step: "connect to " + addr, After: c.cfg.ConnectTimeout}
		}
		return nil, nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	live := newLiveConn(raw)
	// What the server says once it accepted the key (PAM's account
	// refusal, say); a login node's greeting before that is no refusal.
	var banner strings.Builder
	var signed atomic.Bool
	config := &ssh.ClientConfig{
		BannerCallback: func(msg string) error {
			if signed.Load() && banner.Len() < 1024 {
				banner.WriteString(msg[:min(len(msg), 1024-banner.Len())])
			}
			return nil
		},
		User:              ep.user,
		Auth:              auth[addr].methods(&signed),
		HostKeyCallback:   c.keepHostKey(ep.addr() == c.cfg.target.addr() && ep.user == c.cfg.target.user, c.cfg.HostKeys.Callback(c.cfg.Name)),
		HostKeyAlgorithms: c.cfg.HostKeys.Algorithms(addr),
		Timeout:           c.cfg.HandshakeTimeout,
	}
	type result struct {
		conn  ssh.Conn
		chans <-chan ssh.NewChannel
		reqs  <-chan *ssh.Request
		err   error
	}
	done := make(chan result, 1)
	go func() {
		conn, chans, reqs, err := ssh.NewClientConn(live, addr, config)
		done <- result{conn, chans, reqs, err}
	}()
	timer := time.NewTimer(c.cfg.HandshakeTimeout)
	defer timer.Stop()
	select {
	case res := <-done:
		if res.err != nil {
			live.Close()
			return nil, nil, handshakeError(addr, ep.user, res.err, banner.String())
		}
		return ssh.NewClient(res.conn, res.chans, res.reqs), live, nil
	case <-timer.C:
		live.Close()
		<-done
		return nil, nil, &TimeoutError{Node: c.cfg.Name, Step: "ssh handshake with " + addr, After: c.cfg.HandshakeTimeout}
	case <-ctx.Done():
		live.Close()
		<-done
		return nil, nil, fmt.Errorf("ssh handshake with %s: %w", addr, ctx.Err())
	}
}

// keepHostKey remembers the final hop's key once the check has passed.
func (c *Client) keepHostKey(final bool, check ssh.HostKeyCallback) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		if err == nil && final {
			c.hostKey = key
		}
		return err
	}
}

// handshakeError unwraps host key errors (they already say everything) and
// spells out authentication failures. banner: what the server sent while
// authenticating; a server that said something and then closed the
// connection refused the login (OpenSSH does so when its PAM account phase
// denies a key it accepted: pam_slurm_adopt's "no active jobs on this
// node").
func handshakeError(addr, user string, err error, banner string) error {
	var unknown *UnknownHostKeyError
	var changed *HostKeyChangedError
	switch {
	case errors.As(err, &unknown):
		return unknown
	case errors.As(err, &changed):
		return changed
	}
	var se *ssh.ServerAuthError
	if errors.As(err, &se) || isAuthFailure(err) {
		return &AuthError{Addr: addr, User: user, Err: err}
	}
	if said := strings.TrimSpace(banner); said != "" && errors.Is(err, io.EOF) {
		return &AuthError{Addr: addr, User: user, Said: said, Err: err}
	}
	return fmt.Errorf("ssh handshake with %s: %w", addr, err)
}

func isAuthFailure(err error) bool {
	return err != nil && containsAny(err.Error(), "unable to authenticate", "no supported methods remain")
}

// Close ends the connection and every hop under it. Pending calls fail.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		if c.conn != nil {
			c.conn.Close()
		}
		c.closeHops()
		if c.agentConn != nil {
			c.agentConn.Close()
		}
	})
	c.wg.Wait()
	return nil
}

func (c *Client) closeHops() {
	for i := len(c.hops) - 1; i >= 0; i-- {
		c.hops[i].Close()
	}
}

// lose records why the connection is gone (first reason wins) and closes
// it, which fails every pending call.
func (c *Client) lose(reason string, err error) {
	c.lost.CompareAndSwap(nil, &ConnectionLostError{Node: c.cfg.Name, Reason: reason, Err: err})
	if c.conn != nil {
		c.conn.Close()
	}
	c.closeHops()
}

// Lost reports whether the connection went away underneath the client
// (as opposed to being closed by it).
func (c *Client) Lost() bool { return c.lost.Load() != nil }

// lostErr is the reason the connection is gone, or nil if it was closed
// on purpose or is still up.
func (c *Client) lostErr() error {
	if l := c.lost.Load(); l != nil {
		return l
	}
	return nil
}

// connectionError explains a failure of a call: the recorded loss if there
// is one, else a generic loss.
func (c *Client) connectionError(what string, err error) error {
	if l := c.lostErr(); l != nil {
		return l
	}
	select {
	case <-c.done:
		return fmt.Errorf("%s: %s: connection closed by gpuaccept: %w", c.cfg.Name, what, net.ErrClosed)
	default:
	}
	// The session failed before the connection's watcher heard the
	// connection go: it is lost from here on, as the Executor contract has
	// it (Lost true once a call said so), and the window dials afresh.
	c.lose(what+" failed", err)
	return c.lostErr()
}

func (c *Client) watch() {
	defer c.wg.Done()
	err := c.conn.Wait()
	select {
	case <-c.done:
	default:
		c.lose("closed by the node or the network", err)
	}
}

const keepaliveRequest = "keepalive@openssh.com"

// keepalive asks the node for a reply every interval. Liveness is "any
// byte received recently", not "keepalive answered", so a busy transfer
// whose replies queue behind data is not mistaken for a dead node.
func (c *Client) keepalive() {
	defer c.wg.Done()
	interval, misses := c.cfg.KeepaliveInterval, c.cfg.KeepaliveMisses
	limit := interval * time.Duration(misses)
	// Check four times an interval so a loss is noticed close to the limit.
	tick := time.NewTicker(interval / 4)
	defer tick.Stop()
	answered := make(chan error, 1)
	inflight := false
	var lastSent time.Time
	for {
		select {
		case <-c.done:
			if inflight {
				<-answered
			}
			return
		case err := <-answered:
			inflight = false
			if err != nil {
				// watch() reports the closed connection with its cause.
				continue
			}
		case now := <-tick.C:
			if silent := now.Sub(c.live.lastRead()); silent > limit {
				c.lose(fmt.Sprintf("node silent for %s (%d keepalives %s apart unanswered)",
					silent.Round(100*time.Millisecond), misses, interval), nil)
				if inflight {
					<-answered
				}
				return
			}
			if !inflight && now.Sub(lastSent) >= interval {
				inflight, lastSent = true, now
				go func() {
					_, _, err := c.conn.SendRequest(keepaliveRequest, true, nil)
					answered <- err
				}()
			}
		}
	}
}

// liveConn remembers when a byte last arrived.
type liveConn struct {
	net.Conn
	last atomic.Int64
}

func newLiveConn(c net.Conn) *liveConn {
	l := &liveConn{Conn: c}
	l.last.Store(time.Now().UnixNano())
	return l
}

func (l *liveConn) Read(p []byte) (int, error) {
	n, err := l.Conn.Read(p)
	if n > 0 {
		l.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (l *liveConn) lastRead() time.Time { return time.Unix(0, l.last.Load()) }
