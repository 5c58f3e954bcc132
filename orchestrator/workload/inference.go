package workload

// Inference is what the inference load test measured on one node: one
// entry per server (one per node, or per GPU group).
type Inference struct {
	Servers []Server `json:"servers"`
	// Runs: the whole measurement again, when acceptance.retest retested
	// a failed figure (Servers is the last run; Runs every run, in order,
	// the last included). Empty when it ran once.
	Runs [][]Server `json:"runs,omitempty"`
}

// Server is one OpenAI-compatible server on a node and the load it took.
type Server struct {
	Index int    `json:"index"`
	GPUs  string `json:"gpus,omitempty"` // the GPU group it was given ("0-3"); "" for all
	Port  int    `json:"port"`
	Image string `json:"image,omitempty"`
	// Ready: seconds from starting the container until the health endpoint
	// answered 200 (Health) and one completion came back (Ready).
	StartedSecs *float64 `json:"started_seconds,omitempty"` // the runtime said the container runs
	HealthSecs  *float64 `json:"health_seconds,omitempty"`
	ReadySecs   *float64 `json:"ready_seconds,omitempty"`
	// Error: why the server did not get ready or the load did not run;
	// LogTail: the server's last lines then (bounded, node text).
	Error   string  `json:"error,omitempty"`
	LogTail string  `json:"log_tail,omitempty"`
	Levels  []Level `json:"levels,omitempty"`
	// GPUMemPeakMiB / GPUMemTotalMiB: the most GPU memory in use on the
	// server's GPUs while it ran (nvidia-smi, sampled), and what they have.
	GPUMemPeakMiB  *float64 `json:"gpu_mem_peak_mib,omitempty"`
	GPUMemTotalMiB *float64 `json:"gpu_mem_total_mib,omitempty"`
	// RequestLog is the raw request log's path in the bundle
	// (raw/<node>/workload-requests-<server>.jsonl.gz).
	RequestLog string `json:"request_log,omitempty"`
}

// Level is one load level of the sweep: "concurrency:N" (closed loop) or
// "rate:R" (open loop, Poisson arrivals).
type Level struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	// Seconds the level was measured for (warm-up excluded).
	Seconds float64 `json:"seconds"`
	// Requests sent in the measured time; Completed, Failed (an error, an
	// HTTP status, a broken stream), TimedOut, and Retried (a connection
	// that failed before the server answered, sent again).
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	TimedOut  int `json:"timed_out"`
	Retried   int `json:"retried"`
	// Open loop only: SendLag is how late the generator sent its requests
	// against their Poisson schedule (p99, ms), and Unsent the arrivals
	// of the measured time it never sent (it fell behind, or too many were
	// in flight): a generator that cannot keep the rate shows here instead
	// of hiding its lag in the server's latencies.
	SendLag *float64 `json:"send_lag_p99_ms,omitempty"`
	Unsent  int      `json:"unsent,omitempty"`
	// Partial: the level was cut short (the generator was stopped): its
	// figures cover Seconds, not the duration asked for.
	Partial bool `json:"partial,omitempty"`
	// Errors counts failures by kind ("http 503", "stream ended early",
	// "timeout"): at most a few dozen kinds.
	Errors map[string]int `json:"errors,omitempty"`
	// Throughput over the measured time.
	RequestsPerSec     float64 `json:"requests_per_s"`
	OutputTokensPerSec float64 `json:"output_tokens_per_s"`
	InputTokensPerSec  float64 `json:"input_tokens_per_s"`
	// Latencies in milliseconds, over completed requests, named as vLLM's
	// bench serve and GuideLLM name them: TTFT (time to first token), TPOT
	// (time per output token after the first, one value per request), ITL
	// (every gap between tokens), E2EL (end-to-end).
	TTFT Dist `json:"ttft_ms"`
	TPOT Dist `json:"tpot_ms"`
	ITL  Dist `json:"itl_ms"`
	E2EL Dist `json:"e2el_ms"`
	// OutputTokens per completed request.
	OutputTokens Dist `json:"output_tokens"`
	// Goodput: the share of requests (0..1) that met every latency target
	// acceptance.workload set; nil when none is set.
	Goodput *float64 `json:"goodput,omitempty"`
	// Metrics scraped from the server during the level, when it has them.
	Metrics *ServerMetrics `json:"metrics,omitempty"`
}

// ServerMetrics are what a server's Prometheus endpoint said during a
// level (vLLM's names; other servers' where they mean the same).
type ServerMetrics struct {
	// QueueMs: the mean time a request waited in the server's queue
	// (vllm:request_queue_time_seconds over the level).
	QueueMs *float64 `json:"queue_ms,omitempty"`
	// WaitingMax: the most requests waiting at once
	// (vllm:num_requests_waiting, sampled).
	WaitingMax *float64 `json:"waiting_max,omitempty"`
	// Preemptions during the level (vllm:num_preemptions_total).
	Preemptions *float64 `json:"preemptions,omitempty"`
	// KVCacheMax: the most KV cache in use, 0..1
	// (vllm:kv_cache_usage_perc, formerly vllm:gpu_cache_usage_perc).
	KVCacheMax *float64 `json:"kv_cache_max,omitempty"`
	// Scrapes that answered, and the last error of one that did not.
	Scrapes int    `json:"scrapes"`
	Error   string `json:"error,omitempty"`
}
