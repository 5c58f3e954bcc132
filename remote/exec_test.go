package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunOutputAndExitStatus(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	ctx := t.Context()

	out, err := c.Output(ctx, "echo hello; echo warn >&2")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
	// The guard adds nothing to either stream.
	var so, se bytes.Buffer
	if err := c.Run(ctx, Cmd{Command: "echo out; echo err >&2", Stdout: &so, Stderr: &se}); err != nil ||
		so.String() != "out\n" || se.String() != "err\n" {
		t.Fatalf("streams %q %q, %v", so.String(), se.String(), err)
	}

	err = c.Run(ctx, Cmd{Command: "echo about to fail >&2; exit 3"})
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("want *ExitError, got %T %v", err, err)
	}
	if ee.Status != 3 || ee.Signal != "" || ee.Node != "node-a" || !strings.Contains(ee.StderrTail, "about to fail") {
		t.Fatalf("ExitError = %+v", ee)
	}
	for _, want := range []string{"node-a: ", "exit 3", "about to fail"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	err = c.Run(ctx, Cmd{Command: "kill -9 $$"})
	if !errors.As(err, &ee) || ee.Signal != "KILL" {
		t.Fatalf("want signal KILL, got %v", err)
	}
	if !strings.Contains(err.Error(), "killed by signal KILL") {
		t.Errorf("error %q does not name the signal", err)
	}
}

func TestRunEnvIsQuoted(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	var out bytes.Buffer
	err := c.Run(t.Context(), Cmd{Command: `printf '%s|%s' "$A" "$B_2"`, Stdout: &out,
		Env: map[string]string{"A": `it's "quoted" $HOME`, "B_2": ""}})
	if err != nil || out.String() != `it's "quoted" $HOME|` {
		t.Fatalf("got %q, %v", out.String(), err)
	}
	err = c.Run(t.Context(), Cmd{Command: "true", Env: map[string]string{"A;rm -rf /": "x"}})
	if err == nil || !strings.Contains(err.Error(), "not a valid shell name") {
		t.Fatalf("bad env name accepted: %v", err)
	}
}

