package labtest

import (
	"context"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// TestSlurmFeaturesOnTheLab: h1 and h2 given the features h100 and ib
// (scontrol update, cleared in t.Cleanup), h3 none; a window whose
// slurm.allocate.constraint asks for h100&ib is granted two nodes that
// have them (salloc's --constraint reached Slurm), and SLURM-005 passes
// each with the ActiveFeatures scontrol showed; the window's verdicts
// carry them for the buyer to read.
func TestSlurmFeaturesOnTheLab(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	prepare(t, l, nil)
	if out, err := l.Exec(t.Context(), "h1", "scontrol", "update", "nodename=h[1-2]", "availablefeatures=h100,ib", "activefeatures=h100,ib"); err != nil {
		t.Fatalf("scontrol update features: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := l.Exec(context.Background(), "h1", "scontrol", "update", "nodename=h[1-2]", "availablefeatures=", "activefeatures="); err != nil {
			t.Errorf("the lab nodes' features not cleared: %v %s", err, out)
		}
	})
	inv := allocatingInventory(t, l, "  allocate: {nodes: 2, constraint: \"h100&ib\"}\n", "")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,teardown")
	r := readRun(t, runDir(t, runs))
	if r.Slurm == nil || !strings.Contains(r.Slurm.Command, "--constraint=h100&ib") || len(r.Slurm.Nodes) != 2 {
		t.Fatalf("exit %d: allocation %+v", res.code, r.Slurm)
	}
	logVerdicts(t, r, "SLURM-005", r.Slurm.Nodes[0].Name, r.Slurm.Nodes[1].Name)
	for _, n := range r.Slurm.Nodes {
		if n.Name == "h3" || n.Features != "h100,ib" {
			t.Errorf("granted %s with features %q", n.Name, n.Features)
		}
		if v := verdict(r, "SLURM-005", n.Name); v.Status != record.Pass || v.Measured != "h100,ib" || v.Quoted != "h100&ib" {
			t.Errorf("SLURM-005 %s: %s %q %q", n.Name, v.Status, v.Measured, v.Detail)
		}
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
}
