package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// gpuPartition is the fake login node's partition gpu, as the lab's
// Slurm 22.05 prints one (`scontrol -a show partition -o`), its name and
// nodes changed.
const gpuPartition = "PartitionName=gpu AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A " +
	"DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED " +
	"MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=h[1-4] PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO " +
	"OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=16 TotalNodes=4 SelectTypeParameters=NONE " +
	"JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=16,mem=2M,node=4,billing=16\n"

// The partition's limits are read before salloc and SLURM-004 holds the
// window's ask to them: an open partition passes; MaxTime shorter than
// the window's bound and MaxNodes under its node count are named with
// their values, and since the (fake) Slurm granted the job anyway (a QOS
// may lift a limit), they are said in a PASS, failing nothing; a
// partition scontrol does not show is NOT MEASURED in scontrol's words,
// the window INCOMPLETE for it.
func TestPartitionLimitsJudged(t *testing.T) {
	for _, c := range []struct {
		name       string
		says       fake.Reply
		status     record.Status
		measured   string
		detail     string
		incomplete string
	}{
		{"open", fake.Reply{Stdout: gpuPartition}, record.Pass,
			"partition gpu: UP, MaxTime UNLIMITED, MaxNodes UNLIMITED, TotalNodes 4", "lets the window run as asked: 2 node(s) for ", ""},
		{"short", fake.Reply{Stdout: "Welcome\n" + strings.NewReplacer("MaxTime=UNLIMITED", "MaxTime=00:10:00", "MaxNodes=UNLIMITED", "MaxNodes=1").Replace(gpuPartition)},
			record.Pass, "partition gpu: UP, MaxTime 00:10:00, MaxNodes 1, TotalNodes 4",
			"Slurm granted the job past the limits read (a QOS or the site lifts them): MaxTime 00:10:00 (10m) is shorter than the ", ""},
		{"not shown", fake.Reply{Stdout: "Partition gpu not found\n", Exit: 1}, record.Skip, "not measured",
			"slurm-login: scontrol show partition gpu: Partition gpu not found: ",
			"NOT MEASURED: the limits of Slurm partition gpu: slurm-login: scontrol show partition gpu: Partition gpu not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fakeFleet(fakeInventory(t, 2, ""))
			login := slurmLogin(f, false)
			login.Reply(`^scontrol -a show partition -o gpu 2>&1$`, c.says)
			rec := runFake(t, slurmInventory(t, ""), f)
			calls := login.Commands()
			if len(calls) < 2 || calls[0] != "scontrol -a show partition -o gpu 2>&1" || !strings.HasPrefix(calls[1], "salloc ") {
				t.Errorf("the partition not read before salloc: %q", calls)
			}
			v := verdictOf(t, rec, "SLURM-004", "")
			if v.Status != c.status || v.Measured != c.measured || !strings.HasPrefix(v.Detail, c.detail) || !strings.HasPrefix(v.Incomplete, c.incomplete) {
				t.Errorf("SLURM-004: %s %q %q incomplete %q", v.Status, v.Measured, v.Detail, v.Incomplete)
			}
			p := rec.Slurm.Partition
			if p == nil || p.AskedNodes != 2 || p.AskedMinutes == 0 {
				t.Fatalf("partition %+v", p)
			}
			if c.name == "short" {
				want := "MaxNodes 1: at most 1 node(s) a job, not the 2 the window asks for"
				if len(p.Cuts) != 2 || p.Cuts[1] != want || !strings.Contains(v.Detail, want) {
					t.Errorf("cuts %q, detail %q", p.Cuts, v.Detail)
				}
				if res := rec.Result(); strings.Contains(strings.Join(res.Failed, " "), "SLURM-004") {
					t.Errorf("result %+v", res)
				}
			}
			if c.incomplete != "" && !strings.Contains(strings.Join(rec.Result().Incomplete, "\n"), "Partition gpu not found") {
				t.Errorf("incomplete: %q", rec.Result().Incomplete)
			}
		})
	}
}
