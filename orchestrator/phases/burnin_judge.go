package phases

import (
	"fmt"
	"slices"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// fleetSlowRatio: a GPU below this share of the fleet's median rate is
// named slow (the contract's 0.9 × median); a GPU of a quoted SKU is held
// to the quote too.
const fleetSlowRatio = 0.9

// burnNode is what BURN-001 knows of one node.
type burnNode struct {
	Name string
	// Absent: why it took no part (quarantined, not run); Unmeasured: why
	// its tools could not measure; Err: why its burn-in failed.
	Absent, Unmeasured, Err string
	GPUs                    []GemmGPU // each GPU's median over its runs
}

func judgeBurnin(w *orchestrator.Window) []record.Verdict {
	if !burninOn(w.Inv) {
		return nil
	}
	var nodes []burnNode
	var load []record.Verdict
	for _, n := range w.Nodes {
		bn := burnNode{Name: n.Name}
		var res BurninNode
		r, ok := w.Result(burninPhase, n.Index, &res)
		switch {
		case !ok:
			bn.Absent = "not run"
			if q, why := n.Quarantined(); q {
				bn.Absent = why
			}
		case r.Outcome == record.NotMeasured:
			bn.Unmeasured = r.Error
		case r.Outcome == record.Skipped:
			bn.Absent = firstNonEmpty(r.Error, "skipped")
		default:
			bn.Err = r.Error
			if res.Compute != nil {
				bn.GPUs = res.Compute.GPUs
			}
		}
		nodes = append(nodes, bn)
		load = append(load, loadVerdicts(w, bn, res)...)
	}
	out := append(burnVerdicts(nodes, w.Inv.Quote.GPUTFLOPSBF16, w.Inv.Acceptance.ToleranceFor("BURN-001")), load...)
	return append(out, roundsVerdicts(w)...)
}

// loadVerdicts are BURN-002 (drift) and, where a stress tool is on,
// BURN-003 for one node; a node that took no part or could not measure
// is said as for BURN-001.
func loadVerdicts(w *orchestrator.Window, n burnNode, res BurninNode) []record.Verdict {
	b := w.Inv.Phases.Burnin
	ids := []string{"BURN-002"}
	if b.GPUBurn.Wanted() || b.DCGMStress.Wanted() {
		ids = append(ids, "BURN-003")
	}
	var out []record.Verdict
	for _, id := range ids {
		v := record.NewVerdict(id, n.Name)
		switch {
		case n.Absent != "":
			v.Status, v.Detail = record.Skip, n.Absent
		case n.Unmeasured != "":
			notMeasured(&v, n.Unmeasured)
		case id == "BURN-002":
			v = driftVerdict(n.Name, res)
			if n.Err != "" && v.Status != record.Fail {
				v.Detail = clip(v.Detail+"; "+n.Err, 200)
			}
		default:
			v = stressVerdict(n.Name, res)
		}
		out = append(out, v)
	}
	return out
}

// stressVerdict is BURN-003: every run of gpu-burn and DCGM's targeted
// stress ended with exit 0 and, for gpu-burn, no GPU FAULTY in its
// summary. A tool the node lacks is named; asked for (true), the window
// is INCOMPLETE.
func stressVerdict(node string, res BurninNode) record.Verdict {
	v := record.NewVerdict("BURN-003", node)
	ran := map[string]int{}
	var failed []string
	for i, r := range res.Runs {
		for _, l := range r.Loads {
			ran[l.Tool]++
			if l.Error != "" {
				failed = append(failed, fmt.Sprintf("iteration %d: %s %s", i+1, l.Tool, faultyText(l)))
			}
		}
	}
	var lacks, asked []string
	for _, m := range res.NotMeasured {
		if m.Load == loadGPUBurn || m.Load == loadDCGMStress {
			lacks = append(lacks, m.Reason)
			if m.Asked {
				asked = append(asked, m.Reason)
			}
		}
	}
	if len(asked) > 0 {
		v.Incomplete = strings.Join(asked, "; ")
	}
	var tools []string
	for t, k := range ran {
		tools = append(tools, fmt.Sprintf("%s %d run(s)", t, k))
	}
	slices.Sort(tools)
	switch {
	case len(failed) > 0:
		v.Status, v.Measured = record.Fail, fmt.Sprintf("%d of %d run(s) failed", len(failed), len(failed)+countOK(ran, len(failed)))
		v.Detail = strings.Join(firstFew(failed), "; ")
	case len(ran) == 0 && len(lacks) > 0:
		v.Status, v.Measured, v.Detail = record.Skip, "not measured", clip(strings.Join(lacks, "; "), 200)
	case len(ran) == 0:
		v.Status, v.Measured, v.Detail = record.Skip, "not run", "no iteration reached the stress tools"
	default:
		v.Status, v.Measured = record.Pass, strings.Join(tools, ", ")+", all exit 0"
		if len(lacks) > 0 {
			v.Detail = clip(strings.Join(lacks, "; "), 200)
		}
	}
	return v
}

// countOK is how many of the runs counted in ran passed.
func countOK(ran map[string]int, failed int) int {
	total := 0
	for _, k := range ran {
		total += k
	}
	return total - failed
}

// faultyText says how one stress run failed: its exit, and gpu-burn's
// FAULTY GPUs (the first few).
func faultyText(l BurninLoad) string {
	if len(l.Faulty) == 0 {
		return l.Error
	}
	var gpus []string
	for _, g := range l.Faulty[:min(len(l.Faulty), 4)] {
		gpus = append(gpus, fmt.Sprint(g))
	}
	more := ""
	if len(l.Faulty) > 4 {
		more = fmt.Sprintf(" and %d more", len(l.Faulty)-4)
	}
	return fmt.Sprintf("%s (GPU %s%s)", l.Error, strings.Join(gpus, ", "), more)
}

// burnVerdicts judges each node's GPUs: against quote × tol where the
// quote states a rate (a figure measured on the CPU is no GPU's and is
// held to the fleet only), and against the fleet's median of GPUs, a GPU
// below 0.9 × median named. Unquoted with fewer than two GPUs fleet-wide
// there is nothing to hold a figure to: SKIP.
func burnVerdicts(nodes []burnNode, quote, tol float64) []record.Verdict {
	var all []float64
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.Error == "" {
				all = append(all, g.TFLOPS)
			}
		}
	}
	fleet := median(all)
	var out []record.Verdict
	for _, n := range nodes {
		v := record.NewVerdict("BURN-001", n.Name)
		v.Unit = record.UnitTFLOPS
		switch {
		case n.Absent != "":
			v.Status, v.Detail = record.Skip, n.Absent
		case n.Unmeasured != "":
			notMeasured(&v, n.Unmeasured)
		case len(n.GPUs) == 0:
			v.Status, v.Measured, v.Detail = record.Fail, "no figure", clip(firstNonEmpty(n.Err, "gemm.py gave no figure"), 160)
		default:
			burnNodeVerdict(&v, n, quote, tol, fleet, len(all))
		}
		out = append(out, v)
	}
	return out
}

