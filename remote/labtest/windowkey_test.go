package labtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"gpuaccept/remote"
	"gpuaccept/scripts"
)

// TestTeardownKeepsLoginsWorking: teardown takes the window's key out of
// a shared authorized_keys while others log in. Every login succeeds
// (the file is replaced by a rename, never truncated and refilled), and
// the other keys, owner and mode are what they were, byte for byte. The
// lab's own key is last, after thousands of others, where a file being
// rewritten in place lacks it longest.
func TestTeardownKeepsLoginsWorking(t *testing.T) {
	l := needLab(t)
	// h15: no other test of the package rekeys, kills or cuts it (h13's
	// key is changed by TestChangedHostKeyIsRefusedOnRealHost).
	const host = "h15"
	keys := filepath.Join(l.Dir, "home", ".ssh", "authorized_keys")
	orig, err := os.ReadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(keys, orig, 0o600); err != nil {
			t.Errorf("restore the lab's authorized_keys: %v", err)
		}
	})
	var others strings.Builder
	for i := 0; i < 20000; i++ {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&others, "%s another-user-%d\n", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))), i)
	}
	want := others.String() + string(orig)
	if err := os.WriteFile(keys, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	c := dial(t, l, host)
	run := fmt.Sprintf("keytest-%d", time.Now().UnixNano())
	windowLine := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHdpbmRvdy1rZXktb2YtdGhlLXRlc3QtLS0tLS0tLS0 gpuaccept-window-" + run
	teardown := "bash -c " + remote.Quote(scripts.Teardown) + " teardown " + remote.Quote(run) + " '' ''"

	var logins, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lc, err := remote.Dial(t.Context(), config(t, l, host))
				logins.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lc.Close()
			}
		}()
	}
	for i := 0; i < 15; i++ {
		if out, err := c.Output(t.Context(), "flock $HOME/.ssh/.gpuaccept.lock sh -c "+remote.Quote("printf '%s\\n' "+remote.Quote(windowLine)+" >>$HOME/.ssh/authorized_keys")); err != nil {
			t.Fatalf("add the window key: %v: %s", err, out)
		}
		out, err := c.Output(t.Context(), teardown)
		if err != nil || !strings.Contains(string(out), "removed the window key from") {
			t.Fatalf("teardown %d: %v: %s", i, err, out)
		}
		time.Sleep(30 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d logins during 15 teardowns, %d failed", logins.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d logins failed while teardown removed the window key; first: %v", failed.Load(), logins.Load(), firstErr.Load())
	}
	got, err := os.ReadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("authorized_keys changed beyond the window's line: %d bytes, want %d", len(got), len(want))
	}
	st, err := os.Stat(keys)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("authorized_keys mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(l.Dir, "home", ".ssh", ".authorized_keys.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
