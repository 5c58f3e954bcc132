// Package contract is the one test suite of remote.Executor's written
// guarantees: every executor (SSH through the in-process server and the
// lab's real sshd, this machine's, the fake) runs it, so that phases may
// rely on what executor.go promises whichever transport reached a node.
//
// The suite runs fixed bash commands (the constants below): an executor
// that runs no shell (the fake) answers them from handlers of its own and
// names the items it does not claim, with why.
package contract

import (
	"bytes"
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
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

// The commands the suite runs, for executors that answer them without a
// shell.
const (
	// CmdStreams prints "out\n" on stdout and "err\n" on stderr.
	CmdStreams = "echo out; echo err >&2"
	// CmdFail says "about to fail" on stderr and exits 3.
	CmdFail = "echo about to fail >&2; exit 3"
	// CmdKilled is killed by SIGKILL.
	CmdKilled = "kill -9 $$"
	// CmdEnv prints $A|$B_2, or "unset" for one that is not set.
	CmdEnv = `printf '%s|%s' "${A-unset}" "${B_2-unset}"`
	// CmdCat copies stdin to stdout.
	CmdCat = "cat"
	// CmdCount prints how many bytes stdin held.
	CmdCount = "wc -c"
	// CmdStream prints "first", waits for a line on stdin, prints it.
	CmdStream = "echo first; read -r x; echo \"got $x\""
	// CmdLongStderr writes 1 MiB to stderr, then "last words", and fails.
	CmdLongStderr = "head -c 1048576 /dev/zero | tr '\\0' x >&2; echo >&2; echo last words >&2; exit 1"
	// CmdBigStreams writes 8 MiB of 'a' to stdout and of 'b' to stderr at once.
	CmdBigStreams = `(head -c 8388608 /dev/zero | tr '\0' a) & (head -c 8388608 /dev/zero | tr '\0' b >&2) & wait`
	// CmdIndex prints the value of I.
	CmdIndex = `printf '%s' "$I"`
)

// CmdSleep is a command that runs until it is stopped, with a child that
// ignores TERM (ignoreTerm) or not; marker is unique to it, for Alive.
func CmdSleep(marker string, ignoreTerm bool) string {
	if ignoreTerm {
		return "trap '' TERM; (trap '' TERM; " + marker + ") & " + marker + " & wait; wait"
	}
	return marker + " & " + marker + "; wait"
}

// Target is one executor under test.
type Target struct {
	// New reaches the node afresh; the suite closes what it makes.
	New func(t *testing.T) remote.Executor
	// Dir is a fresh directory on the node the suite may write into;
	// default: one made with mktemp -d through the executor, removed after.
	Dir func(t *testing.T, e remote.Executor) string
	// File is a file on the node as the node sees it, ok false when there
	// is none; default: stat and sha256sum through the executor.
	File func(t *testing.T, e remote.Executor, path string) (f File, ok bool)
	// Entries is what a node directory holds; default: ls -A through the
	// executor.
	Entries func(t *testing.T, e remote.Executor, dir string) []string
	// Alive reports whether a process whose command line holds marker
	// still runs on the node; default: pgrep through a fresh executor.
	Alive func(t *testing.T, marker string) bool
	// Cut takes the node away from e while a command runs on it, as a
	// reset connection or a cut link does, without e's knowing; the func
	// it returns brings the node back once the suite has seen e fail (a
	// lab host's link restored). Needed unless "lost" is NotApplicable.
	Cut func(t *testing.T, e remote.Executor) (restore func())
	// NotApplicable names the items (Items) this executor does not claim,
	// with the reason, which the suite prints as the item's skip.
	NotApplicable map[string]string
	// GaveUp, when set, says whether err is the transport giving a command
	// up for a reason of its own and saying so, never as short output
	// (srun aborts a whole job step for one I/O error of a slurmstepd's:
	// NOT MEASURED): output-bounds' large streams are then tried once more.
	GaveUp func(err error) bool
}

// File is a file as the node holds it.
type File struct {
	Size   int64
	SHA256 string
	// Mode is its permission bits; 0 when the executor keeps none (the
	// suite then does not judge them).
	Mode fs.FileMode
}

func (f File) is(data []byte) bool { return f.Size == int64(len(data)) && f.SHA256 == sum(data) }

// Items are the contract's items, by name.
var Items = []string{
	"run", "exit-error", "signal", "env", "home", "stdin", "stream", "upload", "upload-failure",
	"cancel", "cancel-ignores-term", "cancel-grace", "lost", "output-bounds", "close", "concurrency",
}

// Run runs every item of the contract against tg.
func Run(t *testing.T, tg Target) {
	tg.fill()
	items := map[string]func(*testing.T, *Target){
		"run": itemRun, "exit-error": itemExit, "signal": itemSignal, "env": itemEnv, "home": itemHome,
		"stdin": itemStdin, "stream": itemStream, "upload": itemUpload, "upload-failure": itemUploadFailure,
		"cancel":              func(t *testing.T, tg *Target) { itemCancel(t, tg, false) },
		"cancel-ignores-term": func(t *testing.T, tg *Target) { itemCancel(t, tg, true) },
		"cancel-grace":        itemCancelGrace,
		"lost":                itemLost,
		"output-bounds":       itemBounds, "close": itemClose, "concurrency": itemConcurrency,
	}
	for name := range tg.NotApplicable {
		if items[name] == nil {
			t.Errorf("NotApplicable names %q, which is no item of the contract", name)
		}
	}
	if _, na := tg.NotApplicable["lost"]; tg.Cut == nil && !na {
		t.Error("no Cut: an executor whose node can go away must show what it does when it does")
	}
	for _, name := range Items {
		t.Run(name, func(t *testing.T) {
			if why, ok := tg.NotApplicable[name]; ok {
				t.Skip("not applicable: " + why)
			}
			items[name](t, &tg)
		})
	}
}

func (tg *Target) fill() {
	if tg.Dir == nil {
		tg.Dir = func(t *testing.T, e remote.Executor) string {
			out := output(t, e, "mktemp -d")
			dir := strings.TrimSpace(out)
			// Cleanups run last first: e is still open here, and the
			// test's own context is already done.
			t.Cleanup(func() {
				_ = e.Run(context.Background(), remote.Cmd{Command: "rm -rf " + remote.Quote(dir)})
			})
			return dir
		}
	}
	if tg.File == nil {
		tg.File = func(t *testing.T, e remote.Executor, p string) (File, bool) {
			var out bytes.Buffer
			q := remote.Quote(p)
			err := e.Run(t.Context(), remote.Cmd{Command: "stat -c '%a %s' " + q + " && sha256sum < " + q, Stdout: &out})
			if err != nil {
				return File{}, false
			}
			fields := strings.Fields(out.String())
			if len(fields) < 3 {
				t.Fatalf("stat %s: %q", p, out.String())
			}
			mode, err1 := strconv.ParseUint(fields[0], 8, 32)
			size, err2 := strconv.ParseInt(fields[1], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("stat %s: %q", p, out.String())
			}
			return File{Size: size, SHA256: fields[2], Mode: fs.FileMode(mode)}, true
		}
	}
	if tg.Entries == nil {
		tg.Entries = func(t *testing.T, e remote.Executor, dir string) []string {
			return strings.Fields(output(t, e, "ls -A "+remote.Quote(dir)))
		}
	}
	if tg.Alive == nil {
		tg.Alive = func(t *testing.T, marker string) bool {
			e := tg.New(t)
			defer e.Close()
			// [s]leep: the pattern does not find pgrep's own command line.
			var out bytes.Buffer
			_ = e.Run(t.Context(), remote.Cmd{Command: "pgrep -f " + remote.Quote("["+marker[:1]+"]"+marker[1:]), Stdout: &out})
			return strings.TrimSpace(out.String()) != ""
		}
	}
}

func output(t *testing.T, e remote.Executor, cmd string) string {
	t.Helper()
	var out bytes.Buffer
	if err := e.Run(t.Context(), remote.Cmd{Command: cmd, Stdout: &out}); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out.String()
}

func (tg *Target) open(t *testing.T) remote.Executor {
	t.Helper()
	e := tg.New(t)
	t.Cleanup(func() { e.Close() })
	return e
}

// Run: both streams arrive, and nothing of the guard's is in them.
func itemRun(t *testing.T, tg *Target) {
	e := tg.open(t)
	var so, se bytes.Buffer
	if err := e.Run(t.Context(), remote.Cmd{Command: CmdStreams, Stdout: &so, Stderr: &se}); err != nil {
		t.Fatal(err)
	}
	if so.String() != "out\n" || se.String() != "err\n" {
		t.Fatalf("stdout %q, stderr %q; want \"out\\n\", \"err\\n\"", so.String(), se.String())
	}
	if e.Name() == "" || e.Addr() == "" {
		t.Errorf("Name %q, Addr %q: both must say something", e.Name(), e.Addr())
	}
	if e.Lost() {
		t.Error("Lost is true on a healthy executor")
	}
}

// exit-error: an *ExitError with the status, the node and stderr's tail.
func itemExit(t *testing.T, tg *Target) {
	e := tg.open(t)
	err := e.Run(t.Context(), remote.Cmd{Command: CmdFail})
	var ee *remote.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("want *remote.ExitError, got %T %v", err, err)
	}
	if ee.Status != 3 || ee.Signal != "" || ee.Node != e.Name() || !strings.Contains(ee.StderrTail, "about to fail") {
		t.Fatalf("ExitError = %+v", ee)
	}
	if !strings.HasPrefix(err.Error(), e.Name()+": ") || !strings.Contains(err.Error(), "exit 3") {
		t.Errorf("error %q: want the node first and the exit status", err)
	}
}

