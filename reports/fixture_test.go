package reports

import (
	"encoding/json"
	"time"

	"gpuaccept/orchestrator/record"
)

func ratio(f float64) *float64 { return &f }

var t0 = time.Date(2026, 11, 30, 5, 40, 12, 0, time.UTC)

func phase(name, node string, index int, out record.Outcome, start, secs int, errText string) record.PhaseResult {
	dir := node
	if node == "" {
		dir = "cluster"
	}
	return record.PhaseResult{
		Phase: name, Node: node, Index: index, Outcome: out, Error: errText,
		Started: t0.Add(time.Duration(start) * time.Second),
		Ended:   t0.Add(time.Duration(start+secs) * time.Second),
		Log:     "raw/" + dir + "/" + name + ".log",
	}
}

func withData(p record.PhaseResult, data string) record.PhaseResult {
	p.Data = []byte(data)
	return p
}

// failedRun is a completed window that was not accepted: one node
// quarantined, every status, ratios and tolerances both set and absent,
// verdicts recorded out of order on purpose.
func failedRun() *record.Run {
	return &record.Run{
		Schema:    record.Schema,
		ID:        "20261130T054012Z-vendor-a",
		Tool:      "gpuaccept v0.1.0",
		Inventory: record.Inventory{Path: "inventories/vendor-a.yaml", Digest: "5f2b5e9cb1a3e8d1f0b0c1e4f9e0a7d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7"},
		Provider:  "vendor-a",
		Region:    "eu-west-1",
		Window:    "2026-11-30 05:30-09:30 UTC",
		Started:   t0,
		Ended:     t0.Add(47*time.Minute + 3*time.Second),
		Nodes: []record.Node{
			{Index: 0, Name: "gpu-01", Address: "10.0.0.11:22"},
			{Index: 1, Name: "gpu-02", Address: "10.0.0.12:22", Quarantined: true,
				Reason: "preflight: nvidia-smi: 7 of 8 GPUs visible"},
			{Index: 2, Name: "gpu-03", Address: "10.0.0.13:22", Labels: map[string]string{"rack": "r2"}},
		},
		Phases: []record.PhaseResult{
			phase("connect", "gpu-01", 0, record.OK, 0, 2, ""),
			phase("connect", "gpu-02", 1, record.OK, 0, 3, ""),
			phase("connect", "gpu-03", 2, record.OK, 0, 2, ""),
			phase("preflight", "gpu-01", 0, record.OK, 3, 41, ""),
			phase("preflight", "gpu-02", 1, record.Failed, 3, 38,
				"gpu-02: preflight: nvidia-smi: expected 8 GPUs, found 7"),
			phase("preflight", "gpu-03", 2, record.OK, 3, 40, ""),
			phase("diag", "gpu-01", 0, record.OK, 44, 600, ""),
			{Phase: "diag", Node: "gpu-02", Index: 1, Outcome: record.Skipped, Error: "quarantined"},
			phase("diag", "gpu-03", 2, record.OK, 44, 612, ""),
			phase("allreduce", "", -1, record.OK, 660, 1500, ""),
		},
		Verdicts: []record.Verdict{
			{ID: "NCCL-001", Title: "all-reduce busbw at >= 1 GiB", Status: record.Fail,
				Measured: "312.4 GB/s", Quoted: "400 GB/s", Ratio: ratio(0.781), Tolerance: ratio(0.9),
				Detail: "median of 5 repeats (min 301.2, max 318.0); NCCL_ALGO=Ring"},
			{ID: "GPU-001", Title: "GPU model and count", Node: "gpu-03", Status: record.Pass,
				Measured: "8x H100 80GB HBM3", Quoted: "8x H100 80GB"},
			{ID: "GPU-001", Title: "GPU model and count", Node: "gpu-01", Status: record.Pass,
				Measured: "8x H100 80GB HBM3", Quoted: "8x H100 80GB"},
			{ID: "GPU-001", Title: "GPU model and count", Node: "gpu-02", Status: record.Fail,
				Measured: "7x H100 80GB HBM3", Quoted: "8x H100 80GB",
				Detail: "GPU 5 <missing> | node quarantined\nsee raw/gpu-02/preflight.log"},
			{ID: "DIAG-001", Title: "DCGM diagnostic passes", Node: "gpu-01", Status: record.Warn,
				Measured: "1 warning", Detail: "PCIe replay counter rising on GPU 3"},
			{ID: "DIAG-001", Title: "DCGM diagnostic passes", Node: "gpu-02", Status: record.Skip,
				Detail: "node quarantined"},
			{ID: "DIAG-001", Title: "DCGM diagnostic passes", Node: "gpu-03", Status: record.Pass,
				Measured: "0 warnings"},
			{ID: "STAGE-001", Title: "dataset staging throughput", Node: "gpu-01", Status: record.Pass,
				Measured: "2.1 GB/s", Quoted: "2.0 GB/s", Ratio: ratio(1.05)},
		},
		Quote: json.RawMessage(`{"gpu":"H100 80GB","gpus_per_node":8,"busbw_gbps":400,"price":"2.49 USD/GPU-hour"}`),
	}
}

