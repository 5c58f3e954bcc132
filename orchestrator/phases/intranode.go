package phases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Intra is one node's intra-node sweeps.
type Intra struct {
	Command string  `json:"command"`
	Repeats []Sweep `json:"repeats"`
	// Earlier: the runs of the bandwidth figure before Repeats, when one
	// failed and was retested; NCCL-003 rests on Repeats, the last.
	Earlier [][]Sweep `json:"earlier_runs,omitempty"`
	// Latency: the small-message runs, one more per retest; NCCL-007
	// rests on the last.
	Latency []LatencyRun `json:"latency,omitempty"`
}

// IntraNode runs the benchmark inside every node at once, one process
// driving all the node's GPUs (-g): NVLink/NVSwitch against the quote,
// before the fabric is blamed for what a node does on its own.
var IntraNode = orchestrator.Phase{
	Name:    "intranode",
	Loads:   true,
	Enabled: intraEnabled,
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.AllReduce.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		runs := max(inv.Phases.AllReduce.Repeats, 1) * record.MaxRuns(inv.Acceptance.RetestOr())
		return time.Duration(runs)*(sweepTimeout(inv)+latencyTimeout(inv)+time.Minute) + time.Minute
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		a := w.Inv.Phases.AllReduce
		if has, err := nodeHas(ctx, w, n, a.Binary); err != nil {
			return nil, err
		} else if !has[a.Binary] {
			return nil, orchestrator.Unmeasured(a.Binary, "%s not installed (phases.allreduce.binary): intra-node all-reduce not measured", a.Binary)
		}
		b := allReduceBench(a)
		b.gpus = a.RanksPerNode
		j := job{nodes: []*orchestrator.Node{n}, ranksPerNode: 1, bench: b, log: "intranode"}
		res := Intra{Command: strings.Join(b.args(), " ")}
		tol := w.Inv.Acceptance.ToleranceFor
		runs, err := retested(ctx, w, n.Name, "intra-node all-reduce bandwidth", func(ctx context.Context, run int) ([]Sweep, error) {
			return measureSweeps(ctx, w, j, a.Repeats, "")
		}, func(sweeps []Sweep) string {
			return bandwidthFailed(sweeps, w.Inv.Quote.IntraBusBWGBs, tol("NCCL-003"))
		})
		res.Repeats, res.Earlier = lastRun(runs)
		// As NCCL-006: only where the quote states the latency.
		if err == nil && ctx.Err() == nil && w.Inv.Quote.IntraLatencyUs > 0 {
			lj := j
			lj.bench, lj.log = latencyBench(a), "intranode-latency"
			lj.bench.gpus = a.RanksPerNode
			res.Latency, _ = retested(ctx, w, n.Name, "intra-node all-reduce latency", func(ctx context.Context, run int) (LatencyRun, error) {
				return measureLatency(ctx, w, lj, a.Repeats, "")
			}, func(r LatencyRun) string { return latencyFailed(r, w.Inv.Quote.IntraLatencyUs, tol("NCCL-007")) })
		}
		failed := 0
		for _, s := range res.Repeats {
			if s.Error != "" {
				failed++
			}
		}
		if len(res.Repeats) > 0 && failed == len(res.Repeats) {
			return res, errors.New(res.Repeats[0].Error)
		}
		return res, nil
	},
	Judge: judgeIntra,
}

// judgeIntra: per node, correctness and the median of the repeats'
// medians against the quote's intra-node busbw.
func judgeIntra(w *orchestrator.Window) []record.Verdict {
	if !intraEnabled(w.Inv) {
		return nil
	}
	var out []record.Verdict
	for _, n := range w.Nodes {
		var res Intra
		pr, ok := w.Result("intranode", n.Index, &res)
		if !ok && pr.Phase == "" {
			continue
		}
		if vs, ok := unmeasuredVerdicts(pr, n.Name, "NCCL-001", "NCCL-003", "NCCL-007"); ok {
			out = append(out, vs...)
			continue
		}
		correct, bw := record.NewVerdict("NCCL-001", n.Name), record.NewVerdict("NCCL-003", n.Name)
		correct.Status, correct.Measured = record.Pass, "0 wrong (intra-node)"
		medians, problems, _ := summarize(res.Repeats, &correct, " (intra-node)")
		wrongEarlier(res.Earlier, &correct, " (intra-node)")
		tol := w.Inv.Acceptance.ToleranceFor("NCCL-003")
		bw.Retest = bandwidthRetest(append(slices.Clone(res.Earlier), res.Repeats), w.Inv.Quote.IntraBusBWGBs, tol)
		lat := intraLatencyVerdict(w, n.Name, res, pr)
		if len(medians) == 0 {
			bw.Status, bw.Detail = record.Fail, firstNonEmpty(pr.Error, strings.Join(problems, "; "), "no sweep completed")
			out = append(out, correct, bw, lat)
			continue
		}
		sp := fabric.SpreadOf(medians)
		bw.Measured = fmt.Sprintf("%.4g GB/s median of %d sweep(s) (%.4g..%.4g)", sp.Median, len(medians), sp.Min, sp.Max)
		bw.Measure(sp.Median, record.UnitGBs)
		againstQuote(&bw, sp.Median, w.Inv.Quote.IntraBusBWGBs, tol)
		if bw.Retest.Failed() {
			bw.Status = record.Fail
		}
		out = append(out, correct, bw, lat)
	}
	return out
}

// intraLatencyVerdict is NCCL-007 for one node, as NCCL-006 is judged.
func intraLatencyVerdict(w *orchestrator.Window, node string, res Intra, pr record.PhaseResult) record.Verdict {
	q := w.Inv.Quote.IntraLatencyUs
	if len(res.Latency) > 0 {
		return latencyVerdict("NCCL-007", node, res.Latency, q, w.Inv.Acceptance.ToleranceFor("NCCL-007"))
	}
	v := record.NewVerdict("NCCL-007", node)
	switch {
	case pr.Error != "":
		v.Status, v.Detail = record.Fail, "not run: "+pr.Error
	case q > 0:
		v.Status, v.Measured = record.Skip, "not measured"
		v.Incomplete = "NOT MEASURED: no small-message sweep ran (quote.intra_latency_us is stated)"
	default:
		v.Status, v.Measured, v.Detail = record.Skip, "not measured", "not stated in the quote (quote.intra_latency_us): the small-message run is made only to hold it to one"
	}
	return v
}

func intraEnabled(inv *inventory.Inventory) bool {
	return inv.Phases.AllReduce.Enabled && inventory.On(inv.Phases.AllReduce.IntraNode)
}
