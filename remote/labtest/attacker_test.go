package labtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

// victim puts a file of root's on the host, one another user must never
// be able to make the window overwrite, and returns its path and a check
// that it is still what it was.
func victim(t *testing.T, l *lab.Lab, host string) (string, func()) {
	t.Helper()
	path := fmt.Sprintf("/srv/victim-%d", time.Now().UnixNano())
	const body = "a file of root\n"
	if out, err := l.Exec(t.Context(), host, "sh", "-c", "umask 022; printf '%s' '"+body+"' >"+path); err != nil {
		t.Fatalf("%s: %v: %s", host, err, out)
	}
	return path, func() {
		t.Helper()
		out, err := l.Exec(t.Context(), host, "cat", path)
		if err != nil || out != body {
			t.Errorf("%s: %s was overwritten: now %q (%v)", host, path, out, err)
		}
	}
}

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
	file, intact := victim(t, l, host)
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
