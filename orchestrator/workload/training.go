package workload

// Training is what the training load test measured: one job over every
// node still in the window.
type Training struct {
	Command string         `json:"command"` // the launch on the rendezvous node
	World   int            `json:"world"`   // workers of the whole job
	Nodes   []TrainingNode `json:"nodes"`
	// MedianStepSecs is the median of the nodes' median steady step times;
	// Straggler the node slower than it by more than the straggler ratio
	// (the slowest such node), "" when none is.
	MedianStepSecs float64 `json:"median_step_seconds"`
	// StragglerBasis: what the straggler is judged on, "compute" (the
	// log's compute time, a slow node's own) or "step" (the whole step,
	// when the log does not split it).
	StragglerBasis string  `json:"straggler_basis,omitempty"`
	StragglerRatio float64 `json:"straggler_ratio"`
	Straggler      string  `json:"straggler,omitempty"`
	// Unit of the throughput: "samples/s" or "tokens/s" (what the log
	// gives; tokens when it gives both).
	Unit string `json:"unit,omitempty"`
	// Runs: every run when acceptance.retest or phases.workload.repeats
	// ran the job again (Nodes is the last). Empty when it ran once.
	Runs [][]TrainingNode `json:"runs,omitempty"`
	// Repeats: the runs of one measurement (phases.workload.repeats);
	// Runs holds the measurements in order, Repeats runs each, so a
	// retested figure's history is Runs in groups of Repeats.
	Repeats int    `json:"repeats,omitempty"`
	Error   string `json:"error,omitempty"`
}

// TrainingNode is one node's part of the job.
type TrainingNode struct {
	Node string `json:"node"`
	// Seconds from launching the job on the node to: its container
	// running (when in an image), its rendezvous done (workers started),
	// its first step logged.
	ContainerSecs  *float64 `json:"container_seconds,omitempty"`
	RendezvousSecs *float64 `json:"rendezvous_seconds,omitempty"`
	FirstStepSecs  *float64 `json:"first_step_seconds,omitempty"`
	// Steps logged; StepSecs over the steady steps (warm-up excluded).
	Steps    int  `json:"steps"`
	StepSecs Dist `json:"step_seconds"`
	// ComputeSecs and WaitSecs split the steady steps where the log says
	// how (ddp_train.py's compute= and wait=): the batch, forward and
	// backward pass, and the all-reduce, where every rank waits for the
	// slowest. A straggler shows in its own compute; its slowness
	// spreads over every node's step time through the wait.
	ComputeSecs *Dist `json:"compute_seconds,omitempty"`
	WaitSecs    *Dist `json:"wait_seconds,omitempty"`
	// Throughput over the steady steps, in Training.Unit.
	PerSec *float64 `json:"per_second,omitempty"`
	// GPU memory at the peak (the largest a worker reported, or sampled),
	// and the GPU's total, MiB.
	GPUMemPeakMiB  *float64 `json:"gpu_mem_peak_mib,omitempty"`
	GPUMemTotalMiB *float64 `json:"gpu_mem_total_mib,omitempty"`
	// Errors and restarts the job logged on the node; ErrorLines the first
	// few (bounded, node text).
	// GPUMemFrom: "log" (what the workers reported) or "nvidia-smi"
	// (sampled while the job ran).
	GPUMemFrom string   `json:"gpu_mem_from,omitempty"`
	Errors     int      `json:"errors"`
	Restarts   int      `json:"restarts"`
	ErrorLines []string `json:"error_lines,omitempty"`
}
