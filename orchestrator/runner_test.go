package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testInventory(t *testing.T, nodes ...string) *inventory.Inventory {
	inv := &inventory.Inventory{Path: filepath.Join(t.TempDir(), "inv.yaml"), Digest: "abc", Provider: "test"}
	for _, n := range nodes {
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: n, Address: "192.0.2.1"})
	}
	return inv
}

// calls counts how often each phase ran on each node.
type calls struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *calls) add(phase, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[phase+"/"+node]++
}

func (c *calls) get(phase, node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[phase+"/"+node]
}

func phase(name string, c *calls, gating bool, fail func(n *Node) error) Phase {
	return Phase{Name: name, Gating: gating, PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
		c.add(name, n.Name)
		if fail != nil {
			if err := fail(n); err != nil {
				return nil, err
			}
		}
		return map[string]string{"node": n.Name}, nil
	}}
}

func teardownPhase(c *calls, ctxSeen *atomic.Bool) Phase {
	return Phase{Name: "teardown", Teardown: true, PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
		c.add("teardown", n.Name)
		if ctx.Err() == nil {
			ctxSeen.Store(true)
		}
		return nil, nil
	}}
}

func TestGatingFailureQuarantines(t *testing.T) {
	inv := testInventory(t, "a", "b", "c")
	var c calls
	failB := func(n *Node) error {
		if n.Name == "b" {
			return errors.New("no GPU found")
		}
		return nil
	}
	ps := []Phase{phase("one", &c, true, failB), phase("two", &c, false, nil)}
	rec, dir, err := Start(t.Context(), inv, ps, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c.get("two", "b") != 0 || c.get("two", "a") != 1 || c.get("two", "c") != 1 {
		t.Fatalf("quarantined node ran a later phase: %v", c.m)
	}
	if n := rec.Nodes[1]; !n.Quarantined || !strings.Contains(n.Reason, "one failed: no GPU found") {
		t.Fatalf("node b: %+v", n)
	}
	if rec.Accepted() {
		t.Fatal("a window with a quarantined node was accepted")
	}
	r, err := readJournal(dir)
	if err != nil || !r.ended || len(r.quarantine) != 1 || !r.done["one"] || !r.done["two"] {
		t.Fatalf("journal: %+v, %v", r, err)
	}
}

func TestStrictAbortsButTearsDown(t *testing.T) {
	inv := testInventory(t, "a", "b")
	var c calls
	var live atomic.Bool
	failA := func(n *Node) error {
		if n.Name == "a" {
			return errors.New("unreachable")
		}
		return nil
	}
	ps := []Phase{phase("one", &c, true, failA), phase("two", &c, false, nil), teardownPhase(&c, &live)}
	// Teardown visits reached nodes only; none has a client here.
	rec, _, err := Start(t.Context(), inv, ps, Options{RunsDir: t.TempDir(), Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Aborted, "a: one failed: unreachable (--strict)") {
		t.Fatalf("aborted = %q", rec.Aborted)
	}
	if c.get("two", "b") != 0 {
		t.Fatal("the window went on after a strict abort")
	}
}

func TestInterruptThenResume(t *testing.T) {
	inv := testInventory(t, "a", "b")
	load := func(string) (*inventory.Inventory, error) { return inv, nil }
	ctx, cancel := context.WithCancel(t.Context())
	var c calls
	var live atomic.Bool
	connect := phase("connect", &c, true, nil)
	connect.AlwaysRun = true
	crash := func(n *Node) error {
		cancel() // the coordinator goes away in the middle of "two"
		<-ctx.Done()
		return ctx.Err()
	}
	first := []Phase{connect, phase("one", &c, true, nil), phase("two", &c, false, crash), phase("three", &c, false, nil), teardownPhase(&c, &live)}
	rec, dir, err := Start(ctx, inv, first, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Interrupted || c.get("three", "a") != 0 {
		t.Fatalf("interrupted=%v, three ran %d times", rec.Interrupted, c.get("three", "a"))
	}
	for _, p := range rec.Phases {
		if p.Phase == "two" && p.Outcome != record.Interrupted {
			t.Errorf("two on %s: %s", p.Node, p.Outcome)
		}
	}
	if !live.Load() {
		t.Fatal("teardown ran with the cancelled context")
	}
	// A crash can tear the last journal line.
	f, _ := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"result","res`)
	f.Close()

	var c2 calls
	second := []Phase{phase("connect", &c2, true, nil), phase("one", &c2, true, nil), phase("two", &c2, false, nil), phase("three", &c2, false, nil)}
	second[0].AlwaysRun = true
	rec, _, err = Resume(t.Context(), dir, load, second, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c2.get("connect", "a") != 1 || c2.get("one", "a") != 0 || c2.get("two", "a") != 1 || c2.get("three", "b") != 1 {
		t.Fatalf("resume ran: %v", c2.m)
	}
	if rec.Interrupted || len(rec.Resumed) != 1 {
		t.Fatalf("resumed record: interrupted=%v resumed=%v", rec.Interrupted, rec.Resumed)
	}
	// One result per phase and node: the interrupted attempt of "two" and
	// the first connect are gone.
	seen := map[string]int{}
	for _, p := range rec.Phases {
		seen[p.Phase+"/"+p.Node]++
	}
	for k, n := range seen {
		if n != 1 && !strings.HasPrefix(k, "teardown/") {
			t.Errorf("%s recorded %d times", k, n)
		}
	}
	// The window is over: its journal is sealed, and still read.
	if _, err := os.Stat(filepath.Join(dir, JournalFile)); !os.IsNotExist(err) {
		t.Errorf("the ended window's plain journal is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SealedJournalFile)); err != nil {
		t.Errorf("sealed journal: %v", err)
	}
	if _, _, err := Resume(t.Context(), dir, load, second, Options{}); err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Fatalf("resuming an ended window: %v", err)
	}
}

func TestResumeRefusesAChangedInventory(t *testing.T) {
	inv := testInventory(t, "a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, dir, err := Start(ctx, inv, []Phase{phase("one", &calls{}, false, nil)}, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	changed := *inv
	changed.Digest = "def"
	_, _, err = Resume(t.Context(), dir, func(string) (*inventory.Inventory, error) { return &changed, nil }, nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "changed since the window started") {
		t.Fatalf("got %v", err)
	}
}

func TestResultDecodesTheRecord(t *testing.T) {
	inv := testInventory(t, "a", "b")
	var c calls
	rec, _, err := Start(t.Context(), inv, []Phase{phase("one", &c, false, nil)}, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := &Window{rec: rec}
	var v map[string]string
	if r, ok := w.Result("one", 1, &v); !ok || v["node"] != "b" || r.Outcome != record.OK {
		t.Fatalf("Result = %+v %v %v", r, v, ok)
	}
}

// The finished window carries its ledger: every node billed for the whole
// window, the quarantined one not accepted; none without a price.
func TestWindowLedger(t *testing.T) {
	inv := testInventory(t, "a", "b", "c")
	inv.Quote = inventory.Quote{PricePerGPUHr: 2.49, GPUsPerNode: 8, Currency: "USD", Billing: "1m"}
	failB := func(n *Node) error {
		if n.Name == "b" {
			return errors.New("no GPU found")
		}
		return nil
	}
	var c calls
	rec, _, err := Start(t.Context(), inv, []Phase{phase("one", &c, true, failB), phase("two", &c, false, nil)}, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	l := rec.Ledger
	if l == nil || len(l.Nodes) != 3 || l.Granularity != "1m" || l.Currency != "USD" {
		t.Fatalf("ledger %+v", l)
	}
	// A window of well under a minute is billed one minute a node.
	if want := 3 * 8 * 2.49 / 60; l.AcceptedUnits != 2 || l.Unit != "accepted node" || l.TotalCost < want-1e-6 || l.TotalCost > want+1e-6 {
		t.Errorf("total %v for %v %s, want %v for 2", l.TotalCost, l.AcceptedUnits, l.Unit, want)
	}
	for _, n := range l.Nodes {
		if n.BilledSecs != 60 || n.Accepted == (n.Name == "b") {
			t.Errorf("%s: billed %v accepted %v", n.Name, n.BilledSecs, n.Accepted)
		}
	}
	if b := l.Nodes[1]; b.FailedSecs <= 0 {
		t.Errorf("the quarantined node has no failed time: %+v", b)
	}

	inv.Quote = inventory.Quote{}
	if rec, _, err = Start(t.Context(), inv, []Phase{phase("one", &c, false, nil)}, Options{RunsDir: t.TempDir()}); err != nil || rec.Ledger != nil {
		t.Errorf("no price: ledger %+v, %v", rec.Ledger, err)
	}
}

// Windows started in the same second into one runs directory each get a
// directory of their own.
func TestRunDirsAreNeverShared(t *testing.T) {
	runs := t.TempDir()
	seen := map[string]bool{}
	for range 3 {
		id, dir, err := newRunDir(runs, "20261201T000000Z-demo")
		if err != nil {
			t.Fatal(err)
		}
		if seen[dir] || !validRunID(id) || filepath.Base(dir) != id {
			t.Fatalf("run dir %s (id %s) again or invalid", dir, id)
		}
		seen[dir] = true
	}
	if !seen[filepath.Join(runs, "20261201T000000Z-demo-3")] {
		t.Errorf("dirs %v", seen)
	}
}

// run --nodes, --only, --skip: the window runs on those nodes and phases,
// the record says so (the plan marks what was left out), essential phases
// run whatever, and a wrong name is an error naming the choices.
func TestSelection(t *testing.T) {
	inv := testInventory(t, "n1", "n2", "n3")
	var c calls
	var ctxSeen atomic.Bool
	phases := []Phase{phase("connect", &c, true, nil), phase("preflight", &c, true, nil), phase("diag", &c, true, nil),
		phase("staging", &c, false, nil), teardownPhase(&c, &ctxSeen)}
	phases[0].AlwaysRun = true // connect, as the real one
	sel := &Selection{Nodes: "n[1-2]", Skip: []string{"diag"}}
	rec, _, err := Start(t.Context(), inv, phases, Options{RunsDir: t.TempDir(), Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		phase, node string
		n           int
	}{{"connect", "n1", 1}, {"preflight", "n2", 1}, {"diag", "n1", 0}, {"staging", "n2", 1}, {"connect", "n3", 0}, {"teardown", "n2", 1}} {
		if got := c.get(want.phase, want.node); got != want.n {
			t.Errorf("%s on %s ran %d times, want %d", want.phase, want.node, got, want.n)
		}
	}
	if rec.Selection == nil || rec.Selection.Nodes != "n[1-2]" || len(rec.Nodes) != 2 {
		t.Errorf("selection %+v, nodes %d", rec.Selection, len(rec.Nodes))
	}
	for _, p := range rec.Plan {
		if (p.Name == "diag") != (p.Skipped == "--skip diag") {
			t.Errorf("plan: %+v", p)
		}
	}
	var c2 calls
	phases2 := []Phase{phase("connect", &c2, true, nil), phase("preflight", &c2, true, nil), phase("diag", &c2, true, nil), teardownPhase(&c2, &ctxSeen)}
	phases2[0].AlwaysRun = true
	if _, _, err := Start(t.Context(), inv, phases2, Options{RunsDir: t.TempDir(), Selection: &Selection{Only: []string{"diag"}}}); err != nil {
		t.Fatal(err)
	}
	if c2.get("preflight", "n1") != 0 || c2.get("diag", "n3") != 1 || c2.get("connect", "n3") != 1 {
		t.Errorf("--only diag: %v", c2.m)
	}
	// A judge that fails what has no result (as the all-reduce's does) is
	// not heard for a phase the selection left out: its requirement was
	// not measured.
	var c3 calls
	phases3 := []Phase{phase("connect", &c3, true, nil), phase("preflight", &c3, true, nil), phase("diag", &c3, true, nil), teardownPhase(&c3, &ctxSeen)}
	phases3[0].AlwaysRun = true
	for i, id := range []string{"GPU-001", "DIAG-001"} {
		phases3[i+1].Judge = func(w *Window) []record.Verdict {
			v := record.NewVerdict(id, "")
			v.Status, v.Measured, v.Detail = record.Fail, "nothing", "no result"
			return []record.Verdict{v}
		}
	}
	rec3, _, err := Start(t.Context(), inv, phases3, Options{RunsDir: t.TempDir(), Selection: &Selection{Only: []string{"diag"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rec3.Verdicts {
		want := record.Fail
		if v.ID == "GPU-001" {
			want = record.Skip
		}
		if v.Status != want || v.ID == "GPU-001" && (v.Detail != "skipped: not in --only" || v.Measured != "") {
			t.Errorf("--only diag: %+v, want %s", v, want)
		}
	}
	if len(rec3.Verdicts) != 2 {
		t.Errorf("verdicts %+v", rec3.Verdicts)
	}
	// The inventory's order, whatever the flag's: the first node launches.
	if got, err := selectNodes(inv, &Selection{Nodes: "n3,n1"}); err != nil || len(got.Nodes) != 2 || got.Nodes[0].Name != "n1" {
		t.Errorf("--nodes n3,n1: %v %v", got, err)
	}
	for _, bad := range []struct {
		sel  Selection
		want string
	}{
		{Selection{Nodes: "n[1-5]"}, "--nodes \"n[1-5]\": n[4-5] not in"},
		{Selection{Only: []string{"diagg"}}, `--only: no phase "diagg" (the phases: connect, preflight, diag, teardown)`},
		{Selection{Skip: []string{"connect"}}, "--skip connect: every window runs connect"},
	} {
		if _, _, err := Start(t.Context(), inv, phases2, Options{RunsDir: t.TempDir(), Selection: &bad.sel}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want %q", bad.sel, err, bad.want)
		}
	}
}

// A phase that exists for others (the window's key, for the MPI launches)
// runs when one of them will, and only then: in a selection and on
// --resume. Its results from before a resume are kept when it does not run
// again, so the resumed window judges as the uninterrupted one.
func TestAPhaseThatServesOthersRunsOnlyForThem(t *testing.T) {
	inv := testInventory(t, "a", "b")
	var live atomic.Bool
	window := func(c *calls, crashIn string, cancel func()) []Phase {
		var crash func(n *Node) error
		if cancel != nil {
			crash = func(n *Node) error { cancel(); return context.Canceled }
		}
		ps := []Phase{phase("connect", c, true, nil), phase("key", c, true, nil), phase("preflight", c, true, nil),
			phase("mpi", c, false, nil), phase("three", c, false, nil), teardownPhase(c, &live)}
		ps[0].AlwaysRun = true
		ps[1].AlwaysRun, ps[1].Serves = true, []string{"mpi"}
		for i := range ps {
			if ps[i].Name == crashIn {
				ps[i] = phase(crashIn, c, false, crash)
			}
		}
		return ps
	}
	var c calls
	rec, _, err := Start(t.Context(), inv, window(&c, "", nil), Options{RunsDir: t.TempDir(), Selection: &Selection{Only: []string{"preflight"}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.get("key", "a") != 0 || c.get("preflight", "a") != 1 || c.get("connect", "a") != 1 {
		t.Errorf("--only preflight ran %v", c.m)
	}
	for _, p := range rec.Plan {
		if p.Name == "key" && p.Skipped != "needed only by mpi, none of them selected" {
			t.Errorf("plan: %+v", p)
		}
	}
	var c1 calls
	if _, _, err := Start(t.Context(), inv, window(&c1, "", nil), Options{RunsDir: t.TempDir(), Selection: &Selection{Only: []string{"mpi"}}}); err != nil {
		t.Fatal(err)
	}
	if c1.get("key", "b") != 1 || c1.get("mpi", "b") != 1 || c1.get("preflight", "b") != 0 {
		t.Errorf("--only mpi ran %v", c1.m)
	}
	if _, err := selectPhases(window(&c1, "", nil), nil, &Selection{Skip: []string{"key"}}); err == nil ||
		err.Error() != "--skip key: it runs only for mpi; skip those instead" {
		t.Errorf("--skip key: %v", err)
	}

	load := func(string) (*inventory.Inventory, error) { return inv, nil }
	for _, tc := range []struct {
		crashIn string
		again   int // key runs on resume
	}{{"three", 0}, {"mpi", 1}} {
		ctx, cancel := context.WithCancel(t.Context())
		var c2 calls
		_, dir, err := Start(ctx, inv, window(&c2, tc.crashIn, cancel), Options{RunsDir: t.TempDir()})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var c3 calls
		rec, _, err := Resume(t.Context(), dir, load, window(&c3, "", nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c3.get("key", "a") != tc.again || c3.get("connect", "a") != 1 || c3.get("three", "a") != 1 {
			t.Errorf("crash in %s: resume ran %v, want key %d times", tc.crashIn, c3.m, tc.again)
		}
		keys := 0
		for _, p := range rec.Phases {
			if p.Phase == "key" && p.Outcome == record.OK {
				keys++
			}
		}
		if keys != 2 {
			t.Errorf("crash in %s: the resumed record has %d key results, want 2", tc.crashIn, keys)
		}
	}
}

// A command Slurm never started measured nothing of its node: NOT
// MEASURED, with srun's words, and so no quarantine.
func TestStepNotStartedIsNotMeasured(t *testing.T) {
	err := fmt.Errorf("preflight: %w", &remote.StepNotStartedError{Node: "h2", Command: "nvidia-smi", After: 5 * time.Minute,
		Said: "srun: Job step creation temporarily disabled, retrying"})
	nm, ok := IsNotMeasured(err)
	if !ok || nm.Tool != "slurm" || nm.Why != "Slurm did not start the job step within 5m0s: srun: Job step creation temporarily disabled, retrying" {
		t.Errorf("%v: %+v %v", err, nm, ok)
	}
	if _, ok := IsNotMeasured(&remote.ExitError{Node: "h2", Command: "nvidia-smi", Status: 1}); ok {
		t.Error("a command's own failure taken for not measured")
	}
}

// A command whose shared job step srun gave up (for another node's I/O
// error) has no outcome: NOT MEASURED too, no quarantine.
func TestStepAbortedIsNotMeasured(t *testing.T) {
	err := fmt.Errorf("preflight: %w", &remote.StepAbortedError{Node: "h2", Command: "nvidia-smi",
		Said: "srun: error: step_launch_notify_io_failure: aborting, io error with slurmstepd on node 33"})
	nm, ok := IsNotMeasured(err)
	if !ok || nm.Tool != "slurm" || !strings.Contains(nm.Why, "srun aborted the job step") {
		t.Errorf("%v: %+v %v", err, nm, ok)
	}
}
