package phases

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote"
)

// What each iteration of the burn-in runs after gemm.py: the intra-node
// collective, then gpu-burn and DCGM's targeted stress where the node has
// them. A load the node lacks is said once (not measured) and the loop
// goes on with the rest.
type (
	BurninCollective = workload.BurninCollective
	BurninLoad       = workload.BurninLoad
	LoadUnmeasured   = workload.LoadUnmeasured
	BusBWDrift       = workload.BusBWDrift
	BurninWorkload   = workload.BurninWorkload
)

// The loads' names in the record (and the inventory's keys under
// phases.burnin).
const (
	loadCollectives = "collectives"
	loadGPUBurn     = "gpu_burn"
	loadDCGMStress  = "dcgm_stress"
)

// gpuBurnNames: the binary as wilicc/gpu-burn builds it, and as some
// distributions package it.
var gpuBurnNames = []string{"gpu_burn", "gpu-burn"}

// maxBurnBusBW bounds a collective's figure a node may claim, GB/s: ten
// times any NVLink's (NVLink 5 is 900 GB/s a direction). Past it the
// figure is garbage or a lie, and it is not kept.
const maxBurnBusBW = 1e4

// stressStartWithin is what gpu-burn or DCGM may take beyond its seconds:
// CUDA's start on every GPU, DCGM's plugin load and its own checks.
const stressStartWithin = 3 * time.Minute

// burnLoads is what a node's loop runs after each gemm.py run.
type burnLoads struct {
	collective *job
	gpuBurn    string // the binary found ("" none)
	dcgm       bool
	seconds    int
}

