package loadgen

import (
	"context"
	"math"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/workload"
)

func testConfig(url string, levels ...inventory.Level) Config {
	return Config{URL: url, Model: "m", Levels: levels, Duration: 500 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Input: Lengths{Mean: 8}, Output: Lengths{Mean: 5}, Seed: 1,
		RequestTimeout: 5 * time.Second}
}

func runOne(t *testing.T, cfg Config) workload.Level {
	t.Helper()
	ls, err := Run(context.Background(), cfg)
	if err != nil || len(ls) != 1 {
		t.Fatalf("Run: %d levels, %v", len(ls), err)
	}
	return ls[0]
}

func TestClosedLoopCounts(t *testing.T) {
	for _, noUsage := range []bool{false, true} {
		f := &fakeServer{ttft: 5 * time.Millisecond, tokenDelay: 2 * time.Millisecond, noUsage: noUsage}
		s := f.start(t)
		lv := runOne(t, testConfig(s.URL, inventory.Level{Concurrency: 4}))
		if lv.Requests == 0 || lv.Completed != lv.Requests || lv.Failed != 0 {
			t.Fatalf("usage chunk %v: %+v", !noUsage, lv)
		}
		if lv.OutputTokens.Min != 5 || lv.OutputTokens.Max != 5 {
			t.Errorf("usage chunk %v: output tokens %+v, want 5 each", !noUsage, lv.OutputTokens)
		}
		if lv.TTFT.N != lv.Completed || lv.ITL.N != 4*lv.Completed || lv.TPOT.N != lv.Completed {
			t.Errorf("samples: ttft %d itl %d tpot %d for %d completed", lv.TTFT.N, lv.ITL.N, lv.TPOT.N, lv.Completed)
		}
		// Warm-up excluded: the server saw more than the level counts.
		if int(f.n.Load()) <= lv.Requests {
			t.Errorf("server saw %d requests, level counts %d: warm-up not excluded?", f.n.Load(), lv.Requests)
		}
		wantIn := 7.0 // the usage chunk's prompt_tokens
		if noUsage {
			wantIn = 8 // the synthetic words asked for
		}
		if got := lv.InputTokensPerSec / lv.RequestsPerSec; math.Abs(got-wantIn) > 0.05 {
			t.Errorf("usage chunk %v: %.2f input tokens a request, want %v", !noUsage, got, wantIn)
		}
		if lv.Seconds < 0.5 || lv.RequestsPerSec <= 0 || lv.SendLag != nil {
			t.Errorf("seconds %v, req/s %v, send lag %v", lv.Seconds, lv.RequestsPerSec, lv.SendLag)
		}
	}
}

// TestThroughputOverTheWindow: requests of 40 tokens 10 ms apart (about
// 0.4 s) in a level measured for 1 s: the streams are busy with warm-up
// requests when it begins and the last ones drain after it. The output
// tokens/s and requests/s are the server's own rate within a few %; the
// old rule (the requests sent in the window over the time to the last
// one's end) read about 20 % low here.
func TestThroughputOverTheWindow(t *testing.T) {
	f := &fakeServer{ttft: 10 * time.Millisecond, tokenDelay: 10 * time.Millisecond}
	s := f.start(t)
	cfg := testConfig(s.URL, inventory.Level{Concurrency: 4})
	cfg.Duration, cfg.Warmup, cfg.Output = time.Second, 200*time.Millisecond, Lengths{Mean: 40}
	cfg.wrap = stamped
	lv := runOne(t, cfg)
	if lv.Seconds != 1 {
		t.Errorf("seconds %v, want the measured duration 1", lv.Seconds)
	}
	// The truth: the token events the server flushed in the measured
	// time (the level began when its first request was sent, to within
	// a millisecond), and the requests' shares of it.
	f.mu.Lock()
	defer f.mu.Unlock()
	var first time.Time
	for _, tr := range f.truth {
		if first.IsZero() || tr.sent.Before(first) {
			first = tr.sent
		}
	}
	from, to := first.Add(cfg.Warmup), first.Add(cfg.Warmup+cfg.Duration)
	tokens, reqs := 0, 0.0
	for _, tr := range f.truth {
		at := tr.sent.Add(time.Duration(tr.ttft * float64(time.Millisecond)))
		for i := 0; ; i++ {
			if !at.Before(from) && at.Before(to) {
				tokens++
			}
			if i == len(tr.itl) {
				break
			}
			at = at.Add(time.Duration(tr.itl[i] * float64(time.Millisecond)))
		}
		lo, hi := tr.sent, at
		life := hi.Sub(lo)
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			reqs += float64(hi.Sub(lo)) / float64(life)
		}
	}
	wantTok, wantReq := float64(tokens), reqs
	// The old rule on the same requests, to show the level is one where
	// it reads low: the tokens of the requests sent in the window over
	// the time from its start to the last one's end.
	oldTok, stop := 0, to
	for _, tr := range f.truth {
		if tr.sent.Before(from) || !tr.sent.Before(to) {
			continue
		}
		end := tr.sent.Add(time.Duration(tr.ttft * float64(time.Millisecond)))
		for _, g := range tr.itl {
			end = end.Add(time.Duration(g * float64(time.Millisecond)))
		}
		oldTok += 1 + len(tr.itl)
		if end.After(stop) {
			stop = end
		}
	}
	if old := float64(oldTok) / stop.Sub(from).Seconds(); old > 0.9*wantTok {
		t.Errorf("the old rule reads %.1f tokens/s of %.1f: the level does not show its bias", old, wantTok)
	}
	if math.Abs(lv.OutputTokensPerSec/wantTok-1) > 0.03 {
		t.Errorf("%.1f output tokens/s, the server flushed %.1f a second", lv.OutputTokensPerSec, wantTok)
	}
	if math.Abs(lv.RequestsPerSec/wantReq-1) > 0.03 {
		t.Errorf("%.2f requests/s, the server's %.2f", lv.RequestsPerSec, wantReq)
	}
}
