package labtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

// pyxisRootfs builds the root filesystem of the Pyxis tests' image: a
// static busybox, a marker file the smoke command prints, and the
// nccl-tests stand-in at /usr/local/bin/all_reduce_perf with what it
// needs of Open MPI and PMIx (their directories and every library the
// binary and their components link), so the all-reduce can run from the
// image alone: the hosts get no stand-in of their own.
const pyxisRootfs = `set -euo pipefail
root=$1 bin=$2
mkdir -p "$root/bin" "$root/usr/local/bin" "$root/etc" "$root/tmp" "$root/root"
cp /bin/busybox "$root/bin/busybox"
for a in sh cat echo ls; do ln -s busybox "$root/bin/$a"; done
cp "$bin" "$root/usr/local/bin/all_reduce_perf"
echo "gpuaccept lab image for Pyxis" >"$root/etc/gpuaccept-pyxis-image"
# (cp --parents fails here on the machine's merged /usr: the parents are made by hand)
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /usr/share/pmix /etc/openmpi /etc/ld.so.cache; do
	if [ -e "$d" ]; then mkdir -p "$root$(dirname "$d")" && cp -a "$d" "$root$(dirname "$d")/"; fi
done
{ echo "$bin"; find /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 -name '*.so*' -type f 2>/dev/null; } |
	while read -r f; do ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\/lib/{print $1}'; done | sort -u |
	while read -r lib; do mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; done
du -sh "$root" >&2
`

