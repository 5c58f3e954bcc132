package remote

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

//go:embed guard.sh
var guardSource string

// guardScript is guard.sh without its comments: it travels with every
// command and is parsed twice on the node.
var guardScript = stripComments(guardSource)

func stripComments(script string) string {
	var b strings.Builder
	for _, line := range strings.Split(script, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// Cmd is one command to run on a node.
type Cmd struct {
	// Command is a bash command line.
	Command string
	// Env is exported before the command runs. (SSH "env" requests are
	// mostly refused by sshd's AcceptEnv, so it travels in the command.)
	Env map[string]string
	// Stdin, when set, is streamed to the command; it sees EOF at its end.
	Stdin io.Reader
	// Stdout and Stderr receive the streams as they arrive, each copied on
	// its own; nil discards.
	Stdout, Stderr io.Writer
	// Grace is how long the command may take to exit after TERM when it
	// is cancelled, before KILL. Default 5s.
	Grace time.Duration
}

const stdinFrameBytes = 1 << 20 // few forks per MiB on the node (guard.sh reads a frame with head)

// DefaultGrace is Cmd.Grace when it is not given.
const DefaultGrace = 5 * time.Second

// Run runs cmd on the node and waits for it. The command runs under a
// guard (guard.sh): when ctx is cancelled, or the coordinator or the
// network goes away, the command's whole process group on the node is
// stopped, not only the local wait.
//
// Errors: *ExitError when the command failed; *ConnectionLostError when
// the connection went away; ctx's error (wrapped, naming node and command)
// when cancelled.
func (c *Client) Run(ctx context.Context, cmd Cmd) error {
	if err := c.lostErr(); err != nil {
		return err
	}
	sess, err := c.newSession(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()

	tail := NewStderrTail()
	sess.Stdout = cmd.Stdout
	if sess.Stdout == nil {
		sess.Stdout = io.Discard
	}
	if cmd.Stderr != nil {
		sess.Stderr = io.MultiWriter(cmd.Stderr, tail)
	} else {
		sess.Stderr = tail
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return c.connectionError("stdin", err)
	}
	for k := range cmd.Env {
		if !IsEnvName(k) {
			return fmt.Errorf("%s: environment variable name %q is not a valid shell name", c.cfg.Name, k)
		}
	}
	grace := cmd.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	line := guardedCommand(cmd, c.cfg.GuardLease, grace)
	if err := sess.Start(line); err != nil {
		return c.connectionError("start "+Shorten(cmd.Command, 60), err)
	}

	ctl, stopControl := streamControl(stdin, c.cfg.KeepaliveInterval, cmd.Stdin)
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()

	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		// Closing the control stream is the guard's signal to stop the
		// command's group; TERM covers a guard blocked mid-frame. Wait for
		// the guard to report, so that when Run returns the node is clean.
		// The close waits for a frame being written, which a node that does
		// not read its stream (a full channel) may hold up: the cancel goes
		// on, and the session's Close below ends such a write.
		go ctl.close()
		_ = sess.Signal(ssh.SIGTERM)
		select {
		case <-waited:
		case <-time.After(grace + 5*time.Second):
		case <-c.done:
		}
		sess.Close()
		stopControl()
		return fmt.Errorf("%s: %s: %w", c.cfg.Name, Shorten(cmd.Command, 120), ctx.Err())
	}
	stopControl()
	sess.Close()
	return c.exitError(cmd.Command, werr, tail.String())
}

// streamControl starts the guard's control stream on w: a heartbeat every
// interval and, when stdin is set, its frames then its end. stop ends the
// heartbeat and closes the stream (the guard then stops a command still
// running).
func streamControl(w io.WriteCloser, every time.Duration, stdin io.Reader) (ctl *control, stop func()) {
	ctl = &control{w: w}
	done := make(chan struct{})
	var heartbeat sync.WaitGroup
	heartbeat.Add(1)
	go func() {
		defer heartbeat.Done()
		ctl.heartbeat(every, done)
	}()
	if stdin != nil {
		// Not waited for: a Stdin that blocks (a terminal, a pipe) must not
		// hold Run after the command ended. The feeder ends when its Read
		// returns, as os/exec's does.
		go ctl.feed(stdin, done)
	}
	var once sync.Once
	return ctl, func() {
		once.Do(func() {
			close(done)
			ctl.close()
			heartbeat.Wait()
		})
	}
}

// ControlStream is streamControl for a transport outside this package
// (remote/kube), whose exec's stdin is w: end closes the stream once the
// frame being written is out (the guard then stops a command still
// running, or its caller's wrapper ends the exec), stop ends the heartbeat
// and the stream.
func ControlStream(w io.WriteCloser, every time.Duration, stdin io.Reader) (end, stop func()) {
	ctl, stop := streamControl(w, every, stdin)
	return ctl.close, stop
}

// Output runs command and returns its stdout; stderr's tail is in the
// error when it fails.
func (c *Client) Output(ctx context.Context, command string) ([]byte, error) {
	var out bytes.Buffer
	err := c.Run(ctx, Cmd{Command: command, Stdout: &out})
	return out.Bytes(), err
}

func (c *Client) exitError(command string, err error, stderrTail string) error {
	if err == nil {
		return nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return &ExitError{
			Node: c.cfg.Name, Command: command, Status: ee.ExitStatus(), Signal: ee.Signal(), StderrTail: stderrTail,
		}
	}
	return c.connectionError(Shorten(command, 60), err)
}

// newSession opens a channel under the session deadline.
func (c *Client) newSession(ctx context.Context) (*ssh.Session, error) {
	s, err := openBounded(ctx, c.cfg.SessionTimeout, c.conn.NewSession, func(s *ssh.Session) { s.Close() })
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, errOpenTimeout):
		return nil, &TimeoutError{Node: c.cfg.Name, Step: "open session (is sshd's MaxSessions reached?)", After: c.cfg.SessionTimeout}
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: open session: %w", c.cfg.Name, err)
	}
	return nil, c.connectionError("open session", err)
}

