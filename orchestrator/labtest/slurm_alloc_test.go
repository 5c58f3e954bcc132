package labtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

// loginNode is the lab's h1 over SSH, as a window reaches its Slurm
// login node.
func loginNode(t *testing.T) remote.Executor {
	t.Helper()
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{l.KnownHosts}})
	if err != nil {
		t.Fatal(err)
	}
	h := l.Host("h1")
	c, err := remote.DialNode(t.Context(), remote.Config{Name: "slurm-login", SSH: &remote.SSHConfig{Name: "slurm-login",
		Host: h.Addr, User: "root", IdentityFiles: []string{l.ClientKey}, SSHConfig: "none", HostKeys: hk,
		ConnectTimeout: 3 * time.Second, HandshakeTimeout: 5 * time.Second, SessionTimeout: 5 * time.Second,
		KeepaliveInterval: time.Second, KeepaliveMisses: 3, GuardLease: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSlurmAllocationOnTheLab: the window's own allocation on the lab's
// real Slurm, through the login node: two hosts granted (their job ID
// heard before salloc returned), their addresses and states read back,
// found again by ID as a resumed window would; a second allocation that
// cannot be had while the first holds its hosts is not granted within
// its wait and names squeue's reason, its job cancelled; a drained host
// shows its reason; the first cancelled, nothing is left in the queue.
func TestSlurmAllocationOnTheLab(t *testing.T) {
	login := loginNode(t)
	l := needLab(t)
	ctx := t.Context()
	if q := slurmQueue(t, l); q != "" {
		t.Fatalf("the lab's queue is not empty before the test: %s", q)
	}
	var heard atomic.Value
	spec := slurm.Spec{Name: "gpuaccept-labtest", Partition: "lab", Nodes: 2, Exclusive: true, Time: 90 * time.Second}
	a, err := slurm.Allocate(ctx, login, spec, 30*time.Second, func(id string) { heard.Store(id) })
	if err != nil {
		t.Fatalf("allocate %s: %v", spec.Command(), err)
	}
	// (t.Context is cancelled before the cleanups run.)
	t.Cleanup(func() { _ = slurm.Cancel(context.Background(), login, a.JobID) })
	if heard.Load() != a.JobID || a.State != "RUNNING" || len(a.Nodes) != 2 || a.Nodes[0].Name != "h1" {
		t.Fatalf("allocation %+v, heard %v", a, heard.Load())
	}
	for _, n := range a.Nodes {
		if n.Addr != l.Host(n.Name).Addr || !strings.Contains(n.State, "ALLOCATED") {
			t.Errorf("%s: %+v, want its lab address %s, allocated", n.Name, n, l.Host(n.Name).Addr)
		}
	}
	if !strings.Contains(spec.Command(), "--time=2") {
		t.Errorf("90 s is a time limit of 2 minutes: %s", spec.Command())
	}
	again, err := slurm.Find(ctx, login, a.JobID, spec.Name)
	if err != nil || again.NodeList != a.NodeList {
		t.Errorf("found again: %+v %v", again, err)
	}

	// Every host, exclusively, while the first job holds two.
	start := time.Now()
	b, err := slurm.Allocate(ctx, login, slurm.Spec{Name: "gpuaccept-labtest-2", Partition: "lab", Nodes: len(l.Hosts), Exclusive: true,
		Time: time.Minute}, 6*time.Second, nil)
	if err == nil {
		_ = slurm.Cancel(ctx, login, b.JobID)
	}
	ng, ok := err.(*slurm.NotGranted)
	if !ok || ng.JobID == "" || ng.Reason != "Resources" {
		t.Fatalf("a second allocation: %T %v, want not granted for Resources", err, err)
	}
	t.Logf("%v (after %s)", err, time.Since(start).Round(100*time.Millisecond))
	if q := slurmQueue(t, l); strings.Contains(q, ng.JobID+" ") {
		t.Errorf("the job not granted is still queued: %s", q)
	}

	if _, err := l.Exec(ctx, "h1", "scontrol", "update", "nodename=h3", "state=drain", "reason=GPU 3 fell off the bus"); err != nil {
		t.Fatal(err)
	}
	undrain := func() { _, _ = l.Exec(context.Background(), "h1", "scontrol", "update", "nodename=h3", "state=resume") }
	t.Cleanup(undrain)
	nodes, err := slurm.Describe(ctx, login, "h[1-3]")
	if err != nil || len(nodes) != 3 || !strings.Contains(nodes[2].State, "DRAIN") || !strings.HasPrefix(nodes[2].Reason, "GPU 3 fell off the bus [") {
		t.Errorf("described: %+v %v", nodes, err)
	}

	undrain()
	if err := slurm.Cancel(ctx, login, a.JobID); err != nil {
		t.Fatal(err)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue after cancel: %s", q)
	}
	if _, err := slurm.Find(ctx, login, a.JobID, spec.Name); err == nil {
		t.Error("a cancelled job found as running")
	}
}

// allocatingInventory is writeInventory's for hosts with the nodes left
// out and slurm.allocate asking for n of the lab's Slurm hosts instead,
// the login node h1.
func allocatingInventory(t *testing.T, l *lab.Lab, allocate, phasesExtra string) string {
	t.Helper()
	path := writeInventory(t, l, []string{"h1"}, "", phasesExtra)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	s = strings.Replace(s, "nodes:\n  - name: h1\n    address: "+l.Host("h1").Addr+"\n", "", 1)
	s += "slurm:\n  login: {address: " + l.Host("h1").Addr + "}\n  partition: lab\n" + allocate
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWindowInItsOwnSlurmAllocation: an inventory naming no nodes, only
// slurm.allocate: the window asks the lab's real Slurm for three hosts
// through the login node, reaches each through the login node as its
// jump host, runs connect, tools, preflight and teardown there, and
// gives the job back (squeue empty after); SLURM-001 passes, and so does
// SLURM-004 (the lab partition has no limit the window meets). Then an
// allocation of more hosts than the partition has: SLURM-004 names its
// TotalNodes as the window's ask past it (INCOMPLETE: the inventory asks
// too much, the provider failed nothing), the job is not granted within
// its wait (SLURM-001 with squeue's reason), nothing left queued.
func TestWindowInItsOwnSlurmAllocation(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	prepare(t, l, nil)
	inv := allocatingInventory(t, l, "  allocate: {nodes: 3}\n", "")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,teardown")
	r := readRun(t, runDir(t, runs))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exit %d, stderr:\n%s", res.code, res.stderr)
		}
	})
	s := r.Slurm
	if s == nil || s.JobID == "" || s.Granted.IsZero() || s.Cancelled.IsZero() || len(s.Nodes) != 3 || len(r.Nodes) != 3 {
		t.Fatalf("allocation %+v, nodes %+v", s, r.Nodes)
	}
	for i, n := range r.Nodes {
		if n.Name != s.Nodes[i].Name || n.Address != l.Host(n.Name).Addr {
			t.Errorf("node %d: %+v, want Slurm's %s at its lab address", i, n, s.Nodes[i].Name)
		}
		if pr := phaseData(t, r, "preflight", i, new(any)); pr.Outcome != record.OK {
			t.Errorf("preflight on %s: %s %s", n.Name, pr.Outcome, pr.Error)
		}
	}
	if v := verdict(r, "SLURM-001", ""); v.Status != record.Pass {
		t.Errorf("SLURM-001: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdict(r, "SLURM-004", ""); v.Status != record.Pass || !strings.HasPrefix(v.Measured, "partition lab: UP, MaxTime UNLIMITED") {
		t.Errorf("SLURM-004: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if !strings.Contains(res.stderr, "slurm: job "+s.JobID+" given back") {
		t.Errorf("the window did not say it gave the job back:\n%s", res.stderr)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}

	inv = allocatingInventory(t, l, fmt.Sprintf("  allocate: {nodes: %d}\n  allocate_timeout: 10s\n", len(l.Hosts)+1), "")
	runs = t.TempDir()
	res = gpuaccept(t, "run", inv, "--runs-dir", runs)
	r = readRun(t, runDir(t, runs))
	v := verdict(r, "SLURM-001", "")
	t.Logf("not granted: exit %d, SLURM-001 %s %q", res.code, v.Status, v.Detail)
	// squeue's reason for the job left pending, in the record and the
	// verdict (Slurm 22.05 says PartitionNodeLimit for more nodes than
	// the partition has).
	if r.Slurm == nil || !strings.Contains(r.Slurm.NotGranted, "squeue's reason: PartitionNodeLimit") || v.Status != record.Skip ||
		!strings.Contains(v.Detail, "PartitionNodeLimit") || v.Incomplete == "" || len(r.Nodes) != 0 {
		t.Errorf("not granted: %+v, SLURM-001 %+v, stdout:\n%s", r.Slurm, v, res.stdout)
	}
	p := verdict(r, "SLURM-004", "")
	want := fmt.Sprintf("TotalNodes %d: %d node(s) in the partition, fewer than the %d the window asks for", len(l.Hosts), len(l.Hosts), len(l.Hosts)+1)
	if p.Status != record.Skip || p.Detail != want || !strings.Contains(p.Incomplete, "change what slurm.allocate") ||
		res.code != 3 || strings.Contains(res.stdout, "NOT ACCEPTED") {
		t.Errorf("SLURM-004: %s %q, want SKIP %q, the window INCOMPLETE; exit %d, stdout:\n%s", p.Status, p.Detail, want, res.code, res.stdout)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
}

// slurmQueue is squeue's jobs: "ID STATE NAME" lines.
func slurmQueue(t *testing.T, l *lab.Lab) string {
	t.Helper()
	out, err := l.Exec(t.Context(), "h1", "squeue", "-h", "-o", "%i %T %j")
	if err != nil {
		t.Fatalf("squeue: %v %s", err, out)
	}
	return strings.TrimSpace(string(out))
}