func itemSignal(t *testing.T, tg *Target) {
	e := tg.open(t)
	err := e.Run(t.Context(), remote.Cmd{Command: CmdKilled})
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Signal != "KILL" || !strings.Contains(err.Error(), "killed by signal KILL") {
		t.Fatalf("want an ExitError with signal KILL, got %T %v", err, err)
	}
}

// env: exported for the command, quoted whatever it holds, for that
// command only; a name that is no shell name is refused.
func itemEnv(t *testing.T, tg *Target) {
	e := tg.open(t)
	var out bytes.Buffer
	env := map[string]string{"A": `it's "quoted" $HOME; $(false)`, "B_2": ""}
	if err := e.Run(t.Context(), remote.Cmd{Command: CmdEnv, Env: env, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if want := env["A"] + "|"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	out.Reset()
	if err := e.Run(t.Context(), remote.Cmd{Command: CmdEnv, Stdout: &out}); err != nil || out.String() != "unset|unset" {
		t.Fatalf("the next command saw %q (%v): Env is for its command only", out.String(), err)
	}
	err := e.Run(t.Context(), remote.Cmd{Command: CmdEnv, Env: map[string]string{"A;touch x": "1"}})
	if err == nil || !strings.Contains(err.Error(), "not a valid shell name") || !strings.HasPrefix(err.Error(), e.Name()+": ") {
		t.Fatalf("a bad variable name: %v", err)
	}
}

// CmdHome prints the directory a command starts in, then the home
// directory, one a line.
const CmdHome = `pwd -P; cd && pwd -P`

// home: a command starts in the node user's home directory, as an SSH
// session does, and an upload to a relative path lands there: the window
// names its files on a node relative to it (.gpuaccept/RUN/...), so every
// command and every upload must mean the same file by them, whatever
// directory a transport's process would start in (a pod's image sets its
// own).
func itemHome(t *testing.T, tg *Target) {
	e := tg.open(t)
	dirs := strings.Fields(output(t, e, CmdHome))
	if len(dirs) != 2 || dirs[0] != dirs[1] {
		t.Fatalf("a command starts in %q, the home directory is the second of %q", dirs, output(t, e, CmdHome))
	}
	name := fmt.Sprintf(".gpuaccept-contract-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_ = e.Run(context.Background(), remote.Cmd{Command: "rm -rf " + remote.Quote(name)})
	})
	data := []byte("found by its relative path\n")
	if _, err := e.UploadFrom(t.Context(), bytes.NewReader(data), int64(len(data)), name+"/file", remote.TransferOptions{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if got := output(t, e, `cat "$HOME"/`+remote.Quote(name+"/file")); got != string(data) {
		t.Fatalf("the upload to %s/file, read as $HOME/%s/file: %q", name, name, got)
	}
}

// stdin: streamed byte for byte, then EOF; none means /dev/null.
func itemStdin(t *testing.T, tg *Target) {
	e := tg.open(t)
	data := make([]byte, 1<<20+17)
	rand.Read(data)
	var out bytes.Buffer
	if err := e.Run(t.Context(), remote.Cmd{Command: CmdCat, Stdin: bytes.NewReader(data), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("cat gave back %d bytes, want %d identical", out.Len(), len(data))
	}
	for _, in := range []io.Reader{strings.NewReader(""), nil} {
		out.Reset()
		if err := e.Run(t.Context(), remote.Cmd{Command: CmdCount, Stdin: in, Stdout: &out}); err != nil || strings.TrimSpace(out.String()) != "0" {
			t.Fatalf("wc -c of stdin %v = %q, %v; want 0", in, out.String(), err)
		}
	}
}

// stream: output arrives while the command runs, and stdin reaches it
// while it runs (a pipe the test writes only once it saw the output).
func itemStream(t *testing.T, tg *Target) {
	e := tg.open(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	seen := make(chan struct{})
	out := &watchWriter{want: "first\n", seen: seen}
	done := make(chan error, 1)
	go func() { done <- e.Run(t.Context(), remote.Cmd{Command: CmdStream, Stdin: pr, Stdout: out}) }()
	select {
	case <-seen:
	case err := <-done:
		t.Fatalf("the command ended before its stdin did: %v (stdout %q)", err, out.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("no output while the command runs (stdout %q)", out.String())
	}
	io.WriteString(pw, "hello\n")
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out.String() != "first\ngot hello\n" {
		t.Fatalf("stdout %q", out.String())
	}
}

type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.HasPrefix(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// upload: the file lands whole, with its mode, and the result's sum is
// the node's; a directory that is not there is made.
func itemUpload(t *testing.T, tg *Target) {
	e := tg.open(t)
	dir := tg.Dir(t, e)
	data := make([]byte, 3<<20+5)
	rand.Read(data)
	dst := path.Join(dir, "sub", "blob")
	var last, total int64
	res, err := e.UploadFrom(t.Context(), bytes.NewReader(data), int64(len(data)), dst,
		remote.TransferOptions{Mode: 0o640, Progress: func(d, tot int64) { last, total = d, tot }})
	if err != nil {
		t.Fatal(err)
	}
	if res.SHA256 != sum(data) || res.Bytes != int64(len(data)) || res.Files != 1 {
		t.Fatalf("result %+v, want %d bytes sha256 %s", res, len(data), sum(data))
	}
	if last != total || total != int64(len(data)) {
		t.Errorf("progress ended at %d of %d, want %d", last, total, len(data))
	}
	got, ok := tg.File(t, e, dst)
	if !ok || !got.is(data) {
		t.Fatalf("the node's copy: %+v (ok %v), want %d bytes sha256 %s", got, ok, len(data), sum(data))
	}
	if got.Mode != 0 && got.Mode.Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", got.Mode.Perm())
	}
	// Upload of a local file keeps its mode when none is asked for.
	local := path.Join(t.TempDir(), "script")
	if err := os.WriteFile(local, []byte("#!/bin/sh\necho hi\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(local, 0o750)
	res, err = e.Upload(t.Context(), local, path.Join(dir, "script"), remote.TransferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SHA256 != sum([]byte("#!/bin/sh\necho hi\n")) {
		t.Errorf("Upload's sum %s", res.SHA256)
	}
	if got, ok := tg.File(t, e, path.Join(dir, "script")); !ok || got.Mode != 0 && got.Mode.Perm() != 0o750 {
		t.Errorf("Upload of a 0750 file: mode %v (ok %v)", got.Mode.Perm(), ok)
	}
}

// upload-failure: a source that breaks, a sum that does not match and a
// cancelled upload each leave the target as it was.
func itemUploadFailure(t *testing.T, tg *Target) {
	e := tg.open(t)
	dir := tg.Dir(t, e)
	dst := path.Join(dir, "target")
	old := []byte("the old content\n")
	if _, err := e.UploadFrom(t.Context(), bytes.NewReader(old), int64(len(old)), dst, remote.TransferOptions{}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2<<20)
	rand.Read(data)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		src  io.ReaderAt
		o    remote.TransferOptions
	}{
		{"a source that breaks", t.Context(), &brokenReader{data: data, at: 1 << 20}, remote.TransferOptions{}},
		{"a sum that does not match", t.Context(), bytes.NewReader(data), remote.TransferOptions{SHA256: sum(old)}},
		{"a cancelled context", cancelled, bytes.NewReader(data), remote.TransferOptions{}},
	}
	for _, c := range cases {
		_, err := e.UploadFrom(c.ctx, c.src, int64(len(data)), dst, c.o)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), e.Name()+": ") {
			t.Errorf("%s: error %q does not name the node first", c.name, err)
		}
		if got, ok := tg.File(t, e, dst); !ok || !got.is(old) {
			t.Errorf("%s: the target is %+v (ok %v), want the old %d bytes", c.name, got, ok, len(old))
		}
	}
	// The executor is still good after them.
	if _, err := e.UploadFrom(t.Context(), bytes.NewReader(data), int64(len(data)), dst, remote.TransferOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tg.File(t, e, dst); !got.is(data) {
		t.Fatal("the upload after the failures did not land")
	}
}

type brokenReader struct {
	data []byte
	at   int64
}

func (b *brokenReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > b.at {
		return 0, errors.New("the source broke")
	}
	return copy(p, b.data[off:]), nil
}

// marker is a sleep only this test runs.
func marker() string {
	return fmt.Sprintf("sleep 600.%06d", time.Now().UnixNano()%1000000)
}

// cancel: ctx's error, named, within the grace; the whole group is gone,
// a child that ignores TERM included; the executor is good after.
func itemCancel(t *testing.T, tg *Target, ignoreTerm bool) {
	e := tg.open(t)
	m := marker()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- e.Run(ctx, remote.Cmd{Command: CmdSleep(m, ignoreTerm), Grace: time.Second, Stderr: &stderr})
	}()
	lab.Eventually(t, 10*time.Second, "the command started", func() bool { return tg.Alive(t, m) })
	start := time.Now()
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), e.Name()+": ") {
		t.Fatalf("want %s: ... context canceled, got %T %v", e.Name(), err, err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("Run returned %s after the cancel (grace 1s)", d)
	}
	lab.Eventually(t, 5*time.Second, "every process of the command ended", func() bool { return !tg.Alive(t, m) })
	if stderr.Len() > 0 {
		t.Errorf("the guard wrote to the command's stderr: %q", stderr.String())
	}
	var out bytes.Buffer
	if err := e.Run(t.Context(), remote.Cmd{Command: CmdStreams, Stdout: &out}); err != nil || out.String() != "out\n" {
		t.Fatalf("after the cancel: %q, %v", out.String(), err)
	}
}

// cancel-grace: a cancelled command hears TERM first and has its grace
// to end (a trap that writes a file on the node), not a KILL at once.
func itemCancelGrace(t *testing.T, tg *Target) {
	e := tg.open(t)
	dir := tg.Dir(t, e)
	m := marker()
	mark := path.Join(dir, "termed")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, remote.Cmd{Command: "trap 'echo termed > " + remote.Quote(mark) + "; exit 0' TERM; " + m + " & wait",
			Grace: 3 * time.Second})
	}()
	lab.Eventually(t, 10*time.Second, "the command started", func() bool { return tg.Alive(t, m) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context canceled, got %T %v", err, err)
	}
	if f, ok := tg.File(t, e, mark); !ok || f.Size != int64(len("termed\n")) {
		t.Errorf("the command's TERM trap left no mark (%+v, %v): it was killed without its grace", f, ok)
	}
}

// lost: a node that goes away under a running command fails the command
// with a *ConnectionLostError naming the node, within the keepalive bound
// rather than TCP's minutes; Lost is true from then on and every later
// call fails the same way; the command's whole group (a child that
// ignores TERM included) is ended on the node by its guard, even though
// the node never heard the coordinator go; and the node can be reached
// afresh.
func itemLost(t *testing.T, tg *Target) {
	e := tg.open(t)
	m := marker()
	done := make(chan error, 1)
	go func() { done <- e.Run(t.Context(), remote.Cmd{Command: CmdSleep(m, true), Grace: time.Second}) }()
	lab.Eventually(t, 10*time.Second, "the command started", func() bool { return tg.Alive(t, m) })
	restore := tg.Cut(t, e)
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the node went away")
	}
	var lost *remote.ConnectionLostError
	if !errors.As(err, &lost) || !errors.Is(err, remote.ErrConnectionLost) || lost.Node != e.Name() ||
		!strings.HasPrefix(err.Error(), e.Name()+": ") {
		t.Fatalf("want a *remote.ConnectionLostError naming %s first, got %T %v", e.Name(), err, err)
	}
	if !e.Lost() {
		t.Error("Lost is false after a lost connection")
	}
	if err := e.Run(t.Context(), remote.Cmd{Command: CmdStreams}); !errors.Is(err, remote.ErrConnectionLost) ||
		!strings.HasPrefix(err.Error(), e.Name()+": ") {
		t.Errorf("Run after the loss: %v; want the loss, naming the node", err)
	}
	if _, err := e.UploadFrom(t.Context(), strings.NewReader("x"), 1, "/nonexistent/x", remote.TransferOptions{}); !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("UploadFrom after the loss: %v; want the loss", err)
	}
	if !e.Lost() {
		t.Error("Lost did not stay true")
	}
	restore()
	restored = true
	lab.Eventually(t, 15*time.Second, "the guard ended every process of the command", func() bool { return !tg.Alive(t, m) })
	again := tg.open(t)
	var out bytes.Buffer
	if err := again.Run(t.Context(), remote.Cmd{Command: CmdStreams, Stdout: &out}); err != nil || out.String() != "out\n" {
		t.Fatalf("the node reached afresh: %q, %v", out.String(), err)
	}
}

// output-bounds: stderr's tail in the error is bounded and ends with the
// last words; large streams arrive whole, both at once.
func itemBounds(t *testing.T, tg *Target) {
	e := tg.open(t)
	err := e.Run(t.Context(), remote.Cmd{Command: CmdLongStderr})
	var ee *remote.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("want *remote.ExitError, got %T %v", err, err)
	}
	if len(ee.StderrTail) > 64<<10 || !strings.HasSuffix(ee.StderrTail, "last words\n") {
		t.Fatalf("stderr tail of %d bytes ending %q: want at most 64 KiB ending with the last words",
			len(ee.StderrTail), ee.StderrTail[max(0, len(ee.StderrTail)-20):])
	}
	if len(err.Error()) > 8<<10 {
		t.Errorf("the error's text is %d bytes: it must stay bounded", len(err.Error()))
	}
	a, b := &countWriter{c: 'a'}, &countWriter{c: 'b'}
	err = e.Run(t.Context(), remote.Cmd{Command: CmdBigStreams, Stdout: a, Stderr: b})
	if err != nil && tg.GaveUp != nil && tg.GaveUp(err) {
		t.Logf("the transport gave the command up, and said so (tried once more): %v", err)
		a, b = &countWriter{c: 'a'}, &countWriter{c: 'b'}
		err = e.Run(t.Context(), remote.Cmd{Command: CmdBigStreams, Stdout: a, Stderr: b})
	}
	if err != nil {
		t.Fatal(err)
	}
	if a.n != 8<<20 || b.n != 8<<20 || a.bad+b.bad != 0 {
		t.Fatalf("stdout %d (%d wrong), stderr %d (%d wrong), want %d each", a.n, a.bad, b.n, b.bad, 8<<20)
	}
}

type countWriter struct {
	n, bad int
	c      byte
}

func (w *countWriter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != w.c {
			w.bad++
		}
	}
	w.n += len(p)
	return len(p), nil
}

