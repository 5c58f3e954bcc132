package phases

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// slurmLogin answers the window's allocation on a fake login node: salloc
// granted job 7 at once (or left pending), scontrol as Slurm 22.05 prints
// it (the lab's captured lines, names and addresses changed), scancel,
// then squeue forgets the job.
func slurmLogin(f *fake.Fleet, pending bool) *fake.Host {
	return slurmLoginSays(f, pending, "salloc: Granted job allocation 7\n")
}

// slurmLoginSays is slurmLogin whose salloc, granted, writes said.
func slurmLoginSays(f *fake.Fleet, pending bool, said string) *fake.Host {
	h := f.Add(fake.NewHost("slurm-login"))
	var mu sync.Mutex
	cancelled, name := false, ""
	h.On(`^salloc --no-shell `, func(c *fake.Call) fake.Reply {
		mu.Lock()
		name = jobNameIn.FindStringSubmatch(c.Command)[1]
		mu.Unlock()
		if pending {
			c.Stderr.Write([]byte("salloc: Pending job allocation 8\nsalloc: job 8 queued and waiting for resources\n"))
			<-c.Ctx.Done()
			return fake.Reply{Stderr: "salloc: Job aborted due to signal\n", Exit: 1}
		}
		return fake.Reply{Stderr: said}
	})
	h.On(`^scontrol show job -o 7$`, func(*fake.Call) fake.Reply {
		mu.Lock()
		defer mu.Unlock()
		// A login shell's greeting first, as some sites print one.
		return fake.Reply{Stdout: "Welcome to the cluster\nJobId=7 JobName=" + name + " UserId=root(0) JobState=RUNNING Reason=None " +
			"Partition=gpu NodeList=h[1-2] BatchHost=h1 NumNodes=2 Comment=NodeList=h[5-9]\n"}
	})
	h.On(`^scancel --name=`, func(*fake.Call) fake.Reply {
		mu.Lock()
		cancelled = true
		mu.Unlock()
		return fake.Reply{}
	})
	h.Reply(`^scontrol show node -o 'h\[1-2\]'$`, fake.Reply{Stdout: "" +
		"NodeName=h1 Arch=x86_64 Gres=gpu:h100:8 NodeAddr=192.0.2.11 NodeHostName=h1 State=ALLOCATED Partitions=gpu\n" +
		"NodeName=h2 Arch=x86_64 Gres=gpu:h100:7(S:0-1) NodeAddr=192.0.2.12 NodeHostName=h2 State=ALLOCATED+DRAIN Partitions=gpu Reason=xid 79 [ops@2026-12-06T08:00:00]\n"})
	h.On(`^scancel [78]$`, func(*fake.Call) fake.Reply {
		mu.Lock()
		cancelled = true
		mu.Unlock()
		return fake.Reply{}
	})
	h.Reply(`^scontrol -a show partition -o gpu 2>&1$`, fake.Reply{Stdout: gpuPartition})
	h.On(`^squeue -h -j 8 -o %r$`, func(*fake.Call) fake.Reply { return fake.Reply{Stdout: "Resources\n"} })
	h.On(`^squeue -h -j [78] -o %T`, func(*fake.Call) fake.Reply {
		// (Every answer greets first.)
		mu.Lock()
		defer mu.Unlock()
		if cancelled {
			return fake.Reply{Stdout: "Welcome to the cluster\n"}
		}
		return fake.Reply{Stdout: "Welcome to the cluster\nRUNNING\n"}
	})
	return h
}

