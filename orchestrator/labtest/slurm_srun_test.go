package labtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

// srunHosts are the hosts a window of transport srun allocates: h1 is the
// login node, which takes SSH; these take none from the coordinator.
var srunHosts = []string{"h2", "h3", "h4", "h5"}

// noSSHFromTheCoordinator makes hosts refuse the coordinator's SSH (a
// reset from their own firewall), as the compute nodes of a cluster that
// admits SSH only on its login node do; the rule goes with the test.
func noSSHFromTheCoordinator(t *testing.T, l *lab.Lab, hosts []string) {
	t.Helper()
	env, err := l.Env()
	if err != nil {
		t.Fatal(err)
	}
	rule := []string{"INPUT", "-p", "tcp", "--dport", "22", "-s", env["LAB_GATEWAY"], "-j", "REJECT", "--reject-with", "tcp-reset"}
	for _, h := range hosts {
		if out, err := l.Exec(t.Context(), h, append([]string{"iptables", "-I"}, rule...)...); err != nil {
			t.Fatalf("%s: iptables: %v %s", h, err, out)
		}
		t.Cleanup(func() { _, _ = l.Exec(context.Background(), h, append([]string{"iptables", "-D"}, rule...)...) })
	}
}

// srunInventory asks for srunHosts and reaches them by srun.
func srunInventory(t *testing.T, l *lab.Lab, phasesExtra string) string {
	t.Helper()
	inv := allocatingInventory(t, l, "  allocate: {nodelist: \"h[2-5]\"}\n", phasesExtra)
	appendInventory(t, inv, "transport: srun\n")
	return inv
}

// fourHostSweep is the all-reduce of the four-host windows: one small
// sweep, one rank a host, the intra-node runs on (a lone MPI program on a
// node, which srun's variables once broke).
const fourHostSweep = `  allreduce:
    enabled: true
    min_bytes: 1MiB
    max_bytes: 2MiB
    iters: 2
    warmup: 1
    repeats: 2
    ranks_per_node: 1
    timeout: 1m
` + mpiArgs

// TestWindowThroughSrun: a whole window on hosts that take no SSH from
// the coordinator. It allocates four hosts through the login node h1
// (the only host it reaches over SSH), runs every phase on them as job
// steps of its allocation (the collectives as steps of the same job,
// under srun from the login node) and gives the job back; nothing of the
// window is left on any host, nor in the queue. check --connect asked
// Slurm first.
func TestWindowThroughSrun(t *testing.T) {
	l := needLab(t)
	// Only what the hosts' sshd logs say from here on: an earlier test of
	// the same lab (a window over SSH through the login node) logged in.
	logged := map[string]int{}
	for _, h := range srunHosts {
		if b, err := os.ReadFile(filepath.Join(l.Dir, "hosts", h, "sshd.log")); err == nil {
			logged[h] = len(b)
		}
	}
	inv := srunInventory(t, l, fourHostSweep)
	fourHostWindow(t, l, inv, "", func(r *record.Run) {
		for _, n := range r.Nodes {
			if v := verdict(r, "CONN-001", n.Name); !strings.Contains(v.Detail+v.Measured, "srun") {
				t.Errorf("CONN-001 %s: %q %q: not reached by srun", n.Name, v.Measured, v.Detail)
			}
		}
	})
	for _, h := range srunHosts {
		log, _ := os.ReadFile(filepath.Join(l.Dir, "hosts", h, "sshd.log"))
		if len(log) >= logged[h] && strings.Contains(string(log[logged[h]:]), "Accepted publickey") {
			t.Errorf("%s: a login over SSH: the window must reach it by srun alone", h)
		}
	}
}

// TestWindowThroughTheLoginNode: the same window the other way to the
// nodes: over SSH with the login node h1 as the jump host (the hosts still
// refuse the coordinator itself), the collectives as steps of the
// window's job. The hosts run pam_slurm_adopt and the window logs in as
// the lab's user, whom only its own allocation admits to them.
func TestWindowThroughTheLoginNode(t *testing.T) {
	l := needLab(t)
	inv := allocatingInventory(t, l, "  allocate: {nodelist: \"h[2-5]\"}\n", fourHostSweep+"    launcher: srun\n")
	fourHostWindow(t, l, inv, lab.AdoptUser, nil)
}

