// Package loadgen is the load generator gpuaccept ships to every node
// (`gpuaccept loadgen`): it drives the node's OpenAI-compatible server
// over loopback, so that neither the coordinator's link nor its CPU shapes
// the figures, and writes workload.Level evidence. Timings are taken from
// the wire (when each SSE event's first byte arrived), never from the
// server's own timestamps.
package loadgen

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// Config is one `loadgen run`.
type Config struct {
	URL    string // the server's base URL, http://127.0.0.1:8000
	Model  string
	Levels []inventory.Level
	// Duration is measured per level, after Warmup (whose requests count
	// in no figure).
	Duration, Warmup time.Duration
	// Prompts is the buyer's set; nil: synthetic lengths.
	Prompts []Prompt
	// Input and Output: the synthetic length distribution (words asked
	// for, tokens to generate).
	Input, Output Lengths
	Seed          uint64
	// RequestTimeout bounds one request, its whole stream included.
	RequestTimeout time.Duration
	// Retries of a request whose connection failed (never of one the
	// server answered).
	Retries int
	// MetricsPath is scraped every second during a level; "" is none.
	MetricsPath string
	Goodput     Goodput
	// Log, when set, receives one line per request.
	Log *RequestLog
	// Progress, when set, is told of each level as it starts and ends.
	Progress func(format string, args ...any)

	// wrap, in tests, stands between the generator and its transport;
	// maxInFlight, in tests, lowers the open loop's bound (0: maxInFlight).
	wrap        func(http.RoundTripper) http.RoundTripper
	maxInFlight int64
}

// Lengths is a synthetic length: Mean, and uniform within ±Spread of it.
type Lengths struct {
	Mean   int
	Spread float64
}

// ParseLengths reads "512" or "512:0.2".
func ParseLengths(s string) (Lengths, error) {
	m, sp, hasSpread := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.Atoi(m)
	if err != nil || n < 1 || n > 1<<20 {
		return Lengths{}, fmt.Errorf("%q: want N or N:SPREAD, N a token count 1..1048576", s)
	}
	l := Lengths{Mean: n}
	if hasSpread {
		f, err := strconv.ParseFloat(sp, 64)
		if err != nil || f < 0 || f >= 1 {
			return Lengths{}, fmt.Errorf("%q: SPREAD is a fraction 0 ≤ x < 1 (0.2: within ±20%% of N)", s)
		}
		l.Spread = f
	}
	return l, nil
}

// Goodput is the buyer's latency targets: a request is good when it
// completed and met every target set (zero: not set).
type Goodput struct {
	TTFT, TPOT, ITL, E2EL time.Duration
}

// Set says whether any target is.
func (g Goodput) Set() bool { return g.TTFT > 0 || g.TPOT > 0 || g.ITL > 0 || g.E2EL > 0 }

// ParseGoodput reads "ttft=800ms,tpot=50ms,itl=100ms,e2el=5s".
func ParseGoodput(s string) (Goodput, error) {
	var g Goodput
	if strings.TrimSpace(s) == "" {
		return g, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || err != nil || d <= 0 {
			return g, fmt.Errorf("%q: want NAME=DURATION (ttft=800ms), NAME one of ttft, tpot, itl, e2el", kv)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "ttft":
			g.TTFT = d
		case "tpot":
			g.TPOT = d
		case "itl":
			g.ITL = d
		case "e2el":
			g.E2EL = d
		default:
			return g, fmt.Errorf("%q: unknown target %q: one of ttft, tpot, itl, e2el", kv, k)
		}
	}
	return g, nil
}

// ParseLevels reads "concurrency:1,concurrency:32,rate:8".
func ParseLevels(s string) ([]inventory.Level, error) {
	var ls []inventory.Level
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		l, err := inventory.ParseLevel(f)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("no level: give concurrency:N or rate:R, comma-separated")
	}
	return ls, nil
}
