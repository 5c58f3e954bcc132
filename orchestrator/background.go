package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// background is the work that runs beside the phases for the window's
// lifetime (the telemetry sampler's stream from every node): it outlives
// the phase that started it and ends, all of it, when StopBackground is
// called (before teardown, or when the window ends any other way).
type background struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	tasks   []*bgTask
	stopped bool
}

type bgTask struct {
	node, name string
	cancel     context.CancelFunc
	done       chan struct{}
	err        error
}

// ErrBackgroundStopped is Background's answer once the window stopped its
// background work: nothing may start after it (teardown has begun).
var ErrBackgroundStopped = errors.New("the window's background work has stopped")

// Background runs fn for node n beside the phases, under a context that
// ends only when the window stops its background work (StopBackground),
// not when the phase that called it ends. fn must return once its
// context is done. A fn that ends early with an error says so in the
// progress lines; its error is fn's own to record.
func (w *Window) Background(n *Node, name string, fn func(ctx context.Context) error) error {
	b := &w.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return fmt.Errorf("%s: %s: %w", n.Name, name, ErrBackgroundStopped)
	}
	if b.ctx == nil {
		// Not the phase's context: a phase's deadline must not end work
		// that is meant to run until teardown.
		b.ctx, b.cancel = context.WithCancel(context.Background())
	}
	// Each task's own context: a node the idle guard releases has its
	// sampler stopped while the others' go on.
	ctx, cancel := context.WithCancel(b.ctx)
	t := &bgTask{node: n.Name, name: name, cancel: cancel, done: make(chan struct{})}
	b.tasks = append(b.tasks, t)
	go func() {
		defer close(t.done)
		defer cancel()
		_, t.err = guarded(func() (struct{}, error) { return struct{}{}, fn(ctx) })
		if t.err != nil && ctx.Err() == nil {
			w.Progress.Node(n.Name, "%s ended: %s", name, firstLine(t.err.Error()))
		}
	}()
	return nil
}

// StopBackground cancels every background task and waits up to timeout
// for them to end. It returns an error naming the tasks still running
// then (each was told to stop: its remote command's guard ends it when
// the connection closes). Calling it again waits again; nothing new
// starts after the first call.
func (w *Window) StopBackground(timeout time.Duration) error {
	b := &w.bg
	b.mu.Lock()
	b.stopped = true
	if b.cancel != nil {
		b.cancel()
	}
	tasks := append([]*bgTask(nil), b.tasks...)
	b.mu.Unlock()
	return waitTasks(tasks, timeout)
}

// StopBackgroundOf cancels node's background tasks and waits up to timeout
// for them to end, as StopBackground does for all of them.
func (w *Window) StopBackgroundOf(node string, timeout time.Duration) error {
	b := &w.bg
	b.mu.Lock()
	var tasks []*bgTask
	for _, t := range b.tasks {
		if t.node == node {
			t.cancel()
			tasks = append(tasks, t)
		}
	}
	b.mu.Unlock()
	return waitTasks(tasks, timeout)
}

func waitTasks(tasks []*bgTask, timeout time.Duration) error {
	deadline := time.After(timeout)
	spent := false
	var left []string
	for _, t := range tasks {
		if !spent {
			select {
			case <-t.done:
				continue
			case <-deadline:
				spent = true // the rest are only looked at
			}
		}
		select {
		case <-t.done:
		default:
			left = append(left, t.node+" "+t.name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("background work still running after %s: %s", timeout, strings.Join(left, ", "))
	}
	return nil
}
