// Package fake is an in-memory remote.Executor: hosts whose answers a test
// scripts command by command, which can hang, drop the connection, fail or
// print anything. Unit tests of phase bodies and the runner's property
// tests drive it; it never stands in for the lab in a test that claims
// the SSH path works.
//
// A Host is the machine (its scripted answers, its files, what ran on
// it); each Dial of it is a new connection, so a dropped connection can be
// redialled onto the same host, as on a real node.
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"gpuaccept/remote"
)

// Reply is what a command does on a fake host.
type Reply struct {
	Stdout, Stderr string
	// Exit is the exit status (0: success); Signal, when set, the signal
	// that killed it ("KILL"). Either makes Run return an *ExitError.
	Exit   int
	Signal string
	// Delay holds the command for a while before it ends (cut short by a
	// cancelled context, as a real one would be).
	Delay time.Duration
	// Hang keeps the command running until its context ends or the
	// connection drops: a collective that never finishes.
	Hang bool
	// Drop loses the connection the command runs on, after its output.
	Drop bool
	// Err is returned as it is (after the output), for errors no other
	// field describes.
	Err error
}

// Call is one command as a handler sees it.
type Call struct {
	// Ctx ends when the command is cancelled or its connection drops; a
	// handler that streams output watches it.
	Ctx     context.Context
	Host    *Host
	Command string
	Env     map[string]string
	// Stdin is the command's whole stdin, read before the handler runs;
	// nil for a rule added with Stream, whose handler reads In instead.
	Stdin []byte
	// In is the command's stdin as it arrives (rules added with Stream):
	// the handler reads it while the command runs, as a command on a node
	// reads a pipe, and sees EOF at its end. A failing source ends it as
	// EOF does.
	In io.Reader
	// Stdout and Stderr take output as the command makes it (a handler
	// streaming lines writes here before it returns its Reply).
	Stdout, Stderr io.Writer
}

// Handler answers a command.
type Handler func(c *Call) Reply

// Record is what the host keeps of a command it ran.
type Record struct {
	Command string
	Env     map[string]string
	// Stdin is what the command read of its stdin.
	Stdin []byte
	// Ended: the command's process group was ended from outside (the
	// context was cancelled or the connection dropped), as the guard does.
	Ended bool
}

// File is an uploaded file as the host holds it.
type File struct {
	Size   int64
	SHA256 string
	// Data is the content of files up to KeepBytes; larger ones keep only
	// their size and sum.
	Data []byte
}

// KeepBytes is the largest upload whose bytes a host keeps.
const KeepBytes = 1 << 20

type rule struct {
	re     *regexp.Regexp
	h      Handler
	stream bool
}

// Host is one fake machine.
type Host struct {
	name string

	mu      sync.Mutex
	rules   []rule
	def     Handler
	files   map[string]File
	calls   []Record
	conns   []*conn
	running int
	// uploadFault, when set, fails the uploads it returns an error for;
	// tamper rewrites what an upload left (another user of the node
	// changing the file after it landed).
	uploadFault func(ctx context.Context, path string) error
	tamper      func(path string, f File) File
	intercept   func(c *Call) (Reply, bool)
}

// NewHost is a host named name on which every command not scripted fails
// as bash does for a command it cannot find (exit 127).
func NewHost(name string) *Host {
	return &Host{name: name, files: map[string]File{}}
}

// Name is the host's name.
func (h *Host) Name() string { return h.name }

// On answers every command that pattern (a regular expression) matches
// with handler. The rule added last wins, so a test can override a
// default it set up earlier.
func (h *Host) On(pattern string, handler Handler) *Host {
	return h.add(pattern, handler, false)
}

// Stream is On for a handler that reads the command's stdin as it
// arrives (Call.In), for a command that answers its input while it runs.
func (h *Host) Stream(pattern string, handler Handler) *Host {
	return h.add(pattern, handler, true)
}

func (h *Host) add(pattern string, handler Handler, stream bool) *Host {
	re := regexp.MustCompile(pattern)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rules = append(h.rules, rule{re: re, h: handler, stream: stream})
	return h
}

// Reply answers every command that pattern matches with r.
func (h *Host) Reply(pattern string, r Reply) *Host {
	return h.On(pattern, func(*Call) Reply { return r })
}

// Default answers the commands no rule matches.
func (h *Host) Default(handler Handler) *Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.def = handler
	return h
}

// FailUploads makes the uploads for which fault returns an error fail with
// it (ctx is the upload's).
func (h *Host) FailUploads(fault func(ctx context.Context, path string) error) *Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.uploadFault = fault
	return h
}

