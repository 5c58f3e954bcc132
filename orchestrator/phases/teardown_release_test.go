package phases

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/scripts"
)

// TestReleasedNodeTearsDownOnlyItsOwn runs teardown.sh as the idle
// guard's release does (GPUACCEPT_RELEASE_NODE), on a home that two nodes
// of the window share, with both nodes' processes on this machine (the
// lab's case): only h2's process, copy and private directory go; h1's
// process, copy, the window key and the window's directory stay for the
// window's own teardown; so does its private directory, which lists the
// images the window added to the machine they share. On a home of its
// own with the others' processes beside it (the demo's), its home's files
// go, h1's process and its private directory stay; alone
// on its machine (a real node), it is a whole teardown: an unmarked
// process of the window (an MPI rank) goes too.
func TestReleasedNodeTearsDownOnlyItsOwn(t *testing.T) {
	for i, tc := range []struct{ shared, others bool }{{true, true}, {false, true}, {false, false}} {
		// A run of its own: the processes of the cases before live on.
		run := fmt.Sprintf("20261206T000000Z-release-%d", i+1)
		shared := tc.shared
		home := t.TempDir()
		dir := filepath.Join(home, ".gpuaccept", run)
		nodes := []string{"h2"}
		if shared {
			nodes = append(nodes, "h1")
		}
		for _, n := range nodes {
			if err := os.MkdirAll(filepath.Join(dir, "bin", n), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		ssh := filepath.Join(home, ".ssh")
		os.Mkdir(ssh, 0o700)
		key := "restrict ssh-ed25519 AAAAwindow gpuaccept-window-" + run + "\n"
		write(t, filepath.Join(ssh, "authorized_keys"), key)
		// As mktemp -d names it: ten characters after the run ID.
		state := fmt.Sprintf("/var/tmp/gpuaccept-%s.%010d", run, time.Now().UnixNano()%1e10)
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(state) })
		ended := map[string]chan struct{}{}
		marks := map[string]string{"h1": "GPUACCEPT_NODE=h1", "h2": "GPUACCEPT_NODE=h2"}
		if !tc.others {
			marks["h1"] = "GPUACCEPT_RANK=1" // no node's mark: a rank mpirun started
		}
		for _, n := range []string{"h1", "h2"} {
			c := exec.Command("sleep", "60")
			c.Env = append(os.Environ(), "GPUACCEPT_RUN="+run, marks[n])
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			ended[n] = done
			go func() { c.Wait(); close(done) }()
			t.Cleanup(func() { c.Process.Kill(); <-done })
		}
		cmd := exec.Command("bash", "-c", scripts.Teardown, "teardown", run, dir, state)
		cmd.Env = append(os.Environ(), "HOME="+home, "GPUACCEPT_RELEASE_NODE=h2")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("shared=%v: teardown: %v: %s", shared, err, out)
		}
		alive := func(n string) bool {
			select {
			case <-ended[n]:
				return false
			case <-time.After(300 * time.Millisecond):
				return true
			}
		}
		exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
		keyLeft, _ := os.ReadFile(filepath.Join(ssh, "authorized_keys"))
		if shared {
			if alive("h2") || !alive("h1") || exists(filepath.Join(dir, "bin", "h2")) || !exists(filepath.Join(dir, "bin", "h1")) ||
				!strings.Contains(string(keyLeft), "gpuaccept-window-") || !exists(state) || !strings.Contains(string(out), "released alone") {
				t.Errorf("shared home: h2 alive %v, h1 alive %v, key %q, state kept %v:\n%s", alive("h2"), alive("h1"), keyLeft, exists(state), out)
			}
		} else if alive("h2") || alive("h1") == !tc.others || exists(dir) || strings.Contains(string(keyLeft), "gpuaccept-window-") ||
			exists(state) == !tc.others {
			t.Errorf("own home, others' processes %v: h2 alive %v, h1 alive %v, dir kept %v, key %q:\n%s",
				tc.others, alive("h2"), alive("h1"), exists(dir), keyLeft, out)
		}
	}
}
