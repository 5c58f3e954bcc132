package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/reports"
)

// smallBundle writes a bundle of a not-accepted run made by tool.
func smallBundle(t *testing.T, tool string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	run := &record.Run{Schema: record.Schema, ID: "20261204T080000Z-p", Tool: tool, Provider: "p", Started: t0,
		Ended: t0.Add(time.Hour), Nodes: []record.Node{{Name: "gpu-01", Address: "192.0.2.1"}},
		Verdicts: []record.Verdict{{ID: "GPU-001", Node: "gpu-01", Status: record.Fail, Measured: "7 GPUs"}}}
	if err := reports.WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A report edited from NOT ACCEPTED to ACCEPTED is named by verify, for a
// run this build made and for one another build made (where verify used
// to hold the report only to naming the digest).
func TestVerifyNamesAnEditedReport(t *testing.T) {
	work := t.TempDir()
	for _, tool := range []string{"gpuaccept v0.0.1 (another build)", "gpuaccept"} {
		for _, name := range reports.Reports {
			dir := smallBundle(t, tool)
			if v := gpuaccept(t, work, "verify", dir); v.code != 0 || !strings.Contains(v.stdout, "intact") {
				t.Fatalf("fresh bundle of %q: exit %d\n%s%s", tool, v.code, v.stdout, v.stderr)
			}
			path := filepath.Join(dir, name)
			b, _ := os.ReadFile(path)
			edited := bytes.Replace(b, []byte("NOT ACCEPTED"), []byte("ACCEPTED"), 1)
			if bytes.Equal(b, edited) {
				t.Fatalf("%s says no NOT ACCEPTED", name)
			}
			os.WriteFile(path, edited, 0o644)
			v := gpuaccept(t, work, "verify", dir)
			if v.code != 1 || !strings.Contains(v.stdout, "changed: "+name) {
				t.Errorf("%s edited in a bundle of %q: exit %d\n%s%s", name, tool, v.code, v.stdout, v.stderr)
			}
		}
	}
}
