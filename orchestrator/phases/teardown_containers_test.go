package phases

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gpuaccept/scripts"
)

// TestTeardownRemovesTheWindowsContainers runs teardown.sh against a
// podman that holds a running and a stopped container of the window (its
// label), one of another window and one of nobody's: the window's two go,
// stopped or not, the others stay.
func TestTeardownRemovesTheWindowsContainers(t *testing.T) {
	const run = "20261205T000000Z-inf-1"
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// The containers, each with its label and whether it runs.
	podman := `#!/bin/bash
echo "$*" >>` + calls + `
case "$*" in
"ps -aq --filter label=gpuaccept.window=` + run + `") printf 'c0run\nc1stopped\n' ;;
"ps -q --filter label=gpuaccept.window=` + run + `") printf 'c0run\n' ;;
"ps -aq --filter label=gpuaccept.window="*) printf 'other\n' ;;
esac
exit 0
`
	for name, body := range map[string]string{"podman": podman, "docker": "#!/bin/sh\nexit 0\n"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, sweep := range []bool{false, true} {
		os.Remove(calls)
		cmd := exec.Command("bash", "-c", scripts.Teardown, "teardown", run, "", "")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PATH="+bin+":"+os.Getenv("PATH"))
		if sweep {
			cmd.Env = append(cmd.Env, "GPUACCEPT_TEARDOWN_CONTAINERS=1")
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("teardown: %v: %s", err, out)
		}
		b, _ := os.ReadFile(calls)
		removed := strings.Count(string(b), "rm -f ")
		switch {
		case !sweep && removed != 0:
			t.Errorf("without a container phase, teardown removed containers:\n%s", b)
		case sweep && (!strings.Contains(string(b), "rm -f c0run\n") || !strings.Contains(string(b), "rm -f c1stopped\n") || removed != 2):
			t.Errorf("teardown ran:\n%s\nsaid:\n%s", b, out)
		case sweep && !strings.Contains(string(out), "removed container c1stopped (podman)"):
			t.Errorf("teardown said:\n%s", out)
		}
	}
}

// TestTeardownRemovesTheWindowsPyxisContainer runs teardown.sh against an
// enroot that holds the window's named Pyxis container (pyxis_NAME, and
// pyxis_JOBID_NAME as a job-scoped Pyxis names it), another window's and an
// unnamed step's: only the window's two go, and only when teardown is
// told the name, which must be this window's.
func TestTeardownRemovesTheWindowsPyxisContainer(t *testing.T) {
	const run = "20261206T000000Z-pyx-1"
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	enroot := `#!/bin/bash
echo "$*" >>` + calls + `
case "$1" in
list) printf 'pyxis_gpuaccept-` + run + `\npyxis_42_gpuaccept-` + run + `\npyxis_gpuaccept-` + run + `x\npyxis_gpuaccept-other\npyxis_7.0\n' ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(bin, "enroot"), []byte(enroot), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"":                       nil,
		"gpuaccept-other":        nil,
		"gpuaccept-" + run:       {"remove -f pyxis_gpuaccept-" + run, "remove -f pyxis_42_gpuaccept-" + run},
		"-rf gpuaccept-" + run:   nil,
		"gpuaccept-" + run + "x": nil,
	} {
		os.Remove(calls)
		cmd := exec.Command("bash", "-c", scripts.Teardown, "teardown", run, "", "")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PATH="+bin+":"+os.Getenv("PATH"), "GPUACCEPT_TEARDOWN_ENROOT="+name)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("teardown: %v: %s", err, out)
		}
		b, _ := os.ReadFile(calls)
		var removed []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, "remove") {
				removed = append(removed, l)
			}
		}
		if !slices.Equal(removed, want) {
			t.Errorf("told %q: removed %q, want %q\nsaid: %s", name, removed, want, out)
		}
		if want != nil && !strings.Contains(string(out), "removed container pyxis_gpuaccept-"+run+" (enroot)") {
			t.Errorf("teardown said: %s", out)
		}
	}
}
