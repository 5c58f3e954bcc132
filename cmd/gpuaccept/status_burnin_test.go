package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// burninJournal writes a window's journal, entry by entry, as the
// coordinator does.
type burninJournal struct {
	t     *testing.T
	dir   string
	lines []string
}

func (j *burninJournal) add(e map[string]any) {
	j.t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		j.t.Fatal(err)
	}
	j.lines = append(j.lines, string(b))
	if err := os.WriteFile(filepath.Join(j.dir, orchestrator.JournalFile), []byte(strings.Join(j.lines, "\n")+"\n"), 0o600); err != nil {
		j.t.Fatal(err)
	}
}

// runNote is node's note of its i-th finished run, elapsed into the
// burn-in, as phases' burninNote writes it.
func (j *burninJournal) runNote(at time.Time, node string, i int, elapsed time.Duration) {
	j.t.Helper()
	v, err := json.Marshal(map[string]any{"elapsed_s": elapsed.Seconds(),
		"run": workload.BurninRun{At: at, GPUs: []workload.GemmGPU{{GPU: 0, TFLOPS: 668.7, Iters: 100, Secs: 60, On: "cuda"}}}})
	if err != nil {
		j.t.Fatal(err)
	}
	j.add(map[string]any{"type": "note", "at": at, "node": node, "key": fmt.Sprintf("burnin.run.%d", i), "value": string(v)})
}

func burninHeader(t0 time.Time, nodes []string, duration string) *record.Run {
	r := &record.Run{Schema: record.Schema, ID: "20261206T010000Z-burn", Started: t0, Plan: []record.PlannedPhase{
		{Name: "connect", Enabled: true, Deadline: "2m0s", Gating: true},
		{Name: "burnin", Enabled: true, Deadline: "4h4m0s", Duration: duration},
		{Name: "teardown", Enabled: true, Deadline: "5m0s"},
	}}
	for i, n := range nodes {
		r.Nodes = append(r.Nodes, record.Node{Index: i, Name: n, Address: "10.0.0.1:22"})
	}
	return r
}

