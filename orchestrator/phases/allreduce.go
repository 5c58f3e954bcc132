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
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// Sweeps is what the cluster-wide all-reduce found: one entry per repeat.
type Sweeps struct {
	Launcher string   `json:"launcher"`
	Command  string   `json:"command"`
	Nodes    []string `json:"nodes"`
	Repeats  []Sweep  `json:"repeats"`
}

// Sweep is one run of the benchmark.
type Sweep struct {
	Judgement *fabric.Judgement `json:"judgement,omitempty"`
	Error     string            `json:"error,omitempty"`
}

// AllReduce runs nccl-tests' all_reduce_perf over every node still in the
// window, from the first of them, under mpirun; each sweep is bounded by
// its own deadline, because a hung collective never fails by itself.
var AllReduce = orchestrator.Phase{
	Name:    "allreduce",
	Enabled: func(inv *inventory.Inventory) bool { return inv.Phases.AllReduce.Enabled },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		a := inv.Phases.AllReduce
		return time.Duration(max(a.Repeats, 1))*sweepTimeout(inv) + time.Minute
	},
	Cluster: func(ctx context.Context, w *orchestrator.Window) (any, error) {
		nodes := w.Active()
		if len(nodes) < 2 {
			return nil, fmt.Errorf("all-reduce needs at least 2 nodes, %d left in the window", len(nodes))
		}
		a := w.Inv.Phases.AllReduce
		res := Sweeps{Launcher: nodes[0].Name, Command: mpirunCommand(w, nodes)}
		for _, n := range nodes {
			res.Nodes = append(res.Nodes, n.Name)
		}
		failed := 0
		for rep := 1; rep <= max(a.Repeats, 1); rep++ {
			w.Progress.Node(nodes[0].Name, "all-reduce sweep %d of %d over %d nodes", rep, a.Repeats, len(nodes))
			s := sweep(ctx, w, nodes, res.Command)
			if s.Error != "" {
				failed++
				w.Progress.Node(nodes[0].Name, "all-reduce sweep %d: %s", rep, s.Error)
			}
			res.Repeats = append(res.Repeats, s)
			if ctx.Err() != nil {
				break
			}
		}
		if failed == len(res.Repeats) {
			return res, errors.New(res.Repeats[0].Error)
		}
		return res, nil
	},
	Judge: judgeAllReduce,
}

func sweepTimeout(inv *inventory.Inventory) time.Duration {
	return orDefault(inv.Phases.AllReduce.Timeout, 15*time.Minute)
}

// sweep runs the benchmark once and checks that it ran as planned: a
// binary built without MPI runs one single-rank copy per rank and prints
// numbers that mean nothing (nccl-tests #27, #213).
func sweep(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, command string) Sweep {
	sctx, cancel := context.WithTimeout(ctx, sweepTimeout(w.Inv))
	defer cancel()
	out, err := runOn(sctx, w, nodes[0], "allreduce", command)
	if sctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return Sweep{Error: fmt.Sprintf("the collective did not finish within %s (a node or link stopped answering); all ranks were stopped", sweepTimeout(w.Inv))}
	}
	r, perr := parse.NCCLTests(string(out))
	if errors.Is(perr, parse.ErrNotRecognized) {
		if err != nil {
			return Sweep{Error: err.Error()}
		}
		return Sweep{Error: "no nccl-tests output: " + perr.Error()}
	}
	j := fabric.Judge(r, w.Inv, "")
	s := Sweep{Judgement: &j}
	ranks := len(nodes) * w.Inv.Phases.AllReduce.RanksPerNode
	switch {
	case j.Ranks != ranks || j.Hosts != len(nodes):
		s.Error = fmt.Sprintf("the benchmark ran as %d rank(s) on %d host(s), planned %d on %d: not an MPI run of the window's nodes", j.Ranks, j.Hosts, ranks, len(nodes))
	case err != nil:
		s.Error = err.Error()
	}
	return s
}

