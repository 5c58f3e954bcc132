package sshtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a server with one authorized client key.
type fixture struct {
	srv *Server
	key ssh.Signer
	dir string
}

func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.AuthorizedKeys = append(opts.AuthorizedKeys, key.PublicKey())
	opts.Logf = t.Logf
	srv, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return &fixture{srv: srv, key: key, dir: opts.Dir}
}

func (f *fixture) config() *ssh.ClientConfig {
	return &ssh.ClientConfig{
		User:            "tester",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(f.key)},
		HostKeyCallback: ssh.FixedHostKey(f.srv.HostKey()),
		Timeout:         5 * time.Second,
	}
}

func (f *fixture) dial(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", f.srv.Addr(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newSession(t *testing.T, c *ssh.Client) *ssh.Session {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestExecEcho(t *testing.T) {
	f := start(t, Options{Env: []string{"FROM_OPTS=opts"}})
	c := f.dial(t)
	s := newSession(t, c)
	if err := s.Setenv("FROM_CLIENT", "client"); err != nil {
		t.Fatal(err)
	}
	out, err := s.Output("echo hello $FROM_CLIENT $FROM_OPTS; pwd")
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello client opts\n" + f.dir + "\n"; string(out) != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	if got := f.srv.Execs(); len(got) != 1 || got[0] != "echo hello $FROM_CLIENT $FROM_OPTS; pwd" {
		t.Fatalf("Execs() = %q", got)
	}
	if n := f.srv.Connections(); n != 1 {
		t.Fatalf("Connections() = %d", n)
	}
}

func TestExitStatus(t *testing.T) {
	f := start(t, Options{})
	err := newSession(t, f.dial(t)).Run("exit 3")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 3 || ee.Signal() != "" {
		t.Fatalf("err = %v, want exit status 3", err)
	}
}

func TestExitSignal(t *testing.T) {
	f := start(t, Options{})
	err := newSession(t, f.dial(t)).Run("kill -9 $$")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.Signal() != "KILL" {
		t.Fatalf("err = %v, want signal KILL", err)
	}
}

func TestBothOutputsAtOnce(t *testing.T) {
	f := start(t, Options{})
	s := newSession(t, f.dial(t))
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	// tee alternates between the two, so if either stream were not drained
	// independently the other would stall.
	if err := s.Run("head -c 8388608 /dev/urandom | tee /dev/stderr"); err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 8<<20 || !bytes.Equal(stdout.Bytes(), stderr.Bytes()) {
		t.Fatalf("stdout %d bytes, stderr %d bytes, equal %v", stdout.Len(), stderr.Len(), bytes.Equal(stdout.Bytes(), stderr.Bytes()))
	}
}

func TestStdinRoundTrip(t *testing.T) {
	f := start(t, Options{})
	s := newSession(t, f.dial(t))
	in := make([]byte, 1<<20)
	rand.Read(in)
	s.Stdin = bytes.NewReader(in)
	out, err := s.Output("cat")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("got %d bytes back, want the %d sent", len(out), len(in))
	}
}

func TestSignal(t *testing.T) {
	f := start(t, Options{})
	s := newSession(t, f.dial(t))
	if err := s.Start("sleep 100"); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := s.Wait()
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.Signal() != "TERM" {
		t.Fatalf("err = %v, want signal TERM", err)
	}
}

func TestRefusedRequests(t *testing.T) {
	f := start(t, Options{})
	c := f.dial(t)
	s := newSession(t, c)
	if err := s.RequestPty("xterm", 24, 80, nil); err == nil {
		t.Error("pty-req accepted")
	}
	if err := s.Shell(); err == nil {
		t.Error("shell accepted")
	}
	// Malformed payloads are refused, not fatal.
	for _, typ := range []string{"exec", "env", "signal", "subsystem"} {
		if ok, err := s.SendRequest(typ, true, []byte{0, 0, 0, 9, 'x'}); ok || err != nil {
			t.Errorf("malformed %s: ok %v, err %v", typ, ok, err)
		}
	}
	if ok, _ := s.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"nope"})); ok {
		t.Error("unknown subsystem accepted")
	}
	if _, _, err := c.OpenChannel("x11", nil); err == nil {
		t.Error("x11 channel accepted")
	}
	if _, _, err := c.OpenChannel("direct-tcpip", []byte{1, 2}); err == nil {
		t.Error("malformed direct-tcpip accepted")
	}
	// The connection still works.
	if out, err := newSession(t, c).Output("echo ok"); err != nil || string(out) != "ok\n" {
		t.Fatalf("after malformed requests: %q, %v", out, err)
	}
}

