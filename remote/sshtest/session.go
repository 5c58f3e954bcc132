package sshtest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// child is a process started by an exec request.
type child struct {
	cmd   *exec.Cmd
	done  chan struct{}    // closed once the process is reaped
	state *os.ProcessState // set before done is closed; nil if Wait failed
}

// session is one "session" channel. Its fields belong to the goroutine that
// serves the channel's requests; the goroutines it starts get what they need
// as arguments.
type session struct {
	srv *Server
	ch  ssh.Channel
	env []string

	// started is set by the first exec or subsystem request: like sshd, a
	// channel runs one program at most.
	started bool
	child   *child

	// The server's ends of the child's pipes, in the order to close them
	// when the client goes away: output first, so that a child which sees
	// EOF on stdin and then writes already gets EPIPE.
	stdoutR, stderrR, stdinW *os.File

	gone chan struct{} // closed once the client closed the channel or left
}

func (s *Server) serveSession(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	sess := &session{srv: s, ch: ch, gone: make(chan struct{})}
	// reqs is closed when the channel is closed by the client, in answer to
	// our close, or because the connection ended.
	for req := range reqs {
		sess.handle(req)
	}
	close(sess.gone)
	// Without a pty, sshd does not kill the command when its client goes
	// away; it closes its ends of the pipes and lets the command find out.
	for _, f := range []*os.File{sess.stdoutR, sess.stderrR, sess.stdinW} {
		if f != nil {
			f.Close()
		}
	}
	ch.Close()
}

func (sess *session) handle(req *ssh.Request) {
	switch req.Type {
	case "env":
		var msg struct{ Name, Value string }
		if ssh.Unmarshal(req.Payload, &msg) != nil {
			req.Reply(false, nil)
			return
		}
		sess.env = append(sess.env, msg.Name+"="+msg.Value)
		req.Reply(true, nil)

	case "exec":
		var msg struct{ Command string }
		if ssh.Unmarshal(req.Payload, &msg) != nil || sess.started {
			req.Reply(false, nil)
			return
		}
		if err := sess.exec(msg.Command); err != nil {
			sess.srv.logf("exec %q: %v", msg.Command, err)
			req.Reply(false, nil)
			return
		}
		sess.started = true
		// Reply before any output goes out, as sshd does.
		req.Reply(true, nil)
		sess.pump()

	case "subsystem":
		var msg struct{ Name string }
		if ssh.Unmarshal(req.Payload, &msg) != nil || sess.started || msg.Name != "sftp" {
			req.Reply(false, nil)
			return
		}
		sess.started = true
		req.Reply(true, nil)
		sess.srv.wg.Go(func() { sess.srv.serveSFTP(sess.ch) })

	case "signal":
		var msg struct{ Signal string }
		if ssh.Unmarshal(req.Payload, &msg) != nil {
			req.Reply(false, nil)
			return
		}
		sig, known := signals[msg.Signal]
		if !known || sess.child == nil {
			req.Reply(false, nil)
			return
		}
		// Only the direct child, as sshd: a shell that forked does not pass
		// the signal on to its own children.
		err := sess.child.cmd.Process.Signal(sig)
		req.Reply(err == nil, nil)

	default:
		// pty-req, shell, x11-req, window-change, ...: refused, which is
		// what the client code expects, since it never asks for a pty.
		req.Reply(false, nil)
	}
}

