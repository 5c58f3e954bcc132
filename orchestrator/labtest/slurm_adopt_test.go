package labtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

// adoptLab is the package's lab with lab.sh slurm --adopt: the compute
// hosts admit lab.AdoptUser over SSH only while it holds a job on them.
// The mode is turned off again when the test ends (the other tests log
// in to every host freely).
func adoptLab(t *testing.T) *lab.Lab {
	t.Helper()
	l := needLab(t)
	slurmAdopt(t, l)
	return l
}

// slurmAdopt turns l's lab.sh slurm --adopt on for the test.
func slurmAdopt(t *testing.T, l *lab.Lab) {
	t.Helper()
	if err := l.SlurmAdopt(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// (t.Context is cancelled before the cleanups run.)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.Slurm(ctx); err != nil {
			t.Errorf("turning pam_slurm_adopt off: %v", err)
		}
	})
}

// dialAs reaches a lab host as user over SSH with gpuaccept's remote
// package, through the jump hosts given ("user@addr"), as a window does.
func dialAs(ctx context.Context, t *testing.T, l *lab.Lab, host, user string, jump ...string) (remote.Executor, error) {
	t.Helper()
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{l.KnownHosts}})
	if err != nil {
		t.Fatal(err)
	}
	return remote.DialNode(ctx, remote.Config{Name: host, SSH: &remote.SSHConfig{Name: host,
		Host: l.Host(host).Addr, User: user, Jump: jump, IdentityFiles: []string{l.ClientKey}, SSHConfig: "none", HostKeys: hk,
		ConnectTimeout: 3 * time.Second, HandshakeTimeout: 5 * time.Second, SessionTimeout: 5 * time.Second,
		KeepaliveInterval: time.Second, KeepaliveMisses: 3, GuardLease: 5 * time.Second}})
}

// TestPamSlurmAdoptAdmitsOnlyWithAJob: under lab.sh slurm --adopt an SSH
// login to a compute host through the login host h1 (the window's way)
// is refused by the host's account check while the user holds no job
// there — an authentication refusal that quotes pam_slurm_adopt, at once,
// not a timeout — admitted once salloc --no-shell through h1 holds that
// host, and refused again after the job is cancelled. h1 admits the user
// throughout, and root (exempt by the module) is admitted everywhere.
func TestPamSlurmAdoptAdmitsOnlyWithAJob(t *testing.T) {
	l := adoptLab(t)
	ctx := t.Context()
	user, jump := lab.AdoptUser, lab.AdoptUser+"@"+l.Host("h1").Addr
	login, err := dialAs(ctx, t, l, "h1", user)
	if err != nil {
		t.Fatalf("the login host refused %s: %v", user, err)
	}
	t.Cleanup(func() { login.Close() })

	refused := func(when string) {
		t.Helper()
		start := time.Now()
		c, err := dialAs(ctx, t, l, "h2", user, jump)
		took := time.Since(start)
		if err == nil {
			c.Close()
			t.Fatalf("%s: h2 admitted %s", when, user)
		}
		var auth *remote.AuthError
		var timeout *remote.TimeoutError
		if !errors.As(err, &auth) || errors.As(err, &timeout) || errors.Is(err, context.DeadlineExceeded) ||
			remote.CauseOf(err).Kind != "authentication" || took > 3*time.Second {
			t.Fatalf("%s: want an authentication refusal at once, got (after %s) %T: %v", when, took.Round(time.Millisecond), err, err)
		}
		if !strings.Contains(err.Error(), "pam_slurm_adopt") {
			t.Errorf("%s: the refusal does not quote pam_slurm_adopt: %v", when, err)
		}
		t.Logf("%s: refused after %s: %v", when, took.Round(time.Millisecond), err)
	}
	refused("without a job")

	spec := slurm.Spec{Name: "gpuaccept-adopt", Partition: "lab", NodeList: "h2", Time: 2 * time.Minute}
	a, err := slurm.Allocate(ctx, login, spec, 30*time.Second, nil)
	if err != nil {
		t.Fatalf("allocate %s: %v", spec.Command(), err)
	}
	cancelled := false
	t.Cleanup(func() {
		if !cancelled {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = slurm.Cancel(cctx, login, a.JobID)
		}
	})
	if len(a.Nodes) != 1 || a.Nodes[0].Name != "h2" {
		t.Fatalf("allocation %+v, want h2", a)
	}
	c, err := dialAs(ctx, t, l, "h2", user, jump)
	if err != nil {
		t.Fatalf("with job %s on h2: %v", a.JobID, err)
	}
	var out strings.Builder
	if err := c.Run(ctx, remote.Cmd{Command: "id -un; hostname", Stdout: &out}); err != nil || strings.TrimSpace(out.String()) != user+"\nh2" {
		t.Errorf("on h2 with the job: %q %v", out.String(), err)
	}
	// pam_slurm_adopt put the session into the job's extern step: what
	// the step tracks (proctrack/linuxproc here) is logged, not asserted.
	if out, err := l.Exec(ctx, "h2", "scontrol", "listpids", a.JobID); err == nil {
		t.Logf("job %s's processes on h2 while the session is open:\n%s", a.JobID, out)
	}
	c.Close()

	if err := slurm.Cancel(ctx, login, a.JobID); err != nil {
		t.Fatal(err)
	}
	cancelled = true
	refused("after the job was cancelled")

	for _, h := range []string{"h1", "h2"} {
		if c, err := dialAs(ctx, t, l, h, "root"); err != nil {
			t.Errorf("root on %s: %v", h, err)
		} else {
			c.Close()
		}
	}
	if out, err := l.Exec(ctx, "h1", "squeue", "-h"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("left in the queue: %q %v", out, err)
	}
}

