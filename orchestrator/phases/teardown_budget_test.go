package phases

import (
	"context"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator"
)

// TestEachTeardownPhaseHasItsOwnTime: a slow teardown does not spend the
// time of the teardown phase after it. One budget shared by both was spent
// by 733 of 1,000 nodes' teardown, and the deletion check after it never
// started on any node.
func TestEachTeardownPhaseHasItsOwnTime(t *testing.T) {
	inv := fakeInventory(t, 4, "")
	inv.SSH.Concurrency = 1
	f := fakeFleet(inv)
	var mu sync.Mutex
	live := map[string]bool{}
	slow := orchestrator.Phase{Name: "slow-teardown", Teardown: true,
		PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
			select { // 4 nodes one at a time: 1.2 s, past the 1 s budget
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil, nil
		}}
	check := orchestrator.Phase{Name: "check-after", Teardown: true,
		PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			live[n.Name] = ctx.Err() == nil
			return nil, ctx.Err()
		}}
	_, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, slow, check},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test", TeardownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range inv.Nodes {
		if !live[n.Name] {
			t.Errorf("%s: the teardown phase after the slow one did not run in time (ran: %v)", n.Name, live)
		}
	}
}