// burninLoads asks the node, once, which of the loads the inventory turns
// on it has; each it lacks is returned as not measured, with the key.
func burninLoads(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (burnLoads, []LoadUnmeasured, error) {
	b, a := w.Inv.Phases.Burnin, w.Inv.Phases.AllReduce
	l := burnLoads{seconds: b.Compute.Seconds}
	var tools []string
	if inventory.On(b.Collectives) {
		tools = append(tools, a.Binary)
	}
	if b.GPUBurn.Wanted() {
		tools = append(tools, gpuBurnNames...)
	}
	if b.DCGMStress.Wanted() {
		tools = append(tools, "dcgmi")
	}
	if len(tools) == 0 {
		return l, nil, nil
	}
	has, err := nodeHas(ctx, w, n, tools...)
	if err != nil {
		return l, nil, err
	}
	var missing []LoadUnmeasured
	if inventory.On(b.Collectives) {
		switch {
		case a.RanksPerNode < 2:
			// One GPU moves nothing to a peer: busbw is 0 by definition.
			missing = append(missing, LoadUnmeasured{Load: loadCollectives,
				Reason: "one GPU per node (phases.allreduce.ranks_per_node): no intra-node collective to loop"})
		case has[a.Binary]:
			bn := allReduceBench(a)
			bn.gpus = a.RanksPerNode
			l.collective = &job{nodes: []*orchestrator.Node{n}, ranksPerNode: 1, bench: bn, log: "burnin-collective"}
		default:
			missing = append(missing, LoadUnmeasured{Load: loadCollectives, Asked: true,
				Reason: fmt.Sprintf("%s not installed (phases.allreduce.binary): intra-node collective not looped", a.Binary)})
		}
	}
	if b.GPUBurn.Wanted() {
		for _, name := range gpuBurnNames {
			if has[name] && l.gpuBurn == "" {
				l.gpuBurn = name
			}
		}
		if l.gpuBurn == "" {
			missing = append(missing, LoadUnmeasured{Load: loadGPUBurn, Asked: b.GPUBurn.Asked(),
				Reason: "gpu_burn (or gpu-burn) not installed (phases.burnin.gpu_burn: " + b.GPUBurn.String() + ")"})
		}
	}
	if b.DCGMStress.Wanted() {
		l.dcgm = has["dcgmi"]
		if !l.dcgm {
			missing = append(missing, LoadUnmeasured{Load: loadDCGMStress, Asked: b.DCGMStress.Asked(),
				Reason: "dcgmi not installed (phases.burnin.dcgm_stress: " + b.DCGMStress.String() + ")"})
		}
	}
	return l, missing, nil
}

// burninLoadsWithin bounds one iteration's loads beyond gemm.py, for the
// phase's deadline: the collective's timeout and each stress tool's run,
// as the inventory turns them on (the deadline is set before any node is
// asked what it has).
func burninLoadsWithin(inv *inventory.Inventory) time.Duration {
	b := inv.Phases.Burnin
	var d time.Duration
	if inventory.On(b.Collectives) {
		d += sweepTimeout(inv)
	}
	stress := time.Duration(max(b.Compute.Seconds, 1))*time.Second + stressStartWithin
	if b.GPUBurn.Wanted() {
		d += stress
	}
	if b.DCGMStress.Wanted() {
		d += stress
	}
	if b.ClusterAllReduce {
		// The round's collective, after a wait for the slowest node's
		// iteration (within the bound above).
		d += sweepTimeout(inv) + 30*time.Second
	}
	if b.Workload {
		d += cmp.Or(inv.Phases.Workload.Timeout, trainingJobWithin)
	}
	return d
}

// run runs the loads after one gemm.py run and fills r with them. Their
// failures are the iteration's figures (kept in the record), not the
// burn-in's end: a collective that failed once under load is a finding,
// and the loop goes on.
func (l burnLoads) run(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, r *BurninRun) {
	if l.collective != nil && ctx.Err() == nil {
		r.Collective = burnCollective(ctx, w, *l.collective)
		if c := r.Collective; c.Error == "" {
			w.Progress.Node(n.Name, "burn-in: intra-node all-reduce %.4g GB/s", c.BusBW)
		} else {
			w.Progress.Node(n.Name, "burn-in: intra-node all-reduce: %s", clip(c.Error, 120))
		}
	}
	if l.gpuBurn != "" && ctx.Err() == nil {
		r.Loads = append(r.Loads, stressOnce(ctx, w, n, loadGPUBurn, l.gpuBurn, gpuBurnCommand(l.gpuBurn, l.seconds), l.seconds))
	}
	if l.dcgm && ctx.Err() == nil {
		r.Loads = append(r.Loads, stressOnce(ctx, w, n, loadDCGMStress, "dcgmi", dcgmStressCommand(l.seconds), l.seconds))
	}
}

// burnCollective runs the intra-node all-reduce once, as the intranode
// phase does (one process, -g over the node's GPUs), and keeps its busbw
// over the gating sizes; a figure out of any GPU's range is not kept.
func burnCollective(ctx context.Context, w *orchestrator.Window, j job) *BurninCollective {
	s := j.run(ctx, w, sweepTimeout(w.Inv))
	c := &BurninCollective{Secs: s.Secs, Error: clip(s.Error, 400)}
	if s.Judgement == nil {
		if c.Error == "" {
			c.Error = "no result"
		}
		return c
	}
	c.GateBytes, c.Ranks = s.Judgement.GateBytes, s.Judgement.Ranks
	for _, v := range s.Judgement.Verdicts {
		// A sweep keeps the verdicts that did not pass: wrong results
		// make the iteration's figure no figure.
		if v.ID == "NCCL-001" && v.Status == record.Fail && c.Error == "" {
			c.Error = clip("wrong results: "+v.Measured, 200)
		}
	}
	bw := s.Judgement.BusBW.Median
	switch {
	case c.Error != "":
	case !finite(bw) || bw <= 0:
		c.Error = "no bus bandwidth over the gating sizes"
	case bw > maxBurnBusBW:
		c.Error = fmt.Sprintf("a bus bandwidth of %.3g GB/s is past any GPU's: not kept", bw)
	default:
		c.BusBW = bw
	}
	return c
}

// gpuBurnCommand runs gpu-burn for seconds from its own directory: it
// loads compare.ptx from the working directory ("Couldn't init a GPU
// test: Error in "load module"" otherwise; ../shared/samples/gpu-burn).
func gpuBurnCommand(binary string, seconds int) string {
	q := remote.Quote(binary)
	return fmt.Sprintf(`p=$(command -v -- %s) && cd -- "$(dirname -- "$p")" && exec "$p" %d 2>&1`, q, seconds)
}

// dcgmStressCommand runs DCGM's targeted stress for seconds. No genuine
// output of it alone is in the shared samples: its exit status is what the
// record keeps.
func dcgmStressCommand(seconds int) string {
	return fmt.Sprintf("exec dcgmi diag -r targeted_stress -p targeted_stress.test_duration=%d 2>&1", seconds)
}

// stressOnce runs one stress tool once, bounded, and keeps its exit (and,
// for gpu-burn, the GPUs its summary calls FAULTY).
func stressOnce(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, load, tool, command string, seconds int) BurninLoad {
	rctx, cancel := context.WithTimeout(orchestrator.WithLog(ctx, "burnin-"+load), time.Duration(max(seconds, 1))*time.Second+stressStartWithin)
	defer cancel()
	start := time.Now()
	out, err := runOn(rctx, w, n, command)
	l := BurninLoad{Load: load, Tool: tool, Secs: time.Since(start).Seconds()}
	var ee *remote.ExitError
	switch {
	case errors.As(err, &ee):
		l.Exit = ee.Status
		l.Error = fmt.Sprintf("exit %d", ee.Status)
		if ee.Signal != "" {
			l.Error = "killed by SIG" + ee.Signal
		}
	case err != nil:
		l.Exit, l.Error = -1, clip(err.Error(), 200)
	}
	if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		l.Error = fmt.Sprintf("did not end within %s of its start", time.Duration(seconds)*time.Second+stressStartWithin)
	}
	if load == loadGPUBurn {
		g := parse.ParseGPUBurn(string(out))
		l.Faulty = g.Faulty
		if len(g.Faulty) > 0 && l.Error == "" {
			// gpu-burn exits 0 with faulty GPUs: its summary says so.
			l.Error = fmt.Sprintf("%d of %d GPU(s) FAULTY", len(g.Faulty), g.Tested)
		}
	}
	msg := "exit 0"
	if l.Error != "" {
		msg = l.Error
	}
	w.Progress.Node(n.Name, "burn-in: %s %s after %.0f s", tool, msg, l.Secs)
	return l
}

// loadsLine is the not-measured loads of a node in a line.
func loadsLine(missing []LoadUnmeasured) string {
	var parts []string
	for _, m := range missing {
		parts = append(parts, m.Reason)
	}
	return strings.Join(parts, "; ")
}
