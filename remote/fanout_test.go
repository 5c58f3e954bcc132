package remote

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachIsASlidingWindow(t *testing.T) {
	// Limit 2: node 0 is slow. In batches, node 2 would wait for node 0;
	// in a sliding window it starts as soon as node 1 ends.
	var mu sync.Mutex
	started := map[int]time.Time{}
	ended := map[int]time.Time{}
	var inFlight, peak atomic.Int32
	res := Each(t.Context(), 6, FanOut{Limit: 2}, func(ctx context.Context, i int) (int, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		mu.Lock()
		started[i] = time.Now()
		mu.Unlock()
		d := 20 * time.Millisecond
		if i == 0 {
			d = 400 * time.Millisecond
		}
		time.Sleep(d)
		mu.Lock()
		ended[i] = time.Now()
		mu.Unlock()
		inFlight.Add(-1)
		return i * i, nil
	})
	if peak.Load() != 2 {
		t.Errorf("peak concurrency %d, want 2", peak.Load())
	}
	for i := 2; i < 6; i++ {
		if !started[i].Before(ended[0]) {
			t.Errorf("node %d waited for the slow node 0 (batching)", i)
		}
	}
	for i, r := range res {
		if r.Value != i*i || r.Err != nil {
			t.Errorf("result %d = %+v", i, r)
		}
	}
}

func TestEachIsolatesFailuresTimeoutsAndPanics(t *testing.T) {
	res := Each(t.Context(), 4, FanOut{Timeout: 100 * time.Millisecond}, func(ctx context.Context, i int) (string, error) {
		switch i {
		case 0:
			return "", errors.New("broken")
		case 1:
			<-ctx.Done() // a node that hangs
			return "", ctx.Err()
		case 2:
			panic("odd node")
		}
		time.Sleep(50 * time.Millisecond) // outlives the failures of the others
		if ctx.Err() != nil {
			return "", errors.New("cancelled by another node's failure")
		}
		return "ok", nil
	})
	if res[0].Err == nil || res[0].Err.Error() != "broken" {
		t.Errorf("node 0: %v", res[0].Err)
	}
	if !errors.Is(res[1].Err, context.DeadlineExceeded) || res[1].Elapsed > time.Second {
		t.Errorf("node 1: %v after %s", res[1].Err, res[1].Elapsed)
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "panic: odd node") {
		t.Errorf("node 2: %v", res[2].Err)
	}
	if res[3].Err != nil || res[3].Value != "ok" {
		t.Errorf("node 3: %+v", res[3])
	}
}

func TestEachOthersFinishWhenOneFails(t *testing.T) {
	res := Each(t.Context(), 3, FanOut{Limit: 3}, func(ctx context.Context, i int) (int, error) {
		if i == 0 {
			return 0, errors.New("dead node")
		}
		time.Sleep(50 * time.Millisecond)
		return i, ctx.Err()
	})
	if res[0].Err == nil || res[1].Err != nil || res[2].Err != nil || res[2].Value != 2 {
		t.Fatalf("results %+v", res)
	}
}

func TestEachStopsStartingWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Int32
	res := Each(ctx, 10, FanOut{Limit: 1}, func(ctx context.Context, i int) (int, error) {
		ran.Add(1)
		if i == 1 {
			cancel()
		}
		return i, nil
	})
	if ran.Load() > 3 {
		t.Errorf("%d nodes started after cancel", ran.Load())
	}
	if !errors.Is(res[9].Err, context.Canceled) || !strings.Contains(res[9].Err.Error(), "not started") {
		t.Errorf("node 9: %v", res[9].Err)
	}
}
