package phases

import (
	"fmt"
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

// Another user's process counts in SEC-002 when it runs in the node's
// network namespace, or when its namespace cannot be read (another
// user's, to a window user who is not root); one that ended between ps
// and the look does not: on a kernel shared by hosts (the lab's, a
// demo's machine) it was most likely another host's short command, and
// the make test that ran a demo beside the lab's pam_slurm_adopt windows
// failed SEC-002 on such a bash of the lab's user. security.sh runs here
// for real, ps answered by a stand-in naming a live process and a gone
// one.
func TestForeignProcessThatEndedIsNotCounted(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	bin := t.TempDir()
	ps := fmt.Sprintf("#!/bin/sh\necho '4243 other %d S sleep'\necho '4242 ghost 2147480000 S bash'\n", live.Process.Pid)
	if err := os.WriteFile(filepath.Join(bin, "ps"), []byte(ps), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "security.sh")
	if err := os.WriteFile(script, []byte(scripts.Security), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "run", t.TempDir())
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, _ := cmd.Output()
	p := postureFrom(splitSections(string(out)), "", nil)
	if len(p.Foreign) != 1 || !strings.HasPrefix(p.Foreign[0], fmt.Sprintf("4243 other %d sleep", live.Process.Pid)) {
		t.Errorf("foreign processes %q, want the live one alone\n%s", p.Foreign, out)
	}
}
