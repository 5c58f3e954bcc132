package phases

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/scripts"
)

// On a real H200 with `address: local` and checkpoint.dir /var/tmp, SEC-003
// warned about the window's own private directory (made by the tools phase
// in /var/tmp) as if an earlier tenant had left it. security.sh runs here
// for real: the residue it reports leaves out exactly the window's own
// directory and nothing else, not even a look-alike of it.
func TestResidueLeavesOutTheWindowsOwnDirectory(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	const run = "20261204T175836Z-local-acceptance-c90a"
	d := t.TempDir()
	own := filepath.Join(d, "gpuaccept-"+run+".f4UTl6PE2Y")
	for _, p := range []string{own, filepath.Join(d, "gpuaccept-"+run+".planted"), filepath.Join(d, "leftover")} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(t.TempDir(), "security.sh")
	if err := os.WriteFile(script, []byte(scripts.Security), 0o600); err != nil {
		t.Fatal(err)
	}
	residue := func(env ...string) ResidueDir {
		cmd := exec.Command("bash", script, run, d)
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.Output()
		p := postureFrom(splitSections(string(out)), "", nil)
		if len(p.Residue) != 1 {
			t.Fatalf("residue sections: %+v\n%s", p.Residue, out)
		}
		return p.Residue[0]
	}
	r := residue("GPUACCEPT_OWN=" + own)
	listed := strings.Join(r.Listed, "\n")
	if r.Entries != 2 || strings.Contains(listed, ".f4UTl6PE2Y") || !strings.Contains(listed, "leftover") || !strings.Contains(listed, ".planted") {
		t.Errorf("with the window's own directory named: entries %d, listed:\n%s", r.Entries, listed)
	}
	if r := residue(); r.Entries != 3 {
		t.Errorf("without it every entry is residue: entries %d, listed %q", r.Entries, r.Listed)
	}
}
