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
		if got := lv.InputTokensPerSec * lv.Seconds / float64(lv.Completed); math.Abs(got-wantIn) > 0.05 {
			t.Errorf("usage chunk %v: %.2f input tokens a request, want %v", !noUsage, got, wantIn)
		}
		if lv.Seconds < 0.5 || lv.RequestsPerSec <= 0 || lv.SendLag != nil {
			t.Errorf("seconds %v, req/s %v, send lag %v", lv.Seconds, lv.RequestsPerSec, lv.SendLag)
		}
	}
}
