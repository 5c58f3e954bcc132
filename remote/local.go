package remote

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LocalAddress is the inventory address of the coordinator's own machine:
// a node at it is reached without SSH (Local).
const LocalAddress = "local"

// Local is the coordinator's own machine as an Executor: commands run
// here under the same guard as on an SSH node (guard.sh, in a process
// group of their own, stopped when ctx ends, when the executor is closed
// or when the coordinator dies and the guard's control stream with it),
// and uploads are written here as the SSH path writes them on a node.
// This machine cannot go away under the coordinator: Lost is false until
// the executor is closed, and true after, so that the window dials afresh
// rather than reuse it.
type Local struct {
	name    string
	lease   time.Duration
	beat    time.Duration
	home    string
	env     []string
	mu      sync.Mutex
	closed  bool
	done    chan struct{}
	running sync.WaitGroup
}

var _ Executor = (*Local)(nil)

// LocalConfig is the local transport's settings: the guard's, since
// nothing else stands between the coordinator and this machine. Zero
// values take the defaults an SSH node's guard has.
type LocalConfig struct {
	// Heartbeat is how often the guard hears that the coordinator lives.
	Heartbeat time.Duration
	// GuardLease is how long a command outlives silence from the
	// coordinator (it died) before the guard ends it.
	GuardLease time.Duration
}

// NewLocal is the executor of the node named name on this machine.
func NewLocal(name string, cfg LocalConfig) *Local {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/"
	}
	beat := cfg.Heartbeat
	setDefault(&beat, DefaultKeepaliveInterval)
	lease := cfg.GuardLease
	if lease <= 0 {
		lease = SSHConfig{KeepaliveInterval: beat}.guardLease()
	}
	return &Local{
		name: name, lease: lease, beat: beat,
		home: home, env: localEnv(os.Environ()), done: make(chan struct{}),
	}
}

func (c LocalConfig) dial(ctx context.Context, name string) (Executor, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return NewLocal(name, c), nil
}

// Nothing to reach: the first command (connect's hostname) is all the
// time reaching it takes.
func (LocalConfig) reachWithin() time.Duration { return 0 }

func (LocalConfig) address() string { return LocalAddress }

func (LocalConfig) via() string { return "locally, without SSH, no host key" }

// localEnv is the environment of local commands: the coordinator's own,
// as a login of the same user on a node would have its own, less the
// ssh-agent. A node never holds the buyer's agent (nothing forwards it),
// and a command of the window that runs ssh (between nodes, with the
// window key) must not reach for the buyer's personal keys here either.
func localEnv(environ []string) []string {
	out := environ[:0:0]
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k == "SSH_AUTH_SOCK" || k == "SSH_AGENT_PID" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Name is the node's name.
func (l *Local) Name() string { return l.name }

// Addr says where the node is: this machine.
func (l *Local) Addr() string { return LocalAddress }

// Lost is false until Close; after it, every call fails with a
// *ConnectionLostError, as the Executor contract has it.
func (l *Local) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Close ends every command still running (as a dropped SSH connection
// does, through their guards) and waits until they have; later calls fail.
func (l *Local) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	l.mu.Unlock()
	l.running.Wait()
	return nil
}

// begin registers a call; false once the executor is closed.
func (l *Local) begin(what string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return &ConnectionLostError{Node: l.name, Reason: what + ": closed by gpuaccept", Err: net.ErrClosed}
	}
	l.running.Add(1)
	return nil
}

// Run runs cmd here under the guard and waits for it.
func (l *Local) Run(ctx context.Context, cmd Cmd) error {
	for k := range cmd.Env {
		if !IsEnvName(k) {
			return fmt.Errorf("%s: environment variable name %q is not a valid shell name", l.name, k)
		}
	}
	if err := l.begin(Shorten(cmd.Command, 60)); err != nil {
		return err
	}
	defer l.running.Done()
	grace := cmd.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	c := exec.Command("bash", GuardArgs(cmd, l.lease, grace)...)
	// A login on a node starts in its home directory.
	c.Dir, c.Env = l.home, l.env
	// The guard in a process group of its own: a Ctrl-C at the terminal is
	// the coordinator's to handle (it tears the window down), not a signal
	// for the node's commands.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tail := NewStderrTail()
	c.Stdout = cmd.Stdout
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	c.Stderr = tail
	if cmd.Stderr != nil {
		c.Stderr = io.MultiWriter(cmd.Stderr, tail)
	}
	// The guard stops everything of its group once the command ended; what
	// left the group on purpose (setsid) and still holds the output open
	// must not hold Run.
	c.WaitDelay = grace + 5*time.Second
	stdin, err := c.StdinPipe()
	if err != nil {
		return fmt.Errorf("%s: %s: %w", l.name, Shorten(cmd.Command, 60), err)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", l.name, Shorten(cmd.Command, 60), err)
	}
	ctl, stopControl := streamControl(stdin, l.beat, cmd.Stdin)
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()

	var werr error
	select {
	case werr = <-waited:
		stopControl()
		return l.exitError(cmd.Command, werr, tail.String())
	case <-ctx.Done():
		werr = ctx.Err()
	case <-l.done:
		werr = fmt.Errorf("closed by gpuaccept: %w", net.ErrClosed)
	}
	// As on a node: the end of the control stream tells the guard to stop
	// the command's group (TERM, KILL after grace); TERM covers a guard
	// blocked mid-frame. Wait for it, so that when Run returns nothing of
	// the command runs; a guard that does not end goes with KILL.
	ctl.close()
	_ = c.Process.Signal(syscall.SIGTERM)
	select {
	case <-waited:
	case <-time.After(grace + 5*time.Second):
		_ = c.Process.Kill()
		<-waited
	}
	stopControl()
	return fmt.Errorf("%s: %s: %w", l.name, Shorten(cmd.Command, 120), werr)
}

