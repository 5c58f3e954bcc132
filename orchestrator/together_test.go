package orchestrator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// A phase that runs Together runs on every node at once, whatever
// ssh.concurrency: each node's body waits for all four to have begun (a
// burn-in of a day on 1,000 nodes, 32 at a time, took a month of waves).
// The window's bound counts it once, not once per wave.
func TestTogetherRunsEveryNodeAtOnce(t *testing.T) {
	inv := testInventory(t, "a", "b", "c", "d")
	inv.SSH.Concurrency = 1
	for _, together := range []bool{true, false} {
		var in atomic.Int32
		all := make(chan struct{})
		p := Phase{Name: "burn", Together: together, Own: func(*inventory.Inventory) bool { return true },
			Deadline: func(*inventory.Inventory) time.Duration { return 10 * time.Second },
			PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
				if in.Add(1) == 4 {
					close(all)
				}
				select {
				case <-all:
					return nil, nil
				case <-time.After(300 * time.Millisecond):
					return nil, errors.New("ran alone: the others had not begun")
				}
			}}
		rec, _, err := Start(t.Context(), inv, []Phase{p}, Options{RunsDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, r := range rec.Phases {
			if r.Phase == "burn" && r.Outcome == record.OK {
				ok++
			}
		}
		if together && ok != 4 || !together && ok == 4 {
			t.Errorf("together %v: %d of 4 nodes ran with the others", together, ok)
		}
		want := 10 * time.Second
		if !together {
			want *= 4 // four waves of one
		}
		if b := Bound(inv, []Phase{p}); b.Total != want {
			t.Errorf("together %v: bound %s, want %s", together, b.Total, want)
		}
	}
}
