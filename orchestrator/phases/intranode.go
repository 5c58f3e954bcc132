package phases

import (
	"context"
	"errors"
	"fmt"
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
}

// IntraNode runs the benchmark inside every node at once, one process
// driving all the node's GPUs (-g): NVLink/NVSwitch against the quote,
// before the fabric is blamed for what a node does on its own.
var IntraNode = orchestrator.Phase{
	Name:    "intranode",
	Enabled: intraEnabled,
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.AllReduce.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return time.Duration(inv.Phases.AllReduce.Repeats)*(sweepTimeout(inv)+30*time.Second) + time.Minute
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
		failed := 0
		for rep := 1; rep <= a.Repeats; rep++ {
			s := j.run(ctx, w, sweepTimeout(w.Inv))
			res.Repeats = append(res.Repeats, s)
			if s.Error != "" {
				failed++
			}
			if ctx.Err() != nil || len(s.Silent) > 0 {
				break
			}
		}
		if failed == len(res.Repeats) {
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
		if vs, ok := unmeasuredVerdicts(pr, n.Name, "NCCL-001", "NCCL-003"); ok {
			out = append(out, vs...)
			continue
		}
		correct, bw := record.NewVerdict("NCCL-001", n.Name), record.NewVerdict("NCCL-003", n.Name)
		correct.Status, correct.Measured = record.Pass, "0 wrong (intra-node)"
		medians, problems, _ := summarize(res.Repeats, &correct, " (intra-node)")
		if len(medians) == 0 {
			bw.Status, bw.Detail = record.Fail, firstNonEmpty(pr.Error, strings.Join(problems, "; "), "no sweep completed")
			out = append(out, correct, bw)
			continue
		}
		sp := fabric.SpreadOf(medians)
		bw.Measured = fmt.Sprintf("%.4g GB/s median of %d sweep(s) (%.4g..%.4g)", sp.Median, len(medians), sp.Min, sp.Max)
		bw.Measure(sp.Median, record.UnitGBs)
		againstQuote(&bw, sp.Median, w.Inv.Quote.IntraBusBWGBs, w.Inv.Acceptance.ToleranceFor("NCCL-003"))
		out = append(out, correct, bw)
	}
	return out
}

func intraEnabled(inv *inventory.Inventory) bool {
	return inv.Phases.AllReduce.Enabled && inventory.On(inv.Phases.AllReduce.IntraNode)
}