// fourHostWindow runs inv's window over srunHosts, which refuse the
// coordinator's SSH, after check --connect asked Slurm whether it would
// grant them, and checks what both ways to the nodes share: the job held
// and given back, every node reached, preflight and the diagnostic run,
// the all-reduce a step of the window's job, nothing left. more checks
// the rest. With user (lab.AdoptUser) the window logs in as that user and
// the hosts run pam_slurm_adopt: only the window's own job admits it.
func fourHostWindow(t *testing.T, l *lab.Lab, inv, user string, more func(*record.Run)) {
	t.Helper()
	if user == "" {
		if err := l.Slurm(t.Context()); err != nil {
			t.Fatal(err)
		}
	} else {
		slurmAdopt(t, l)
		// The stand-in GPU tools run the test's gpuaccept binary, which
		// lives in a directory of mode 0700: the user must reach it.
		if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
			t.Fatal(err)
		}
		setUser(t, inv, user)
	}
	prepare(t, l, nil)
	standinBenchmarks(t, l, srunHosts)
	noSSHFromTheCoordinator(t, l, srunHosts)
	if c := gpuaccept(t, "check", "--connect", inv); c.code != 0 || !strings.Contains(c.stdout, "Slurm would grant it:") ||
		!strings.Contains(c.stdout, "on nodes h[2-5]") {
		t.Errorf("check --connect: exit %d\n%s", c.code, c.stdout)
	}
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	s := r.Slurm
	if s == nil || s.JobID == "" || s.Cancelled.IsZero() || len(r.Nodes) != len(srunHosts) {
		t.Fatalf("exit %d: allocation %+v, nodes %+v", res.code, s, r.Nodes)
	}
	for i, n := range r.Nodes {
		if n.Name != srunHosts[i] {
			t.Errorf("node %d is %s, want %s", i, n.Name, srunHosts[i])
		}
		if v := verdict(r, "CONN-001", n.Name); v.Status != record.Pass {
			t.Errorf("CONN-001 %s: %s %q %q", n.Name, v.Status, v.Measured, v.Detail)
		}
		for _, p := range []string{"preflight", "diag"} {
			if pr := phaseData(t, r, p, i, new(any)); pr.Outcome != record.OK {
				t.Errorf("%s on %s: %s %s", p, n.Name, pr.Outcome, pr.Error)
			}
		}
	}
	var sw phases.Sweeps
	phaseData(t, r, "allreduce", -1, &sw)
	if !strings.Contains(sw.Command, "--jobid="+s.JobID+" --overlap") {
		t.Errorf("the all-reduce is no step of the window's job: %s", sw.Command)
	}
	measured, flaked := fourHostSweeps(t, dir, sw)
	if v := verdict(r, "NCCL-001", ""); measured == 0 || (flaked == 0 && v.Status != record.Pass) {
		t.Errorf("NCCL-001 %s %q: %d sweep(s) measured over the four hosts, %d failed by the lab's MPI",
			v.Status, v.Detail, measured, flaked)
	} else if flaked > 0 {
		t.Logf("%d of %d sweep(s) failed by the lab's MPI; NCCL-001 %s", flaked, len(sw.Repeats), v.Status)
	}
	if v := verdict(r, "SLURM-001", ""); v.Status != record.Pass {
		t.Errorf("SLURM-001: %s %q", v.Status, v.Detail)
	}
	if more != nil {
		more(r)
	}
	t.Logf("exit %d; CONN-001 h2: %s; card:\n%s", res.code, verdict(r, "CONN-001", "h2").Measured, res.stdout)
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
	nothingLeft(t, l)
}

// fourHostSweeps counts the sweeps of a four-host window that were
// measured over the four hosts, and those the lab's MPI failed, and fails
// t for any other failure, with its raw log.
//
// Debian's Open MPI 4.1.4 now and then reports a TCP connect still in
// progress as failed ("Operation now in progress (115)", open-mpi/ompi
// #10734), more often on a loaded machine: a sweep that fails so is the
// lab's MPI, not the transport, and the window rightly fails it. On a
// loaded 2-core CI machine a rank has also ended a sweep's step at once
// under srun --mpi=pmix (once with exit code 1, once by a segmentation
// fault, task 2 on h4 in the Pyxis container), while the other sweep over
// the same four hosts was measured. A core dump of such a rank (scripts/lab
// reproduces it: 2 of 30 runs beside two busy loops) shows a NULL call from
// mca_btl_tcp's event handler in MPI_Init, the TCP BTL's race of a peer's
// connect with add_procs (open-mpi/ompi#3035). One such sweep is counted with the
// race when another was measured, its raw log printed: the step did reach
// the four hosts. What these tests hold is that a step ran over the four
// hosts and was measured, and that nothing else went wrong.
func fourHostSweeps(t *testing.T, dir string, sw phases.Sweeps) (measured, flaked int) {
	t.Helper()
	rawOnce := func() {
		for _, from := range []string{"slurm-login", srunHosts[0]} {
			if b := rawLog(dir, from, "allreduce"); b != nil {
				t.Logf("raw/%s/allreduce.log.gz (end, unpacked):\n%s", from, tail(string(b), 6000))
				return
			}
		}
	}
	var rankEnded []string
	for _, sweep := range sw.Repeats {
		switch {
		case sweep.Error == "" && sweep.Judgement != nil && len(sweep.Nodes) == len(srunHosts):
			measured++
		case strings.Contains(sweep.Error, "Operation now in progress (115)"):
			flaked++
		case strings.Contains(sweep.Error, "ended the step first (srun: "):
			rankEnded = append(rankEnded, sweep.Error)
		default:
			t.Errorf("an all-reduce sweep over %v: %s", sweep.Nodes, sweep.Error)
			rawOnce()
		}
	}
	if len(rankEnded) > 0 {
		if measured == 0 || len(rankEnded) > 1 {
			t.Errorf("%d sweep(s) measured, %d ended by a rank: %s", measured, len(rankEnded), strings.Join(rankEnded, " / "))
		} else {
			t.Logf("a rank ended a sweep's step (the lab's MPI, the other sweep measured): %s", rankEnded[0])
		}
		rawOnce()
		flaked += len(rankEnded)
	}
	return measured, flaked
}

