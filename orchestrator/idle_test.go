package orchestrator

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// idleWindow is a window of nodes a, b, c with the guard on (1 minute
// under 5%), a journal, and one teardown phase that records whom it ran
// on.
func idleWindow(t *testing.T, g inventory.Idle) (*Window, *bytes.Buffer, func() []string) {
	t.Helper()
	dir := t.TempDir()
	inv := &inventory.Inventory{Idle: g}
	inv.Quote.PricePerGPUHr, inv.Quote.GPUsPerNode, inv.Quote.Currency = 3, 8, "EUR"
	for _, name := range []string{"a", "b", "c"} {
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: name, Address: name + ".example"})
	}
	var out bytes.Buffer
	w := &Window{Inv: inv, Dir: dir, Progress: NewProgress(&out, false)}
	w.rec = header(inv, "idle-test", time.Now().UTC().Add(-time.Hour).Truncate(time.Second), "test")
	for i, n := range inv.Nodes {
		w.Nodes = append(w.Nodes, &Node{Index: i, Name: n.Name, Config: inv.NodeConfig(n, nil)})
	}
	w.idle = newIdleGuard(w)
	j, err := createJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.close() })
	hdr := *w.rec
	if err := j.write(entry{Type: "start", Run: &hdr}); err != nil {
		t.Fatal(err)
	}
	w.j = j
	var mu sync.Mutex
	var torn []string
	td := &Phase{Name: "teardown", Teardown: true, Release: true, PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		torn = append(torn, n.Name)
		return nil, nil
	}, Deadline: func(*inventory.Inventory) time.Duration { return time.Minute }}
	w.teardowns = []*Phase{td}
	return w, &out, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), torn...)
	}
}

func pct(v float64) *float64 { return &v }

// sample feeds node n's two GPUs at t0+s seconds.
func sample(w *Window, name string, s int, util float64) {
	at := w.rec.Started.Add(time.Duration(s) * time.Second)
	for range 2 {
		w.IdleSample(w.node(name), at, pct(util))
	}
}

func TestIdleGuardSignalsTheNodeHeldForNothing(t *testing.T) {
	marks := filepath.Join(t.TempDir(), "notified")
	w, out, torn := idleWindow(t, inventory.Idle{After: time.Minute, UtilPct: 5, Action: inventory.IdleSignal,
		Notify: `echo "$GPUACCEPT_IDLE_NODE $GPUACCEPT_IDLE_MINUTES $GPUACCEPT_IDLE_QUARANTINED $GPUACCEPT_IDLE_ADDRESS" >> ` + marks})
	load := &Phase{Name: "burnin", Loads: true, PerNode: noop}
	staging := &Phase{Name: "staging", PerNode: noop}
	w.node("b").setQuarantined("diag failed", w.rec.Started)

	// Staging is meant to be idle: a, idle through it, is not signalled;
	// b, quarantined, is held for nothing whatever runs.
	w.idle.setPhase(staging)
	for s := 0; s <= 90; s += 5 {
		sample(w, "a", s, 0)
		sample(w, "b", s, 0)
	}
	// Under the burn-in, c works and a, its own part done, sits idle for
	// 70 s, then works.
	w.idle.setPhase(load)
	w.idle.partDone(w.node("a"))
	for s := 95; s <= 200; s += 5 {
		sample(w, "c", s, 100)
		u := 0.0
		if s > 165 {
			u = 100
		}
		sample(w, "a", s, u)
		sample(w, "b", s, 0)
	}
	g := w.idle.finish()
	if g == nil || len(g.Stretches) != 2 {
		t.Fatalf("stretches: %+v\n%s", g, out)
	}
	byNode := map[string]record.IdleStretch{}
	for _, st := range g.Stretches {
		byNode[st.Node] = st
	}
	a, b := byNode["a"], byNode["b"]
	// a's clock started with the burn-in (staging reset it at 90 s).
	if a.Since != w.rec.Started.Add(90*time.Second) || a.Phase != "burnin" || a.Quarantined || a.Until != w.rec.Started.Add(170*time.Second) {
		t.Errorf("a: %+v", a)
	}
	if b.Since != w.rec.Started || !b.Quarantined || b.Until != w.rec.Started.Add(200*time.Second) || b.Notify != "exit 0" {
		t.Errorf("b: %+v", b)
	}
	if _, ok := byNode["c"]; ok {
		t.Errorf("c worked and was signalled")
	}
	got, _ := os.ReadFile(marks)
	if lines := strings.Split(strings.TrimSpace(string(got)), "\n"); len(lines) != 2 ||
		!strings.Contains(string(got), "b 1.0 true b.example") || !strings.Contains(string(got), "a 1.0 false a.example") {
		t.Errorf("idle.notify heard:\n%s", got)
	}
	if len(torn()) != 0 {
		t.Errorf("action signal tore down %v", torn())
	}
	w.Progress.Flush()
	if !strings.Contains(out.String(), "b: idle 1m0s (quarantined, every GPU under 5%): 0.40 EUR so far at the quote's rate") {
		t.Errorf("progress:\n%s", out)
	}
	w.rec.Idle = g
	vs := w.idleVerdicts()
	// a and b WARN; c, heard working, PASS.
	want := map[string]record.Status{"a": record.Warn, "b": record.Warn, "c": record.Pass}
	for _, v := range vs {
		if v.Status != want[v.Node] {
			t.Errorf("IDLE-001 %s: %s %s", v.Node, v.Status, v.Detail)
		}
	}
	if d := vs[1].Detail; !strings.Contains(d, "3m20s from +0s (quarantined), 1.33 EUR, idle.notify exit 0") {
		t.Errorf("b's detail: %s", d)
	}
}