// TestWindowInItsOwnSlurmAllocation: an inventory that names no nodes,
// only slurm.allocate: the window asks the login node for its job, its
// nodes are the allocation's (reached through the login node), the job
// is given back once teardown ran, and SLURM-001 names the node Slurm
// had drained.
func TestWindowInItsOwnSlurmAllocation(t *testing.T) {
	named := fakeInventory(t, 2, "")
	f := fakeFleet(named)
	login := slurmLogin(f, false)
	inv := slurmInventory(t, "")
	rec := runFake(t, inv, f)
	s := rec.Slurm
	if s == nil || s.JobID != "7" || s.NodeList != "h[1-2]" || len(s.Nodes) != 2 || s.Cancelled.IsZero() || s.Granted.IsZero() {
		t.Fatalf("allocation %+v", s)
	}
	if len(rec.Nodes) != 2 || rec.Nodes[1].Name != "h2" || rec.Nodes[1].Address != "192.0.2.12" {
		t.Errorf("nodes %+v", rec.Nodes)
	}
	if !strings.Contains(s.Command, "--nodes=2") || !strings.Contains(s.Command, "--exclusive") || !strings.Contains(s.Command, "--partition=gpu") {
		t.Errorf("salloc: %s", s.Command)
	}
	if r := resultOf(t, rec, "connect", 1); r.Outcome != record.OK {
		t.Errorf("h2 not reached: %s %s", r.Outcome, r.Error)
	}
	if f.Host("h1").Ran(`^hostname$`) == 0 {
		t.Error("the window never ran a command on the allocation's h1")
	}
	// The job given back last, then the login node's scratch removed.
	calls := login.Commands()
	if n := len(calls); n < 2 || !strings.HasPrefix(calls[n-2], "squeue -h -j 7") || login.Ran(`^scancel 7$`) != 1 ||
		!strings.Contains(calls[n-1], "gpuaccept-") || !strings.Contains(calls[n-1], "-login; if [ -d") {
		t.Errorf("the job was not given back last: %q", calls)
	}
	if v := verdictOf(t, rec, "SLURM-001", ""); v.Status != record.Pass || !strings.Contains(v.Measured, "job 7: h[1-2], 2 node(s)") {
		t.Errorf("SLURM-001: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-002", "h2"); v.Status != record.Fail || !strings.Contains(v.Detail, "DRAIN (xid 79 [ops@") {
		t.Errorf("SLURM-002 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-002", "h1"); v.Status != record.Pass {
		t.Errorf("SLURM-002 h1: %s %q", v.Status, v.Detail)
	}
	// h2's GRES says 7 GPUs where the quote says 8: a GPU no job can get.
	if v := verdictOf(t, rec, "SLURM-003", "h2"); v.Status != record.Fail || !strings.Contains(v.Detail, "Slurm schedules 7; the quote says 8") {
		t.Errorf("SLURM-003 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-003", "h1"); v.Status != record.Pass {
		t.Errorf("SLURM-003 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
}

// TestANodeDrainedWhileTheWindowHoldsIt: both nodes in service when
// granted; by the window's end Slurm drained h1 with a reason. SLURM-002
// names it from the states read again before the job is given back.
func TestANodeDrainedWhileTheWindowHoldsIt(t *testing.T) {
	f := fakeFleet(fakeInventory(t, 2, ""))
	login := slurmLogin(f, false)
	var mu sync.Mutex
	reads := 0
	login.On(`^scontrol show node -o 'h\[1-2\]'$`, func(*fake.Call) fake.Reply {
		mu.Lock()
		defer mu.Unlock()
		reads++
		h1 := "State=ALLOCATED Partitions=gpu"
		if reads > 1 {
			h1 = "State=ALLOCATED+DRAIN Partitions=gpu Reason=GPU 3 fell off the bus [root@2026-12-06T11:00:00]"
		}
		return fake.Reply{Stdout: "NodeName=h1 Gres=gpu:8 NodeAddr=192.0.2.11 " + h1 + "\n" +
			"NodeName=h2 Gres=gpu:8 NodeAddr=192.0.2.12 State=ALLOCATED Partitions=gpu\n"}
	})
	rec := runFake(t, slurmInventory(t, ""), f)
	if reads != 2 || rec.Slurm == nil || rec.Slurm.Nodes[0].StateAtEnd != "ALLOCATED+DRAIN" || rec.Slurm.Nodes[0].State != "ALLOCATED" {
		t.Fatalf("read %d time(s): %+v", reads, rec.Slurm)
	}
	calls := login.Commands()
	cancelled := slices.Index(calls, "scancel 7")
	if cancelled < 0 || slices.Index(calls[cancelled:], "scontrol show node -o 'h[1-2]'") >= 0 {
		t.Errorf("the states not read again before the job was given back: %q", calls)
	}
	v := verdictOf(t, rec, "SLURM-002", "h1")
	if v.Status != record.Fail || v.Measured != "ALLOCATED+DRAIN" || v.Detail != "DRAIN (GPU 3 fell off the bus [root@2026-12-06T11:00:00]) while the window held it (in service when granted)" {
		t.Errorf("SLURM-002 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-002", "h2"); v.Status != record.Pass || v.Detail != "in service when granted and at the window's end" {
		t.Errorf("SLURM-002 h2: %s %q", v.Status, v.Detail)
	}
}

func TestGRESGPUs(t *testing.T) {
	for gres, want := range map[string]int{"gpu:h100:8(S:0-1)": 8, "gpu:4,gpu:a100:2": 6, "gpu": 1, "gpu:h100": 1, "mps:100": -1, "": -1,
		"gpu:a100:2(S:0),nic:2": 2} {
		got, ok := orchestrator.GRESGPUs(gres)
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%q: %d, want %d", gres, got, want)
		}
	}
}

// TestWindowWithoutItsAllocationIsIncomplete: Slurm leaves the job
// pending past slurm.allocate_timeout: the job is cancelled, no phase
// touches a node, and the window is INCOMPLETE with squeue's reason.
func TestWindowWithoutItsAllocationIsIncomplete(t *testing.T) {
	f := fake.NewFleet()
	login := slurmLogin(f, true)
	inv := slurmInventory(t, "")
	inv.Slurm.AllocateTimeout = 2 * time.Second
	rec := runFake(t, inv, f)
	if rec.Slurm == nil || rec.Slurm.JobID != "8" || !strings.Contains(rec.Slurm.NotGranted, "Resources") || len(rec.Nodes) != 0 {
		t.Fatalf("allocation %+v, nodes %v", rec.Slurm, rec.Nodes)
	}
	if login.Ran(`^scancel 8$`) == 0 {
		t.Error("the pending job was not cancelled")
	}
	v := verdictOf(t, rec, "SLURM-001", "")
	if v.Status != record.Skip || !strings.Contains(v.Incomplete, "squeue's reason: Resources") || !strings.Contains(rec.Aborted, "no Slurm allocation") {
		t.Errorf("SLURM-001: %s %q incomplete %q; aborted %q", v.Status, v.Detail, v.Incomplete, rec.Aborted)
	}
}

var jobNameIn = regexp.MustCompile(`'?--job-name=([^' ]+)`)

// TestAQuietSallocLeavesNoJob: salloc granted a job and never said its
// ID (a site's quiet wrapper): the window gets no allocation and gives
// back whatever holds nodes under its name.
func TestAQuietSallocLeavesNoJob(t *testing.T) {
	f := fake.NewFleet()
	login := slurmLoginSays(f, false, "")
	rec := runFake(t, slurmInventory(t, ""), f)
	if rec.Slurm == nil || !strings.Contains(rec.Slurm.NotGranted, "without naming its job") || login.Ran(`^scancel --name='?gpuaccept-`+rec.ID+`'? --user=`) != 1 {
		t.Errorf("allocation %+v; login ran %q", rec.Slurm, login.Commands())
	}
}

// slurmInventory is an inventory with a login node and slurm.allocate of
// two nodes, no nodes of its own.
func slurmInventory(t *testing.T, more string) *inventory.Inventory {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slurm.yaml")
	body := "provider: fake\nregion: test\nsimulated: true\nssh:\n  user: root\n  config: none\n" +
		"quote:\n  gpus_per_node: 8\nslurm:\n  login: {address: 192.0.2.1}\n  partition: gpu\n  allocate: {nodes: 2}\n" + more
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	return inv
}

// The job's time limit is the window's own bound: a phase given an hour
// more asks Slurm for an hour more, and slurm.allocate.time, when stated,
// is asked as written. A limit short of the window would have Slurm end
// the job, and every node with it, before the window's last phase.
func TestSallocTimeIsTheWindowsBound(t *testing.T) {
	minutes := func(more string) int {
		t.Helper()
		line := orchestrator.SlurmCommand(slurmInventory(t, more), All())
		m := regexp.MustCompile(` --time=([0-9]+)(?: |$)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no --time in the salloc line %q", line)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	short := minutes("phases:\n  diag:\n    timeout: 15m\n")
	long := minutes("phases:\n  diag:\n    timeout: 75m\n")
	if long-short != 60 {
		t.Errorf("the diagnostic's deadline went up by 60 minutes, the job's time limit by %d (%d to %d)", long-short, short, long)
	}
	if short < 15+15 {
		t.Errorf("--time=%d is short of the diagnostic's deadline and the margin alone", short)
	}
	stated := slurmInventory(t, "")
	stated.Slurm.Allocate.Time = inventory.SlurmTime(90 * time.Minute)
	if line := orchestrator.SlurmCommand(stated, All()); !strings.Contains(line, " --time=90") {
		t.Errorf("slurm.allocate.time 90m was not asked as written: %q", line)
	}
}
