package labtest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/reports"
	"gpuaccept/scripts"
	"gpuaccept/scripts/lab"
)

var failureHosts = []string{"h1", "h2", "h3"}

// failureInventory: h1..h3 run the DDP job (gloo on CPU, one worker each)
// with checkpoints in the lab's shared filesystem; extra is more lines of
// phases.failure.
func failureInventory(t *testing.T, l *lab.Lab, extra string) string {
	t.Helper()
	labShared(t, l)
	return writeInventory(t, l, failureHosts, "  price_per_gpu_hour: 2.00\n  currency: USD\n", `  failure:
    enabled: true
    python: /usr/bin/python3
    dir: /shared
    procs_per_node: 1
    hidden: 256
    checkpoint_every: 5
    steady_steps: 8
    timeout: 6m
`+extra)
}

// runFailure runs a window with the failure test and returns its result.
func runFailure(t *testing.T, l *lab.Lab, inv string) (*record.Run, phases.Failed, result) {
	t.Helper()
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	var f phases.Failed
	phaseData(t, r, "failure", -1, &f)
	t.Logf("%s, %s recovery: detected %s, resumed %s after the failure, from step %s (step %d reached, checkpoint %d), %s; victim back at %s; billed %.0f node-s = %.4f GPU-h%s",
		f.Inject, f.Recovery, secs(f.DetectionSecs), secs(f.ResumeSecs), intp(f.ResumedFrom), f.LastStep, f.LastCheckpoint,
		lostText(f.StepsLost), secsAfter(f.VictimBackAt, f.InjectedAt), f.BilledNodeSecs, f.BilledGPUHours, costOf(f))
	t.Logf("timeline:\n%s", f.Timeline)
	for _, id := range []string{"RECOV-001", "RECOV-002", "RECOV-003", "RECOV-004"} {
		node := ""
		if id == "RECOV-003" {
			node = f.Victim
		}
		v := verdict(r, id, node)
		t.Logf("%s %s %s %s", id, v.Status, v.Measured, v.Detail)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("stderr:\n%s", res.stderr)
		for _, h := range failureHosts {
			b := rawLog(dir, h, "failure")
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("raw/%s/failure.log.gz (end, unpacked):\n%s", h, b)
		}
	})
	return r, f, res
}

// reachable: h1 opens a TCP connection to host's sshd.
func reachable(t *testing.T, l *lab.Lab, host string) bool {
	_, err := l.Exec(t.Context(), "h1", "timeout", "2", "bash", "-c", "echo > /dev/tcp/"+l.Host(host).Addr+"/22")
	return err == nil
}

func secs(p *float64) string {
	if p == nil {
		return "never"
	}
	return fmt.Sprintf("%.1f s", *p)
}

func secsAfter(p *float64, from float64) string {
	if p == nil {
		return "never"
	}
	return fmt.Sprintf("%.1f s", *p-from)
}

