package loadgen

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// An open loop whose requests do not come back stops at its bound of
// requests in flight, and the arrivals it did not send are counted.
func TestOpenLoopUnsent(t *testing.T) {
	f := &fakeServer{hook: func(w http.ResponseWriter, r *http.Request) {
		// The body read, the server notices the client hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}}
	s := f.start(t)
	cfg := testConfig(s.URL, inventory.Level{Rate: 100})
	cfg.Warmup, cfg.Duration, cfg.RequestTimeout, cfg.maxInFlight = 0, 500*time.Millisecond, time.Second, 5
	lv := runOne(t, cfg)
	if lv.Requests != 5 || lv.TimedOut != 5 || lv.Unsent < 20 || lv.SendLag == nil {
		t.Fatalf("5 in flight, the rest unsent: %+v", lv)
	}
}

func TestRequestLogBound(t *testing.T) {
	var buf bytes.Buffer
	l := NewRequestLog(&buf)
	l.max = 3
	o := outcome{kind: "http 500", detail: strings.Repeat("é", 1000), ttft: math.NaN(), e2el: math.NaN(),
		tpot: math.NaN()}
	for range 5 {
		l.write("rate:1", 0.5, false, &o)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(gz)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 4 || !strings.Contains(lines[3], `"dropped":2`) || len([]rune(lines[0])) > maxLogError+120 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
}

func TestReservoirBound(t *testing.T) {
	r := reservoir{max: 1000, rng: rand.New(rand.NewPCG(1, 1))}
	for i := range 100_000 {
		r.add(float64(i))
	}
	if len(r.s) != 1000 || r.seen != 100_000 {
		t.Fatalf("%d kept of %d", len(r.s), r.seen)
	}
	sum := 0.0
	for _, x := range r.s {
		sum += x
	}
	// A uniform sample of 0..99,999: mean near 50,000 (standard error
	// about 900).
	if m := sum / 1000; m < 45_000 || m > 55_000 {
		t.Fatalf("mean %.0f: not a uniform sample", m)
	}
}