func (l *Local) exitError(command string, err error, stderrTail string) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &ExitError{Node: l.name, Command: command, Status: -1,
				Signal: strings.TrimPrefix(unix.SignalName(ws.Signal()), "SIG"), StderrTail: stderrTail}
		}
		return &ExitError{Node: l.name, Command: command, Status: ee.ExitCode(), StderrTail: stderrTail}
	}
	return fmt.Errorf("%s: %s: %w", l.name, Shorten(command, 120), err)
}

// Upload copies a local file to remotePath, as UploadFrom does; Mode 0
// keeps the file's permission bits.
func (l *Local) Upload(ctx context.Context, local, remotePath string, o TransferOptions) (TransferResult, error) {
	return UploadLocalFile(ctx, l, local, remotePath, o)
}

// UploadFrom writes size bytes that src serves to remotePath: into a part
// file of its own beside it (a random name, created exclusively, never
// through a link, readable by nobody else while it is written), whose
// size and sha256 are then read back from the disk and checked, and only
// then renamed into place. remotePath is either as it was or the complete
// file; the part never outlives a failure. Files get o.Mode (default
// 0644); directories that do not exist are made private (0700).
func (l *Local) UploadFrom(ctx context.Context, src io.ReaderAt, size int64, remotePath string, o TransferOptions) (TransferResult, error) {
	start := time.Now()
	if size < 0 {
		return TransferResult{}, fmt.Errorf("%s: upload %s: negative size %d", l.name, remotePath, size)
	}
	if err := l.begin("upload " + remotePath); err != nil {
		return TransferResult{}, err
	}
	defer l.running.Done()
	// A closed executor cancels the upload, as it ends a command.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	mode := o.Mode
	if mode == 0 {
		mode = 0o644
	}
	sum, err := l.writeChecked(ctx, src, size, remotePath, mode, o)
	if err != nil {
		return TransferResult{}, err
	}
	return TransferResult{Files: 1, Bytes: size, SHA256: sum, Elapsed: time.Since(start)}, nil
}

func (l *Local) writeChecked(ctx context.Context, src io.ReaderAt, size int64, remotePath string, mode fs.FileMode, o TransferOptions) (sum string, err error) {
	fail := func(step string, err error) (string, error) {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("%s: upload %s: %s: %w", l.name, remotePath, step, err)
	}
	// A relative path is relative to the login directory, as SFTP names it.
	if !filepath.IsAbs(remotePath) {
		remotePath = filepath.Join(l.home, remotePath)
	}
	dir, base := filepath.Split(remotePath)
	if base == "" {
		return fail("target", errors.New("names a directory"))
	}
	// The directory is checked as over SSH: made 0700 where missing, and
	// refused when it or a parent is a link or another user could write
	// in it, since root writing into a directory another user planted
	// writes wherever that user points it.
	if err := makePrivate(ctx, l, l.name, dir, remotePath); err != nil {
		return "", err
	}
	// Everything below happens in this directory as it was opened: the
	// part is created in it and renamed within it, whatever is swapped
	// into its path meanwhile.
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fail("open "+dir, err)
	}
	defer d.Close()
	var salt [6]byte
	rand.Read(salt[:])
	part := "." + base + partSuffix + "-" + hex.EncodeToString(salt[:])
	fd, err := unix.Openat(int(d.Fd()), part, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fail("create "+part, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, part))
	defer f.Close()
	defer func() {
		if err != nil {
			_ = unix.Unlinkat(int(d.Fd()), part, 0)
		}
	}()
	// Hash the source as it is written (unless the caller knows its sum),
	// then the disk's copy as read back: what matters is what the node
	// holds, not what was believed to be sent.
	want := sha256.New()
	var w io.Writer = f
	if o.SHA256 == "" {
		w = io.MultiWriter(f, want)
	}
	p := newProgress(o.Progress, size)
	// MiB at a time: an image archive of gigabytes in 32 KiB writes is
	// tens of thousands of calls more, and ctx is looked at per read.
	buf := make([]byte, 1<<20)
	n, err := io.CopyBuffer(w, &ctxReader{ctx: ctx, r: &progressReader{r: io.NewSectionReader(src, 0, size), p: p}}, buf)
	if err != nil {
		return fail("write", err)
	}
	if n != size {
		return fail("write", fmt.Errorf("the source served %d of %d bytes", n, size))
	}
	wantSum := o.SHA256
	if wantSum == "" {
		wantSum = hex.EncodeToString(want.Sum(nil))
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	got := sha256.New()
	gotSize, err := io.CopyBuffer(got, &ctxReader{ctx: ctx, r: io.NewSectionReader(f, 0, 1<<62)}, buf)
	if err != nil {
		return fail("read back", err)
	}
	gotSum := hex.EncodeToString(got.Sum(nil))
	if gotSize != size || gotSum != wantSum {
		return "", fmt.Errorf("%s: upload %s: verification failed on the node: sent %d bytes sha256 %s, node has %d bytes sha256 %s",
			l.name, remotePath, size, wantSum, gotSize, gotSum)
	}
	if err := f.Chmod(mode); err != nil {
		return fail("chmod", err)
	}
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	if err := unix.Renameat(int(d.Fd()), part, int(d.Fd()), base); err != nil {
		return fail("rename into place", err)
	}
	p.finish()
	return gotSum, nil
}

// ctxReader ends a copy once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