// Intercept sees every command before the rules do: when fn says so, its
// reply is the command's (a fault schedule injecting failures into
// whatever a host would otherwise answer).
func (h *Host) Intercept(fn func(c *Call) (Reply, bool)) *Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.intercept = fn
	return h
}

// Tamper rewrites what each later upload leaves on the host: fn gets the
// file as it landed and returns what the host then holds, as a local user
// who rewrites a file after the push would.
func (h *Host) Tamper(fn func(path string, f File) File) *Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tamper = fn
	return h
}

// Drop loses every connection to the host now: commands running on them
// end (their process groups ended), later calls on them fail with a
// *remote.ConnectionLostError. A new Dial reaches the host again.
func (h *Host) Drop(reason string) {
	h.mu.Lock()
	conns := append([]*conn(nil), h.conns...)
	h.mu.Unlock()
	for _, c := range conns {
		c.lose(reason)
	}
}

// Calls is every command run on the host, in the order they started.
func (h *Host) Calls() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Record(nil), h.calls...)
}

// Commands is the command lines run on the host.
func (h *Host) Commands() []string {
	var out []string
	for _, c := range h.Calls() {
		out = append(out, c.Command)
	}
	return out
}

// Ran counts the commands that pattern matches.
func (h *Host) Ran(pattern string) int {
	re := regexp.MustCompile(pattern)
	n := 0
	for _, c := range h.Calls() {
		if re.MatchString(c.Command) {
			n++
		}
	}
	return n
}

// Running is how many commands are running on the host now.
func (h *Host) Running() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

// File is the uploaded file at path.
func (h *Host) File(path string) (File, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.files[path]
	return f, ok
}

// Rename moves an uploaded file, as mv on the node would; false when there
// is none at from.
func (h *Host) Rename(from, to string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.files[from]
	if ok {
		delete(h.files, from)
		h.files[to] = f
	}
	return ok
}

// Put leaves data at path, as a command on the node writing a file would
// (tar unpacking an uploaded archive, say, or another user rewriting it).
func (h *Host) Put(path string, data []byte) {
	sum := sha256.Sum256(data)
	f := File{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	if len(data) <= KeepBytes {
		f.Data = append([]byte(nil), data...)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[path] = f
}

// Remove deletes the file at path, as rm on the node would.
func (h *Host) Remove(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.files, path)
}

// Files is every uploaded file, by path.
func (h *Host) Files() map[string]File {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]File, len(h.files))
	for k, v := range h.files {
		out[k] = v
	}
	return out
}

// Open connections to the host (not lost, not closed).
func (h *Host) Open() int {
	h.mu.Lock()
	conns := append([]*conn(nil), h.conns...)
	h.mu.Unlock()
	n := 0
	for _, c := range conns {
		if !c.Lost() && !c.isClosed() {
			n++
		}
	}
	return n
}

// connect is a new connection to the host.
func (h *Host) connect(addr string) *conn {
	c := &conn{host: h, addr: addr, gone: make(chan struct{})}
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	return c
}

// handler is the rule that answers command, and whether it reads its
// stdin as it arrives.
func (h *Host) handler(command string) (Handler, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.rules) - 1; i >= 0; i-- {
		if h.rules[i].re.MatchString(command) {
			return h.rules[i].h, h.rules[i].stream
		}
	}
	if h.def != nil {
		return h.def, false
	}
	return notFound, false
}

func notFound(c *Call) Reply {
	word, _, _ := strings.Cut(strings.TrimSpace(c.Command), " ")
	return Reply{Exit: 127, Stderr: "bash: line 1: " + word + ": command not found\n"}
}

// conn is one connection to a host: the remote.Executor.
type conn struct {
	host *Host
	addr string

	mu     sync.Mutex
	lost   *remote.ConnectionLostError
	closed bool
	gone   chan struct{} // closed when the connection is lost or closed
}

var (
	_ remote.Executor  = (*conn)(nil)
	_ remote.HostKeyed = (*conn)(nil)
)

func (c *conn) Name() string { return c.host.name }
func (c *conn) Addr() string { return c.addr }

func (c *conn) Lost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost != nil
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *conn) lostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost != nil {
		return c.lost
	}
	if c.closed {
		return &remote.ConnectionLostError{Node: c.host.name, Reason: "connection closed"}
	}
	return nil
}

func (c *conn) lose(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost != nil || c.closed {
		return
	}
	c.lost = &remote.ConnectionLostError{Node: c.host.name, Reason: reason}
	close(c.gone)
}