// burnNodeVerdict holds one measured node's GPUs to the quote and the
// fleet.
func burnNodeVerdict(v *record.Verdict, n burnNode, quote, tol, fleet float64, fleetGPUs int) {
	slowest := n.GPUs[0]
	cpu := false
	var broken []string
	for _, g := range n.GPUs {
		if g.Error != "" {
			broken = append(broken, fmt.Sprintf("GPU %d: %s", g.GPU, g.Error))
			continue
		}
		if slowest.Error != "" || g.TFLOPS < slowest.TFLOPS {
			slowest = g
		}
		cpu = cpu || g.On == "cpu"
	}
	on := ""
	if cpu {
		on = " on the CPU (simulated)"
	}
	if slowest.Error == "" {
		x := slowest.TFLOPS
		v.Value = &x
		v.Measured = fmt.Sprintf("slowest GPU %d: %.4g TFLOP/s%s", slowest.GPU, x, on)
	}
	held := quote > 0 && !cpu
	var failed, slow []string
	if held {
		v.Quoted = fmt.Sprintf("%.4g TFLOP/s", quote)
		t := tol
		v.Tolerance = &t
		if slowest.Error == "" {
			r := slowest.TFLOPS / quote
			v.Ratio = &r
		}
	}
	for _, g := range n.GPUs {
		if g.Error != "" {
			continue
		}
		if held && g.TFLOPS < quote*tol {
			failed = append(failed, fmt.Sprintf("GPU %d %.4g (%.2f×)", g.GPU, g.TFLOPS, g.TFLOPS/quote))
		} else if fleetGPUs >= 2 && fleet > 0 && g.TFLOPS < fleetSlowRatio*fleet {
			slow = append(slow, fmt.Sprintf("GPU %d %.4g (%.2f×)", g.GPU, g.TFLOPS, g.TFLOPS/fleet))
		}
	}
	// A node's eight GPUs named one by one would not fit a line: the
	// first few, and how many more (run.json has them all).
	broken, failed, slow = firstFew(broken), firstFew(failed), firstFew(slow)
	fleetText := fmt.Sprintf("median of %d GPU(s), %.4g TFLOP/s", fleetGPUs, fleet)
	switch {
	case len(broken) > 0:
		v.Status, v.Detail = record.Fail, strings.Join(slices.Concat(broken, failed, slow), "; ")
	case len(failed) > 0:
		v.Status, v.Detail = record.Fail, fmt.Sprintf("below %.2f× the quote: %s", tol, strings.Join(failed, ", "))
		if len(slow) > 0 {
			v.Detail += "; below 0.9× the " + fleetText + ": " + strings.Join(slow, ", ")
		}
	case len(slow) > 0 && held:
		// At the quoted rate but slower than its peers: recorded, not a
		// breach of the quote.
		v.Status, v.Detail = record.Warn, "below 0.9× the "+fleetText+": "+strings.Join(slow, ", ")
	case len(slow) > 0:
		v.Status, v.Detail = record.Fail, "below 0.9× the "+fleetText+": "+strings.Join(slow, ", ")
	case held:
		v.Status, v.Detail = record.Pass, fmt.Sprintf("%d GPU(s) at or above %.2f× the quote; %s", len(n.GPUs), tol, fleetText)
	case fleetGPUs < 2:
		v.Status, v.Detail = record.Skip, "not quoted (quote.gpu_tflops_bf16), and one GPU in the fleet: nothing to hold it to"
	default:
		v.Status, v.Detail = record.Pass, fmt.Sprintf("%d GPU(s) within 0.9× the %s (not quoted)", len(n.GPUs), fleetText)
	}
	if cpu && quote > 0 {
		v.Detail += "; CPU figures are not held to the quote"
	}
	if n.Err != "" && v.Status != record.Fail {
		v.Detail += "; " + clip(n.Err, 120)
	}
}

// firstFew is the first two of list and "N more" for the rest.
func firstFew(list []string) []string {
	if len(list) <= 2 {
		return list
	}
	return append(slices.Clone(list[:2]), fmt.Sprintf("%d more", len(list)-2))
}