// close: ends a running command (Run returns, its processes go), is
// idempotent, and every later call fails naming the node.
func itemClose(t *testing.T, tg *Target) {
	e := tg.New(t)
	m := marker()
	done := make(chan error, 1)
	go func() { done <- e.Run(t.Context(), remote.Cmd{Command: CmdSleep(m, true), Grace: time.Second}) }()
	lab.Eventually(t, 10*time.Second, "the command started", func() bool { return tg.Alive(t, m) })
	closed := make(chan struct{})
	go func() { e.Close(); close(closed) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run of a command ended by Close returned nil")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not end the running command")
	}
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return")
	}
	lab.Eventually(t, 8*time.Second, "every process of the command ended", func() bool { return !tg.Alive(t, m) })
	if err := e.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	// Lost may stay false after Close (SSH: closed is not lost), but once
	// true, every call must fail as lost.
	if e.Lost() {
		if err := e.Run(t.Context(), remote.Cmd{Command: CmdStreams}); !errors.Is(err, remote.ErrConnectionLost) {
			t.Errorf("Lost is true and Run fails with %v, not a *ConnectionLostError", err)
		}
	}
	err := e.Run(t.Context(), remote.Cmd{Command: CmdStreams})
	if err == nil || !strings.HasPrefix(err.Error(), e.Name()+": ") ||
		!errors.Is(err, net.ErrClosed) && !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("Run after Close: %v; want an error naming the node (closed or lost)", err)
	}
	if _, err := e.UploadFrom(t.Context(), strings.NewReader("x"), 1, "/nonexistent/x", remote.TransferOptions{}); err == nil {
		t.Error("UploadFrom after Close succeeded")
	}
}

