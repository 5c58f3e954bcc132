package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/standins"
)

// TestDemoNodeWithoutDcgmiIsNotMeasured: the field report's node, over
// real SSH (the demo's in-process servers, their shells, the stand-ins):
// gpu-02 has no dcgmi (profile h100-no-dcgm) and the inventory no DCGM
// image. DIAG-001 is SKIP with the reason, the window INCOMPLETE with it,
// gpu-02 is not quarantined and the phases after diag still run on it.
func TestDemoNodeWithoutDcgmiIsNotMeasured(t *testing.T) {
	inv, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	demoResize(inv, 2)
	work := t.TempDir()
	servers, err := demoNodes(work, binary, inv, demoFabric(inv.Nodes, hw, 0), "")
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := standins.Install(filepath.Join(work, "gpu-02", "bin"), "h100-no-dcgm", []string{binary, "standin"}); err != nil {
		t.Fatal(err)
	}
	sel := &orchestrator.Selection{Only: []string{"preflight", "diag", "staging"}}
	r, _, err := orchestrator.Start(t.Context(), inv, phases.All(), orchestrator.Options{RunsDir: t.TempDir(), Tool: "test", Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	const why = "dcgmi not installed and phases.diag.image not set: DCGM diagnostic not measured"
	for _, v := range r.Verdicts {
		switch {
		case v.ID == "DIAG-001" && v.Node == "gpu-01" && v.Status != record.Pass && v.Status != record.Warn:
			t.Errorf("gpu-01 has dcgmi: %+v", v)
		case v.ID == "DIAG-001" && v.Node == "gpu-02" && (v.Status != record.Skip || v.Incomplete != why):
			t.Errorf("gpu-02 has no dcgmi: %+v", v)
		}
	}
	if r.Nodes[1].Quarantined {
		t.Errorf("gpu-02 quarantined for a tool it lacks: %s", r.Nodes[1].Reason)
	}
	staged := false
	for _, p := range r.Phases {
		staged = staged || p.Phase == "staging" && p.Node == "gpu-02" && p.Outcome == record.OK
	}
	if !staged {
		t.Error("staging did not run on gpu-02 after its diag was not measured")
	}
	res := r.Result()
	if res.Outcome != record.OutcomeIncomplete || !slices.Contains(res.Incomplete, "gpu-02: "+why) {
		t.Errorf("window %s: %s", res.Outcome, strings.Join(res.Incomplete, "\n"))
	}
}