func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		if c.lost == nil {
			close(c.gone)
		}
	}
	return nil
}

// KnownHostsLine is a line of the shape known_hosts has, with a key of the
// host's own that no SSH client would accept.
func (c *conn) KnownHostsLine(names ...string) string {
	if len(names) == 0 {
		return ""
	}
	return strings.Join(names, ",") + " ssh-ed25519 FAKE-" + c.host.name
}

// Run runs cmd as the host's handlers say, keeping the guard's contract:
// a cancelled context or a lost connection ends the command.
func (c *conn) Run(ctx context.Context, cmd remote.Cmd) error {
	if err := c.lostErr(); err != nil {
		return err
	}
	for k := range cmd.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("%s: environment variable name %q is not a valid shell name", c.host.name, k)
		}
	}
	handler, stream := c.host.handler(cmd.Command)
	var stdin []byte
	var in *inReader
	if stream {
		in = &inReader{r: cmd.Stdin}
	} else if cmd.Stdin != nil {
		stdin, _ = io.ReadAll(cmd.Stdin) // a failing reader ends stdin, as on a node
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.gone:
			cancel()
		case <-cctx.Done():
		}
	}()
	tail := remote.NewStderrTail()
	stdout, stderr := orDiscard(cmd.Stdout), io.MultiWriter(orDiscard(cmd.Stderr), tail)
	rec := Record{Command: cmd.Command, Env: cmd.Env, Stdin: stdin}
	h := c.host
	h.mu.Lock()
	h.calls = append(h.calls, rec)
	at := len(h.calls) - 1
	h.running++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()

	call := &Call{Ctx: cctx, Host: h, Command: cmd.Command, Env: cmd.Env, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if in != nil {
		call.In = in
		defer func() {
			h.mu.Lock()
			h.calls[at].Stdin = in.read()
			h.mu.Unlock()
		}()
	}
	h.mu.Lock()
	intercept := h.intercept
	h.mu.Unlock()
	var r Reply
	taken := false
	if intercept != nil {
		r, taken = intercept(call)
	}
	if !taken {
		r = handler(call)
	}
	io.WriteString(stdout, r.Stdout)
	io.WriteString(stderr, r.Stderr)
	if r.Drop {
		c.lose("the fake host dropped the connection")
	}
	if r.Delay > 0 {
		t := time.NewTimer(r.Delay)
		select {
		case <-t.C:
		case <-cctx.Done():
		}
		t.Stop()
	}
	if r.Hang {
		<-cctx.Done()
	}
	ended := func() {
		h.mu.Lock()
		h.calls[at].Ended = true
		h.mu.Unlock()
	}
	// The connection went away under the command (or the command took it
	// down): the guard ended the command's group.
	if err := c.lostErr(); err != nil {
		ended()
		return err
	}
	if ctx.Err() != nil {
		ended()
		return fmt.Errorf("%s: %s: %w", h.name, shorten(cmd.Command, 120), ctx.Err())
	}
	if r.Err != nil {
		return r.Err
	}
	if r.Exit != 0 || r.Signal != "" {
		status := r.Exit
		if r.Signal != "" {
			status = -1
		}
		return &remote.ExitError{Node: h.name, Command: cmd.Command, Status: status, Signal: r.Signal, StderrTail: tail.String()}
	}
	return nil
}

// inReader is a streamed stdin: what the handler reads of it is kept for
// the host's record; no stdin, or a failing one, reads as EOF.
type inReader struct {
	mu   sync.Mutex
	r    io.Reader
	seen []byte
	done bool
}

func (i *inReader) Read(p []byte) (int, error) {
	i.mu.Lock()
	r, done := i.r, i.done
	i.mu.Unlock()
	if r == nil || done {
		return 0, io.EOF
	}
	n, err := r.Read(p)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.seen = append(i.seen, p[:n]...)
	if err != nil {
		i.done = true
		if n == 0 {
			return 0, io.EOF
		}
	}
	return n, nil
}

