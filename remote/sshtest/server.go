// Package sshtest runs an in-process SSH and SFTP server for tests.
//
// The server is small but deliberately behaves like OpenSSH's sshd wherever
// the client code under test can observe a difference, because that code is
// also exercised against a real sshd: commands run as real child processes
// of `Shell -c COMMAND` in their own session (no pty), exit statuses and
// signals are reported the way sshd reports them, and a client that goes
// away does not kill the commands it started.
//
// On top of that it can inject the network faults that are hard to provoke
// with a real sshd: a handshake that never starts, a frozen network, ignored
// keepalives, connections dropped at once, and a changed host key.
//
// Children still running when a channel or connection ends are NOT killed,
// not even by Close, because sshd does not kill them either. Their pipes are
// closed, so most commands end on their own, but a test that leaves one
// running (for example `sleep 100` whose channel was closed) must end it
// itself, for instance with KillChildren; otherwise the goroutine that reaps
// it is still there when goleak looks.
package sshtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// Options configures a Server. The zero value is usable but authorizes no
// key, so no client can log in.
type Options struct {
	// HostKey is the key the server presents; an ed25519 key is generated
	// when nil.
	HostKey ssh.Signer
	// AuthorizedKeys are the only keys accepted for public-key
	// authentication, for any user name. No other method is offered.
	AuthorizedKeys []ssh.PublicKey
	// AuthorizedKeyLines are more authorized keys, as authorized_keys
	// lines (what remote.NewWindowKey gives), for callers that do not
	// import x/crypto/ssh.
	AuthorizedKeyLines []string
	// Shell runs each exec request as `Shell -c COMMAND`; /bin/bash when
	// empty.
	Shell string
	// Dir is the user's home: the working directory of commands (and
	// their HOME) and of the SFTP subsystem; the test process's own when
	// empty.
	Dir string
	// Env is appended to the environment of commands, after os.Environ()
	// and the variables the client sent, so it wins over both.
	Env []string
	// Name identifies the server in log and error text, which helps when a
	// test runs several (a jump host and a target, say).
	Name string
	// Logf, when set, receives a line for events worth knowing when a test
	// fails (a rejected key, a failed handshake, a command that would not
	// start). It is not called after Close returns.
	Logf func(format string, args ...any)
	// CorruptSFTPWrites flips one byte in the first SFTP write that carries
	// data on each SFTP session: bytes that the disk got differ from what
	// the client sent, as bad memory, a bad disk or a broken proxy would do.
	CorruptSFTPWrites bool
}

// Server is a running test SSH server. All methods are safe for concurrent
// use.
type Server struct {
	opts   Options
	ln     net.Listener
	port   int
	ctx    context.Context // cancelled by Close, to abort outgoing dials
	cancel context.CancelFunc

	// wg counts every goroutine of the server except the reapers of child
	// processes, which live as long as the children do.
	wg sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	hostKey   ssh.Signer
	conns     map[*faultConn]struct{}
	accepted  int
	execs     []string
	children  map[*child]struct{}
	stall     bool
	ignoreKAs bool
}

// Start listens on 127.0.0.1 on a free port and serves until Close.
func Start(opts Options) (*Server, error) {
	if opts.Shell == "" {
		opts.Shell = "/bin/bash"
	}
	for _, line := range opts.AuthorizedKeyLines {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("sshtest %s: authorized key %.40q: %w", opts.Name, line, err)
		}
		opts.AuthorizedKeys = append(slices.Clone(opts.AuthorizedKeys), k)
	}
	hostKey := opts.HostKey
	if hostKey == nil {
		var err error
		if hostKey, err = NewKey(); err != nil {
			return nil, fmt.Errorf("sshtest %s: host key: %w", opts.Name, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sshtest %s: %w", opts.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:     opts,
		ln:       ln,
		port:     ln.Addr().(*net.TCPAddr).Port,
		ctx:      ctx,
		cancel:   cancel,
		hostKey:  hostKey,
		conns:    make(map[*faultConn]struct{}),
		children: make(map[*child]struct{}),
	}
	s.wg.Go(s.acceptLoop)
	return s, nil
}

// Close stops listening, closes every connection (frozen ones too) and waits
// until every goroutine of the server has ended. Child processes that are
// still running are left alone, as sshd leaves them; see KillChildren.
// Close may be called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	conns := s.connList()
	s.mu.Unlock()

	var err error
	if first {
		s.cancel()
		if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("sshtest %s: %w", s.opts.Name, cerr)
		}
		for _, c := range conns {
			c.Close()
		}
	}
	s.wg.Wait()
	return err
}

// Addr is "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort(s.Host(), strconv.Itoa(s.port)) }

// Host is "127.0.0.1".
func (s *Server) Host() string { return "127.0.0.1" }

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// HostKey is the public host key that new connections are shown.
func (s *Server) HostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostKey.PublicKey()
}

