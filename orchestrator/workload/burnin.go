package workload

import "time"

// Burnin is one node's burn-in (phase burnin's data): every run's figures, in order, and
// each GPU's drift. Error: why it ended early or a run failed.
type Burnin struct {
	// DurationS is the burn-in's planned length, ElapsedS what it ran.
	DurationS float64 `json:"duration_s"`
	ElapsedS  float64 `json:"elapsed_s"`
	// Seconds and Size are each run's (phases.burnin.compute).
	Seconds int         `json:"seconds"`
	Size    int         `json:"size"`
	Runs    []BurninRun `json:"runs,omitempty"`
	// Resumed is how many of Runs a window lost mid burn-in had finished:
	// its resume ran only the time left (ElapsedS counts both).
	Resumed int          `json:"resumed_runs,omitempty"`
	Drift   []GemmDrift  `json:"drift,omitempty"`
	Error   string       `json:"error,omitempty"`
	Compute *GemmSummary `json:"compute,omitempty"`
}

// BurninRun is one run of gemm.py: when it started and each GPU's figure.
type BurninRun struct {
	At   time.Time `json:"at"`
	GPUs []GemmGPU `json:"gpus"`
}

// GemmGPU is one GPU's line of gemm.py.
type GemmGPU struct {
	GPU    int     `json:"gpu"`
	TFLOPS float64 `json:"tflops"`
	Iters  int64   `json:"iters"`
	Secs   float64 `json:"secs"`
	// On is where it multiplied: "cuda", or "cpu" in the lab (no GPU's
	// rate, never held to the quote).
	On     string `json:"on,omitempty"`
	Device string `json:"device,omitempty"`
	Error  string `json:"error,omitempty"`
}

// GemmDrift is a GPU's rate in the first run and the last, and the change
// in percent of the first (negative: it slowed).
type GemmDrift struct {
	GPU   int     `json:"gpu"`
	First float64 `json:"first"`
	Last  float64 `json:"last"`
	Pct   float64 `json:"pct"`
}

// GemmSummary is each GPU's figure over the runs: the median of its runs
// (never the best), which BURN-001 judges.
type GemmSummary struct {
	GPUs []GemmGPU `json:"gpus"`
}