func (i *inReader) read() []byte {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]byte(nil), i.seen...)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c *conn) Upload(ctx context.Context, local, remotePath string, o remote.TransferOptions) (remote.TransferResult, error) {
	f, err := os.Open(local)
	if err != nil {
		return remote.TransferResult{}, fmt.Errorf("%s: upload: %w", c.host.name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return remote.TransferResult{}, fmt.Errorf("%s: upload: %w", c.host.name, err)
	}
	if st.IsDir() {
		return remote.TransferResult{}, fmt.Errorf("%s: upload %s: is a directory (use UploadDir)", c.host.name, local)
	}
	return c.UploadFrom(ctx, f, st.Size(), remotePath, o)
}

// UploadFrom stores what src serves at remotePath, checked against
// o.SHA256 when it is given, as the node checks its copy.
func (c *conn) UploadFrom(ctx context.Context, src io.ReaderAt, size int64, remotePath string, o remote.TransferOptions) (remote.TransferResult, error) {
	start := time.Now()
	if err := c.lostErr(); err != nil {
		return remote.TransferResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return remote.TransferResult{}, fmt.Errorf("%s: upload %s: %w", c.host.name, remotePath, err)
	}
	if size < 0 {
		return remote.TransferResult{}, fmt.Errorf("%s: upload %s: negative size %d", c.host.name, remotePath, size)
	}
	h := c.host
	h.mu.Lock()
	fault := h.uploadFault
	h.mu.Unlock()
	if fault != nil {
		if err := fault(ctx, remotePath); err != nil {
			return remote.TransferResult{}, err
		}
	}
	sum := sha256.New()
	var keep strings.Builder
	w := io.Writer(sum)
	if size <= KeepBytes {
		w = io.MultiWriter(sum, &keep)
	}
	n, err := io.Copy(w, io.NewSectionReader(src, 0, size))
	if err != nil {
		return remote.TransferResult{}, fmt.Errorf("%s: upload %s: read the source: %w", h.name, remotePath, err)
	}
	if n != size {
		return remote.TransferResult{}, fmt.Errorf("%s: upload %s: the source served %d of %d bytes", h.name, remotePath, n, size)
	}
	got := hex.EncodeToString(sum.Sum(nil))
	if o.SHA256 != "" && o.SHA256 != got {
		return remote.TransferResult{}, fmt.Errorf("%s: upload %s: the node's copy has sha256 %s, the source %s", h.name, remotePath, got, o.SHA256)
	}
	if err := c.lostErr(); err != nil {
		return remote.TransferResult{}, err
	}
	f := File{Size: size, SHA256: got}
	if size <= KeepBytes {
		f.Data = []byte(keep.String())
	}
	h.mu.Lock()
	if h.tamper != nil {
		f = h.tamper(remotePath, f)
	}
	h.files[remotePath] = f
	h.mu.Unlock()
	if o.Progress != nil {
		o.Progress(size, size)
	}
	return remote.TransferResult{Files: 1, Bytes: size, SHA256: got, Elapsed: time.Since(start)}, nil
}

// Fleet is a set of hosts and the Dialer that reaches them by node name.
type Fleet struct {
	mu          sync.Mutex
	hosts       map[string]*Host
	order       []string
	unreachable map[string]error
	dials       map[string]int
}

// NewFleet makes a host for each name.
func NewFleet(names ...string) *Fleet {
	f := &Fleet{hosts: map[string]*Host{}, unreachable: map[string]error{}, dials: map[string]int{}}
	for _, n := range names {
		f.Add(NewHost(n))
	}
	return f
}

// Add puts h in the fleet under its name.
func (f *Fleet) Add(h *Host) *Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.hosts[h.name]; !ok {
		f.order = append(f.order, h.name)
	}
	f.hosts[h.name] = h
	return h
}

// Host is the host named name (nil when there is none).
func (f *Fleet) Host(name string) *Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts[name]
}

// Hosts is every host, in the order they were added.
func (f *Fleet) Hosts() []*Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Host
	for _, n := range f.order {
		out = append(out, f.hosts[n])
	}
	return out
}

// Unreachable makes every later dial of name fail with err; nil makes it
// reachable again.
func (f *Fleet) Unreachable(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.unreachable, name)
		return
	}
	f.unreachable[name] = err
}

// Dials counts the dials of name.
func (f *Fleet) Dials(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials[name]
}

// Dial is the fleet's remote.Dialer: the host named cfg.Name, on a new
// connection, whichever transport cfg names.
func (f *Fleet) Dial(ctx context.Context, cfg remote.Config) (remote.Executor, error) {
	f.mu.Lock()
	f.dials[cfg.Name]++
	h, err := f.hosts[cfg.Name], f.unreachable[cfg.Name]
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: dial: %w", cfg.Name, err)
	}
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%s: dial %s: no such host", cfg.Name, cfg.Address())
	}
	return h.connect(fmt.Sprintf("%s:%d", cfg.Address(), max(cfg.SSHPort(), 22))), nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