func TestRejectsUnknownKey(t *testing.T) {
	f := start(t, Options{})
	other, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(other)}
	if c, err := ssh.Dial("tcp", f.srv.Addr(), cfg); err == nil {
		c.Close()
		t.Fatal("unknown key accepted")
	}
}

func TestSFTP(t *testing.T) {
	f := start(t, Options{})
	sc, err := sftp.NewClient(f.dial(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	up := make([]byte, 300<<10)
	rand.Read(up)
	w, err := sc.Create("up.bin") // relative to Options.Dir
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(up); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(f.dir, "up.bin")); err != nil || !bytes.Equal(got, up) {
		t.Fatalf("uploaded file: %d bytes, %v", len(got), err)
	}

	if err := os.WriteFile(filepath.Join(f.dir, "down.txt"), []byte("down\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := sc.Open(filepath.Join(f.dir, "down.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || string(got) != "down\n" {
		t.Fatalf("downloaded %q, %v", got, err)
	}
}

func TestDirectTCPIP(t *testing.T) {
	jump := start(t, Options{Name: "jump"})
	target := start(t, Options{Name: "target"})
	hop := jump.dial(t)
	conn, err := hop.Dial("tcp", target.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := ssh.NewClientConn(conn, target.srv.Addr(), target.config())
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	c := ssh.NewClient(cc, chans, reqs)
	defer c.Close()
	if out, err := newSession(t, c).Output("echo through"); err != nil || string(out) != "through\n" {
		t.Fatalf("through the jump host: %q, %v", out, err)
	}
	if target.srv.Connections() != 1 || len(target.srv.Execs()) != 1 || len(jump.srv.Execs()) != 0 {
		t.Fatal("command did not run on the target")
	}
	if _, err := hop.Dial("tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
}

func TestStallHandshake(t *testing.T) {
	f := start(t, Options{})
	f.srv.StallHandshake(true)
	conn, err := net.Dial("tcp", f.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	begin := time.Now()
	conn.SetDeadline(begin.Add(300 * time.Millisecond))
	if _, _, _, err := ssh.NewClientConn(conn, f.srv.Addr(), f.config()); err == nil {
		t.Fatal("handshake succeeded")
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("handshake failed only after %v", d)
	}
	if f.srv.Connections() != 1 {
		t.Fatalf("Connections() = %d", f.srv.Connections())
	}
	f.srv.StallHandshake(false)
	f.dial(t)
}

// keepalive sends a keepalive and delivers its outcome on the channel.
func keepalive(c *ssh.Client) <-chan error {
	res := make(chan error, 1)
	go func() {
		ok, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
		if err == nil && !ok {
			err = errors.New("keepalive refused")
		}
		res <- err
	}()
	return res
}

func TestFreeze(t *testing.T) {
	f := start(t, Options{})
	c := f.dial(t)
	if err := <-keepalive(c); err != nil {
		t.Fatal(err)
	}
	f.srv.Freeze()
	res := keepalive(c)
	select {
	case err := <-res:
		t.Fatalf("keepalive answered while frozen: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// New connections are not frozen.
	f.dial(t)
	f.srv.Thaw()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after Thaw")
	}
	if out, err := newSession(t, c).Output("echo alive"); err != nil || string(out) != "alive\n" {
		t.Fatalf("after Thaw: %q, %v", out, err)
	}
}

func TestCloseWhileFrozen(t *testing.T) {
	f := start(t, Options{})
	c := f.dial(t)
	s := newSession(t, c)
	if err := s.Start("echo started; cat"); err != nil {
		t.Fatal(err)
	}
	f.srv.Freeze()
	res := keepalive(c)
	done := make(chan error, 1)
	go func() { done <- f.srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on a frozen connection")
	}
	if err := <-res; err == nil {
		t.Fatal("keepalive answered by a closed server")
	}
	// cat saw EOF when its stdin was closed and has ended by itself.
	waitFor(t, func() bool { return len(f.srv.Children()) == 0 })
}

func TestIgnoreKeepalives(t *testing.T) {
	f := start(t, Options{})
	c := f.dial(t)
	f.srv.IgnoreKeepalives(true)
	res := keepalive(c)
	select {
	case err := <-res:
		t.Fatalf("keepalive answered while ignored: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	f.srv.IgnoreKeepalives(false)
	// The client serializes global requests, so the ignored one blocks the
	// connection's later ones; a new connection gets answers again.
	if err := <-keepalive(f.dial(t)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-res; err == nil {
		t.Fatal("ignored keepalive got an answer")
	}
}

func TestDropConnections(t *testing.T) {
	f := start(t, Options{})
	c := f.dial(t)
	s := newSession(t, c)
	if err := s.Start("cat"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	f.srv.DropConnections()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("client did not notice the dropped connection")
	}
	// The server still accepts.
	if out, err := newSession(t, f.dial(t)).Output("echo again"); err != nil || string(out) != "again\n" {
		t.Fatalf("after drop: %q, %v", out, err)
	}
	waitFor(t, func() bool { return len(f.srv.Children()) == 0 })
}

func TestChannelCloseLeavesChildRunning(t *testing.T) {
	f := start(t, Options{})
	s := newSession(t, f.dial(t))
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Keep stdin open: only the server's closing of the pipe ends cat.
	if _, err := s.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(f.dir, "marker")
	err = s.Start(`trap '' PIPE; echo $$; cat >/dev/null; echo late || echo epipe >` + marker + `; exec sleep 100`)
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 32)
	n, err := stdout.Read(line)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("pid line %q: %v", line[:n], err)
	}

	s.Close()
	// The child saw EOF on stdin, then EPIPE on stdout, and lives on.
	waitFor(t, func() bool {
		b, _ := os.ReadFile(marker)
		return string(b) == "epipe\n"
	})
	waitFor(t, func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return strings.HasPrefix(string(b), "sleep\x00")
	})
	time.Sleep(100 * time.Millisecond)
	if got := f.srv.Children(); len(got) != 1 || got[0] != pid || !running(pid) {
		t.Fatalf("children %v, %d running %v", got, pid, running(pid))
	}
	// Not even Close kills it.
	if err := f.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if !running(pid) {
		t.Fatal("Close killed the child")
	}
	f.srv.KillChildren()
	if len(f.srv.Children()) != 0 || running(pid) {
		t.Fatal("KillChildren left the child")
	}
}

func TestHostKeys(t *testing.T) {
	f := start(t, Options{})
	other := start(t, Options{})
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := WriteKnownHosts(path, f.srv, other.srv); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "[127.0.0.1]:" + strconv.Itoa(f.srv.Port()) + " ssh-ed25519 AAAA"
	if !strings.HasPrefix(string(b), prefix) || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("known_hosts:\n%s", b)
	}
	check, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.HostKeyCallback = check
	c, err := ssh.Dial("tcp", f.srv.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetHostKey(key)
	if !bytes.Equal(f.srv.HostKey().Marshal(), key.PublicKey().Marshal()) {
		t.Fatal("HostKey() does not follow SetHostKey")
	}
	_, err = ssh.Dial("tcp", f.srv.Addr(), cfg)
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		t.Fatalf("changed host key: err = %v, want a knownhosts.KeyError", err)
	}
}

func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name; Z is a zombie.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
