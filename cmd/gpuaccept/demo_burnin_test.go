package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
)

// The demo's burn-in, that phase alone: ten seconds of iterations,
// gpu-03's GPU 3 at 0.8 × the others' is named by BURN-001 against the
// fleet's median; every other node passes. gpu-02's all-reduce, sagging to
// 0.7 × from the third iteration, is named by BURN-002 with both figures;
// gpu-04's dcgmi (its genuine failing diag table) by BURN-003. The plan
// records the duration, and status shows each node's time of it.
func TestDemoBurninNamesTheSlowGPU(t *testing.T) {
	began := time.Now()
	work := t.TempDir()
	res := gpuaccept(t, work, "demo", "--burnin", "--only", "burnin", "--runs-dir", "runs", "-o", "json")
	took := time.Since(began)
	t.Logf("demo --burnin --only burnin: %v", took.Round(100*time.Millisecond))
	if res.code != 1 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var rec struct {
		Verdicts []record.Verdict      `json:"verdicts"`
		Plan     []record.PlannedPhase `json:"plan"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil {
		t.Fatalf("%v\n%.500s", err, res.stdout)
	}
	seen := 0
	for _, v := range rec.Verdicts {
		switch {
		case v.ID == "BURN-002" && v.Node == "gpu-02":
			if v.Status != record.Fail || !strings.Contains(v.Measured, "intra-node all-reduce") || !strings.Contains(v.Measured, " GB/s busbw") {
				t.Errorf("gpu-02: BURN-002 %s %s | %s", v.Status, v.Measured, v.Detail)
			}
		case v.ID == "BURN-002" && v.Status == record.Fail:
			t.Errorf("%s: BURN-002 %s %s | %s", v.Node, v.Status, v.Measured, v.Detail)
		case v.ID == "BURN-003" && (v.Node == "gpu-04") != (v.Status == record.Fail):
			t.Errorf("%s: BURN-003 %s %s | %s", v.Node, v.Status, v.Measured, v.Detail)
		}
		if v.ID != "BURN-001" {
			continue
		}
		seen++
		switch {
		case v.Node == "gpu-03" && (v.Status != record.Fail || !strings.Contains(v.Detail, "GPU 3 534.2 (0.80×)")):
			t.Errorf("gpu-03: BURN-001 %s %s | %s", v.Status, v.Measured, v.Detail)
		case v.Node != "gpu-03" && v.Status != record.Pass:
			t.Errorf("%s: BURN-001 %s %s | %s", v.Node, v.Status, v.Measured, v.Detail)
		}
	}
	if seen != 4 {
		t.Errorf("BURN-001 on %d nodes, want 4\n%s", seen, res.stderr)
	}
	if !strings.Contains(res.stderr, "demo: a 10s burn-in; GPU 3 of gpu-03 computes 20% slower") {
		t.Errorf("no demo line saying the slow GPU:\n%s", res.stderr)
	}
	for _, p := range rec.Plan {
		if p.Name == "burnin" && p.Duration != "10s" {
			t.Errorf("the plan's burn-in duration %q, want 10s", p.Duration)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(work, "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("runs: %v", runs)
	}
	st := gpuaccept(t, work, "status", runs[0])
	if st.code != 0 || !strings.Contains(st.stdout, "burn-in, 10s per node, done (") ||
		!regexp.MustCompile(`4 nodes gpu-\[01-04\]: burn-in \d+s(-\d+s)? of 10s, \d+ runs?\n`).MatchString(st.stdout) {
		t.Errorf("status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
}
