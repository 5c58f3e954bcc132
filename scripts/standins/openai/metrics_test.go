package openai

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestMetricsExposition holds /metrics to the Prometheus text format's rules a scraper relies on: every
// sample's family declared by # TYPE before it, label values quoted and escaped, histogram buckets cumulative
// with +Inf equal to _count, and the series the loadgen scrapes present.
func TestMetricsExposition(t *testing.T) {
	s := newStats()
	for _, v := range []float64{0.0005, 0.003, 0.3, 0.3, 9000} {
		s.ttft.observe(v)
	}
	s.success["length"] = 5
	var b bytes.Buffer
	writeMetrics(&b, `odd "model"\name`, 3, 7, 4, s)
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\} (\S+)$`)
	typed := map[string]string{}
	var bucketPrev float64
	var infSeen float64 = -1
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" {
			typed[f[2]] = f[3]
			continue
		} else if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample line: %q", line)
		}
		if !strings.Contains(m[2], `model_name="odd \"model\"\\name"`) {
			t.Errorf("model_name not escaped: %q", line)
		}
		v, err := strconv.ParseFloat(strings.Replace(m[3], "+Inf", "Inf", 1), 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		family := m[1]
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(family, suf); ok && typed[base] == "histogram" {
				family = base
			}
		}
		if typed[family] == "" {
			t.Errorf("%q: no # TYPE for %s before it", line, family)
		}
		if strings.HasPrefix(line, "vllm:time_to_first_token_seconds_bucket") {
			if v < bucketPrev {
				t.Errorf("buckets not cumulative at %q", line)
			}
			bucketPrev = v
			if strings.Contains(line, `le="+Inf"`) {
				infSeen = v
			}
		}
		if strings.HasPrefix(line, "vllm:time_to_first_token_seconds_count") && v != infSeen {
			t.Errorf("_count %v, +Inf bucket %v", v, infSeen)
		}
	}
	for name, typ := range map[string]string{
		"vllm:request_queue_time_seconds": "histogram", "vllm:num_requests_waiting": "gauge",
		"vllm:num_requests_running": "gauge", "vllm:num_preemptions_total": "counter",
		"vllm:kv_cache_usage_perc": "gauge", "vllm:time_to_first_token_seconds": "histogram",
		"vllm:e2e_request_latency_seconds": "histogram",
	} {
		if typed[name] != typ {
			t.Errorf("%s: type %q, want %s", name, typed[name], typ)
		}
	}
	for _, want := range []string{
		`vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="odd \"model\"\\name"} 1.0`,
		`vllm:time_to_first_token_seconds_bucket{engine="0",le="2560.0",model_name="odd \"model\"\\name"} 4.0`,
		`vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="odd \"model\"\\name"} 5.0`,
		`vllm:kv_cache_usage_perc{engine="0",model_name="odd \"model\"\\name"} 0.75`,
		`vllm:num_requests_waiting{engine="0",model_name="odd \"model\"\\name"} 7.0`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
}

func TestGoFloat(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 12: "12.0", 0.25: "0.25", 1e-05: "1e-05", 2560: "2560.0"} {
		if got := goFloat(v); got != want {
			t.Errorf("goFloat(%v) = %q, want Python's repr %q", v, got, want)
		}
	}
}
