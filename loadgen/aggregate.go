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
	// The throughput window, [from, to): the level's measured time, and
	// what arrived in it (see window).
	from, to                         time.Time
	winReqs, winIn, winOut           float64
	ttft, tpot, itl, e2el, out, lags reservoir
}

func newAggregate(g Goodput, seed uint64, from, to time.Time) *aggregate {
	a := &aggregate{goodput: g, errors: map[string]int{}, from: from, to: to}
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

// window counts the throughput of one completed request, warm-up ones
// and ones that end after the level's measured time included, by what of
// it falls inside that time: each output token when it arrived (its text
// chunk's time, from the TTFT and the gaps after it; a usage count that
// differs from the chunks spreads over them), and the request itself and
// its input tokens by the share of its life (send to [DONE]) inside the
// window. The rates are then these over the window's length D.
//
// Why not the requests sent in the window over the time to the last one's
// end: at the window's start the streams are busy with warm-up requests,
// whose tokens went uncounted, and the drain after it adds up to one
// request's length to the time, so long requests read low (30 s requests
// in a 60 s level: about 17 %). Counting the requests sent in the window
// over D instead is right only on average (Little's law: the warm-up's
// tokens that arrive in the window balance those of the window's requests
// that arrive after it), and a closed loop of requests of one length
// sends in step, so the count jumps by a whole round of requests with the
// window's phase. Counting by arrival is what the server delivered in
// the window, whatever the requests' length.
func (a *aggregate) window(o *outcome) {
	if o.cancelled || o.kind != "" || o.start.IsZero() || math.IsNaN(o.e2el) {
		return
	}
	from, to := a.from, a.to
	msAt := func(x float64) time.Time { return o.start.Add(time.Duration(x * float64(time.Millisecond))) }
	end := msAt(o.e2el)
	if end.Before(from) || !o.start.Before(to) {
		return
	}
	share := 0.0
	if life := end.Sub(o.start); life > 0 {
		lo, hi := o.start, end
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			share = float64(hi.Sub(lo)) / float64(life)
		}
	} else if !end.Before(from) && end.Before(to) {
		share = 1
	}
	chunks := 1 + len(o.itl)
	per := float64(o.outputTokens) / float64(chunks)
	in := 0
	t := o.ttft
	for i := 0; ; i++ {
		if at := msAt(t); !at.Before(from) && at.Before(to) {
			in++
		}
		if i == len(o.itl) {
			break
		}
		t += o.itl[i]
	}
	if share == 0 && in == 0 {
		return
	}
	a.mu.Lock()
	a.winReqs += share
	a.winIn += share * float64(o.inputTokens)
	a.winOut += per * float64(in)
	a.mu.Unlock()
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

// fill writes the level's figures. The measured time is the level's
// duration, from the end of the warm-up, or to when it was cut short;
// the rates are what arrived in it (window), over it.
func (a *aggregate) fill(lv *workload.Level, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	stop := a.to
	if now.Before(stop) {
		stop = now
	}
	secs := stop.Sub(a.from).Seconds()
	lv.Seconds = math.Round(secs*1000) / 1000
	lv.Requests, lv.Completed, lv.Failed, lv.TimedOut, lv.Retried = a.requests, a.completed, a.failed, a.timedOut, a.ret
	if len(a.errors) > 0 {
		lv.Errors = a.errors
	}
	if secs > 0 {
		lv.RequestsPerSec = a.winReqs / secs
		lv.OutputTokensPerSec = a.winOut / secs
		lv.InputTokensPerSec = a.winIn / secs
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