// mpirunCommand launches one rank per GPU on every node, with the flags
// that keep Open MPI's TCP transport faithful and NCCL's choices on record.
func mpirunCommand(w *orchestrator.Window, nodes []*orchestrator.Node) string {
	a := w.Inv.Phases.AllReduce
	var hosts []string
	for _, n := range nodes {
		hosts = append(hosts, fmt.Sprintf("%s:%d", n.Config.Host, a.RanksPerNode))
	}
	args := []string{"mpirun", "$ROOT", "-np", fmt.Sprint(len(nodes) * a.RanksPerNode), "-H", strings.Join(hosts, ","),
		"-x", "GPUACCEPT_RUN", "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,TUNING"}
	if len(nodes) == 2 {
		// Tree and NVLS figures exceed the NIC line rate on two nodes.
		args = append(args, "-x", "NCCL_ALGO=Ring")
	}
	for _, m := range a.MPIArgs {
		args = append(args, remote.Quote(m))
	}
	args = append(args, remote.Quote(a.Binary), "-b", fmt.Sprint(int64(a.MinBytes)), "-e", fmt.Sprint(int64(a.MaxBytes)),
		"-f", fmt.Sprint(a.Factor), "-n", fmt.Sprint(a.Iters), "-w", fmt.Sprint(a.Warmup), "-c", "1", "-g", "1")
	// mpirun refuses root unless told; the window may well run as root.
	return `ROOT=; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root; ` + strings.Join(args, " ")
}

// judgeAllReduce: correctness over every sweep, bandwidth as the median of
// the sweeps' medians with their spread.
func judgeAllReduce(w *orchestrator.Window) []record.Verdict {
	var s Sweeps
	r, ok := w.Result("allreduce", -1, &s)
	if !w.Inv.Phases.AllReduce.Enabled || !ok {
		return nil
	}
	correct := record.Verdict{ID: "NCCL-001", Title: "collective results are correct", Status: record.Pass, Measured: "0 wrong"}
	bw := record.Verdict{ID: "NCCL-002", Title: "inter-node all_reduce bus bandwidth matches the quote"}
	var medians []float64
	var last *fabric.Judgement
	var problems []string
	for i, sw := range s.Repeats {
		if sw.Error != "" {
			problems = append(problems, fmt.Sprintf("sweep %d: %s", i+1, sw.Error))
		}
		if sw.Judgement == nil {
			continue
		}
		for _, v := range sw.Judgement.Verdicts {
			if v.ID == "NCCL-001" && v.Status == record.Fail {
				correct.Status, correct.Measured = record.Fail, fmt.Sprintf("sweep %d: %s", i+1, v.Measured)
				correct.Detail = v.Detail
			}
		}
		if sw.Error == "" {
			medians = append(medians, sw.Judgement.BusBW.Median)
			last = sw.Judgement
		}
	}
	if len(problems) > 0 && correct.Status == record.Pass {
		correct.Status, correct.Measured, correct.Detail = record.Fail, fmt.Sprintf("%d of %d sweeps failed", len(problems), len(s.Repeats)), strings.Join(problems, "; ")
	}
	if len(medians) == 0 || last == nil {
		bw.Status, bw.Detail = record.Fail, firstNonEmpty(r.Error, strings.Join(problems, "; "), "no sweep completed")
		return []record.Verdict{correct, bw}
	}
	sp := fabric.SpreadOf(medians)
	bw.Measured = fmt.Sprintf("%.4g GB/s median of %d sweep(s) (%.4g..%.4g); wire rate %.4g GB/s per GPU", sp.Median, len(medians), sp.Min, sp.Max,
		fabric.WireRate(sp.Median, last.Hosts, last.Ranks))
	tol := w.Inv.Acceptance.ToleranceFor("NCCL-002")
	if q := w.Inv.Quote.InterBusBWGBs; q > 0 {
		ratio := sp.Median / q
		bw.Quoted, bw.Ratio, bw.Tolerance = fmt.Sprintf("%.4g GB/s", q), &ratio, &tol
		bw.Status = record.Pass
		if ratio < tol {
			bw.Status = record.Fail
		}
	} else {
		bw.Status, bw.Detail = record.Skip, "not stated in the quote"
	}
	return []record.Verdict{correct, bw}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