// countWriter counts bytes and checks they are all one byte value.
type countWriter struct {
	n   int
	bad int
	c   byte
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

func TestRunLargeStdoutAndStderrAtOnce(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	const size = 8 << 20
	out, errw := &countWriter{c: 'a'}, &countWriter{c: 'b'}
	cmd := `(head -c 8388608 /dev/zero | tr '\0' a) & (head -c 8388608 /dev/zero | tr '\0' b >&2) & wait`
	if err := c.Run(t.Context(), Cmd{Command: cmd, Stdout: out, Stderr: errw}); err != nil {
		t.Fatal(err)
	}
	if out.n != size || errw.n != size || out.bad != 0 || errw.bad != 0 {
		t.Fatalf("stdout %d (%d bad), stderr %d (%d bad), want %d each", out.n, out.bad, errw.n, errw.bad, size)
	}
}

func TestRunStdin(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	data := make([]byte, 1<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Run(t.Context(), Cmd{Command: "cat", Stdin: bytes.NewReader(data), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("cat returned %d bytes, want %d identical", out.Len(), len(data))
	}
	// A command that ignores its stdin still ends, and an empty stdin is EOF.
	if err := c.Run(t.Context(), Cmd{Command: "true", Stdin: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := c.Run(t.Context(), Cmd{Command: "wc -c", Stdin: strings.NewReader(""), Stdout: &out}); err != nil || strings.TrimSpace(out.String()) != "0" {
		t.Fatalf("wc -c of empty stdin = %q, %v", out.String(), err)
	}
	// Without Stdin the command reads /dev/null, never the control stream.
	out.Reset()
	if err := c.Run(t.Context(), Cmd{Command: "wc -c", Stdout: &out}); err != nil || strings.TrimSpace(out.String()) != "0" {
		t.Fatalf("wc -c without stdin = %q, %v", out.String(), err)
	}
}

func TestCancelStopsTheRemoteProcessGroup(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	cmd, marker := uniqueSleep()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	// A child in the background and one in the foreground: both belong to
	// the command and both must go.
	go func() { done <- c.Run(ctx, Cmd{Command: cmd + " & " + cmd + "; wait", Grace: time.Second}) }()
	eventually(t, 3*time.Second, "remote sleep started", func() bool { return running(marker) })
	start := time.Now()
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "node-a: ") {
		t.Fatalf("want node-a: ... context canceled, got %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %s", d)
	}
	// The marker is in the guard's command line too, so this finds the
	// guard as well as the command (and not other packages' guards, which
	// run in parallel on this machine). Run returns once the session is
	// closed, and the guard hears that a moment later: the processes get
	// half a second to go, inside the second of grace before a KILL.
	gone := time.Now().Add(500 * time.Millisecond)
	for running(marker) && time.Now().Before(gone) {
		time.Sleep(20 * time.Millisecond)
	}
	if out, _ := exec.Command("pgrep", "-af", marker).Output(); len(out) > 0 {
		t.Fatalf("a process of ours outlived the cancel by half a second:\n%s", out)
	}
	// The connection is still good for the next command.
	if out, err := c.Output(t.Context(), "echo again"); err != nil || string(out) != "again\n" {
		t.Fatalf("after cancel: %q %v", out, err)
	}
}

func TestCommandThatIgnoresTermIsKilledAfterGrace(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	cmd, marker := uniqueSleep()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- c.Run(ctx, Cmd{Command: "trap '' TERM; " + cmd + " & wait; wait", Grace: time.Second, Stderr: &stderr})
	}()
	eventually(t, 3*time.Second, "remote sleep started", func() bool { return running(marker) })
	cancel()
	<-done
	// bash's job notices ("Killed") are the guard's, not the command's.
	if stderr.Len() > 0 {
		t.Errorf("the guard wrote to the command's stderr: %q", stderr.String())
	}
	eventually(t, 3*time.Second, "TERM-ignoring command and its guard killed", func() bool {
		return !running(marker) // the guard's command line holds the marker too
	})
}

func TestDroppedConnectionFailsCallsAndStopsRemote(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0, tightKeepalives)
	cmd, marker := uniqueSleep()
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { errs <- c.Run(t.Context(), Cmd{Command: cmd}) }()
	}
	eventually(t, 3*time.Second, "remote sleep started", func() bool { return running(marker) })
	f.servers[0].DropConnections()
	for i := 0; i < 2; i++ {
		err := <-errs
		var lost *ConnectionLostError
		if !errors.As(err, &lost) || lost.Node != "node-a" || !errors.Is(err, ErrConnectionLost) {
			t.Fatalf("want *ConnectionLostError for node-a, got %T %v", err, err)
		}
	}
	// sshd closes the guard's stdin with the connection: the guard stops the
	// command at once, without waiting for its lease.
	eventually(t, 1500*time.Millisecond, "orphaned command stopped", func() bool { return !running(marker) })
	if err := c.Run(t.Context(), Cmd{Command: "true"}); !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("a call after the loss: %v", err)
	}
}

func TestFrozenNetworkIsDetectedByKeepalivesAndLeaseStopsRemote(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0, tightKeepalives)
	cmd, marker := uniqueSleep()
	done := make(chan error, 1)
	go func() { done <- c.Run(t.Context(), Cmd{Command: cmd}) }()
	eventually(t, 3*time.Second, "remote sleep started", func() bool { return running(marker) })
	start := time.Now()
	f.servers[0].Freeze()
	err := <-done
	elapsed := time.Since(start)
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "silent") {
		t.Fatalf("want a keepalive loss, got %v", err)
	}
	// interval 200ms × 3 misses, checked every 50ms.
	if elapsed > 2*time.Second {
		t.Errorf("loss noticed after %s, bound is 600ms + a check", elapsed)
	}
	// The node never heard the connection go; the guard's lease (2s) ends
	// the command.
	eventually(t, 5*time.Second, "command stopped by the lease", func() bool { return !running(marker) })
}