// TestSrunWindowKilledThenResumed: the coordinator of a srun window is
// SIGKILLed while the diagnostic runs as steps on every node. The guards
// on the nodes end the diagnostic (their heartbeats stopped); the job,
// journaled, stays. The resumed window keeps that job, reads the
// partition's limits again (SLURM-004), finishes, and gives it back: the
// queue is empty and nothing is left on any host.
func TestSrunWindowKilledThenResumed(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	killedThenResumed(t, l, srunInventory(t, l, ""))
}

// TestLoginNodeWindowKilledThenResumed: the same the other way to the
// nodes, over SSH through the login node as the lab's user under
// pam_slurm_adopt: the resumed window is admitted to the hosts again by
// the job the first one left held.
func TestLoginNodeWindowKilledThenResumed(t *testing.T) {
	l := needLab(t)
	slurmAdopt(t, l)
	if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
		t.Fatal(err)
	}
	inv := allocatingInventory(t, l, "  allocate: {nodelist: \"h[2-5]\"}\n", "")
	setUser(t, inv, lab.AdoptUser)
	killedThenResumed(t, l, inv)
}

// killedThenResumed runs inv's window over srunHosts, which refuse the
// coordinator's SSH, SIGKILLs its coordinator while the diagnostic runs
// on h2, and resumes it.
func killedThenResumed(t *testing.T, l *lab.Lab, inv string) {
	t.Helper()
	setups := map[string]nodeSetup{}
	for _, h := range srunHosts {
		setups[h] = nodeSetup{profile: "h100", slowDiag: 7 * time.Second}
	}
	prepare(t, l, setups)
	noSSHFromTheCoordinator(t, l, srunHosts)
	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,diag,teardown")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "diag running on h2", func() bool { return slowRunning(t, l, "h2", 7*time.Second) })
	cmd.Process.Kill()
	_ = cmd.Wait()
	dir := runDir(t, runs)
	before := readJournalJob(t, dir)
	if q := slurmQueue(t, l); !strings.HasPrefix(q, before+" ") {
		t.Fatalf("the job %s is not held after the coordinator died: queue %q", before, q)
	}
	left := ""
	t.Cleanup(func() {
		if left != "" && t.Failed() {
			t.Logf("left running after the coordinator died:\n%s", left)
		}
	})
	waitFor(t, 20*time.Second, "no process of ours left after the coordinator died", func() bool {
		for _, h := range srunHosts {
			if ps, _ := l.Ps(t.Context(), h); ours(ps) != "" {
				left = h + ":\n" + ours(ps)
				return false
			}
		}
		left = ""
		return true
	})
	res := gpuaccept(t, "run", "--resume", dir)
	r := readRun(t, dir)
	if r.Slurm == nil || r.Slurm.JobID != before || r.Slurm.Cancelled.IsZero() || len(r.Resumed) != 1 {
		t.Fatalf("exit %d: the resumed window's allocation %+v (journaled %s), resumed %d", res.code, r.Slurm, before, len(r.Resumed))
	}
	// The partition's limits read again when the window went on (not
	// journaled: the ones that may cut it are those standing now).
	if v := verdict(r, "SLURM-004", ""); v.Status != record.Pass || r.Slurm.Partition == nil || r.Slurm.Partition.Name != "lab" {
		t.Errorf("SLURM-004 after the resume: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if types := journalTypes(t, dir); !slices.Contains(types, "done:diag") {
		t.Errorf("the resumed window did not finish the diagnostic: %v", types)
	}
	for i, n := range r.Nodes {
		if pr := phaseData(t, r, "diag", i, new(any)); pr.Outcome != record.OK {
			t.Errorf("diag on %s after the resume: %s %s", n.Name, pr.Outcome, pr.Error)
		}
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
	nothingLeft(t, l)
}

// readJournalJob is the job ID the window journaled.
func readJournalJob(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"type":"slurm"`) && strings.Contains(line, `"key":"job"`) {
			_, v, _ := strings.Cut(line, `"value":"`)
			id, _, _ := strings.Cut(v, `"`)
			return id
		}
	}
	t.Fatalf("no job journaled in %s", dir)
	return ""
}
