package remote

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// FanOut bounds work spread over many nodes.
type FanOut struct {
	// Limit is how many nodes are worked on at once; a node starts as soon
	// as any other finishes (a sliding window, not batches). <=0: all.
	Limit int
	// Timeout bounds each node's work; 0: only ctx bounds it.
	Timeout time.Duration
}

// Result is one node's outcome, at the node's index.
type Result[T any] struct {
	Value   T
	Err     error
	Elapsed time.Duration
}

// Each runs fn for every index in [0, n) and returns the results by index.
// One node's failure (or panic) never cancels the others; only ctx does.
func Each[T any](ctx context.Context, n int, o FanOut, fn func(ctx context.Context, i int) (T, error)) []Result[T] {
	results := make([]Result[T], n)
	limit := o.Limit
	if limit <= 0 || limit > n {
		limit = n
	}
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				results[j].Err = fmt.Errorf("not started: %w", ctx.Err())
			}
			wg.Wait()
			return results
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			nctx, cancel := ctx, context.CancelFunc(func() {})
			if o.Timeout > 0 {
				nctx, cancel = context.WithTimeout(ctx, o.Timeout)
			}
			defer cancel()
			start := time.Now()
			results[i].Value, results[i].Err = protect(nctx, i, fn)
			results[i].Elapsed = time.Since(start)
		}(i)
	}
	wg.Wait()
	return results
}

// protect turns a panic in one node's work into that node's error, so a
// bug hit by one odd node does not take the whole window down.
func protect[T any](ctx context.Context, i int, fn func(context.Context, int) (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(ctx, i)
}

// DialAll connects to every node with the fan-out's bounds; clients and
// errors are by index (a nil client where the error is set).
func DialAll(ctx context.Context, cfgs []SSHConfig, o FanOut) ([]*Client, []error) {
	res := Each(ctx, len(cfgs), o, func(ctx context.Context, i int) (*Client, error) {
		return Dial(ctx, cfgs[i])
	})
	clients := make([]*Client, len(cfgs))
	errs := make([]error, len(cfgs))
	for i, r := range res {
		clients[i], errs[i] = r.Value, r.Err
	}
	return clients, errs
}

// CloseAll closes every non-nil client, all at once.
func CloseAll(clients []*Client) {
	var execs []Executor
	for _, c := range clients {
		if c != nil {
			execs = append(execs, c)
		}
	}
	CloseExecutors(execs)
}
