package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCheckPlanHonoursPhasesDeadline: phases.deadline is the bound of every
// phase the inventory gives no timeout of its own; a phase's own timeout
// wins, and teardown keeps its budget. It used to change nothing: every
// phase's built-in bound won over it.
func TestCheckPlanHonoursPhasesDeadline(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	src, err := os.ReadFile(filepath.Join("../..", cleanOffer))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "\n  deadline: 30m", "\n  deadline: 7m", 1)
	if text == string(src) {
		t.Fatalf("%s has no phases.deadline to change", cleanOffer)
	}
	dir := t.TempDir()
	inv := filepath.Join(dir, "inv.yaml")
	if err := os.WriteFile(inv, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	res := gpuaccept(t, "../..", "check", inv)
	if res.code != 0 {
		t.Fatalf("check: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	want := map[string]string{
		"connect":   "1m30s", // its bound comes from ssh.connect_timeout and handshake_timeout
		"tools":     "7m0s",
		"telemetry": "7m0s", // it starts the sampler and returns; phases.deadline bounds the start
		"preflight": "2m0s", // phases.preflight.timeout
		"security":  "7m0s",
		"diag":      "15m0s",  // phases.diag.timeout
		"staging":   "3h6m0s", // phases.staging.window, thrice: a node below the quote stages again (acceptance.retest) and confirms a pass
		"windowkey": "7m0s", "image": "7m0s", "intranode": "7m0s", "allreduce": "7m0s", "bisect": "7m0s",
		"checkpoint-write": "7m0s", "checkpoint-restore": "7m0s", "training": "7m0s", "inference": "7m0s", "failure": "7m0s",
		"teardown": "45s", "deletion": "2m0s", // cleanup keeps its own budget
		"burnin":     "7m0s", // off here; on, phases.burnin.duration sets its own bound
		"idle-check": "7m0s", // off here; on, the quoted idle shutdown and its grace set its bound
	}
	line := regexp.MustCompile(`(?m)^  \d+\. (\S+) +\S+ +deadline (\S+)`)
	got := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(res.stdout, -1) {
		got[m[1]] = m[2]
	}
	for name, d := range want {
		if got[name] != d {
			t.Errorf("phase %s: deadline %q, want %s", name, got[name], d)
		}
	}
	if len(got) != len(want) {
		t.Errorf("plan has %d phases, want %d:\n%s", len(got), len(want), res.stdout)
	}
}