// concurrency: commands and uploads at once on one executor, each with
// its own environment, streams and file.
func itemConcurrency(t *testing.T, tg *Target) {
	e := tg.open(t)
	dir := tg.Dir(t, e)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	outs := make([]bytes.Buffer, n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[i] = e.Run(t.Context(), remote.Cmd{Command: CmdIndex, Env: map[string]string{"I": strconv.Itoa(i)}, Stdout: &outs[i]})
		}()
		go func() {
			defer wg.Done()
			b := []byte(strings.Repeat(strconv.Itoa(i), 1000+i))
			_, errs[n+i] = e.UploadFrom(t.Context(), bytes.NewReader(b), int64(len(b)), path.Join(dir, "f"+strconv.Itoa(i)), remote.TransferOptions{})
		}()
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if errs[i] != nil || outs[i].String() != strconv.Itoa(i) {
			t.Errorf("command %d: %q, %v", i, outs[i].String(), errs[i])
		}
		if errs[n+i] != nil {
			t.Errorf("upload %d: %v", i, errs[n+i])
			continue
		}
		want := strings.Repeat(strconv.Itoa(i), 1000+i)
		if got, ok := tg.File(t, e, path.Join(dir, "f"+strconv.Itoa(i))); !ok || !got.is([]byte(want)) {
			t.Errorf("upload %d: the node holds %+v, want %d bytes", i, got, len(want))
		}
	}
	if len(tg.Entries(t, e, dir)) != n {
		t.Errorf("the directory holds %v: want the %d files and nothing else (no part left)", tg.Entries(t, e, dir), n)
	}
}