func TestIgnoredKeepalivesCloseTheConnection(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0, tightKeepalives)
	f.servers[0].IgnoreKeepalives(true)
	start := time.Now()
	err := c.Run(t.Context(), Cmd{Command: "sleep 5"})
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("want connection lost, got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestHandshakeDeadline(t *testing.T) {
	f := newFleet(t, 1)
	f.servers[0].StallHandshake(true)
	cfg := f.config(0)
	cfg.HandshakeTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := Dial(t.Context(), cfg)
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "handshake") {
		t.Fatalf("want handshake TimeoutError, got %v", err)
	}
	if strings.Count(err.Error(), "node-a") != 1 || !strings.HasPrefix(err.Error(), "node-a: ") {
		t.Errorf("node named other than once, first: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestSessionOpenIsBounded(t *testing.T) {
	f := newFleet(t, 1)
	cfg := f.config(0)
	cfg.SessionTimeout = 200 * time.Millisecond
	cfg.KeepaliveInterval = 2 * time.Second // the session deadline must fire first
	c, err := Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f.servers[0].Freeze()
	err = c.Run(t.Context(), Cmd{Command: "true"})
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "open session") {
		t.Fatalf("want open-session TimeoutError, got %v", err)
	}
	_, err = c.Download(t.Context(), "/etc/hostname", filepath.Join(t.TempDir(), "x"), TransferOptions{})
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "open sftp session") || !strings.HasPrefix(err.Error(), "node-a: ") {
		t.Fatalf("want open-sftp TimeoutError, got %v", err)
	}
}

func TestGuardedCommandQuoting(t *testing.T) {
	// The user's command reaches bash byte for byte, whatever it contains.
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	tricky := `printf '%s\n' "a'b" 'c"d' '$(x)' "\\" ; echo "$#"`
	var out bytes.Buffer
	if err := c.Run(t.Context(), Cmd{Command: tricky, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if want := "a'b\nc\"d\n$(x)\n\\\n0\n"; out.String() != want {
		t.Fatalf("got %q want %q", out.String(), want)
	}
}

func TestStdinReaderErrorEndsStdin(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	var out bytes.Buffer
	r := io.MultiReader(strings.NewReader("partial"), errReader{})
	if err := c.Run(t.Context(), Cmd{Command: "cat", Stdin: r, Stdout: &out}); err != nil || out.String() != "partial" {
		t.Fatalf("got %q, %v", out.String(), err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("source broke") }

func TestGuardStopsACommandWhoseStopCameEarly(t *testing.T) {
	// The guard is told to stop (TERM, as sshd or the control stream's end
	// would) at moments spread over its start: before, or just as, it waits
	// on the command. A command that ignores TERM must still be KILLed after
	// the grace period, and bash's notice of the kill must not reach the
	// command's stderr.
	for i := range 40 {
		sleep, marker := uniqueSleep()
		cmd := exec.CommandContext(t.Context(), "bash", "-c", guardScript, "gpuaccept-guard",
			"trap '' TERM; "+sleep+" & wait; wait", "60", "1", "0")
		stdin, err := cmd.StdinPipe() // held open: only the TERM stops the command
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		time.Sleep(time.Duration(i) * 250 * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("try %d: the guard ended with status 0; want the command's KILL", i)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			_ = exec.Command("pkill", "-KILL", "-f", marker).Run()
			<-done
			t.Fatalf("try %d: the guard still waits on its command 10 s after it was told to stop", i)
		}
		stdin.Close()
		if stderr.Len() > 0 {
			t.Fatalf("try %d: the guard wrote to the command's stderr: %q", i, stderr.String())
		}
	}
}