// A burn-in under way, resumed after its coordinator was lost: each
// node's load time counts its runs from before the resume; nodes alike
// share a line, a node that fell behind or has no run yet has its own,
// a quarantined node none. Once the phase is done, status says so.
func TestStatusBurninResumed(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	nodes := []string{"h1", "h2", "h3", "h4", "h5", "h6"}
	j := &burninJournal{t: t, dir: t.TempDir()}
	j.add(map[string]any{"type": "start", "at": t0, "run": burninHeader(t0, nodes, "4h0m0s")})
	j.add(map[string]any{"type": "quarantine", "at": t0.Add(time.Minute), "phase": "connect", "node": "h6", "reason": "dial: refused"})
	j.add(map[string]any{"type": "done", "at": t0.Add(time.Minute), "phase": "connect"})
	run := 6 * time.Minute
	at := func(i int) time.Time { return t0.Add(time.Minute + time.Duration(i+1)*run) }
	// The first try: ten runs on h1, h2, h4 and h5, five on h3 (slower);
	// then the coordinator is lost.
	for i := range 10 {
		for _, n := range []string{"h1", "h2", "h3", "h4"} {
			if n == "h3" && i >= 5 {
				continue
			}
			j.runNote(at(i), n, i, time.Duration(i+1)*run)
		}
	}
	resumed := t0.Add(2 * time.Hour)
	j.add(map[string]any{"type": "resume", "at": resumed})
	// The resumed try: h1 and h2 finished two more runs; h4 none yet.
	for i := 10; i < 12; i++ {
		for _, n := range []string{"h1", "h2"} {
			j.runNote(resumed.Add(time.Duration(i-9)*run), n, i, time.Duration(i+1)*run)
		}
	}
	now := resumed.Add(13 * time.Minute)
	st, err := orchestrator.ReadStatus(j.dir, now)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printStatus(&b, j.dir, st, now)
	out := b.String()
	t.Logf("\n%s", out)
	want := []string{
		"burn-in, 4h per node, under way (the load time of each node's finished runs):",
		"  2 nodes h[1-2]: burn-in 1h12m of 4h, 2h48m left, 12 runs",
		"  h5: burn-in: no run finished yet",
		"  h3: burn-in 30m of 4h, 3h30m left, 5 runs",
		"  h4: burn-in 1h of 4h, 3h left, 10 runs",
	}
	if !strings.Contains(out, strings.Join(want, "\n")+"\n") {
		t.Errorf("lacks, in this order:\n%s", strings.Join(want, "\n"))
	}
	if strings.Contains(out, "h6: burn-in") {
		t.Error("a quarantined node is listed in the burn-in")
	}
	fits(t, out)

	// The burn-in ends: the phase is done, the window too.
	j.add(map[string]any{"type": "done", "at": now, "phase": "burnin"})
	j.add(map[string]any{"type": "end", "at": now.Add(time.Minute), "reason": "completed"})
	st, err = orchestrator.ReadStatus(j.dir, now.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	printStatus(&b, j.dir, st, now.Add(2*time.Minute))
	if out := b.String(); !strings.Contains(out, "burn-in, 4h per node, done (") || !strings.Contains(out, "2 nodes h[1-2]: burn-in 1h12m of 4h, 12 runs\n") {
		t.Errorf("a finished window:\n%s", out)
	}
}

// Before the burn-in, and in a window without one, status says nothing
// of it.
func TestStatusBurninNotReached(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	j := &burninJournal{t: t, dir: t.TempDir()}
	j.add(map[string]any{"type": "start", "at": t0, "run": burninHeader(t0, []string{"h1"}, "4h0m0s")})
	st, err := orchestrator.ReadStatus(j.dir, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printStatus(&b, j.dir, st, t0.Add(time.Minute))
	if strings.Contains(b.String(), "burn-in") {
		t.Errorf("the burn-in before it began:\n%s", b.String())
	}
}

// At 1,000 nodes the burn-in is the fleet's line and the few nodes that
// differ, within 100 columns; a plan without the duration (a run made
// before the plan kept it) says the time done, not what is left.
func TestStatusBurninAtAThousandNodes(t *testing.T) {
	st := &orchestrator.Status{Current: "burnin", Notes: map[string]map[string]string{},
		Plan: map[string]record.PlannedPhase{"burnin": {Name: "burnin", Enabled: true, Duration: "4h0m0s"}},
		Run:  &record.Run{}, Quarantined: map[string]string{}}
	note := func(elapsed time.Duration) string {
		v, _ := json.Marshal(map[string]any{"elapsed_s": elapsed.Seconds(),
			"run": workload.BurninRun{GPUs: []workload.GemmGPU{{GPU: 0, TFLOPS: 668.7}}}})
		return string(v)
	}
	var names []string
	for i := 1; i <= 1000; i++ {
		n := fmt.Sprintf("gpu-%04d", i)
		names = append(names, n)
		runs := 37
		switch {
		case i == 17 || i == 18:
			runs = 30
		case i == 500 || i == 999:
			continue // no run yet
		}
		st.Notes[n] = map[string]string{}
		for r := range runs {
			// Each run 100 s and a little, as lockstep runs finish.
			st.Notes[n][fmt.Sprintf("burnin.run.%d", r)] = note(time.Duration(r+1)*100*time.Second + time.Duration(i%3)*time.Second)
		}
		if i == 600 {
			st.Notes[n]["burnin.failed"] = "gemm.py: GPU 3: CUDA error: an illegal memory access was encountered"
		}
	}
	var b bytes.Buffer
	printBurnin(&b, st, names)
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"  995 nodes gpu-[0001-0016,0019-0499,0501-0599,…]: burn-in 1h02m of 4h, 2h58m left, 37 runs\n",
		"  2 nodes gpu-[0500,0999]: burn-in: no run finished yet\n",
		"  2 nodes gpu-[0017-0018]: burn-in 50m of 4h, 3h10m left, 30 runs\n",
		"  gpu-0600: burn-in 1h02m of 4h, 2h58m left, 37 runs, failed: gemm.py: GPU 3: CUDA error: an illega…\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q", want)
		}
	}
	if n := strings.Count(out, "\n"); n > 6 {
		t.Errorf("%d lines for 1,000 nodes", n)
	}
	fits(t, out)

	st.Plan["burnin"] = record.PlannedPhase{Name: "burnin", Enabled: true}
	b.Reset()
	printBurnin(&b, st, names)
	if out := b.String(); !strings.Contains(out, "burn-in, under way (") || !strings.Contains(out, ": burn-in 1h02m, 37 runs\n") {
		t.Errorf("without the duration:\n%s", out)
	}
}
