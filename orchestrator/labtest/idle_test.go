package labtest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
)

// TestIdleNodeReleasedWhileTheRestGoOn: h2 fails its diag and is
// quarantined; while h1 and h3 run a one-minute burn-in, h2's GPUs sit
// idle (the stand-in's idle rows). After idle.after (40 s, well past the
// gaps between gemm.py runs on the loaded lab) the guard signals it,
// runs idle.notify with the node in its environment, and, with action
// release, stops its sampler and tears it down at once: its teardown ends
// before the burn-in does (the lab's hosts share one process table: only
// h2's processes go), and the ledger bills it to its release. h1 and
// h3, busy under the burn-in and idle only in phases meant to be idle,
// are never signalled. `gpuaccept status`, run while the burn-in goes on,
// shows the phase, the release and the burn-in's time. Nothing is left
// running anywhere.
func TestIdleNodeReleasedWhileTheRestGoOn(t *testing.T) {
	l := needLab(t)
	if out, err := l.Exec(t.Context(), "h1", "/usr/bin/python3", "-c", "import torch"); err != nil {
		t.Skipf("the lab's python3 has no torch (apt-get install python3-torch): %v %s", err, out)
	}
	hosts := []string{"h1", "h2", "h3"}
	prepare(t, l, map[string]nodeSetup{"h2": {profile: "h100-diag-fail"}})
	notified := filepath.Join(t.TempDir(), "notified")
	inv := writeInventory(t, l, hosts, `  price_per_gpu_hour: 3
  currency: EUR
  billing_granularity: 1s
`, `  burnin:
    enabled: true
    duration: 1m
    compute:
      seconds: 15
      size: 1024
      python: /usr/bin/python3
telemetry:
  interval: 1s
idle:
  after: 40s
  action: release
  notify: 'echo "$GPUACCEPT_IDLE_NODE $GPUACCEPT_IDLE_QUARANTINED $GPUACCEPT_IDLE_ACTION" >> `+notified+`'
`)
	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs, "--only", "connect,tools,telemetry,diag,burnin,teardown")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", errb.String())
		}
	})
	// status, from another process, while the window runs: the release
	// is journaled, the burn-in goes on.
	waitFor(t, 3*time.Minute, "h2's release in the journal", func() bool { return journalHolds(runs, `"type":"release"`) })
	dir := runDir(t, runs)
	st := gpuaccept(t, "status", dir)
	t.Logf("status while it runs:\n%s", st.stdout)
	for _, want := range []string{": burnin for ", "idle guard: 1 node(s) signalled, 1 released",
		"h2: idle +", ", signalled +", "(quarantined, notify exit 0, released +", "burn-in"} {
		if !strings.Contains(st.stdout, want) {
			t.Errorf("status while the burn-in runs lacks %q", want)
		}
	}
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	r := readRun(t, dir)
	if r.Idle == nil {
		t.Fatalf("no idle guard in run.json")
	}
	for _, st := range r.Idle.Stretches {
		t.Logf("stretch %+v", st)
		if st.Node != "h2" {
			t.Errorf("%s signalled idle: %+v", st.Node, st)
		}
	}
	got, _ := os.ReadFile(notified)
	if strings.TrimSpace(string(got)) != "h2 true release" {
		t.Errorf("idle.notify heard %q, want h2 true release", got)
	}
	var h2 record.Node
	for _, n := range r.Nodes {
		if n.Name == "h2" {
			h2 = n
		}
	}
	if !h2.Quarantined || h2.ReleasedAt.IsZero() {
		t.Fatalf("h2: %+v: want quarantined and released", h2)
	}
	// Released while the burn-in ran on the others.
	var burnEnd time.Time
	var h2Teardown *record.PhaseResult
	for i, p := range r.Phases {
		if p.Phase == "burnin" && p.Ended.After(burnEnd) {
			burnEnd = p.Ended
		}
		if p.Phase == "teardown" && p.Node == "h2" && h2Teardown == nil {
			// The first is its release; the window's end visits it again.
			h2Teardown = &r.Phases[i]
		}
	}
	if h2Teardown == nil || h2Teardown.Outcome != record.OK || !h2Teardown.Ended.Before(burnEnd) || h2.ReleasedAt.After(burnEnd) {
		t.Errorf("h2's teardown %+v, released %s: want it done before the burn-in ended at %s", h2Teardown, h2.ReleasedAt, burnEnd)
	}
	// Its sampler stopped at the release: no sample after it.
	s, err := telemetry.ReadFile(filepath.Join(dir, "raw", "h2", telemetry.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.GPUs); n == 0 || s.GPUs[n-1].At.After(h2.ReleasedAt) {
		t.Errorf("h2's last sample at %v, released at %s", s.GPUs[max(n-1, 0)].At, h2.ReleasedAt)
	}
	for _, h := range hosts {
		v := verdict(r, "IDLE-001", h)
		t.Logf("IDLE-001 %s %s %s", h, v.Status, v.Detail)
		want := record.Pass
		if h == "h2" {
			want = record.Warn
		}
		if v.Status != want {
			t.Errorf("IDLE-001 %s: %s, want %s", h, v.Status, want)
		}
	}
	if v := verdict(r, "IDLE-001", "h2"); !strings.Contains(v.Detail, "(quarantined)") || !strings.Contains(v.Detail, "released at +") ||
		!strings.Contains(v.Detail, "idle.notify exit 0") {
		t.Errorf("IDLE-001 h2 must say where, the notice and the release: %s", v.Detail)
	}
	// The ledger bills h2 to its release, the others to the window's end.
	if r.Ledger == nil {
		t.Fatal("no ledger")
	}
	billed := map[string]float64{}
	for _, n := range r.Ledger.Nodes {
		billed[n.Name] = n.BilledSecs
	}
	if billed["h2"] >= billed["h1"] || billed["h2"] <= 0 {
		t.Errorf("billed seconds %v: want h2's shorter than h1's", billed)
	}
	nothingLeft(t, l)
}

// journalHolds says whether the journal of the one window under runs, as
// it is now, holds text (a window still running: read from another
// process, as gpuaccept status reads it).
func journalHolds(runs, text string) bool {
	entries, _ := os.ReadDir(runs)
	if len(entries) != 1 {
		return false
	}
	f, err := orchestrator.OpenJournal(filepath.Join(runs, entries[0].Name()))
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return bytes.Contains(b, []byte(text))
}