// Connections counts the TCP connections accepted so far, including those
// stalled by StallHandshake and those that failed to authenticate.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Execs lists the commands of all exec requests run so far, in order.
func (s *Server) Execs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.execs...)
}

// StallHandshake makes connections accepted while it is on never see a
// single byte from the server, so a client waits for the SSH version line
// forever unless it has a deadline. Connections already stalled stay so.
func (s *Server) StallHandshake(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = on
}

// Freeze makes every existing connection stop reading and writing, like a
// network cut without a reset: what the client sends sits unread and nothing
// comes back, until Thaw. Connections accepted later are not frozen; call
// StallHandshake as well to cut off the whole host.
func (s *Server) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.freeze()
	}
}

// Thaw undoes Freeze; traffic held back flows again.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.thaw()
	}
}

// IgnoreKeepalives makes the server leave every global request, keepalives
// included, unanswered while on: not even a failure reply goes back. A
// request ignored stays unanswered after it is turned off again.
func (s *Server) IgnoreKeepalives(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreKAs = on
}

// DropConnections resets every TCP connection at once, as a host that dies
// would, without any SSH disconnect message. The server keeps listening.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := s.connList()
	s.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
}

// SetHostKey makes connections accepted from now on present key, so that a
// client that recorded the old one sees a changed host key.
func (s *Server) SetHostKey(key ssh.Signer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostKey = key
}

func (s *Server) connList() []*faultConn {
	list := make([]*faultConn, 0, len(s.conns))
	for c := range s.conns {
		list = append(list, c)
	}
	return list
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf == nil {
		return
	}
	// Logf is typically t.Logf, which panics once the test is over; the
	// reapers may outlive Close, so they must not log, and nothing else
	// runs after Close.
	s.opts.Logf("sshtest %s: "+format, append([]any{s.opts.Name}, args...)...)
}

func (s *Server) acceptLoop() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: keep serving, as sshd
			// does, but do not spin.
			s.logf("accept: %v", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		c := newFaultConn(nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.accepted++
		stall := s.stall
		config := s.serverConfig()
		s.mu.Unlock()
		s.wg.Go(func() { s.serveConn(c, config, stall) })
	}
}

// serverConfig is built per connection so that SetHostKey only affects
// connections accepted after it. Called with s.mu held.
func (s *Server) serverConfig() *ssh.ServerConfig {
	config := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-sshtest",
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			wire := key.Marshal()
			for _, ak := range s.opts.AuthorizedKeys {
				if bytes.Equal(ak.Marshal(), wire) {
					return &ssh.Permissions{}, nil
				}
			}
			s.logf("rejected %s key %s for user %q", key.Type(), ssh.FingerprintSHA256(key), meta.User())
			return nil, errors.New("key not authorized")
		},
	}
	config.AddHostKey(s.hostKey)
	return config
}

func (s *Server) serveConn(c *faultConn, config *ssh.ServerConfig, stall bool) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	if stall {
		// Keep reading so that the connection ends when the client gives
		// up, but never answer.
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	}

	sconn, chans, reqs, err := ssh.NewServerConn(c, config)
	if err != nil {
		s.logf("handshake with %s: %v", c.RemoteAddr(), err)
		return
	}
	defer sconn.Close()
	// Dials for direct-tcpip channels must not outlive the connection.
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	s.wg.Go(func() { s.serveGlobalRequests(reqs) })
	// chans is closed when the connection ends, for whatever reason; every
	// channel goroutine ends then too, because its channel is closed.
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			s.wg.Go(func() { s.serveSession(nc) })
		case "direct-tcpip":
			s.wg.Go(func() { s.serveDirectTCPIP(ctx, nc) })
		default:
			nc.Reject(ssh.UnknownChannelType, "unsupported channel type")
		}
	}
}

// serveGlobalRequests answers every global request positively. OpenSSH
// answers keepalive@openssh.com with a failure, but any answer proves the
// server alive, and that is all a client checks.
func (s *Server) serveGlobalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		s.mu.Lock()
		ignore := s.ignoreKAs
		s.mu.Unlock()
		if ignore {
			continue
		}
		req.Reply(true, nil)
	}
}

// signals are the names RFC 4254 defines, which are also all OpenSSH
// accepts in a "signal" request and reports in "exit-signal".
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT,
	"ALRM": syscall.SIGALRM,
	"FPE":  syscall.SIGFPE,
	"HUP":  syscall.SIGHUP,
	"ILL":  syscall.SIGILL,
	"INT":  syscall.SIGINT,
	"KILL": syscall.SIGKILL,
	"PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV,
	"TERM": syscall.SIGTERM,
	"USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

func signalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return name
		}
	}
	// What OpenSSH sends for a signal outside the RFC's list.
	return "SIG@openssh.com"
}
