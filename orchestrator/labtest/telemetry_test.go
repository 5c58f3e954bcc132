package labtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
)

// TestTelemetryNamesThePlantedFaults: the sampler runs on every host from
// the tools phase to teardown while an all-reduce loads the GPUs (the MPI
// stand-in marks them busy); h2's kernel log gets an Xid (a genuine line
// of code 94) on GPU 2, h3's GPU 1 slows for heat for the whole window.
// HEALTH-012 names h2, HEALTH-011 names h3's GPU 1, h1 passes both; each
// node's series is in the bundle; gpuaccept status, reading the run
// directory alone, shows both findings; nothing of the sampler outlives
// teardown.
func TestTelemetryNamesThePlantedFaults(t *testing.T) {
	l := needLab(t)
	hosts := []string{"h1", "h2", "h3"}
	prepare(t, l, map[string]nodeSetup{
		"h2": {profile: "h100", telemetry: "xid:94@2:gpu=2"},
		"h3": {profile: "h100", telemetry: "throttle:hw_thermal_slowdown@0-30m:gpu=1"},
	})
	standinBenchmarks(t, l, hosts)
	// Slow links, so that the all-reduce keeps the GPUs busy for seconds
	// of 1-second samples.
	capHosts(t, l, map[string]string{"h1": "100mbit", "h2": "100mbit", "h3": "100mbit"})
	inv := writeInventory(t, l, hosts, "", `  allreduce:
    enabled: true
    intra_node: false
    min_bytes: 2MiB
    max_bytes: 2MiB
    iters: 20
    warmup: 1
    repeats: 1
    ranks_per_node: 1
    timeout: 2m
    bisection:
      enabled: false
`+mpiArgs+`telemetry:
  interval: 1s
`)
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	if res.code != 1 {
		t.Errorf("exit %d, want 1 (h2 and h3 fail)", res.code)
	}
	for _, h := range hosts {
		for _, id := range []string{"HEALTH-011", "HEALTH-012", "HEALTH-013", "HEALTH-016"} {
			v := verdict(r, id, h)
			t.Logf("%s %s %s %s", id, h, v.Status, v.Detail)
		}
	}
	want := func(id, node string, status record.Status, parts ...string) {
		t.Helper()
		v := verdict(r, id, node)
		if v.Status != status {
			t.Errorf("%s %s: %s, want %s: %s", id, node, v.Status, status, v.Detail)
		}
		for _, p := range parts {
			if !strings.Contains(v.Detail, p) {
				t.Errorf("%s %s: %q lacks %q", id, node, v.Detail, p)
			}
		}
	}
	want("HEALTH-012", "h2", record.Fail, "94", "GPU 2")
	want("HEALTH-012", "h1", record.Pass)
	want("HEALTH-012", "h3", record.Pass)
	want("HEALTH-011", "h3", record.Fail, "GPU 1", "HW Thermal Slowdown")
	want("HEALTH-011", "h1", record.Pass)
	want("HEALTH-013", "h1", record.Pass)
	// The all-reduce kept the GPUs busy: the stall check judged samples.
	want("HEALTH-016", "h1", record.Pass, "busy load samples")

	for _, h := range hosts {
		s, err := telemetry.ReadFile(filepath.Join(dir, "raw", h, telemetry.FileName))
		if err != nil {
			t.Errorf("%s: %v", h, err)
			continue
		}
		if len(s.GPUs) < 8*5 || s.Dropped != 0 || s.Bad != 0 {
			t.Errorf("%s: %d GPU samples, %d dropped, %d bad", h, len(s.GPUs), s.Dropped, s.Bad)
		}
	}
	st := gpuaccept(t, "status", dir)
	t.Logf("status:\n%s", st.stdout)
	for _, w := range []string{"ended (completed)", "HEALTH-011 FAIL h3", "HEALTH-012 FAIL h2", "last samples:"} {
		if !strings.Contains(st.stdout, w) {
			t.Errorf("status lacks %q", w)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "raw", "h1", telemetry.FileName)); err != nil {
		t.Error(err)
	}
	nothingLeft(t, l)
}
