package phases

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/scripts"
)

// TestTeardownReplacesAuthorizedKeys runs teardown.sh's key removal on
// this machine: the window's line goes by a rename (a new inode, so never
// a truncated file), the others stay byte for byte with the file's mode;
// a link is followed and stays a link; a file with other hard links is
// left alone and said so.
func TestTeardownReplacesAuthorizedKeys(t *testing.T) {
	const run = "20261204T000000Z-keys-1"
	others := "ssh-ed25519 AAAAother1 alice\n# a comment\nssh-rsa AAAAother2 bob"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ssh, body string) string // returns the file that holds the keys
		want  string                                      // teardown's line about the key
		kept  bool                                        // the window's line stays
	}{
		{"a plain file", func(t *testing.T, ssh, body string) string {
			return write(t, filepath.Join(ssh, "authorized_keys"), body)
		}, "removed the window key from", false},
		{"a link", func(t *testing.T, ssh, body string) string {
			real := write(t, filepath.Join(t.TempDir(), "keys"), body)
			if err := os.Symlink(real, filepath.Join(ssh, "authorized_keys")); err != nil {
				t.Fatal(err)
			}
			return real
		}, "removed the window key from", false},
		{"hard links", func(t *testing.T, ssh, body string) string {
			f := write(t, filepath.Join(ssh, "authorized_keys"), body)
			if err := os.Link(f, filepath.Join(ssh, "keys.bak")); err != nil {
				t.Fatal(err)
			}
			return f
		}, "could not remove the window key from", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			ssh := filepath.Join(home, ".ssh")
			if err := os.Mkdir(ssh, 0o700); err != nil {
				t.Fatal(err)
			}
			window := "restrict ssh-ed25519 AAAAwindow gpuaccept-window-" + run + "\n"
			body := "ssh-ed25519 AAAAfirst carol\n" + window + others
			file := tc.setup(t, ssh, body)
			before, _ := os.Stat(file)
			cmd := exec.Command("bash", "-c", scripts.Teardown, "teardown", run, "", "")
			cmd.Env = append(os.Environ(), "HOME="+home)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("teardown: %v: %s", err, out)
			}
			got, _ := os.ReadFile(file)
			want := "ssh-ed25519 AAAAfirst carol\n" + others
			if tc.kept {
				want = body
			}
			if string(got) != want {
				t.Errorf("keys now %q, want %q", got, want)
			}
			after, err := os.Stat(file)
			if err != nil || after.Mode() != before.Mode() {
				t.Errorf("mode %v, was %v (%v)", after.Mode(), before.Mode(), err)
			}
			if !tc.kept && os.SameFile(before, after) {
				t.Errorf("rewritten in place, not replaced")
			}
			if st, err := os.Lstat(filepath.Join(ssh, "authorized_keys")); tc.name == "a link" && (err != nil || st.Mode()&os.ModeSymlink == 0) {
				t.Errorf("the link was replaced by a file: %v %v", st, err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".authorized_keys.*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func write(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}
