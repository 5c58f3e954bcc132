package loadgen

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"gpuaccept/orchestrator/inventory"
)

// vllmMetrics is /metrics as vLLM's server writes it (prometheus_client:
// HELP and TYPE lines, _created samples, labels), the figures the
// generator reads set from i.
func vllmMetrics(i int) string {
	return fmt.Sprintf(`# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} %d.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} %g
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} %d.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="m"} 1.733e+09
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} %g
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} %d.0
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} %d.0
# HELP vllm:request_queue_time_seconds_created Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds_created gauge
vllm:request_queue_time_seconds_created{engine="0",model_name="m"} 1.733e+09
`, i%3, 0.1*float64(i%5), 2*i, 0.02*float64(10*i), 10*i, 10*i)
}

func TestParseVLLMMetrics(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(vllmMetrics(4)))
	if err != nil {
		t.Fatal(err)
	}
	if !s.waitingOK || s.waiting != 1 || !s.kvOK || s.kv != 0.4 || !s.preemptOK || s.preemptions != 8 ||
		!s.queueOK || s.queueCount != 40 || s.queueSum != 0.8 {
		t.Fatalf("%+v", s)
	}
	old := strings.ReplaceAll(vllmMetrics(1), "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
	if s, err := parseMetrics(strings.NewReader(old)); err != nil || !s.kvOK || s.kv != 0.1 {
		t.Fatalf("vLLM before 0.10 names it gpu_cache_usage_perc: %+v %v", s, err)
	}
	if s, err := parseMetrics(strings.NewReader("# TYPE other gauge\nother 1\n")); err != nil || s.kvOK || s.queueOK {
		t.Fatalf("a server without vLLM's metrics: %+v %v", s, err)
	}
	if _, err := parseMetrics(strings.NewReader("vllm:num_requests_waiting{ 1\n")); err == nil {
		t.Fatal("broken text parsed")
	}
}

func TestLevelScrapesMetrics(t *testing.T) {
	var n atomic.Int64
	f := &fakeServer{}
	s := f.start(t)
	mux := http.NewServeMux()
	mux.Handle("/", s.Config.Handler)
	mux.HandleFunc("GET /prom", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, vllmMetrics(int(n.Add(1))))
	})
	s.Config.Handler = mux
	cfg := testConfig(s.URL, inventory.Level{Concurrency: 1})
	cfg.MetricsPath = "/prom"
	lv := runOne(t, cfg)
	m := lv.Metrics
	if m == nil || m.Scrapes < 2 || m.Error != "" {
		t.Fatalf("%+v", m)
	}
	// Every scrape i: 10i queued requests having waited 0.2i s in all, so
	// the mean wait of those queued between the first and the last is
	// 20 ms; preemptions grow 2 a scrape; waiting and KV cache peak.
	if m.QueueMs == nil || *m.QueueMs < 19.999 || *m.QueueMs > 20.001 {
		t.Errorf("queue %v", m.QueueMs)
	}
	if m.Preemptions == nil || *m.Preemptions != float64(2*(m.Scrapes-1)) {
		t.Errorf("preemptions %v over %d scrapes", m.Preemptions, m.Scrapes)
	}
	if m.WaitingMax == nil || *m.WaitingMax != 2 || m.KVCacheMax == nil || *m.KVCacheMax < 0.1 {
		t.Errorf("waiting %v, KV cache %v", m.WaitingMax, m.KVCacheMax)
	}

	cfg.MetricsPath = "/nothing-here"
	if m := runOne(t, cfg).Metrics; m == nil || m.Scrapes != 0 || !strings.Contains(m.Error, "404") ||
		m.QueueMs != nil || m.KVCacheMax != nil {
		t.Fatalf("a server without metrics: not measured, and why: %+v", m)
	}
	cfg.MetricsPath = ""
	if m := runOne(t, cfg).Metrics; m != nil {
		t.Fatalf("--metrics-path none: %+v", m)
	}
}