func intp(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func lostText(p *int) string {
	if p == nil {
		return "steps lost unknown"
	}
	return fmt.Sprintf("%d step(s) lost", *p)
}

func costOf(f phases.Failed) string {
	if f.BilledCost == nil {
		return ""
	}
	return fmt.Sprintf(" = %.4f %s", *f.BilledCost, f.Currency)
}

// wantRecovered: the job resumed in time from its last checkpoint, the
// victim came back, and nothing is left.
func wantRecovered(t *testing.T, l *lab.Lab, r *record.Run, f phases.Failed) {
	t.Helper()
	for _, id := range []string{"RECOV-001", "RECOV-002", "RECOV-004"} {
		if v := verdict(r, id, ""); v.Status != record.Pass {
			t.Errorf("%s %s: %s %s", id, v.Status, v.Measured, v.Detail)
		}
	}
	if v := verdict(r, "RECOV-003", f.Victim); v.Status != record.Pass {
		t.Errorf("RECOV-003 %s: %s", v.Status, v.Measured)
	}
	if f.ResumedFrom == nil || *f.ResumedFrom != f.LastCheckpoint {
		t.Errorf("resumed from step %s, the last checkpoint was %d", intp(f.ResumedFrom), f.LastCheckpoint)
	}
	for n, c := range f.Left {
		if c != 0 {
			t.Errorf("%s: %d process(es) of the test left", n, c)
		}
	}
	nothingLeft(t, l)
}

func TestFailureKillNodeElastic(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	r, f, _ := runFailure(t, l, failureInventory(t, l, "    inject: kill-node\n    recovery: elastic\n"))
	wantRecovered(t, l, r, f)
	if f.DetectionSecs == nil {
		t.Error("the killed node's loss was never detected")
	}
	wantTorch(t, f, "1.13")
}

// wantTorch: every node's launcher and workers ran PyTorch version
// (a prefix), and the record says so.
func wantTorch(t *testing.T, f phases.Failed, version string) {
	t.Helper()
	for _, h := range failureHosts {
		if v := f.Torch[h]; !strings.HasPrefix(v.Launcher, version) || !strings.HasPrefix(v.Workers, version) {
			t.Errorf("%s: PyTorch %+v recorded, want %s", h, v, version)
		}
	}
}

func TestFailureKillWorkerElastic(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	r, f, _ := runFailure(t, l, failureInventory(t, l, "    inject: kill-worker\n"))
	wantRecovered(t, l, r, f)
}

// The cut: the victim's link goes down from the node itself, with the
// restore scheduled there first; the collective timeout ends the
// survivors' wait, the job goes on, the victim rejoins once its link is
// back.
func TestFailureCutElastic(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	r, f, _ := runFailure(t, l, failureInventory(t, l, "    inject: cut\n    cut_for: 12s\n    collective_timeout: 10s\n"))
	wantRecovered(t, l, r, f)
	// The link is up again: the lab reaches h3.
	if !reachable(t, l, "h3") {
		t.Error("h3 unreachable from h1 after the test")
	}
}

func TestFailureKillNodeRelaunch(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	r, f, _ := runFailure(t, l, failureInventory(t, l, "    inject: kill-node\n    recovery: relaunch\n"))
	wantRecovered(t, l, r, f)
	if !strings.Contains(fmt.Sprint(f.Actions), "stopped for the relaunch") {
		t.Errorf("no relaunch in %+v", f.Actions)
	}
}

// The coordinator dies while the victim is cut off: the restore scheduled
// on the node brings it back by itself, the guards end the job on the
// others, and a resumed window runs the test again and leaves nothing.
func TestFailureCoordinatorKilledDuringCut(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	inv := failureInventory(t, l, "    inject: cut\n    cut_for: 12s\n    collective_timeout: 10s\n")
	runs := t.TempDir()
	progress := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(progress)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	cmd.Stdout, cmd.Stderr = io.Discard, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the cut", func() bool {
		b, _ := os.ReadFile(progress)
		return strings.Contains(string(b), "failure: cut for")
	})
	cut := time.Now()
	cmd.Process.Kill()
	_ = cmd.Wait()
	waitFor(t, 30*time.Second, "no process of ours left on h1 and h2", func() bool {
		for _, h := range []string{"h1", "h2"} {
			if ps, _ := l.Ps(t.Context(), h); ours(ps) != "" {
				return false
			}
		}
		return true
	})
	waitFor(t, 40*time.Second, "h3 reachable again", func() bool {
		return reachable(t, l, "h3")
	})
	t.Logf("h3 reachable again %.1f s after the coordinator reported the cut (and was killed); nothing of the job left on h1, h2", time.Since(cut).Seconds())
	dir := runDir(t, runs)
	res := gpuaccept(t, "run", "--resume", dir)
	r := readRun(t, dir)
	var fr phases.Failed
	phaseData(t, r, "failure", -1, &fr)
	if v := verdict(r, "RECOV-001", ""); v.Status != record.Pass {
		t.Errorf("after resume: RECOV-001 %s %s %s\n%s", v.Status, v.Measured, v.Detail, res.stderr)
	}
	if !reachable(t, l, "h3") {
		t.Error("h3 unreachable from h1 after the resumed window")
	}
	nothingLeft(t, l)
}

// A job that cannot start again (the user's own command, here one that
// refuses to run after a restart) never resumes: RECOV-001 fails, and
// nothing is left behind.
func TestFailureJobThatCannotResumeFails(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	shared := labShared(t, l)
	if err := os.WriteFile(filepath.Join(shared, "ddp_train.py"), []byte(scripts.DDPTrain), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(shared, "ddp_train.py")) })
	inv := failureInventory(t, l, `    inject: kill-worker
    resume_within: 1m
    command:
      - bash
      - -c
      - 'if [ "${TORCHELASTIC_RESTART_COUNT:-0}" -gt 0 ]; then echo "cannot start again"; exit 3; fi; exec /usr/bin/python3 /shared/ddp_train.py --ckpt-dir "$GPUACCEPT_CKPT_DIR" --step-time 0.5'
`)
	r, f, res := runFailure(t, l, inv)
	if v := verdict(r, "RECOV-001", ""); v.Status != record.Fail || res.code != 1 {
		t.Errorf("exit %d, RECOV-001 %s %s", res.code, v.Status, v.Measured)
	}
	if v := verdict(r, "RECOV-004", ""); v.Status != record.Pass {
		t.Errorf("RECOV-004 %s %s", v.Status, v.Measured)
	}
	if !strings.Contains(f.Command, "--no_python bash -c") {
		t.Errorf("the user's command was not launched: %s", f.Command)
	}
	nothingLeft(t, l)
}

