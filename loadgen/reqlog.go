package loadgen

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
)

// MaxLogLines bounds the request log: past it requests are counted, not
// written (the bundle carries the log, and a level at a high rate for an
// hour would be millions of lines).
const MaxLogLines = 1_000_000

// maxLogError bounds a failure's text in the log (node text: the server's
// error body).
const maxLogError = 300

// RequestLog is the gzip JSONL request log: one line per request.
type RequestLog struct {
	max     int // lines kept: MaxLogLines
	mu      sync.Mutex
	gz      *gzip.Writer
	enc     *json.Encoder
	lines   int
	dropped int
	err     error
}

// logLine is one request in the log. Latencies are omitted where not
// measured (a failed request has no TTFT).
type logLine struct {
	Level        string   `json:"level"`
	Start        float64  `json:"start_s"` // from the level's start
	Warmup       bool     `json:"warmup,omitempty"`
	InputTokens  int      `json:"input_tokens"`
	OutputTokens int      `json:"output_tokens"`
	TTFT         *float64 `json:"ttft_ms,omitempty"`
	E2EL         *float64 `json:"e2el_ms,omitempty"`
	TPOT         *float64 `json:"tpot_ms,omitempty"`
	Retried      int      `json:"retried,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// NewRequestLog writes the log to w; Close ends the gzip stream.
func NewRequestLog(w io.Writer) *RequestLog {
	gz := gzip.NewWriter(w)
	return &RequestLog{max: MaxLogLines, gz: gz, enc: json.NewEncoder(gz)}
}

func (l *RequestLog) write(level string, start float64, warmup bool, o *outcome) {
	if l == nil {
		return
	}
	line := logLine{Level: level, Start: math.Round(start*1e6) / 1e6, Warmup: warmup,
		InputTokens: o.inputTokens, OutputTokens: o.outputTokens, Retried: o.retried,
		TTFT: figure(o.ttft), E2EL: figure(o.e2el), TPOT: figure(o.tpot)}
	switch {
	case o.cancelled:
		line.Error = "cancelled: the generator stopped"
	case o.kind != "":
		line.Error = o.kind
		if o.detail != "" {
			line.Error += ": " + o.detail
		}
		if r := []rune(line.Error); len(r) > maxLogError {
			line.Error = string(r[:maxLogError]) + "…"
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines >= l.max {
		l.dropped++
		return
	}
	l.lines++
	if err := l.enc.Encode(line); err != nil && l.err == nil {
		l.err = err
	}
}

// Close ends the log, with a last line counting the requests left out
// when the bound was reached; it returns the first write error.
func (l *RequestLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 && l.err == nil {
		l.err = l.enc.Encode(map[string]any{"dropped": l.dropped,
			"note": fmt.Sprintf("the log keeps the first %d requests", l.max)})
	}
	if err := l.gz.Close(); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}

func figure(x float64) *float64 {
	if math.IsNaN(x) {
		return nil
	}
	x = math.Round(x*1000) / 1000
	return &x
}
