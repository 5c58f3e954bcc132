package remote_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

const localHelperEnv = "GPUACCEPT_TEST_LOCAL_COORDINATOR"

// A coordinator that dies (SIGKILL: nothing of it runs to clean up) takes
// its local commands with it: the guard's control stream ends with the
// process that held it, as an SSH channel ends with the connection.
func TestLocalCommandsEndWithTheCoordinator(t *testing.T) {
	if cmd := os.Getenv(localHelperEnv); cmd != "" {
		l := remote.NewLocal("here", remote.LocalConfig{Heartbeat: 500 * time.Millisecond, GuardLease: 30 * time.Second})
		_ = l.Run(context.Background(), remote.Cmd{Command: cmd})
		return
	}
	marker := fmt.Sprintf("sleep 600.%06d", time.Now().UnixNano()%1000000)
	alive := func() bool {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		return strings.TrimSpace(string(out)) != ""
	}
	// A child that ignores TERM too: the guard's KILL after the grace
	// must reach it.
	helper := exec.Command(os.Args[0], "-test.run=^TestLocalCommandsEndWithTheCoordinator$")
	helper.Env = append(os.Environ(), localHelperEnv+"=trap '' TERM; "+marker+" & "+marker+"; wait")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, "the command started", alive)
	helper.Process.Kill()
	helper.Wait()
	// The lease is 30 s: the end of the control stream, not silence, must
	// stop the command, within the default grace of 5 s.
	lab.Eventually(t, 10*time.Second, "the command ended with its coordinator", func() bool { return !alive() })
}

// An upload on this machine writes through no link another user planted:
// not the target (a link there is replaced, its victim untouched), not a
// part file under the name the SSH path would use; and the file it leaves
// is whole, with the mode asked for.
func TestLocalUploadNeverFollowsLinks(t *testing.T) {
	dir, victims := t.TempDir(), t.TempDir()
	victim := victims + "/victim"
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/blob", "/.blob.gpuaccept-part"} {
		if err := os.Symlink(victim, dir+name); err != nil {
			t.Fatal(err)
		}
	}
	l := remote.NewLocal("here", remote.LocalConfig{})
	defer l.Close()
	data := []byte("the window's own\n")
	if _, err := l.UploadFrom(t.Context(), strings.NewReader(string(data)), int64(len(data)), dir+"/blob", remote.TransferOptions{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("the victim was written through a link: %q", b)
	}
	st, err := os.Lstat(dir + "/blob")
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("the target: %v, %v; want a regular file of mode 0600", st.Mode(), err)
	}
	if b, _ := os.ReadFile(dir + "/blob"); string(b) != string(data) {
		t.Fatalf("the target holds %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 { // blob and the planted link, no part of ours
		t.Errorf("the directory holds %d entries, want the file and the planted link", len(entries))
	}
}

// This machine is never lost under the window; a closed executor is, so
// that Reconnect dials afresh instead of reusing it.
func TestLocalLostOnlyOnceClosed(t *testing.T) {
	l := remote.NewLocal("here", remote.LocalConfig{})
	if l.Lost() || l.Addr() != remote.LocalAddress || l.Name() != "here" {
		t.Fatalf("a new Local: Lost %v, Addr %q, Name %q", l.Lost(), l.Addr(), l.Name())
	}
	l.Close()
	err := l.Run(t.Context(), remote.Cmd{Command: "true"})
	var lost *remote.ConnectionLostError
	if !l.Lost() || !errors.As(err, &lost) || lost.Node != "here" {
		t.Fatalf("after Close: Lost %v, Run %T %v", l.Lost(), err, err)
	}
}

// A directory on the way that is a link (another user's plant, pointing
// where root should not write) is refused as over SSH, not followed: the
// local transport checks its directories with the same script.
func TestLocalUploadRefusesALinkedDirectory(t *testing.T) {
	base, victims := t.TempDir(), t.TempDir()
	if err := os.Symlink(victims, base+"/planted"); err != nil {
		t.Fatal(err)
	}
	l := remote.NewLocal("here", remote.LocalConfig{})
	defer l.Close()
	data := []byte("the window's own\n")
	_, err := l.UploadFrom(t.Context(), strings.NewReader(string(data)), int64(len(data)), base+"/planted/blob", remote.TransferOptions{Mode: 0o600})
	if !errors.Is(err, remote.ErrNotPrivate) || !strings.Contains(err.Error(), "here: upload "+base+"/planted/blob") {
		t.Fatalf("upload into a linked directory: %v; want ErrNotPrivate naming the node and the target", err)
	}
	if entries, _ := os.ReadDir(victims); len(entries) != 0 {
		t.Fatalf("the link's target was written: %d entries", len(entries))
	}
}
