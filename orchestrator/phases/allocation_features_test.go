package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// slurm.allocate.constraint reaches salloc as --constraint, and SLURM-005
// names the granted node whose ActiveFeatures (scontrol's, as Slurm
// 22.05 prints them) lack a feature asked for.
func TestConstraintJudgedOnTheGrantedNodes(t *testing.T) {
	f := fakeFleet(fakeInventory(t, 2, ""))
	login := slurmLogin(f, false)
	login.Reply(`^scontrol show node -o 'h\[1-2\]'$`, fake.Reply{Stdout: "" +
		"NodeName=h1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.00 AvailableFeatures=h100,ib ActiveFeatures=h100,ib " +
		"Gres=gpu:h100:8 NodeAddr=192.0.2.11 NodeHostName=h1 State=ALLOCATED Partitions=gpu\n" +
		"NodeName=h2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.00 AvailableFeatures=h100 ActiveFeatures=h100 " +
		"Gres=gpu:h100:8 NodeAddr=192.0.2.12 NodeHostName=h2 State=ALLOCATED Partitions=gpu\n"})
	inv := slurmInventory(t, "")
	inv.Slurm.Allocate.Constraint = "h100&ib"
	rec := runFake(t, inv, f)
	if !strings.Contains(rec.Slurm.Command, "--constraint=h100&ib") {
		t.Errorf("salloc: %s", rec.Slurm.Command)
	}
	if v := verdictOf(t, rec, "SLURM-005", "h1"); v.Status != record.Pass || v.Measured != "h100,ib" {
		t.Errorf("SLURM-005 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdictOf(t, rec, "SLURM-005", "h2"); v.Status != record.Fail || v.Detail != "lacks ib (slurm.allocate.constraint h100&ib)" {
		t.Errorf("SLURM-005 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
}
