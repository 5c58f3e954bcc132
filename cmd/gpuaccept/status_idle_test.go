package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// The idle guard's signals and releases as status reads them from the
// journal: a quarantined node released, 998 nodes signalled alike under
// the all-reduce (one line, a host range), the whole within 100 columns.
func TestStatusShowsTheIdleGuard(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	var nodes []string
	for i := 1; i <= 1000; i++ {
		nodes = append(nodes, fmt.Sprintf("gpu-%04d", i))
	}
	j := &burninJournal{t: t, dir: t.TempDir()}
	j.add(map[string]any{"type": "start", "at": t0, "run": burninHeader(t0, nodes, "4h0m0s")})
	j.add(map[string]any{"type": "quarantine", "at": t0.Add(time.Minute), "phase": "connect", "node": "gpu-0007", "reason": "diag failed"})
	idle := func(node, phase string, quarantined bool, at time.Duration, notify string) {
		s := record.IdleStretch{Node: node, Since: t0.Add(at - 10*time.Minute), Until: t0.Add(at), Signalled: t0.Add(at),
			Phase: phase, Quarantined: quarantined, Notify: notify}
		b, _ := json.Marshal(s)
		j.add(map[string]any{"type": "idle", "at": t0.Add(at), "node": node, "phase": phase, "value": string(b)})
	}
	idle("gpu-0007", "burnin", true, 11*time.Minute, "exit 0")
	j.add(map[string]any{"type": "release", "at": t0.Add(12 * time.Minute), "node": "gpu-0007", "reason": "idle 10m while quarantined"})
	for _, n := range nodes[10:] {
		idle(n, "allreduce", false, 40*time.Minute, "exit 3")
	}
	// A forged entry naming another node than its stretch is not shown.
	j.add(map[string]any{"type": "idle", "at": t0.Add(time.Hour), "node": "gpu-0001", "value": `{"node":"gpu-0002"}`})
	st, err := orchestrator.ReadStatus(j.dir, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printIdle(&out, st, t0.Add(time.Hour))
	got := out.String()
	t.Logf("\n%s", got)
	for _, want := range []string{
		"idle guard: 991 node(s) signalled, 1 released",
		"990 nodes gpu-[0011-1000]: idle +30m0s, first signalled +40m0s (in allreduce, notify exit 3)",
		"gpu-0007: idle +1m0s, signalled +11m0s (quarantined, notify exit 0, released +12m0s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if len(l) > 100 {
			t.Errorf("%d columns: %s", len(l), l)
		}
	}
	// No guard, no lines.
	out.Reset()
	printIdle(&out, &orchestrator.Status{Run: st.Run}, t0)
	if out.Len() != 0 {
		t.Errorf("without signals: %q", out.String())
	}
}
