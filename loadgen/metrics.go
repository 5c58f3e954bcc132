package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"gpuaccept/orchestrator/workload"
)

// maxMetricsBody bounds one scrape: vLLM's /metrics is tens of KiB.
const maxMetricsBody = 8 << 20

// scrape is what one /metrics answer said, each figure summed over its
// series (one per model or engine); ok false for a metric not there.
type scrape struct {
	queueSum, queueCount float64
	queueOK              bool
	waiting              float64
	waitingOK            bool
	preemptions          float64
	preemptOK            bool
	kv                   float64
	kvOK                 bool
}

// scrapeOnce reads the server's Prometheus text.
func scrapeOnce(ctx context.Context, hc *http.Client, url string) (scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return scrape{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("http %d", resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, maxMetricsBody))
}

// parseMetrics reads vLLM's metrics (and their older names) from r.
func parseMetrics(r io.Reader) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return scrape{}, err
	}
	var s scrape
	if f := fams["vllm:request_queue_time_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				s.queueSum += h.GetSampleSum()
				s.queueCount += float64(h.GetSampleCount())
				s.queueOK = true
			}
		}
	}
	s.waiting, s.waitingOK = sum(fams["vllm:num_requests_waiting"])
	s.preemptions, s.preemptOK = sum(fams["vllm:num_preemptions_total"])
	if !s.preemptOK {
		// The text format names a counter's family without _total.
		s.preemptions, s.preemptOK = sum(fams["vllm:num_preemptions"])
	}
	if s.kv, s.kvOK = sum(fams["vllm:kv_cache_usage_perc"]); !s.kvOK {
		s.kv, s.kvOK = sum(fams["vllm:gpu_cache_usage_perc"])
	}
	return s, nil
}

// sum of a gauge's or counter's series.
func sum(f *dto.MetricFamily) (float64, bool) {
	if f == nil {
		return 0, false
	}
	v, ok := 0.0, false
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge() != nil:
			v, ok = v+m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			v, ok = v+m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			v, ok = v+m.GetUntyped().GetValue(), true
		}
	}
	return v, ok
}

// scraper samples /metrics every second during a level's measured time.
type scraper struct {
	hc      *http.Client
	url     string
	first   *scrape
	last    *scrape
	max     scrape
	scrapes int
	err     error
}

// run scrapes until ctx ends.
func (s *scraper) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *scraper) once(ctx context.Context) {
	m, err := scrapeOnce(ctx, s.hc, s.url)
	if err != nil {
		if ctx.Err() == nil {
			s.err = err
		}
		return
	}
	s.scrapes++
	if s.first == nil {
		s.first = &m
	}
	s.last = &m
	if m.waitingOK {
		s.max.waiting, s.max.waitingOK = max(s.max.waiting, m.waiting), true
	}
	if m.kvOK {
		s.max.kv, s.max.kvOK = max(s.max.kv, m.kv), true
	}
}

// metrics is the level's figures: counters as the change between the
// first and the last scrape, gauges at their most. A figure the server
// does not export stays nil (not measured, never 0).
func (s *scraper) metrics() *workload.ServerMetrics {
	out := &workload.ServerMetrics{Scrapes: s.scrapes}
	if s.err != nil {
		out.Error = clip(strings.ToValidUTF8(s.err.Error(), "?"), 200)
	}
	if s.first != nil && s.last != nil {
		f, l := s.first, s.last
		if f.queueOK && l.queueOK && l.queueCount > f.queueCount {
			q := (l.queueSum - f.queueSum) / (l.queueCount - f.queueCount) * 1000
			out.QueueMs = &q
		}
		if f.preemptOK && l.preemptOK {
			p := max(l.preemptions-f.preemptions, 0)
			out.Preemptions = &p
		}
	}
	if s.max.waitingOK {
		w := s.max.waiting
		out.WaitingMax = &w
	}
	if s.max.kvOK {
		k := s.max.kv
		out.KVCacheMax = &k
	}
	return out
}
