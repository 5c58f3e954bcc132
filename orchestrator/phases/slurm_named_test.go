package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// An inventory that names its nodes and has a Slurm login node (its
// collectives under srun) holds no job of the window's, yet Slurm
// schedules those nodes: SLURM-002 and SLURM-003 judge Slurm's view of
// each, found by its fabric name, inventory name or address (here h2 is
// known to Slurm as gpu-b by its address). A node Slurm lists by nothing
// of its is NOT MEASURED; Slurm is asked again at the window's end; no
// SLURM-001 or SLURM-004, which are about the window's own job.
func TestSlurmViewOfNamedNodes(t *testing.T) {
	inv := fakeInventory(t, 3, "quote:\n  gpus_per_node: 8\nslurm:\n  login: {address: 192.0.2.1}\n")
	f := fakeFleet(inv)
	login := f.Add(fake.NewHost("slurm-login"))
	all := "NodeName=h1 Arch=x86_64 Gres=gpu:h100:8 NodeAddr=192.0.2.11 NodeHostName=h1 State=IDLE Partitions=gpu\n" +
		"NodeName=gpu-b Arch=x86_64 Gres=gpu:h100:7 NodeAddr=192.0.2.12 NodeHostName=gpu-b State=IDLE+DRAIN Partitions=gpu Reason=xid 79 [ops@2026-12-06T08:00:00]\n" +
		"NodeName=other Gres=gpu:8 NodeAddr=192.0.2.99 State=IDLE\n"
	login.Reply(`^scontrol -a show node -o$`, fake.Reply{Stdout: all})
	login.Reply(`^scontrol show node -o h1,gpu-b$`, fake.Reply{Stdout: strings.Replace(all, "NodeName=h1 Arch=x86_64 Gres=gpu:h100:8 NodeAddr=192.0.2.11 NodeHostName=h1 State=IDLE",
		"NodeName=h1 Arch=x86_64 Gres=gpu:h100:8 NodeAddr=192.0.2.11 NodeHostName=h1 State=DOWN*", 1)})
	rec := runFake(t, inv, f)
	s := rec.Slurm
	if s == nil || !s.Named || s.JobID != "" || len(s.Nodes) != 2 || len(s.Unlisted) != 1 || s.Unlisted[0] != "h3" {
		t.Fatalf("Slurm's view: %+v", s)
	}
	if s.Nodes[1].Name != "h2" || s.Nodes[1].SlurmName != "gpu-b" || s.Nodes[0].SlurmName != "" {
		t.Errorf("nodes %+v", s.Nodes)
	}
	if v := verdictOf(t, rec, "SLURM-002", "h2"); v.Status != record.Fail || !strings.Contains(v.Detail, "DRAIN (xid 79 [ops@") ||
		!strings.Contains(v.Measured, "(Slurm's gpu-b)") {
		t.Errorf("SLURM-002 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-002", "h1"); v.Status != record.Fail || !strings.Contains(v.Detail, "during the window (in service at the window's start)") {
		t.Errorf("SLURM-002 h1, down by the window's end: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-003", "h2"); v.Status != record.Fail || !strings.Contains(v.Detail, "Slurm schedules 7; the quote says 8") {
		t.Errorf("SLURM-003 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	for _, id := range []string{"SLURM-002", "SLURM-003"} {
		if v := verdictOf(t, rec, id, "h3"); v.Status != record.Skip || !strings.Contains(v.Incomplete, "Slurm lists no node by its name") {
			t.Errorf("%s h3: %s %q incomplete %q", id, v.Status, v.Detail, v.Incomplete)
		}
	}
	for _, v := range rec.Verdicts {
		if v.ID == "SLURM-001" || v.ID == "SLURM-004" {
			t.Errorf("%s without a job of the window's: %+v", v.ID, v)
		}
	}
	if login.Ran(`^scontrol show node -o h1,gpu-b$`) != 1 {
		t.Errorf("the nodes not read again at the window's end: %q", login.Commands())
	}
}

// Slurm that cannot be asked leaves each named node's SLURM-002 and
// SLURM-003 NOT MEASURED, never PASS or FAIL.
func TestSlurmViewNotRead(t *testing.T) {
	inv := fakeInventory(t, 2, "slurm:\n  login: {address: 192.0.2.1}\n")
	f := fakeFleet(inv)
	login := f.Add(fake.NewHost("slurm-login"))
	login.Reply(`^scontrol -a show node -o$`, fake.Reply{Stderr: "slurm_load_node error: Unable to contact slurm controller (connect failure)\n", Exit: 1})
	rec := runFake(t, inv, f)
	if rec.Slurm == nil || !strings.Contains(rec.Slurm.ReadError, "Unable to contact slurm controller") {
		t.Fatalf("Slurm's view: %+v", rec.Slurm)
	}
	for _, n := range []string{"h1", "h2"} {
		for _, id := range []string{"SLURM-002", "SLURM-003"} {
			if v := verdictOf(t, rec, id, n); v.Status != record.Skip || v.Incomplete == "" {
				t.Errorf("%s %s: %s %q", id, n, v.Status, v.Detail)
			}
		}
	}
}
