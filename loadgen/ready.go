package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// ReadyResult is `loadgen ready`'s answer: seconds from its start until
// the health endpoint answered 200, and until one completion came back.
type ReadyResult struct {
	Error      string   `json:"error,omitempty"`
	HealthSecs *float64 `json:"health_seconds,omitempty"`
	ReadySecs  *float64 `json:"ready_seconds,omitempty"`
}

// pollEvery: how often the health endpoint and the first completion are
// tried; a server loading its weights takes minutes, so a second costs
// little of the figure and nothing of the server.
const pollEvery = 500 * time.Millisecond

// Ready waits for the server: its health endpoint (a refused connection
// is a server not up yet), then one streamed completion of 4 tokens.
// The error is the last thing that kept it from being ready. Its times
// count from since, this machine's clock when the server was started
// (zero: from Ready's own start), so that no time between the two is lost
// from the figure; timeout counts from now.
func Ready(ctx context.Context, url, model, healthPath string, timeout time.Duration, since time.Time) ReadyResult {
	start := time.Now()
	if !since.IsZero() && since.Before(start) {
		start = since
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url = strings.TrimRight(url, "/")
	c := newClient(url, model, min(timeout, time.Minute), 0, nil)
	defer c.close()
	var r ReadyResult
	last := errors.New("no answer yet")
	for {
		if err := health(ctx, c.http, url+healthPath); err == nil {
			break
		} else {
			last = err
		}
		if !sleepUntil(ctx, time.Now().Add(pollEvery)) {
			r.Error = fmt.Sprintf("GET %s: not 200 within %s: %v", healthPath, timeout, last)
			return r
		}
	}
	h := secs(time.Since(start))
	r.HealthSecs = &h
	for {
		o := c.do(ctx, "Say hello.", 4, 0)
		if o.kind == "" && !o.cancelled {
			break
		}
		last = errors.New(o.kind)
		if o.detail != "" {
			last = fmt.Errorf("%s: %s", o.kind, clip(o.detail, 300))
		}
		if !sleepUntil(ctx, time.Now().Add(pollEvery)) {
			r.Error = fmt.Sprintf("healthy after %.1fs, but no completion answered within %s: %v", h, timeout, last)
			return r
		}
	}
	rs := secs(time.Since(start))
	r.ReadySecs = &rs
	return r
}

func health(ctx context.Context, hc *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("http %d", resp.StatusCode)
	}
	return nil
}

func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