// interruptedRun was cut short by Ctrl-C during the all-reduce.
func interruptedRun() *record.Run {
	r := failedRun()
	r.Interrupted = true
	r.Resumed = []time.Time{t0.Add(20 * time.Minute)}
	r.Phases[len(r.Phases)-1].Outcome = record.Interrupted
	r.Phases[len(r.Phases)-1].Error = "interrupted (SIGINT)"
	r.Verdicts = r.Verdicts[1:] // no all-reduce verdict
	return r
}

// abortedRun was stopped by --strict.
func abortedRun() *record.Run {
	r := failedRun()
	r.Aborted = "--strict: gpu-02 failed preflight"
	r.Phases = r.Phases[:6]
	r.Verdicts = nil
	return r
}

// simulatedRun is the demo: accepted, with a warning and a skip, no quote.
func simulatedRun() *record.Run {
	return &record.Run{
		Schema:    record.Schema,
		ID:        "20261130T060000Z-demo",
		Tool:      "gpuaccept v0.1.0",
		Simulated: true,
		Inventory: record.Inventory{Path: "inventories/demo.yaml", Digest: "0c1d"},
		Provider:  "demo",
		Region:    "loopback",
		Started:   t0,
		Ended:     t0.Add(42 * time.Second),
		Nodes: []record.Node{
			{Index: 0, Name: "sim-a", Address: "127.0.0.1:2201"},
			{Index: 1, Name: "sim-b", Address: "127.0.0.1:2202"},
		},
		Phases: []record.PhaseResult{
			phase("connect", "sim-a", 0, record.OK, 0, 1, ""),
			phase("connect", "sim-b", 1, record.OK, 0, 1, ""),
			phase("allreduce", "", -1, record.OK, 2, 30, ""),
			withData(phase("failure", "", -1, record.OK, 32, 9, ""),
				`{"inject":"kill-node","timeline":"       !!!!!    failure window\nsim-a  ##x....##\nsim-b  ##.....##\n"}`),
		},
		Verdicts: []record.Verdict{
			{ID: "NCCL-001", Title: "all-reduce busbw", Status: record.Pass,
				Measured: "48.0 GB/s", Quoted: "45 GB/s", Ratio: ratio(1.0667), Tolerance: ratio(0.9)},
			{ID: "DIAG-001", Title: "DCGM diagnostic passes", Node: "sim-b", Status: record.Warn,
				Measured: "1 warning", Detail: "simulated degraded node"},
			{ID: "FAIL-001", Title: "failure check", Status: record.Skip, Detail: "disabled in demo"},
		},
	}
}

// costedRun is failedRun with its cost ledger (as ledger.Compute makes it
// for that window at 2.49 USD per GPU-hour, 1m billing, every extra, and
// 12000 training steps stated as its accepted work): the quarantined node
// billed but not accepted, a cost per unit below a cent, a monthly TCO.
func costedRun() *record.Run {
	r := failedRun()
	per := 0.004420313
	r.Ledger = &record.Ledger{
		Currency: "USD", Granularity: "1m", PricePerGPUHour: 2.49,
		Nodes: []record.LedgerNode{
			{Name: "gpu-01", GPUs: 8, Secs: 2823, BilledSecs: 2880, Cost: 15.936, IdleSecs: 737, FailedSecs: 0, Accepted: true},
			{Name: "gpu-02", GPUs: 8, Secs: 2823, BilledSecs: 2880, Cost: 15.936, IdleSecs: 2839, FailedSecs: 2877, Accepted: false},
			{Name: "gpu-03", GPUs: 8, Secs: 2823, BilledSecs: 2880, Cost: 15.936, IdleSecs: 726, FailedSecs: 0, Accepted: true},
		},
		BilledGPUHours: 19.2, ComputeCost: 47.808,
		Extras:    map[string]float64{"licences": 3, "storage": 0.065753, "host": 1.92, "egress": 0.25},
		TotalCost: 53.043753, Unit: "training step", AcceptedUnits: 12000, CostPerUnit: &per,
		TCO: &record.TCO{Components: map[string]float64{"retry_waste": 800, "committed_compute": 143000, "idle_waste": 9000}, Monthly: 152800},
	}
	return r
}

var cases = []struct {
	name string
	run  func() *record.Run
}{
	{"failed", failedRun},
	{"interrupted", interruptedRun},
	{"aborted", abortedRun},
	{"simulated", simulatedRun},
	{"costed", costedRun},
}
