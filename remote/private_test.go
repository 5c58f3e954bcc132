package remote

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivateDirCmd runs the check on this machine's filesystem: what it
// makes, what it keeps, and what it refuses with which reason.
func TestPrivateDirCmd(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root := t.TempDir()
	mk := func(path string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	open := mk(filepath.Join(root, "open"), 0o777)
	sticky := mk(filepath.Join(root, "sticky"), 0o777|os.ModeSticky)
	mine := mk(filepath.Join(root, "mine"), 0o755)
	link := filepath.Join(root, "link")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		parents   bool
		refused   string // "" when it must be made or kept
	}{
		{"made below a sticky directory", filepath.Join(sticky, "gpuaccept-run"), false, ""},
		{"made with its parents", filepath.Join(mine, "a", "b", "c"), true, ""},
		{"an existing directory of mine, writable by no one else", mine, false, ""},
		{"a missing parent without parents", filepath.Join(root, "absent", "d"), false, "cannot create the directory"},
		{"a link", link, false, "it is a symbolic link (to " + mine + ")"},
		{"a link named with a slash", link + "/", false, "it is a symbolic link"},
		{"writable by others", open, false, "other users can write in it (mode 777)"},
		{"below a directory others can write", filepath.Join(open, "d"), false, "other users can write in " + open + " above it (mode 777)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command("bash", "-c", PrivateDirCmd(tc.dir, tc.parents)).CombinedOutput()
			if tc.refused == "" {
				st, serr := os.Lstat(tc.dir)
				if err != nil || serr != nil || !st.IsDir() {
					t.Fatalf("%v %v: %s", err, serr, out)
				}
				return
			}
			var ee *exec.ExitError
			if !strings.Contains(string(out), tc.refused) || !errors.As(err, &ee) || ee.ExitCode() != 97 {
				t.Errorf("%v: %s, want exit 97 and %q", err, out, tc.refused)
			}
		})
	}
	if os.Geteuid() == 0 {
		// Another user's directory (root can make one to refuse).
		theirs := mk(filepath.Join(sticky, "theirs"), 0o700)
		if err := os.Chown(theirs, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", "-c", PrivateDirCmd(theirs, false)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "it is owned by uid 4242, not by") {
			t.Errorf("another user's directory: %v: %s", err, out)
		}
	}
	if st, err := os.Stat(filepath.Join(sticky, "gpuaccept-run")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("made %v (%v), want 0700", st.Mode(), err)
	}
}