func TestIdleGuardReleasesAQuarantinedNodeAtOnceAndAnActiveOneBetweenPhases(t *testing.T) {
	w, _, torn := idleWindow(t, inventory.Idle{After: 20 * time.Second, UtilPct: 5, Action: inventory.IdleRelease})
	load := &Phase{Name: "intranode", Loads: true, PerNode: noop}
	w.node("b").setQuarantined("diag failed", w.rec.Started)
	w.idle.setPhase(load)
	// a waits its turn (ssh.concurrency's waves) for 30 s: not held for
	// nothing, never signalled.
	for s := 0; s <= 30; s += 5 {
		sample(w, "a", s, 0)
	}
	// Its part done, a sits idle while c works.
	w.idle.partDone(w.node("a"))
	for s := 35; s <= 65; s += 5 {
		sample(w, "a", s, 0)
		sample(w, "c", s, 90)
	}
	for s := 0; s <= 65; s += 5 {
		sample(w, "b", s, 0)
	}
	w.idle.releases.Wait()
	if got := torn(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("torn down at once: %v, want only the quarantined b", got)
	}
	if w.node("a").released.Load() {
		t.Fatal("a was released under the phase it takes part in")
	}
	// Between phases a sample changes nothing: a is still held for
	// nothing until the next phase begins, and is released then.
	sample(w, "a", 70, 0)
	w.releasePending()
	if names := names(w.Active()); names != "c" {
		t.Errorf("active after the release: %s, want c", names)
	}
	g := w.idle.finish()
	if got := torn(); len(got) != 2 {
		t.Errorf("torn down: %v, want b and a", got)
	}
	for _, st := range g.Stretches {
		if st.Released.IsZero() {
			t.Errorf("%s: signalled, released, but the stretch says not: %+v", st.Node, st)
		}
	}
	// Samples after the release are not the guard's.
	w.IdleSample(w.node("a"), w.rec.Started.Add(time.Hour), pct(0))
	// The journal holds the release and the stretches for a resume.
	r, err := readJournal(w.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.release) != 2 || len(r.idle) != 2 {
		t.Errorf("journal: %d releases, %d idle entries", len(r.release), len(r.idle))
	}
	w2 := &Window{Inv: w.Inv, Nodes: []*Node{{Name: "a"}, {Name: "b", Index: 1}, {Name: "c", Index: 2}}}
	w2.resumeReleased(r.release)
	if names(w2.Active()) != "c" {
		t.Errorf("a resumed window takes released nodes back: %s", names(w2.Active()))
	}
}

func names(ns []*Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ",")
}

func TestIdleGuardOffCostsNothing(t *testing.T) {
	w := &Window{Inv: &inventory.Inventory{}}
	w.idle = newIdleGuard(w)
	if w.IdleOn() || w.idle.finish() != nil || w.idle.takePending() != nil {
		t.Fatal("a guard with no idle.after is on")
	}
	w.IdleSample(&Node{Name: "x"}, time.Now(), pct(0)) // no panic, nothing kept
	w.releasePending()
}

// Once the guard said its last word (the window's end), a sampler still
// ending is not heard: nothing is signalled or released after it. A node
// signalled under a phase and back at work before the next one is not
// released. A node the guard heard nothing from is SKIP, not PASS.
func TestIdleGuardAfterItsEndAndBackAtWork(t *testing.T) {
	w, _, torn := idleWindow(t, inventory.Idle{After: 20 * time.Second, UtilPct: 5, Action: inventory.IdleRelease})
	w.idle.setPhase(&Phase{Name: "intranode", Loads: true, PerNode: noop})
	w.idle.partDone(w.node("a"))
	for s := 0; s <= 30; s += 5 {
		sample(w, "a", s, 0)
	}
	sample(w, "a", 35, 80) // back at work before the phase ends
	w.idle.setPhase(nil)
	w.releasePending()
	if w.node("a").Released() {
		t.Error("a node back at work was released")
	}
	g := w.idle.finish()
	w.node("b").setQuarantined("diag failed", w.rec.Started)
	for s := 0; s <= 120; s += 5 {
		sample(w, "b", s, 0)
	}
	w.idle.releases.Wait()
	if len(torn()) != 0 || len(g.Stretches) != 1 {
		t.Errorf("after the guard's end: torn %v, stretches %+v", torn(), g.Stretches)
	}
	w.rec.Idle = g
	for _, v := range w.idleVerdicts() {
		want := map[string]record.Status{"a": record.Warn, "b": record.Skip, "c": record.Skip}[v.Node]
		if v.Status != want {
			t.Errorf("IDLE-001 %s: %s %s, want %s", v.Node, v.Status, v.Detail, want)
		}
	}
}

func noop(context.Context, *Window, *Node) (any, error) { return nil, nil }

// A node in a cluster-wide job (the all-reduce, the training job) is not
// held for nothing whatever its GPUs read: the job is using it.
func TestIdleGuardLeavesAClusterJobAlone(t *testing.T) {
	w, _, _ := idleWindow(t, inventory.Idle{After: 20 * time.Second, UtilPct: 5, Action: inventory.IdleSignal})
	w.idle.setPhase(&Phase{Name: "allreduce", Loads: true, Cluster: func(context.Context, *Window) (any, error) { return nil, nil }})
	for s := 0; s <= 120; s += 5 {
		sample(w, "a", s, 0)
	}
	if g := w.idle.finish(); len(g.Stretches) != 0 {
		t.Errorf("signalled under a cluster job: %+v", g.Stretches)
	}
}