// pyxisImage puts the Pyxis tests' image in the lab's registry and returns
// its pinned reference (REGISTRY/gpuaccept-pyxis:1@sha256:…, the manifest
// digest the registry holds it under).
func pyxisImage(t *testing.T, l *lab.Lab) string {
	t.Helper()
	standinBenchmarks(t, l, nil) // built only: the hosts get none
	reg, err := l.Registry(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	if out, err := exec.CommandContext(t.Context(), "bash", "-c", pyxisRootfs, "sh", root, filepath.Join(buildOnce.dir, "all_reduce_perf")).CombinedOutput(); err != nil {
		t.Fatalf("the image's root filesystem: %v\n%s", err, out)
	}
	st, err := os.MkdirTemp("/tmp", "gpa-pyx-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(st)
	archive := filepath.Join(dir, "image.tar")
	script := `set -euo pipefail
p() { podman --root "$1/r" --runroot "$1/rr" --tmpdir "$1/t" --storage-driver vfs "${@:2}"; }
tar -C "$2" -c . | p "$1" import -q - localhost/gpuaccept-pyxis:1 >/dev/null
p "$1" save -q --format docker-archive -o "$3" localhost/gpuaccept-pyxis:1`
	if out, err := exec.CommandContext(t.Context(), "bash", "-c", script, "sh", st, root, archive).CombinedOutput(); err != nil {
		t.Fatalf("the image: %v\n%s", err, out)
	}
	digest, err := reg.Push(t.Context(), archive, "gpuaccept-pyxis:1")
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Addr + "/gpuaccept-pyxis:1@" + digest
	t.Cleanup(func() {
		for _, h := range srunHosts {
			_, _ = l.Exec(context.Background(), h, "podman", "rmi", "-f", reg.Addr+"/gpuaccept-pyxis@"+digest)
		}
	})
	return ref
}

// pyxisSweep is the all-reduce of the Pyxis windows: launched by srun
// (the step that may take --container-image), the intra-node runs off
// (they run on the nodes themselves, which have no stand-in here).
const pyxisSweep = fourHostSweep + "    intra_node: false\n    launcher: srun\n"

// pyxisWindow runs a srun window over srunHosts whose image phase uses
// image.runtime pyxis with ref, and returns its record, exit code and run
// directory; hostBench installs the nccl-tests stand-in on the hosts
// themselves, withPyxis the enroot Pyxis comes with (the stand-in's) and an
// all_gather beside the all-reduce (the image has no all_gather_perf).
// check --connect must say checkSays of the image first.
func pyxisWindow(t *testing.T, l *lab.Lab, ref string, hostBench, withPyxis bool, checkSays string) (*record.Run, result, string) {
	t.Helper()
	prepare(t, l, nil)
	if hostBench {
		standinBenchmarks(t, l, srunHosts)
	}
	sweep := pyxisSweep
	if withPyxis {
		for _, h := range srunHosts {
			if err := l.InstallEnroot(h); err != nil {
				t.Fatal(err)
			}
		}
		sweep += "    collectives: [all_gather]\n"
	}
	noSSHFromTheCoordinator(t, l, srunHosts)
	inv := srunInventory(t, l, sweep)
	appendInventory(t, inv, "image:\n  reference: \""+ref+"\"\n  runtime: pyxis\n  gpus: none\n  smoke: [cat, /etc/gpuaccept-pyxis-image]\n")
	if c := gpuaccept(t, "check", "--connect", inv); !strings.Contains(c.stdout, "the image: "+checkSays) {
		t.Errorf("check --connect: exit %d, not %q:\n%s\n%s", c.code, checkSays, c.stdout, c.stderr)
	}
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	if s := r.Slurm; s == nil || s.JobID == "" || s.Cancelled.IsZero() {
		t.Fatalf("exit %d: allocation %+v\n%s", res.code, s, res.stdout)
	}
	return r, res, dir
}

// TestPyxisImageAndAllReduceInTheContainer: on the lab's Slurm with its
// Pyxis stand-in (a real SPANK plugin), each of the four hosts imports
// the pinned image from the lab's registry by a step of the window's job
// under srun --container-image; Pyxis's words name the pin's digest
// (IMG-001 PASS), the smoke command prints the image's own file
// (IMG-002), and the all-reduce runs as a step of the same job in the
// container: the benchmark is the image's, the hosts have none.
func TestPyxisImageAndAllReduceInTheContainer(t *testing.T) {
	l := needLab(t)
	if err := l.SlurmPyxis(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Slurm(context.Background()) })
	ref := pyxisImage(t, l)
	r, res, dir := pyxisWindow(t, l, ref, false, true, "srun on the login node lists --container-image (Pyxis)")
	var im phases.Imaged
	phaseData(t, r, "image", -1, &im)
	if im.Pyxis == nil || im.Pyxis.Skip != "" || !strings.Contains(im.Pyxis.URI, "#gpuaccept-pyxis:sha256:") {
		t.Fatalf("image phase: %+v", im.Pyxis)
	}
	for _, h := range srunHosts {
		v := verdict(r, "IMG-001", h)
		if v.Status != record.Pass || !strings.Contains(v.Measured, "enroot pulled sha256:"+im.Pin[:12]+" by digest") {
			t.Errorf("IMG-001 %s: %s %q %q", h, v.Status, v.Measured, v.Detail)
		}
		if v := verdict(r, "IMG-002", h); v.Status != record.Pass || !strings.Contains(v.Measured, "gpuaccept lab image for Pyxis") {
			t.Errorf("IMG-002 %s: %s %q %q", h, v.Status, v.Measured, v.Detail)
		}
		if ni := im.Nodes[h]; ni == nil || ni.Imported != im.Pyxis.URI {
			t.Errorf("%s: Pyxis imported %+v, want %s", h, ni, im.Pyxis.URI)
		}
	}
	if v := verdict(r, "IMG-003", ""); v.Status != record.Pass {
		t.Errorf("IMG-003: %s %q", v.Status, v.Measured)
	}
	for _, h := range srunHosts {
		if out, err := l.Exec(t.Context(), h, "sh", "-c", "command -v all_reduce_perf"); err == nil {
			t.Errorf("%s has its own all_reduce_perf (%s): the all-reduce may not have run the image's", h, strings.TrimSpace(out))
		}
	}
	var sw phases.Sweeps
	phaseData(t, r, "allreduce", -1, &sw)
	if !strings.Contains(sw.Command, "--container-image="+"'"+im.Pyxis.URI+"'") || !strings.Contains(sw.Command, "--jobid="+r.Slurm.JobID+" --overlap") {
		t.Errorf("the all-reduce is no container step of the window's job: %s", sw.Command)
	}
	// One import a node: the import step names the window's container,
	// the all-reduce's steps reuse it (Pyxis says no import there).
	name := "--container-name=gpuaccept-" + r.ID
	for _, h := range srunHosts {
		if ni := im.Nodes[h]; ni == nil || ni.Smoke == nil || !strings.Contains(ni.Smoke.Command, name) {
			t.Errorf("%s: the import step names no container %s: %+v", h, name, ni)
		}
	}
	if !strings.Contains(sw.Command, name) {
		t.Errorf("the all-reduce does not reuse the container %s: %s", name, sw.Command)
	}
	if l := rawLog(dir, "slurm-login", "allreduce"); len(l) == 0 || strings.Contains(string(l), "pyxis: imported docker image") {
		t.Errorf("the all-reduce's steps imported the image again (or left no log):\n%s", l)
	}
	// The image has no all_gather_perf: NOT MEASURED, in slurmstepd's
	// own words read on the lab's real Slurm, never a FAIL.
	if v := verdict(r, "NCCL-005", ""); v.Status != record.Skip || !strings.Contains(v.Incomplete, "all_gather_perf not in the pinned image") {
		t.Errorf("NCCL-005 with all_gather_perf missing from the image: %s %q %q (incomplete %q)", v.Status, v.Measured, v.Detail, v.Incomplete)
	}
	if measured, flaked := fourHostSweeps(t, dir, sw); measured == 0 {
		t.Errorf("no sweep measured in the container (%d failed by the lab's MPI)", flaked)
	}
	t.Logf("exit %d; IMG-001 h2: %s; IMG-003: %s; NCCL-001: %s %s; NCCL-005: %s %q",
		res.code, verdict(r, "IMG-001", "h2").Measured, verdict(r, "IMG-003", "").Measured, verdict(r, "NCCL-001", "").Status, verdict(r, "NCCL-001", "").Measured,
		verdict(r, "NCCL-005", "").Status, verdict(r, "NCCL-005", "").Incomplete)
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
	nothingLeft(t, l)
	// The named container is kept by Pyxis: teardown removed it.
	for _, h := range srunHosts {
		if out, _ := l.Exec(t.Context(), h, "sh", "-c", "ls -A /srv/pyxis/0 2>/dev/null"); strings.TrimSpace(out) != "" {
			t.Errorf("%s: container filesystems left in /srv/pyxis/0: %s", h, out)
		}
		said := false
		for _, p := range r.Phases {
			var c phases.Cleaned
			if p.Phase == "teardown" && p.Node == h && json.Unmarshal(p.Data, &c) == nil {
				said = said || slices.Contains(c.Actions, "removed container pyxis_gpuaccept-"+r.ID+" (enroot)")
			}
		}
		if !said {
			t.Errorf("%s: teardown did not say it removed the window's container", h)
		}
	}
}

// TestPyxisAbsentSkipsTheImage: the same window on the lab's Slurm
// without Pyxis: srun lists no --container-image, so no import is tried;
// every image verdict is SKIP with the reason, NOT MEASURED (no FAIL, no
// PASS, no node left out: the window is not accepted without its image
// checked) and the all-reduce runs on the hosts themselves.
func TestPyxisAbsentSkipsTheImage(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	pin := strings.Repeat("5d", 32)
	r, res, _ := pyxisWindow(t, l, labSubnet+".2:5000/gpuaccept-pyxis:1@sha256:"+pin, true, false,
		"srun on the login node lists no --container-image: the cluster has no Pyxis") // the line wraps after
	const why = "srun on the login node lists no --container-image: the cluster has no Pyxis"
	for _, h := range srunHosts {
		for _, id := range []string{"IMG-001", "IMG-002"} {
			if v := verdict(r, id, h); v.Status != record.Skip || v.Detail != why || v.Incomplete != why {
				t.Errorf("%s %s: %s %q %q", id, h, v.Status, v.Measured, v.Detail)
			}
		}
	}
	if v := verdict(r, "IMG-003", ""); v.Status != record.Skip || v.Detail != why || v.Incomplete != why {
		t.Errorf("IMG-003: %s %q", v.Status, v.Detail)
	}
	var sw phases.Sweeps
	phaseData(t, r, "allreduce", -1, &sw)
	if strings.Contains(sw.Command, "--container-image") {
		t.Errorf("the all-reduce asks for a container Slurm cannot give: %s", sw.Command)
	}
	measured := 0
	for _, sweep := range sw.Repeats {
		if sweep.Error == "" && sweep.Judgement != nil {
			measured++
		}
	}
	if measured == 0 {
		t.Errorf("the window did not go on to measure the all-reduce on the hosts: %+v", sw.Repeats)
	}
	t.Logf("exit %d; IMG-001 h2: %s %q", res.code, verdict(r, "IMG-001", "h2").Status, verdict(r, "IMG-001", "h2").Detail)
	if res.code == 0 {
		t.Error("accepted with the pinned image checked on no node")
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
}
