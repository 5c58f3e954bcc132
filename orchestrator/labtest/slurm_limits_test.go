package labtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

// limitPartition sets the lab partition's limits (scontrol update
// partitionname=lab ...) and puts them back as lab.sh configures them
// when the test ends, cancelled or not.
func limitPartition(t *testing.T, l *lab.Lab, set ...string) {
	t.Helper()
	if out, err := l.Exec(t.Context(), "h1", append([]string{"scontrol", "update", "partitionname=lab"}, set...)...); err != nil {
		t.Fatalf("scontrol update %v: %v %s", set, err, out)
	}
	t.Cleanup(func() {
		// (t.Context is cancelled before the cleanups run.)
		if out, err := l.Exec(context.Background(), "h1", "scontrol", "update", "partitionname=lab", "maxtime=INFINITE",
			"maxnodes=UNLIMITED"); err != nil {
			t.Errorf("the lab partition's limits not put back: %v %s", err, out)
		}
	})
}

// TestPartitionLimitsOnTheLab: the lab's Slurm 22.05 partition with a
// MaxTime shorter than the window's bound and a MaxNodes under its node
// count. Slurm's own answer does not say so: sbatch --test-only says the
// job would start (EnforcePartLimits=NO queues a job past a limit for
// ever). check --connect names both limits before the window (exit 3,
// and in its JSON); the window reads them before it asks, SLURM-004 names
// them as the window's ask past them (INCOMPLETE, not a provider's
// failure), the job Slurm leaves pending is not granted (squeue's reason
// in SLURM-001) and nothing is left queued. With MaxTime alone
// Slurm answers that it would grant the job; check --connect still names
// MaxTime and exits 3.
func TestPartitionLimitsOnTheLab(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	prepare(t, l, nil)
	if q := slurmQueue(t, l); q != "" {
		t.Fatalf("the lab's queue is not empty before the test: %s", q)
	}
	limitPartition(t, l, "maxtime=5", "maxnodes=1")
	inv := allocatingInventory(t, l, "  allocate: {nodes: 2}\n  allocate_timeout: 10s\n", "")

	c := gpuaccept(t, "check", "--connect", inv)
	t.Logf("check --connect:\n%s", c.stdout)
	for _, want := range []string{"the partition lab: UP, MaxTime 00:05:00, MaxNodes 1, TotalNodes ",
		"  cuts the window: MaxTime 00:05:00 (5m) is shorter than the ", "  cuts the window: MaxNodes 1: at most 1 node(s) a job, not the 2"} {
		if !strings.Contains(c.stdout, want) {
			t.Errorf("check --connect does not say %q", want)
		}
	}
	if c.code != 3 {
		t.Errorf("check --connect: exit %d, want 3", c.code)
	}
	for _, line := range strings.Split(c.stdout, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("a line of check --connect past 100 columns: %s", line)
		}
	}
	j := gpuaccept(t, "check", "--connect", "-o", "json", inv)
	var got struct {
		Allocation struct {
			Slurm     string                `json:"slurm"`
			Partition record.SlurmPartition `json:"partition"`
		} `json:"allocation"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &got); err != nil || len(got.Allocation.Partition.Cuts) != 2 || got.Allocation.Partition.AskedNodes != 2 {
		t.Errorf("check --connect -o json: %v %+v\n%s", err, got.Allocation, j.stdout)
	}

	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	r := readRun(t, runDir(t, runs))
	v := verdict(r, "SLURM-004", "")
	t.Logf("SLURM-004 %s %q %q; exit %d", v.Status, v.Measured, v.Detail, res.code)
	if v.Status != record.Skip || v.Incomplete == "" || !strings.Contains(v.Detail, "MaxTime 00:05:00 (5m) is shorter than the ") ||
		!strings.Contains(v.Detail, "MaxNodes 1: at most 1 node(s) a job, not the 2 the window asks for") {
		t.Errorf("SLURM-004: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if !strings.Contains(res.stderr, "slurm: partition lab would not let the window run as planned: MaxTime 00:05:00") {
		t.Errorf("the window did not say the partition would cut it before it asked")
	}
	a := verdict(r, "SLURM-001", "")
	t.Logf("SLURM-001 %s %q", a.Status, a.Detail)
	if a.Status != record.Skip || a.Incomplete == "" || res.code != 3 || strings.Contains(res.stdout, "NOT ACCEPTED") {
		t.Errorf("SLURM-001 %s %q; exit %d, want INCOMPLETE (3):\n%s", a.Status, a.Detail, res.code, res.stdout)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}

	// MaxTime alone: Slurm says it would grant the job, which would then
	// wait for ever; check --connect says why it would not run.
	limitPartition(t, l, "maxtime=5", "maxnodes=UNLIMITED")
	c = gpuaccept(t, "check", "--connect", inv)
	if c.code != 3 || !strings.Contains(c.stdout, "Slurm would grant it:") ||
		!strings.Contains(c.stdout, "  cuts the window: MaxTime 00:05:00 (5m) is shorter than the ") ||
		strings.Contains(c.stdout, "cuts the window: MaxNodes") {
		t.Errorf("check --connect, MaxTime alone: exit %d\n%s", c.code, c.stdout)
	}
}
