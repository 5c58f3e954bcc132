package loadgen

import (
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

func TestArrivalsArePoisson(t *testing.T) {
	const rate, n = 8.0, 200_000
	next := arrivals(1, 0, rate)
	var sum, sq float64
	first := make([]time.Duration, 10)
	for i := range n {
		g := next().Seconds()
		if i < len(first) {
			first[i] = time.Duration(g * float64(time.Second))
		}
		sum += g
		sq += g * g
	}
	mean := sum / n
	cv := math.Sqrt(sq/n-mean*mean) / mean
	// Exponential gaps: mean 1/rate, coefficient of variation 1. Over
	// 200,000 gaps the standard error of either is about 0.2 %.
	if math.Abs(mean*rate-1) > 0.01 || math.Abs(cv-1) > 0.02 {
		t.Fatalf("gaps: mean %.5f s (want %.5f), CV %.4f (want 1)", mean, 1/rate, cv)
	}
	again, other := arrivals(1, 0, rate), arrivals(2, 0, rate)
	same, differ := true, false
	for _, g := range first {
		same = same && again() == g
		differ = differ || other() != g
	}
	if !same || !differ {
		t.Fatalf("seeded: the same seed repeats the schedule (%v), another differs (%v)", same, differ)
	}
}

// The open loop sends on schedule whatever the server answers: against a
// server that takes one request at a time, at twice the rate it serves,
// the requests still go out and the queue shows in the TTFT.
func TestOpenLoopQueues(t *testing.T) {
	var mu sync.Mutex
	f := &fakeServer{hook: func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"choices\":[{\"index\":0,\"text\":\"a\"}],\"usage\":null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"))
	}}
	s := f.start(t)
	cfg := testConfig(s.URL, inventory.Level{Rate: 40})
	cfg.Duration, cfg.Warmup, cfg.RequestTimeout = time.Second, 0, 20*time.Second
	lv := runOne(t, cfg)
	// The schedule is seeded: count its arrivals in the measured second.
	want, next := 0, arrivals(cfg.Seed, 0, 40)
	for at := next(); at < time.Second; at += next() {
		want++
	}
	if lv.Requests+lv.Unsent != want || lv.Completed != lv.Requests {
		t.Fatalf("%d requests (%d completed) + %d unsent, the schedule has %d", lv.Requests, lv.Completed,
			lv.Unsent, want)
	}
	if lv.SendLag == nil || lv.Rate != 40 || lv.Concurrency != 0 {
		t.Fatalf("an open-loop level carries its send lag: %+v", lv)
	}
	// 20 requests/s served, 40 sent: the last waits for most of the rest.
	if lv.TTFT.Max < 300 || lv.TTFT.Max < 3*lv.TTFT.Min {
		t.Fatalf("no queue in the TTFT: %+v", lv.TTFT)
	}
	t.Logf("%d requests, send lag p99 %.3f ms, TTFT min %.0f max %.0f ms", lv.Requests, *lv.SendLag,
		lv.TTFT.Min, lv.TTFT.Max)
}