// guardedCommand is the line sshd hands to the login shell.
func guardedCommand(cmd Cmd, lease, grace time.Duration) string {
	args := GuardArgs(cmd, lease, grace)
	for i, a := range args {
		args[i] = Quote(a)
	}
	return "exec bash " + strings.Join(args, " ")
}

// GuardArgs are bash's arguments that run cmd under the guard: the SSH
// path hands them to the login shell quoted, the local one to exec as
// they are, so that both run the very same guard; a transport outside
// this package (remote/kube) runs them as its exec's command.
func GuardArgs(cmd Cmd, lease, grace time.Duration) []string {
	withStdin := "0"
	if cmd.Stdin != nil {
		withStdin = "1"
	}
	return []string{"-c", guardScript, "gpuaccept-guard", guardCommand(cmd),
		strconv.Itoa(ceilSeconds(lease)), strconv.Itoa(ceilSeconds(grace)), withStdin}
}

// guardCommand is the guard's COMMAND for cmd: its exports, then the
// command.
func guardCommand(cmd Cmd) string {
	var b strings.Builder
	for _, k := range sortedKeys(cmd.Env) {
		fmt.Fprintf(&b, "export %s=%s; ", k, Quote(cmd.Env[k]))
	}
	b.WriteString(cmd.Command)
	return b.String()
}

func ceilSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// control writes frames of the guard's control stream; writes from the
// heartbeat and the stdin feeder never interleave.
type control struct {
	mu     sync.Mutex
	w      io.WriteCloser
	closed bool
}

func (c *control) frame(header string, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return io.ErrClosedPipe
	}
	if _, err := io.WriteString(c.w, header+"\n"); err != nil {
		return err
	}
	if len(data) > 0 {
		_, err := c.w.Write(data)
		return err
	}
	return nil
}

// close ends the stream once the frame being written, if any, is out: an
// SSH channel's Write and Close must not run at once. A caller that must
// not wait on a frame blocked on a stream the node does not read (a
// cancel) closes from a goroutine of its own.
func (c *control) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.w.Close()
	}
}

func (c *control) heartbeat(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if c.frame("h", nil) != nil {
				return
			}
		}
	}
}

// feed streams r as data frames, then the end-of-stdin frame.
func (c *control) feed(r io.Reader, stop <-chan struct{}) {
	// Small at first: most commands' stdin is a script or a heartbeat
	// stream (srun's), and a thousand nodes' feeders at a MiB each would be
	// a GiB; a bulk stream that fills it grows it to a frame's size.
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if c.frame("d "+strconv.Itoa(n), buf[:n]) != nil {
				return
			}
			if n == len(buf) && len(buf) < stdinFrameBytes {
				buf = make([]byte, min(2*len(buf), stdinFrameBytes))
			}
		}
		if err != nil {
			// A failing reader ends the command's stdin just like EOF; the
			// command decides what a short input means.
			_ = c.frame("e", nil)
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// Quote makes s one word for a POSIX shell.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
