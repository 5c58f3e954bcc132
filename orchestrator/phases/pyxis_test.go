package phases

import (
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/slurm"
)

// srunHelpPyxis is the lab's Slurm 22.05 srun --help with its Pyxis
// stand-in loaded (the plugins' part as srun prints it).
const srunHelpPyxis = `      --ntasks-per-socket=n   number of tasks to invoke on each socket

Options provided by plugins:

      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH
                              [pyxis] the image to use for the container
                              filesystem. Can be either a docker image given as
                              an enroot URI, or a path to a squashfs file on the
                              remote host filesystem.

      --container-mounts=SRC:DST[:FLAGS][,SRC:DST...]
                              [pyxis] bind mount[s] inside the container. Mount
                              flags are separated with "+", e.g. "ro+rprivate"
`

// pyxisImportFailed is what the lab's srun printed for an image the
// node could not pull (Pyxis's lines; the enroot log is the importer's).
const pyxisImportFailed = `pyxis: importing docker image: nosuch:1
slurmstepd-h2: error: pyxis: child 11396 failed with error code: 125
slurmstepd-h2: error: pyxis: failed to import docker image
slurmstepd-h2: error: pyxis: printing enroot log file:
slurmstepd-h2: error: pyxis:     [ERROR] initializing source docker://registry-1.docker.io/library/nosuch:1: pinging container registry registry-1.docker.io: dial tcp: network is unreachable
slurmstepd-h2: error: pyxis: couldn't start container
slurmstepd-h2: error: spank: required plugin spank_pyxis.so: task_init_privileged() failed with rc=-1
slurmstepd-h2: error: spank_task_init_privileged failed
srun: error: h2: task 0: Exited with exit code 1
`

func TestPyxisListed(t *testing.T) {
	if !slurm.PyxisListed(srunHelpPyxis) {
		t.Error("Pyxis's --container-image not found in srun --help")
	}
	without := strings.Split(srunHelpPyxis, "Options provided by plugins:")[0] + "Options provided by plugins:\n\nHelp options:\n  -h, --help\n"
	if slurm.PyxisListed(without) {
		t.Error("found --container-image in an srun without Pyxis")
	}
	// The option named in another option's help text is no option.
	if slurm.PyxisListed("      --foo   see --container-image of Pyxis\n") {
		t.Error("a mention in help text read as the option")
	}
}

func TestParsePyxis(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	ok := parsePyxis("pyxis: importing docker image: 10.231.0.2:5000#gpuaccept-lab:sha256:" + pin + "\n" +
		"pyxis: imported docker image: 10.231.0.2:5000#gpuaccept-lab:sha256:" + pin + "\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")
	if !slices.Equal(ok.Imported, []string{"10.231.0.2:5000#gpuaccept-lab:sha256:" + pin}) || len(ok.Errors) != 0 ||
		ok.Output != "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)" {
		t.Errorf("imported: %+v", ok)
	}
	if d := digestOf(ok.Imported[0]); d != pin {
		t.Errorf("digestOf = %q", d)
	}
	bad := parsePyxis(pyxisImportFailed)
	if len(bad.Imported) != 0 || bad.Output != "" || len(bad.Errors) != 7 {
		t.Errorf("failed: %+v", bad)
	}
	if f := bad.failure(); !strings.HasPrefix(f, "initializing source docker://registry-1.docker.io/library/nosuch:1") {
		t.Errorf("failure() = %q", f)
	}
	// srun --label's prefix
	lab := parsePyxis("0: slurmstepd: error: pyxis: couldn't start container\n0: hello\n")
	if !slices.Equal(lab.Errors, []string{"couldn't start container"}) || lab.Output != "0: hello" || lab.failure() != "couldn't start container" {
		t.Errorf("labelled: %+v", lab)
	}
	for _, ref := range []string{"x:sha256:" + pin[:63], "x@sha256:" + strings.ToUpper(pin), "sha256:" + pin, "x#ysha256:" + pin} {
		if d := digestOf(ref); d != "" {
			t.Errorf("digestOf(%q) = %q", ref, d)
		}
	}
}

// FuzzParsePyxis: any output splits without a panic; what is read as
// imported came from Pyxis's imported line; Pyxis's and Slurm's lines
// never pass for the command's output; a digest read is 64 hex digits.
func FuzzParsePyxis(f *testing.F) {
	f.Add(pyxisImportFailed)
	f.Add("pyxis: imported docker image: r#i:sha256:" + strings.Repeat("0", 64) + "\nout\n")
	f.Add("3: pyxis: imported docker image: \n3: slurmstepd: error: pyxis:     [ERROR] x\r\n")
	f.Fuzz(func(t *testing.T, out string) {
		w := parsePyxis(out)
		for _, ref := range w.Imported {
			if !strings.Contains(out, "pyxis: imported docker image:") || !strings.Contains(out, ref) || strings.TrimSpace(ref) != ref {
				t.Errorf("imported %q, which no line says", ref)
			}
			if d := digestOf(ref); d != "" && (len(d) != 64 || strings.Trim(d, "0123456789abcdef") != "") {
				t.Errorf("digest %q", d)
			}
		}
		for _, line := range strings.Split(w.Output, "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "pyxis:") || strings.HasPrefix(line, "srun:") || strings.HasPrefix(line, "slurmstepd") {
				t.Errorf("Slurm's line %q in the command's output", line)
			}
		}
		if len(w.Errors) > maxPyxisLines || len(w.Imported) > maxPyxisLines {
			t.Errorf("%d errors, %d imported: unbounded", len(w.Errors), len(w.Imported))
		}
		_ = w.failure()
	})
}
