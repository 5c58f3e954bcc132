package orchestrator

import (
	"context"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// TestPhasesDeadlineIsTheDefault: phases.deadline bounds a phase with no
// bound of its own set in the inventory (it used to lose to every built-in
// one), an inventory-set bound wins, teardown keeps its budget; and the
// run, the plan in run.json and the window's bound all use the same one.
func TestPhasesDeadlineIsTheDefault(t *testing.T) {
	inv := testInventory(t, "a")
	inv.Phases.Deadline = 7 * time.Minute
	builtin := func(*inventory.Inventory) time.Duration { return 3 * time.Minute }
	var mu sync.Mutex
	seen := map[string]time.Duration{}
	body := func(name string) func(ctx context.Context, w *Window, n *Node) (any, error) {
		return func(ctx context.Context, w *Window, n *Node) (any, error) {
			d, _ := ctx.Deadline()
			mu.Lock()
			seen[name] = time.Until(d)
			mu.Unlock()
			return nil, nil
		}
	}
	ps := []Phase{
		{Name: "builtin", Deadline: builtin, PerNode: body("builtin")},
		{Name: "own", Deadline: builtin, Own: func(*inventory.Inventory) bool { return true }, PerNode: body("own")},
		{Name: "none", PerNode: body("none")},
		{Name: "teardown", Teardown: true, Deadline: builtin, PerNode: body("teardown")},
	}
	want := map[string]time.Duration{"builtin": 7 * time.Minute, "own": 3 * time.Minute, "none": 7 * time.Minute, "teardown": 3 * time.Minute}
	for i := range ps {
		if got := PhaseDeadline(&ps[i], inv); got != want[ps[i].Name] {
			t.Errorf("%s: PhaseDeadline %s, want %s", ps[i].Name, got, want[ps[i].Name])
		}
	}
	if b := Bound(inv, ps); b.Total != 20*time.Minute {
		t.Errorf("bound %s, want 20m (7+3+7+3)", b.Total)
	}
	rec, _, err := Start(t.Context(), inv, ps, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rec.Plan {
		if p.Deadline != want[p.Name].String() {
			t.Errorf("run.json plan: %s deadline %s, want %s", p.Name, p.Deadline, want[p.Name])
		}
	}
	// Teardown visits reached nodes only, none here; the others ran.
	for _, name := range []string{"builtin", "own", "none"} {
		if d := seen[name]; d > want[name] || d < want[name]-time.Minute {
			t.Errorf("%s ran under %s, want %s", name, d, want[name])
		}
	}
}