// setUser makes the inventory at path log in as user (writeInventory's is
// root).
func setUser(t *testing.T, path, user string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "\n  user: root\n", "\n  user: "+user+"\n", 1)
	if s == string(b) {
		t.Fatalf("no ssh user root in %s", path)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWindowUnderPamSlurmAdopt: TestWindowInItsOwnSlurmAllocation's window
// (an inventory naming no nodes, slurm.allocate asking for three hosts)
// with the compute hosts behind pam_slurm_adopt and the window logging in
// as the lab's user: its own allocation is what admits it to the hosts
// through the login node; connect, tools, preflight and teardown pass,
// and the job is given back (squeue empty after).
func TestWindowUnderPamSlurmAdopt(t *testing.T) {
	l := adoptLab(t)
	// The stand-in GPU tools run the test's gpuaccept binary, which
	// lives in a directory of mode 0700: the lab user must reach it.
	if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
		t.Fatal(err)
	}
	prepare(t, l, nil)
	if q := slurmQueue(t, l); q != "" {
		t.Fatalf("the lab's queue is not empty before the test: %s", q)
	}
	inv := allocatingInventory(t, l, "  allocate: {nodes: 3}\n", "")
	setUser(t, inv, lab.AdoptUser)
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,teardown")
	r := readRun(t, runDir(t, runs))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exit %d, stderr:\n%s", res.code, res.stderr)
		}
	})
	s := r.Slurm
	if s == nil || s.JobID == "" || s.Cancelled.IsZero() || len(s.Nodes) != 3 || len(r.Nodes) != 3 {
		t.Fatalf("allocation %+v, nodes %+v", s, r.Nodes)
	}
	compute := 0
	for i, n := range r.Nodes {
		if n.Name != "h1" {
			compute++
		}
		if pr := phaseData(t, r, "preflight", i, new(any)); pr.Outcome != record.OK {
			t.Errorf("preflight on %s: %s %s", n.Name, pr.Outcome, pr.Error)
		}
	}
	if compute == 0 {
		t.Errorf("no compute host in the allocation %+v: pam_slurm_adopt was not in the way", s.Nodes)
	}
	if v := verdict(r, "SLURM-001", ""); v.Status != record.Pass {
		t.Errorf("SLURM-001: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if !strings.Contains(res.stderr, "slurm: job "+s.JobID+" given back") {
		t.Errorf("the window did not say it gave the job back:\n%s", res.stderr)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
	t.Logf("window under pam_slurm_adopt: exit %d, job %s on %s", res.code, s.JobID, s.NodeList)
}
