package loadgen

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/workload"
)

// failurePause: how long a closed-loop stream waits after a failed request.
const failurePause = 10 * time.Millisecond

// maxInFlight bounds an open-loop level's requests in flight: past it an
// arrival is not sent and counts as Unsent, so a server that stopped
// answering cannot make the generator spawn without end.
const maxInFlight = 10_000

// Run measures every level in turn and returns them. When ctx ends (SIGTERM)
// it stops sending, cancels what is in flight and returns the levels
// measured so far, the cut one marked Partial, with ctx's error.
func Run(ctx context.Context, cfg Config) ([]workload.Level, error) {
	c := newClient(cfg.URL, cfg.Model, cfg.RequestTimeout, cfg.Retries, cfg.wrap)
	defer c.close()
	levels := make([]workload.Level, 0, len(cfg.Levels))
	for i, l := range cfg.Levels {
		lv, measured := runLevel(ctx, c, cfg, i, l)
		if measured {
			levels = append(levels, lv)
		}
		if ctx.Err() != nil {
			return levels, ctx.Err()
		}
	}
	return levels, nil
}

// source hands out the requests of a level: the buyer's prompts in turn,
// or synthetic ones, each drawn from its own seeded stream so that a run
// with the same seed asks the same.
type source struct {
	cfg   *Config
	level int
	next  atomic.Uint64
}

func (s *source) request() (prompt string, maxTokens, words int) {
	n := s.next.Add(1) - 1
	rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(s.level)<<40|n))
	if len(s.cfg.Prompts) > 0 {
		p := s.cfg.Prompts[n%uint64(len(s.cfg.Prompts))]
		if p.Text != "" {
			return p.Text, p.MaxTokens, 0
		}
		return synthetic(rng, p.Words), p.MaxTokens, p.Words
	}
	words = spread(rng, s.cfg.Input)
	return synthetic(rng, words), spread(rng, s.cfg.Output), words
}

// runLevel runs one level: warm-up, measured time, then the requests
// still in flight, each bounded by the request timeout. measured is false
// when it was cut before its measured time began.
func runLevel(ctx context.Context, c *client, cfg Config, idx int, l inventory.Level) (workload.Level, bool) {
	name := l.String()
	progress(cfg, "loadgen: %s: %s warm-up, %s measured", name, cfg.Warmup, cfg.Duration)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := &source{cfg: &cfg, level: idx}
	start := time.Now()
	warmEnd := start.Add(cfg.Warmup)
	end := warmEnd.Add(cfg.Duration)
	agg := newAggregate(cfg.Goodput, cfg.Seed+uint64(idx), warmEnd, end)

	var sc *scraper
	scDone := make(chan struct{})
	sctx, stopScrape := context.WithCancel(lctx)
	if cfg.MetricsPath != "" {
		sc = &scraper{hc: &http.Client{Transport: c.http.Transport}, url: c.url + cfg.MetricsPath}
		go func() {
			defer close(scDone)
			if !sleepUntil(sctx, warmEnd) {
				return
			}
			sc.run(sctx)
		}()
	} else {
		close(scDone)
	}

	send := func(at time.Time) (failed bool) {
		prompt, maxTokens, words := src.request()
		o := c.do(lctx, prompt, maxTokens, words)
		warm := at.Before(warmEnd)
		cfg.Log.write(name, at.Sub(start).Seconds(), warm, &o)
		// Throughput counts what arrived in the measured time, warm-up
		// requests' tokens included (aggregate.window); the counts and
		// latencies are the requests sent in it.
		agg.window(&o)
		if !warm {
			agg.add(&o)
		}
		return o.kind != "" && !o.cancelled
	}
	var wg sync.WaitGroup
	lv := workload.Level{Name: name, Concurrency: l.Concurrency, Rate: l.Rate}
	if l.Concurrency > 0 {
		for range l.Concurrency {
			wg.Go(func() {
				for lctx.Err() == nil {
					at := time.Now()
					if !at.Before(end) {
						return
					}
					// A server that refuses at once would make the stream spin
					// (millions of failures a second, the log filled): a
					// failure costs the stream a short pause, which leaves the
					// share of requests that fail as it is.
					if send(at) {
						sleepUntil(lctx, time.Now().Add(failurePause))
					}
				}
			})
		}
	} else {
		openLoop(lctx, cfg, idx, l.Rate, start, warmEnd, end, &wg, agg, send)
	}
	wg.Wait()
	stopScrape()
	<-scDone
	finished := time.Now()
	if !finished.After(warmEnd) {
		return lv, false
	}
	agg.fill(&lv, finished)
	if ctx.Err() != nil {
		lv.Partial = true
	}
	if sc != nil {
		// One scrape after the level drained: the counters' last value.
		if ctx.Err() == nil {
			sc.once(ctx)
		}
		lv.Metrics = sc.metrics()
	}
	progress(cfg, "loadgen: %s: %d requests, %d completed, %d failed, %d timed out, %.2f req/s, %.1f tok/s",
		name, lv.Requests, lv.Completed, lv.Failed, lv.TimedOut, lv.RequestsPerSec, lv.OutputTokensPerSec)
	return lv, true
}

// openLoop sends Poisson arrivals at rate per second on schedule,
// whatever the server answers, so that queueing shows in the latencies;
// how late each was sent is kept, and an arrival it could not send counts.
func openLoop(ctx context.Context, cfg Config, idx int, rate float64, start, warmEnd, end time.Time,
	wg *sync.WaitGroup, agg *aggregate, send func(time.Time) bool) {
	next := arrivals(cfg.Seed, idx, rate)
	limit := int64(maxInFlight)
	if cfg.maxInFlight > 0 {
		limit = cfg.maxInFlight
	}
	var inFlight atomic.Int64
	at := start
	for {
		at = at.Add(next())
		if !at.Before(end) {
			return
		}
		measured := !at.Before(warmEnd)
		if !sleepUntil(ctx, at) {
			// Stopped: the rest of the schedule is not the generator
			// falling behind.
			return
		}
		now := time.Now()
		if !now.Before(end) || inFlight.Load() >= limit {
			if measured {
				agg.unsent()
			}
			continue
		}
		if measured {
			agg.lag(now.Sub(at))
		}
		inFlight.Add(1)
		sched := at
		wg.Go(func() {
			defer inFlight.Add(-1)
			send(sched)
		})
	}
}

// arrivals are the gaps between a Poisson process's arrivals at rate per
// second (exponential, mean 1/rate), from a source of their own seeded by
// the run's seed and the level, so that a run is asked the same again.
func arrivals(seed uint64, level int, rate float64) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, 1<<63|uint64(level)))
	return func() time.Duration {
		return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	}
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func progress(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		cfg.Progress(format, args...)
	}
}

// errorKinds bounds Level.Errors: past it every new kind counts as "other".
const errorKinds = 32

// kindOf keeps a failure's kind short and free of node text beyond its
// class.
func kindOf(k string) string {
	if len(k) > 40 {
		k = k[:40]
	}
	return strings.ToValidUTF8(k, "?")
}
