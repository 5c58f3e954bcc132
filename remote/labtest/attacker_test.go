package labtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts"
	"gpuaccept/scripts/lab"
)

// asMallory runs script on the host as the unprivileged user.
func asMallory(t *testing.T, l *lab.Lab, host, script string) {
	t.Helper()
	if out, err := l.ExecAsMallory(t.Context(), host, script); err != nil {
		t.Fatalf("%s as %s: %v: %s", host, lab.MalloryName, err, out)
	}
}

// TestUploadRefusesWhatAnotherUserPlanted: the image archive lands in a
// directory whose name anyone can guess (/var/tmp/gpuaccept-<run id>, the
// run ID in every window command's argv), under a part-file name anyone
// can guess. Another user who made that directory first with a link to
// root's file as the part file, or made the directory itself a link to
// root's directory, must not get root to write there: the upload is
// refused, naming the node and the directory, and the file is untouched.
func TestUploadRefusesWhatAnotherUserPlanted(t *testing.T) {
	l := needLab(t)
	const host = "h1"
	c := dial(t, l, host)
	src := filepath.Join(t.TempDir(), "image.tar")
	if err := os.WriteFile(src, []byte("the window's archive\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().UnixNano()
	theirs := fmt.Sprintf("/var/tmp/gpuaccept-attack-%d", stamp)
	linked := fmt.Sprintf("/var/tmp/gpuaccept-attack-link-%d", stamp)
	mine := fmt.Sprintf("/var/tmp/gpuaccept-attack-fresh-%d", stamp)
	t.Cleanup(func() { l.Exec(t.Context(), host, "rm", "-rf", theirs, linked, mine) })
	file, intact := l.RootFile(t, host)
	dir := fmt.Sprintf("/srv/victim-dir-%d", stamp)
	if out, err := l.Exec(t.Context(), host, "mkdir", "-m", "755", dir); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	asMallory(t, l, host, "umask 0; mkdir "+theirs+" && ln -s "+file+" "+theirs+"/.image.tar.gpuaccept-part && ln -s "+dir+" "+linked)

	for _, target := range []string{theirs + "/image.tar", linked + "/image.tar"} {
		_, err := c.Upload(t.Context(), src, target, remote.TransferOptions{})
		t.Logf("upload to %s: %v", target, err)
		if !errors.Is(err, remote.ErrNotPrivate) || !strings.HasPrefix(err.Error(), host+": upload "+target+": ") ||
			!strings.Contains(err.Error(), filepath.Dir(target)) {
			t.Errorf("upload to %s: %v, want a refusal naming %s and the directory", target, err, host)
		}
	}
	intact()
	if out, _ := l.Exec(t.Context(), host, "ls", "-A", dir); strings.TrimSpace(out) != "" {
		t.Errorf("root's %s now holds %q", dir, out)
	}

	// A directory nobody planted is made private and used.
	if _, err := c.Upload(t.Context(), src, mine+"/image.tar", remote.TransferOptions{}); err != nil {
		t.Fatalf("upload to a fresh directory: %v", err)
	}
	if out, err := l.Exec(t.Context(), host, "stat", "-c", "%U %a", mine); err != nil || strings.TrimSpace(out) != "root 700" {
		t.Errorf("%s: %q (%v), want root 700", mine, out, err)
	}
}

// nodeScript runs a node script (its text, as the phases push it) on the
// host with args, stdin and returns what it printed on stdout and stderr.
func nodeScript(t *testing.T, c *remote.Client, script, name string, stdin string, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	words := []string{"bash", "-c", remote.Quote(script), name}
	for _, a := range args {
		words = append(words, remote.Quote(a))
	}
	err := c.Run(t.Context(), remote.Cmd{Command: strings.Join(words, " "), Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &out})
	return out.String(), err
}

// sharedScratch makes a directory every user may write in (sticky, as a
// shared scratch or checkpoint filesystem often is) for one test.
func sharedScratch(t *testing.T, l *lab.Lab, host, what string) string {
	t.Helper()
	dir := fmt.Sprintf("/var/tmp/%s-%d", what, time.Now().UnixNano())
	if out, err := l.Exec(t.Context(), host, "mkdir", "-m", "1777", dir); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { l.Exec(context.Background(), host, "rm", "-rf", dir) })
	return dir
}

// TestNodeScriptsRefuseWhatAnotherUserPlanted: the checkpoint, staging
// and relay scripts write under <dir>/gpuaccept-<run id>, a name anyone
// can guess in a directory anyone may write. Another user who made that
// directory first (with links to root's file at the names the scripts
// write) gets nothing: each script refuses, naming the path, root's file
// is untouched and nothing of the window's lands in their directory.
func TestNodeScriptsRefuseWhatAnotherUserPlanted(t *testing.T) {
	l := needLab(t)
	const host = "h2"
	c := dial(t, l, host)
	file, intact := l.RootFile(t, host)
	plant := func(base, links string) {
		t.Helper()
		asMallory(t, l, host, "umask 0; mkdir -p "+base+" "+links+"; for f in "+links+"; do rmdir $f; ln -s "+file+" $f; done")
	}
	refused := func(what, out string, err error, base string) {
		t.Helper()
		t.Logf("%s: %v: %s", what, err, out)
		if err == nil || !strings.Contains(out, "refusing "+base+": it is owned by uid ") {
			t.Errorf("%s ran in another user's %s: %v: %s", what, base, err, out)
		}
		if left, _ := l.Exec(t.Context(), host, "find", base, "-user", "root"); strings.TrimSpace(left) != "" {
			t.Errorf("%s left root's files in another user's directory: %s", what, left)
		}
	}

	ckpt := sharedScratch(t, l, host, "gpuaccept-ckpt")
	base := ckpt + "/gpuaccept-run1"
	plant(base, base+"/h2 "+base+"/h2/shard-0.bin")
	out, err := nodeScript(t, c, scripts.Checkpoint, "checkpoint", "", "write", base, "h2", "4096", "1", "seed", "4096")
	refused("checkpoint write", out, err, base)

	stage := sharedScratch(t, l, host, "gpuaccept-stage")
	sdir := stage + "/gpuaccept-run1"
	plant(sdir, sdir+"/.data.gpuaccept-part")
	out, err = nodeScript(t, c, scripts.Stage, "stage", "/etc/hostname\n", "fetch", sdir, "data", "path", "/etc/hostname")
	refused("stage fetch", out, err, sdir)
	out, err = nodeScript(t, c, scripts.Stage, "stage", "", "prepare", sdir)
	refused("stage prepare", out, err, sdir)
	if _, err := l.Exec(t.Context(), host, "test", "-L", sdir+"/.data.gpuaccept-part"); err != nil {
		t.Errorf("stage prepare removed another user's files: %v", err)
	}

	relay := sharedScratch(t, l, host, "gpuaccept-relay")
	rdir := relay + "/gpuaccept-run1"
	plant(rdir, rdir+"/image.tar")
	sum := sha256.Sum256([]byte("an archive\n"))
	out, err = nodeScript(t, c, scripts.Relay, "relay", "an archive\n", rdir+"/image.tar", hex.EncodeToString(sum[:]), "/dev/null", "h2")
	refused("relay", out, err, rdir)
	if !strings.Contains(out, "relay h2 failed 0 0 - refusing "+rdir) {
		t.Errorf("relay: no failed line for the coordinator: %s", out)
	}
	intact()
}
