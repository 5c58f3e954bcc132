package orchestrator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// TestBackgroundLivesUntilTeardown: work a phase starts in the background
// outlives that phase (its deadline included), runs beside the phases
// after it, and is stopped before the first teardown phase begins; once
// stopped, nothing more starts.
func TestBackgroundLivesUntilTeardown(t *testing.T) {
	inv := testInventory(t, "a", "b")
	var mu sync.Mutex
	events := []string{}
	add := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	var running atomic.Int32
	var late error
	ps := []Phase{
		{Name: "start", Deadline: func(*inventory.Inventory) time.Duration { return time.Second },
			PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
				return nil, w.Background(n, "sampler", func(ctx context.Context) error {
					running.Add(1)
					defer running.Add(-1)
					<-ctx.Done()
					add("stopped " + n.Name)
					return ctx.Err()
				})
			}},
		{Name: "later", PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
			time.Sleep(1500 * time.Millisecond) // past the first phase's deadline
			if running.Load() != 2 {
				t.Errorf("%s: %d background tasks running in a later phase, want 2", n.Name, running.Load())
			}
			return nil, nil
		}},
		{Name: "teardown", Teardown: true, PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
			add("teardown " + n.Name)
			if running.Load() != 0 {
				t.Errorf("teardown began with %d background tasks running", running.Load())
			}
			mu.Lock()
			late = w.Background(n, "too late", func(context.Context) error { return nil })
			mu.Unlock()
			return nil, nil
		}},
	}
	if _, _, err := Start(t.Context(), inv, ps, Options{RunsDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 4 || !strings.HasPrefix(events[0], "stopped") || !strings.HasPrefix(events[1], "stopped") {
		t.Errorf("events %q: want both tasks stopped before teardown", events)
	}
	if !errors.Is(late, ErrBackgroundStopped) {
		t.Errorf("Background during teardown: %v, want ErrBackgroundStopped", late)
	}
}

// TestBackgroundStopsOnInterrupt: an interrupted window stops its
// background work too, and StopBackground names a task that will not end.
func TestBackgroundStopsOnInterrupt(t *testing.T) {
	inv := testInventory(t, "a")
	ctx, cancel := context.WithCancel(t.Context())
	var stopped atomic.Bool
	ps := []Phase{
		{Name: "start", PerNode: func(_ context.Context, w *Window, n *Node) (any, error) {
			return nil, w.Background(n, "sampler", func(ctx context.Context) error {
				<-ctx.Done()
				stopped.Store(true)
				return nil
			})
		}},
		{Name: "hang", PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}
	rec, _, err := Start(ctx, inv, ps, Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Interrupted || !stopped.Load() {
		t.Fatalf("interrupted %v, background stopped %v", rec.Interrupted, stopped.Load())
	}

	w := &Window{Progress: NewProgress(nil, false)}
	n := &Node{Name: "b"}
	release := make(chan struct{})
	defer close(release)
	if err := w.Background(n, "stuck", func(context.Context) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	err = w.StopBackground(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "b stuck") {
		t.Fatalf("StopBackground: %v, want it to name b's stuck task", err)
	}
}
