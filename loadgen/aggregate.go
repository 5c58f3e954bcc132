package loadgen

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"gpuaccept/orchestrator/workload"
)

// maxSamples bounds each figure's samples in memory: past it a uniform
// reservoir of them stands for the rest (a level of 512 streams for an
// hour gives a hundred million inter-token gaps).
const maxSamples = 1 << 21

// reservoir keeps a uniform sample of at most maxSamples values.
type reservoir struct {
	max  int // maxSamples
	s    []float64
	seen int
	rng  *rand.Rand
}

func (r *reservoir) add(x float64) {
	r.seen++
	if len(r.s) < r.max {
		r.s = append(r.s, x)
		return
	}
	if j := r.rng.IntN(r.seen); j < r.max {
		r.s[j] = x
	}
}

// aggregate is a level's measured requests, added from every stream.
type aggregate struct {
	mu                                         sync.Mutex
	goodput                                    Goodput
	requests, completed, failed, timedOut, ret int
	good                                       int
	unsentN                                    int
	errors                                     map[string]int
	inTokens, outTokens                        float64
	lastFinish                                 time.Time
	ttft, tpot, itl, e2el, out, lags           reservoir
}

func newAggregate(g Goodput, seed uint64) *aggregate {
	a := &aggregate{goodput: g, errors: map[string]int{}}
	for i, r := range []*reservoir{&a.ttft, &a.tpot, &a.itl, &a.e2el, &a.out, &a.lags} {
		r.rng, r.max = rand.New(rand.NewPCG(seed, uint64(i))), maxSamples
	}
	return a
}

// add counts one measured request; one the generator cancelled counts in
// nothing (the server did not fail it).
func (a *aggregate) add(o *outcome) {
	if o.cancelled {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests++
	a.ret += o.retried
	if now := time.Now(); now.After(a.lastFinish) {
		a.lastFinish = now
	}
	switch {
	case o.timedOut:
		a.timedOut++
		a.errorKind("timeout")
		return
	case o.kind != "":
		a.failed++
		a.errorKind(o.kind)
		return
	}
	a.completed++
	a.inTokens += float64(o.inputTokens)
	a.outTokens += float64(o.outputTokens)
	a.ttft.add(o.ttft)
	a.e2el.add(o.e2el)
	a.out.add(float64(o.outputTokens))
	if !math.IsNaN(o.tpot) {
		a.tpot.add(o.tpot)
	}
	maxITL := 0.0
	for _, x := range o.itl {
		a.itl.add(x)
		maxITL = max(maxITL, x)
	}
	if a.meets(o, maxITL) {
		a.good++
	}
}

// meets: the request met every latency target set. TPOT is the request's
// own (as vLLM's bench serve --goodput holds it); ITL every gap of it.
func (a *aggregate) meets(o *outcome, maxITL float64) bool {
	g := a.goodput
	over := func(x float64, t time.Duration) bool { return t > 0 && !(x <= ms(t)) }
	tpot := o.tpot
	if math.IsNaN(tpot) {
		tpot = 0 // one token: no time per output token to miss
	}
	return !over(o.ttft, g.TTFT) && !over(tpot, g.TPOT) && !over(maxITL, g.ITL) && !over(o.e2el, g.E2EL)
}

func (a *aggregate) errorKind(k string) {
	k = kindOf(k)
	if _, ok := a.errors[k]; !ok && len(a.errors) >= errorKinds-1 {
		k = "other"
	}
	a.errors[k]++
}

func (a *aggregate) lag(d time.Duration) {
	a.mu.Lock()
	a.lags.add(ms(d))
	a.mu.Unlock()
}

func (a *aggregate) unsent() {
	a.mu.Lock()
	a.unsentN++
	a.mu.Unlock()
}

// fill writes the level's figures. The measured time runs from the end
// of the warm-up to the last measured request's end (the requests sent
// before the level's end are waited for), or to now when the level was
// cut short.
func (a *aggregate) fill(lv *workload.Level, warmEnd, end, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	stop := end
	if a.lastFinish.After(stop) {
		stop = a.lastFinish
	}
	if now.Before(stop) {
		stop = now
	}
	secs := stop.Sub(warmEnd).Seconds()
	lv.Seconds = math.Round(secs*1000) / 1000
	lv.Requests, lv.Completed, lv.Failed, lv.TimedOut, lv.Retried = a.requests, a.completed, a.failed, a.timedOut, a.ret
	if len(a.errors) > 0 {
		lv.Errors = a.errors
	}
	if secs > 0 {
		lv.RequestsPerSec = float64(a.completed) / secs
		lv.OutputTokensPerSec = a.outTokens / secs
		lv.InputTokensPerSec = a.inTokens / secs
	}
	lv.TTFT, lv.TPOT, lv.ITL, lv.E2EL = workload.NewDist(a.ttft.s), workload.NewDist(a.tpot.s),
		workload.NewDist(a.itl.s), workload.NewDist(a.e2el.s)
	lv.OutputTokens = workload.NewDist(a.out.s)
	if a.goodput.Set() && a.requests > 0 {
		g := float64(a.good) / float64(a.requests)
		lv.Goodput = &g
	}
	if lv.Rate > 0 {
		lag := 0.0
		if len(a.lags.s) > 0 {
			lag = workload.NewDist(a.lags.s).P99
		}
		lv.SendLag = &lag
		lv.Unsent = a.unsentN
	}
}