// The job in the pinned image: the lab's test image is busybox, so the
// node's own Python and torch are mounted into it (container_args); the
// launcher, the workers and the container's name and label are the
// window's, a killed node's container goes with it, and nothing is left.
func TestFailureInImage(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	im := labImage(t)
	inv := failureInventory(t, l, `    inject: kill-node
    container_args: ["-v", "/usr:/usr:ro", "-v", "/usr/lib:/lib:ro", "-v", "/usr/lib64:/lib64:ro", "-v", "/etc/ld.so.cache:/etc/ld.so.cache:ro", "-v", "/etc/alternatives:/etc/alternatives:ro"]
`)
	withImage(t, inv, im.DockerArchive, strings.TrimPrefix(im.ID, "sha256:"), "direct")
	r, f, _ := runFailure(t, l, inv)
	if !strings.Contains(f.Command, "podman run --rm --network host --ipc host --pid host") || !strings.Contains(f.Command, "gpuaccept.run=") {
		t.Errorf("not run in the image: %s", f.Command)
	}
	wantRecovered(t, l, r, f)
}

// rawLog is node's raw log of phase in the bundle at dir, unpacked; nil
// when there is none.
func rawLog(dir, node, phase string) []byte {
	r, err := reports.OpenLog(filepath.Join(dir, "raw", node, phase+reports.LogSuffix))
	if err != nil {
		return nil
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return b
}

// torch2Args runs the job in the lab's image with Debian 13's root
// filesystem (python3-torch 2.x, Python 3.13, its own glibc) mounted over
// its /usr: the launcher and the workers are PyTorch 2.x's, as on a
// current rented node. The rootfs is built once per machine (torch2.sh).
func torch2Args(t *testing.T) (string, *lab.Torch2) {
	t.Helper()
	tv, err := lab.Torch2Rootfs(t.Context(), "")
	if err != nil {
		t.Fatalf("the PyTorch 2.x root filesystem: %v", err)
	}
	r := tv.Rootfs
	// python: /usr/bin/python3, failureInventory's, is the container's.
	return fmt.Sprintf(`    container_args: ["-v", "%s/usr:/usr:ro", "-v", "%s/usr/lib:/lib:ro", "-v", "%s/usr/lib64:/lib64:ro", "-v", "%s/etc/ld.so.cache:/etc/ld.so.cache:ro"]
`, r, r, r, r), tv
}

// TestFailureKillNodeElasticTorch2: the field's failure (PyTorch 2.11 on an
// H200) in the lab: a node killed, its launcher relaunched while the
// survivors re-form the job. Under 2.x's shared rendezvous store the
// relaunched agent waited for a MASTER_ADDR that no one wrote and the
// survivors for its rank, until the phase ran out.
func TestFailureKillNodeElasticTorch2(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	args, tv := torch2Args(t)
	im := labImage(t)
	inv := failureInventory(t, l, "    inject: kill-node\n    recovery: elastic\n"+args)
	withImage(t, inv, im.DockerArchive, strings.TrimPrefix(im.ID, "sha256:"), "direct")
	r, f, _ := runFailure(t, l, inv)
	t.Logf("python3-torch %s", tv.Version)
	wantRecovered(t, l, r, f)
	wantTorch(t, f, "2.")
}

// TestFailureKillWorkerElasticTorch2: kill-worker on PyTorch 2.x, whose
// workers run in a session of their own (outside the agent's process
// group): failure.sh finds them as the launcher's children, torchrun
// restarts them, and the job resumes.
func TestFailureKillWorkerElasticTorch2(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	args, _ := torch2Args(t)
	im := labImage(t)
	inv := failureInventory(t, l, "    inject: kill-worker\n"+args)
	withImage(t, inv, im.DockerArchive, strings.TrimPrefix(im.ID, "sha256:"), "direct")
	r, f, _ := runFailure(t, l, inv)
	wantRecovered(t, l, r, f)
	wantTorch(t, f, "2.")
}