// exec starts `Shell -c command` with pipes the server owns, so that it can
// close them itself when the client leaves while the child keeps running.
func (sess *session) exec(command string) error {
	s := sess.srv
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		closeAll()
		return err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		closeAll()
		return err
	}

	cmd := exec.Command(s.opts.Shell, "-c", command)
	cmd.Dir = s.opts.Dir
	cmd.Env = os.Environ()
	if s.opts.Dir != "" {
		// sshd starts a session in the user's home and says which it is.
		cmd.Env = append(cmd.Env, "HOME="+s.opts.Dir)
	}
	cmd.Env = append(append(cmd.Env, sess.env...), s.opts.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	// sshd puts a pty-less command into a session of its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}

	if err := cmd.Start(); err != nil {
		closeAll()
		return err
	}
	// The child has its own copies now; ours would keep its stdin open and
	// hide the EOF of its output.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	sess.stdinW, sess.stdoutR, sess.stderrR = stdinW, stdoutR, stderrR

	c := &child{cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.execs = append(s.execs, command)
	s.children[c] = struct{}{}
	s.mu.Unlock()
	// The reaper lives as long as the child, possibly past Close, so it is
	// not counted in s.wg; see KillChildren.
	go func() {
		cmd.Wait()
		c.state = cmd.ProcessState
		s.mu.Lock()
		delete(s.children, c)
		s.mu.Unlock()
		close(c.done)
	}()
	sess.child = c
	return nil
}

// pump copies between the channel and the child's pipes and reports how the
// child ended once all its output is out.
func (sess *session) pump() {
	s, ch, c := sess.srv, sess.ch, sess.child
	stdinW, stdoutR, stderrR := sess.stdinW, sess.stdoutR, sess.stderrR
	gone := sess.gone

	s.wg.Go(func() {
		io.Copy(stdinW, ch)
		// The client sent EOF (or left): so does the child's stdin.
		stdinW.Close()
	})
	var output sync.WaitGroup
	output.Go(func() { io.Copy(ch, stdoutR) })
	output.Go(func() { io.Copy(ch.Stderr(), stderrR) })
	s.wg.Go(func() {
		// Output ends at EOF, which may come after the child exited when it
		// left a background process holding the pipe (sshd waits for that
		// too), or when the client left and the pipes were closed.
		output.Wait()
		stdoutR.Close()
		stderrR.Close()
		select {
		case <-c.done:
		case <-gone:
			// Nobody to tell; the child goes on unobserved.
			return
		}
		ch.CloseWrite()
		name, payload := exitRequest(c.state)
		ch.SendRequest(name, false, payload)
		ch.Close()
	})
}

func exitRequest(state *os.ProcessState) (string, []byte) {
	if state == nil {
		// Wait failed, which should not happen; sshd would not know
		// either, and says 255 like ssh does for its own errors.
		return "exit-status", ssh.Marshal(struct{ Status uint32 }{255})
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "exit-signal", ssh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{signalName(ws.Signal()), ws.CoreDump(), "", ""})
	}
	return "exit-status", ssh.Marshal(struct{ Status uint32 }{uint32(state.ExitCode())})
}

func (s *Server) serveSFTP(ch ssh.Channel) {
	var opts []sftp.ServerOption
	if s.opts.Dir != "" {
		opts = append(opts, sftp.WithServerWorkingDirectory(s.opts.Dir))
	}
	// pkg/sftp's server may still be sending replies after Serve returns;
	// x/crypto's channel does not allow a Write concurrent with CloseWrite.
	lc := &lockedChannel{Channel: ch}
	var rw io.ReadWriteCloser = lc
	if s.opts.CorruptSFTPWrites {
		rw = &corruptor{Channel: lc}
	}
	server, err := sftp.NewServer(rw, opts...)
	if err != nil {
		ch.Close()
		return
	}
	// Serve returns nil when the client closed its end cleanly.
	status := uint32(0)
	if err := server.Serve(); err != nil && !errors.Is(err, io.EOF) {
		s.logf("sftp: %v", err)
		status = 1
	}
	// sshd reports the exit of its sftp-server child like any other.
	lc.CloseWrite()
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
	ch.Close()
}

// Children returns the process IDs of commands started by exec requests
// that have not been reaped yet.
func (s *Server) Children() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := make([]int, 0, len(s.children))
	for c := range s.children {
		pids = append(pids, c.cmd.Process.Pid)
	}
	return pids
}

// KillChildren kills every command still running, with its process group
// (what it started in the background too), and waits until they are reaped.
// Tests that leave commands running call it before checking for leaks.
func (s *Server) KillChildren() {
	s.mu.Lock()
	var list []*child
	for c := range s.children {
		list = append(list, c)
	}
	s.mu.Unlock()
	for _, c := range list {
		select {
		case <-c.done:
			// Reaped already: its process group ID may belong to
			// someone else by now.
			continue
		default:
		}
		// Each child leads its own process group (Setsid).
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, c := range list {
		<-c.done
	}
}

// lockedChannel serializes writes with CloseWrite.
type lockedChannel struct {
	ssh.Channel
	mu sync.Mutex
}

func (c *lockedChannel) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Channel.Write(p)
}

func (c *lockedChannel) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Channel.CloseWrite()
}
