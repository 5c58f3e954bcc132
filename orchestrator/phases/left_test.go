package phases

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gpuaccept/scripts"
)

// TestLeftCountsOnlyTheWindowsOwn: what another user made at one of the
// window's names (a directory, a link) is not the window's residue; what
// this user left there is.
func TestLeftCountsOnlyTheWindowsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making another user's directory needs root")
	}
	dir := t.TempDir()
	mine := filepath.Join(dir, "gpuaccept-mine")
	theirs := filepath.Join(dir, "gpuaccept-theirs")
	link := filepath.Join(dir, "gpuaccept-link")
	for _, d := range []string{mine, theirs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", scripts.Left, "left", "run-x", mine, theirs, link)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if want := "file " + mine + "\nchecked\n"; err != nil || string(out) != want {
		t.Errorf("left: %v: %q, want %q", err, out, want)
	}
}
