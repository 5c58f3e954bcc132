package openai

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// engine is the simulated model engine: Capacity sequences decode at once, the rest wait in a FIFO queue (what
// vLLM's scheduler reports as waiting), and every figure /metrics shows is kept here.
type engine struct {
	mu      sync.Mutex
	tun     Tunables
	running int
	waiting []*waiter
	rng     *rand.Rand // the error draws; seeded, so a run's errors repeat
	stats   stats
}

type waiter struct {
	ch      chan struct{}
	granted bool // under engine.mu
}

func newEngine(t Tunables, seed uint64) *engine {
	return &engine{tun: t, rng: rand.New(rand.NewPCG(seed, 0x6770756163636570)), stats: newStats()}
}

func (e *engine) tunables() Tunables {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tun
}

func (e *engine) setTunables(t Tunables) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tun = t
	e.promote() // a larger capacity admits waiters now; a smaller one lets running sequences finish
}

// draw decides whether a request fails and how, and after how many of its n tokens (1..n-1, or 0 when n < 2)
// a failing stream breaks off.
func (e *engine) draw(n int) (kind string, after int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tun.ErrorRate <= 0 || e.rng.Float64() >= e.tun.ErrorRate {
		return "", 0
	}
	if n > 1 {
		after = 1 + e.rng.IntN(n-1)
	}
	return e.tun.ErrorKind, after
}

// admit waits for a decode slot, first come first served. The slot is the caller's until release; a cancelled
// ctx leaves the queue (or gives back a slot granted meanwhile).
func (e *engine) admit(ctx context.Context) (release func(), err error) {
	e.mu.Lock()
	if e.running < e.tun.Capacity && len(e.waiting) == 0 {
		e.running++
		e.mu.Unlock()
		return e.release, nil
	}
	w := &waiter{ch: make(chan struct{})}
	e.waiting = append(e.waiting, w)
	e.mu.Unlock()
	select {
	case <-w.ch:
		return e.release, nil
	case <-ctx.Done():
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if w.granted {
		e.running--
		e.promote()
	} else {
		for i, x := range e.waiting {
			if x == w {
				e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
				break
			}
		}
	}
	return nil, ctx.Err()
}

func (e *engine) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running--
	e.promote()
}

// promote hands free slots to the head of the queue; e.mu is held.
func (e *engine) promote() {
	for e.running < e.tun.Capacity && len(e.waiting) > 0 {
		w := e.waiting[0]
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		w.granted = true
		e.running++
		close(w.ch)
	}
}

// finished records one request that ran to its end (finish reason "length": every request decodes max_tokens).
func (e *engine) finished(prompt, generated int, queue, prefill, ttft, decode, e2e time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.stats
	s.promptTokens += float64(prompt)
	s.generationTokens += float64(generated)
	s.success["length"]++
	s.queue.observe(queue.Seconds())
	s.prefill.observe(prefill.Seconds())
	s.ttft.observe(ttft.Seconds())
	s.decode.observe(decode.Seconds())
	s.e2e.observe(e2e.Seconds())
	if generated > 1 {
		s.tpot.observe(decode.Seconds() / float64(generated-1))
	}
}

// aborted records a request that ended early (a client gone, a simulated stream error); vLLM counts these under
// finished_reason "abort".
func (e *engine) aborted(prompt, generated int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.promptTokens += float64(prompt)
	e.stats.generationTokens += float64(generated)
	e.stats.success["abort"]++
}

// snapshot copies what /metrics renders.
func (e *engine) snapshot() (running, waiting, capacity int, s stats) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running, len(e.waiting), e.tun.Capacity, e.stats.clone()
}
