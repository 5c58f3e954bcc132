package openai

import (
	"fmt"
	"io"
	"maps"
	"math"
	"strconv"
	"strings"
)

// The metric names, help texts, label names and bucket bounds are vLLM's V1 PrometheusStatLogger
// (vllm/v1/metrics/loggers.py, vllm-project/vllm 0.10/0.11: labelnames ["model_name", "engine"], counters
// vllm:num_preemptions, vllm:prompt_tokens, vllm:generation_tokens, vllm:request_success with finished_reason,
// the TTFT, TPOT and request_latency_buckets lists). The text is prometheus_client's exposition format as
// generate_latest writes it: labels sorted by name (le among them), floats as floatToGoString ("0.0", "+Inf"),
// counters with the _total suffix. No _created samples and no process_/python_ collectors: scrapers of these
// figures never read them.

var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
		7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	tpotBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
		10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
		50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	// FinishReason in vllm/v1/engine/__init__.py: str() of each.
	finishReasons = []string{"stop", "length", "abort"}
)

type histogram struct {
	bounds []float64
	counts []float64 // per bucket, not cumulative
	sum    float64
	count  float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]float64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.sum += v
	h.count++
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
			return
		}
	}
}

type stats struct {
	promptTokens, generationTokens float64
	success                        map[string]float64
	queue, prefill, decode, e2e    histogram
	ttft, tpot                     histogram
}

func newStats() stats {
	return stats{
		success: map[string]float64{},
		queue:   newHistogram(requestLatencyBuckets), prefill: newHistogram(requestLatencyBuckets),
		decode: newHistogram(requestLatencyBuckets), e2e: newHistogram(requestLatencyBuckets),
		ttft: newHistogram(ttftBuckets), tpot: newHistogram(tpotBuckets),
	}
}

func (s stats) clone() stats {
	c := s
	c.success = maps.Clone(s.success)
	for _, h := range []*histogram{&c.queue, &c.prefill, &c.decode, &c.e2e, &c.ttft, &c.tpot} {
		h.counts = append([]float64(nil), h.counts...)
	}
	return c
}

// writeMetrics renders /metrics. kv_cache_usage_perc is modelled as running/capacity: every running sequence
// holds an equal share of the cache, so a full batch reads 1.0. Nothing is ever preempted (the queue takes the
// overflow), so vllm:num_preemptions_total stays 0, truthfully.
func writeMetrics(w io.Writer, model string, running, waiting, capacity int, s stats) {
	labels := `engine="0",model_name="` + escapeLabel(model) + `"`
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %s\n", name, help, name, name, labels, goFloat(v))
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s{%s} %s\n", name, help, name, name, labels, goFloat(v))
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(running))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(waiting))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
		float64(running)/float64(max(capacity, 1)))
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", 0)
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", s.promptTokens)
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", s.generationTokens)
	name := "vllm:request_success_total"
	fmt.Fprintf(w, "# HELP %s Count of successfully processed requests.\n# TYPE %s counter\n", name, name)
	for _, r := range finishReasons {
		fmt.Fprintf(w, "%s{engine=\"0\",finished_reason=\"%s\",model_name=\"%s\"} %s\n", name, r,
			escapeLabel(model), goFloat(s.success[r]))
	}
	hist := func(name, help string, h histogram) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
		cum := 0.0
		for i, b := range h.bounds {
			cum += h.counts[i]
			fmt.Fprintf(w, "%s_bucket{engine=\"0\",le=\"%s\",model_name=\"%s\"} %s\n", name, goFloat(b),
				escapeLabel(model), goFloat(cum))
		}
		fmt.Fprintf(w, "%s_bucket{engine=\"0\",le=\"+Inf\",model_name=\"%s\"} %s\n", name, escapeLabel(model),
			goFloat(h.count))
		fmt.Fprintf(w, "%s_count{%s} %s\n%s_sum{%s} %s\n", name, labels, goFloat(h.count), name, labels,
			goFloat(h.sum))
	}
	hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft)
	hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", s.tpot)
	hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.e2e)
	hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", s.queue)
	hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", s.prefill)
	hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", s.decode)
}

// goFloat is prometheus_client's floatToGoString: Python's repr of a float ("1.0", "0.25", "1e-05"), +Inf.
func goFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1e16:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// escapeLabel escapes a label value as the exposition format requires (the model name is the operator's).
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}
