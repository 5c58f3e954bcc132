package workload

import "time"

// Burnin is one node's burn-in (phase burnin's data): every iteration's figures, in
// order (the compute rate, then the intra-node collective and the stress tools each
// iteration also ran), and the drift of each GPU and of the collective from the first
// hour to the last. Error: why it ended early or a run failed.
type Burnin struct {
	// DurationS is the burn-in's planned length, ElapsedS what it ran.
	DurationS float64 `json:"duration_s"`
	ElapsedS  float64 `json:"elapsed_s"`
	// Seconds and Size are each run's (phases.burnin.compute).
	Seconds int `json:"seconds"`
	Size    int `json:"size"`
	// Runs are the iterations kept: every one of a short burn-in; past
	// a few hundred, those of the first and the last drift windows and
	// an even sample between them, each region thinned by halves
	// (RunsTotal counts them all). A burn-in of days on 1,000 nodes kept
	// every one in memory and in run.json.
	Runs      []BurninRun `json:"runs,omitempty"`
	RunsTotal int         `json:"runs_total,omitempty"`
	// Resumed is how many of Runs a window lost mid burn-in had finished:
	// its resume ran only the time left (ElapsedS counts both).
	Resumed int `json:"resumed_runs,omitempty"`
	// DriftWindowS is the span drift compares at each end: the first hour
	// against the last for a burn-in of 2 h or more, else the first
	// quarter of the duration against the last.
	DriftWindowS float64     `json:"drift_window_s,omitempty"`
	Drift        []GemmDrift `json:"drift,omitempty"`
	// CollectiveDrift is the intra-node collective's busbw over the same
	// windows.
	CollectiveDrift *BusBWDrift  `json:"collective_drift,omitempty"`
	Error           string       `json:"error,omitempty"`
	Compute         *GemmSummary `json:"compute,omitempty"`
	// NotMeasured: each load the node could not run (its tool not
	// installed), said once; the loop went on with the rest.
	NotMeasured []LoadUnmeasured `json:"not_measured,omitempty"`
}

// BurninRun is one iteration of the loop: when its gemm.py run started and
// each GPU's figure, then the intra-node collective's figure and the
// stress tools' exits, when they ran.
type BurninRun struct {
	At         time.Time         `json:"at"`
	GPUs       []GemmGPU         `json:"gpus"`
	Collective *BurninCollective `json:"collective,omitempty"`
	Loads      []BurninLoad      `json:"loads,omitempty"`
	// Cluster is the cluster-wide all-reduce that ended this iteration
	// (phases.burnin.cluster_allreduce), on the run of the node that
	// launched it only: one figure per round, not one per node.
	Cluster *BurninCollective `json:"cluster,omitempty"`
	// Workload is the workload phase's training job that ended this
	// iteration's round (phases.burnin.workload), on the same run.
	Workload *BurninWorkload `json:"workload,omitempty"`
}

// BurninWorkload is one round's run of the training phase's job over the
// nodes still in the burn-in.
type BurninWorkload struct {
	Nodes int `json:"nodes"`
	// MedianStepSecs is the median over the nodes of each one's median
	// steady step time (wall time: a collective's drift shows in it).
	MedianStepSecs float64 `json:"median_step_s,omitempty"`
	Secs           float64 `json:"secs"`
	// Error: why the round's job has no figure, or what went wrong in it
	// (a node's errors or restarts).
	Error string `json:"error,omitempty"`
}

// BurninCollective is one iteration's intra-node all-reduce (nccl-tests'
// all_reduce_perf, one process over every GPU of the node).
type BurninCollective struct {
	// BusBW is the out-of-place bus bandwidth's median over the sizes at
	// or above GateBytes (the largest size when the sweep stops below).
	BusBW     float64 `json:"busbw_gbs"`
	GateBytes int64   `json:"gate_bytes,omitempty"`
	Ranks     int     `json:"ranks,omitempty"`
	// Nodes: how many nodes the round spanned (the cluster all-reduce's
	// only: a node that left the burn-in leaves the rounds).
	Nodes int     `json:"nodes,omitempty"`
	Secs  float64 `json:"secs"`
	// Error: why the iteration has no figure (the run failed, its results
	// were wrong, its figure was past any GPU's).
	Error string `json:"error,omitempty"`
}

// BurninLoad is one iteration's run of a stress tool whose output has no
// figure the record reads: gpu-burn (its "GPU n: FAULTY" summary lines are
// read) or DCGM's targeted stress (its exit status only).
type BurninLoad struct {
	Load   string  `json:"load"` // gpu_burn | dcgm_stress
	Tool   string  `json:"tool"`
	Exit   int     `json:"exit"`
	Secs   float64 `json:"secs"`
	Faulty []int   `json:"faulty_gpus,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// LoadUnmeasured is a load the burn-in could not run on a node, and why.
type LoadUnmeasured struct {
	Load   string `json:"load"` // collectives | gpu_burn | dcgm_stress
	Reason string `json:"reason"`
	// Asked: the inventory turned it on (true), rather than auto: a load
	// that was asked for and could not run leaves the window INCOMPLETE.
	Asked bool `json:"asked,omitempty"`
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

// GemmDrift is a GPU's rate over the runs that started in the first drift
// window (the median) and over those in the last, how many runs each, and
// the change in percent of the first (negative: it slowed).
type GemmDrift struct {
	GPU       int     `json:"gpu"`
	First     float64 `json:"first"`
	Last      float64 `json:"last"`
	Pct       float64 `json:"pct"`
	FirstRuns int     `json:"first_runs,omitempty"`
	LastRuns  int     `json:"last_runs,omitempty"`
}

// BusBWDrift is a node's collective busbw over the first drift window and
// the last (medians, GB/s), as GemmDrift.
type BusBWDrift struct {
	First     float64 `json:"first"`
	Last      float64 `json:"last"`
	Pct       float64 `json:"pct"`
	FirstRuns int     `json:"first_runs"`
	LastRuns  int     `json:"last_runs"`
}

// GemmSummary is each GPU's figure over the runs: the median of its runs
// (never the best), which BURN-001 judges.
type GemmSummary struct {
	GPUs []GemmGPU `json:"gpus"`
}
