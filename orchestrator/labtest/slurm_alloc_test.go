package labtest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
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
	queue := func() string {
		out, err := l.Exec(ctx, "h1", "squeue", "-h", "-o", "%i %T %j")
		if err != nil {
			t.Fatalf("squeue: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if q := queue(); q != "" {
		t.Fatalf("the lab's queue is not empty before the test: %s", q)
	}
	var heard atomic.Value
	spec := slurm.Spec{Name: "gpuaccept-labtest", Partition: "lab", Nodes: 2, Exclusive: true, Time: 90 * time.Second}
	a, err := slurm.Allocate(ctx, login, spec, 30*time.Second, func(id string) { heard.Store(id) })
	if err != nil {
		t.Fatalf("allocate %s: %v", spec.Command(), err)
	}
	t.Cleanup(func() { _ = slurm.Cancel(ctx, login, a.JobID) })
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
	again, err := slurm.Find(ctx, login, a.JobID)
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
	if q := queue(); strings.Contains(q, ng.JobID+" ") {
		t.Errorf("the job not granted is still queued: %s", q)
	}

	if _, err := l.Exec(ctx, "h1", "scontrol", "update", "nodename=h3", "state=drain", "reason=GPU 3 fell off the bus"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = l.Exec(ctx, "h1", "scontrol", "update", "nodename=h3", "state=resume") })
	nodes, err := slurm.Describe(ctx, login, "h[1-3]")
	if err != nil || len(nodes) != 3 || !strings.Contains(nodes[2].State, "DRAIN") || !strings.HasPrefix(nodes[2].Reason, "GPU 3 fell off the bus [") {
		t.Errorf("described: %+v %v", nodes, err)
	}

	if err := slurm.Cancel(ctx, login, a.JobID); err != nil {
		t.Fatal(err)
	}
	if q := queue(); q != "" {
		t.Errorf("left in the queue after cancel: %s", q)
	}
	if _, err := slurm.Find(ctx, login, a.JobID); err == nil {
		t.Error("a cancelled job found as running")
	}
}
