package reports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// workloadView is the load test as both reports show it: its tables as
// rows of plain text (each report escapes them its own way) and the lines
// that sum up what a bounded table leaves out.
type workloadView struct {
	// Inference: one row per server at its judged level (the worst
	// servers past fleetRows); InferenceNote says what the rows are.
	InferenceHeader []string
	Inference       [][]string
	// Logs are the request logs of the rows, in their order ("" none).
	Logs          []string
	InferenceNote []string
	// Sweep: one row per level over every server (throughput against
	// concurrency).
	SweepHeader []string
	Sweep       [][]string
	// Training: one row per node (the slowest past fleetRows).
	TrainingHeader []string
	Training       [][]string
	TrainingNote   []string
	// Compute: the burn-in's rate, one row per node and GPU (the
	// slowest past fleetRows).
	ComputeHeader []string
	Compute       [][]string
	ComputeNote   []string
	// BurnLoads: the burn-in's loads after the compute rate, one row per
	// node (the collective's worst drifts past fleetRows).
	BurnLoadsHeader []string
	BurnLoads       [][]string
	BurnLoadsNote   []string
	// Latency: the all-reduce latency requirements (NCCL-006/007).
	LatencyHeader []string
	Latency       [][]string
}

func (w workloadView) empty() bool {
	return len(w.Inference) == 0 && len(w.Training) == 0 && len(w.TrainingNote) == 0 && len(w.Latency) == 0 && len(w.Compute) == 0 &&
		len(w.BurnLoads) == 0
}

func newWorkloadView(run *record.Run) workloadView {
	var w workloadView
	w.inference(run)
	w.training(run)
	w.compute(run)
	w.burnLoads(run)
	w.latency(run)
	return w
}

func (w *workloadView) inference(run *record.Run) {
	all := inferenceOf(run)
	if len(all) == 0 {
		return
	}
	w.InferenceHeader = []string{"Node", "Level", "TTFT ms p50/p95/p99", "TPOT ms p50/p95/p99", "ITL ms p50/p95/p99",
		"E2EL ms p50/p95/p99", "Requests/s", "Output tokens/s", "Failed", "Goodput", "GPU memory peak", "Request log"}
	shown := all
	if len(all) > fleetRows {
		shown = worstInference(all)[:workloadWorst]
		w.InferenceNote = append(w.InferenceNote, fmt.Sprintf("The %d servers with the worst judged TTFT of %d; every one is in run.json.",
			workloadWorst, len(all)))
	}
	for _, ni := range shown {
		s := ni.Server
		row := []string{ni.label()}
		if ni.At == nil {
			why := firstOf(s.Error, "measured no level")
			row = append(row, none, none, none, none, none, none, none, why, none, memPeak(s.GPUMemPeakMiB, s.GPUMemTotalMiB))
		} else {
			l := ni.At
			row = append(row, l.Name, dist3(l.TTFT), dist3(l.TPOT), dist3(l.ITL), dist3(l.E2EL), fig(l.RequestsPerSec),
				fig(l.OutputTokensPerSec), levelErrors(*l), goodputText(l.Goodput), memPeak(s.GPUMemPeakMiB, s.GPUMemTotalMiB))
		}
		row = append(row, firstOf(s.RequestLog, none))
		w.Inference = append(w.Inference, row)
		w.Logs = append(w.Logs, s.RequestLog)
	}
	var names []string
	var ttft, tokens []float64
	for _, ni := range all {
		if x, ok := ni.ttft(); ok {
			names = append(names, ni.label())
			ttft = append(ttft, x)
			tokens = append(tokens, ni.At.OutputTokensPerSec)
		}
	}
	if len(all) > fleetRows && len(ttft) > 0 {
		pct := fmt.Sprintf("p%d TTFT at the judged level, servers", all[0].Pct)
		w.InferenceNote = append(w.InferenceNote, spreadLine(pct, record.UnitMilliseconds, names, ttft),
			spreadLine("Output tokens/s at the judged level, servers", "tokens/s", names, tokens))
	}
	w.sweep(all)
}

// sweep is one row per level, over every server that measured it.
func (w *workloadView) sweep(all []nodeInference) {
	var order []string
	by := map[string][]workload.Level{}
	who := map[string][]string{}
	for _, ni := range all {
		for _, l := range ni.Server.Levels {
			if _, ok := by[l.Name]; !ok {
				order = append(order, l.Name)
			}
			by[l.Name] = append(by[l.Name], l)
			who[l.Name] = append(who[l.Name], ni.label())
		}
	}
	if len(order) == 0 {
		return
	}
	w.SweepHeader = []string{"Level", "Servers", "Requests/s (median)", "Output tokens/s: median (lowest)",
		"p95 TTFT ms: median (worst)", "p95 ITL ms (median)", "Failed", "Queue ms (median)", "KV cache (most)"}
	for _, name := range order {
		ls := by[name]
		var rps, tok, ttft, itl, queue []float64
		failed, sent, kv := 0, 0, -1.0
		lowTok, worstTTFT := 0, 0
		for i, l := range ls {
			rps = append(rps, l.RequestsPerSec)
			tok = append(tok, l.OutputTokensPerSec)
			ttft = append(ttft, l.TTFT.P95)
			itl = append(itl, l.ITL.P95)
			if l.OutputTokensPerSec < ls[lowTok].OutputTokensPerSec {
				lowTok = i
			}
			if l.TTFT.P95 > ls[worstTTFT].TTFT.P95 {
				worstTTFT = i
			}
			failed += l.Failed + l.TimedOut
			sent += l.Requests
			if m := l.Metrics; m != nil {
				if m.QueueMs != nil {
					queue = append(queue, *m.QueueMs)
				}
				if m.KVCacheMax != nil {
					kv = max(kv, *m.KVCacheMax)
				}
			}
		}
		fail := fmt.Sprintf("%d of %d", failed, sent)
		if sent > 0 && failed > 0 {
			fail += fmt.Sprintf(" (%.2g %%)", 100*float64(failed)/float64(sent))
		}
		q, k := none, none
		if len(queue) > 0 {
			q = fig(median(queue))
		}
		if kv >= 0 {
			k = fmt.Sprintf("%.0f %%", kv*100)
		}
		w.Sweep = append(w.Sweep, []string{name, fmt.Sprint(len(ls)), fig(median(rps)),
			fmt.Sprintf("%s (%s %s)", fig(median(tok)), fig(ls[lowTok].OutputTokensPerSec), who[name][lowTok]),
			fmt.Sprintf("%s (%s %s)", fig(median(ttft)), fig(ls[worstTTFT].TTFT.P95), who[name][worstTTFT]),
			fig(median(itl)), fail, q, k})
	}
}

// stepMedian is a training node's median steady step, seconds (0: none).
func stepMedian(n workload.TrainingNode) float64 {
	if n.StepSecs.N == 0 {
		return 0
	}
	return n.StepSecs.P50
}

func (w *workloadView) training(run *record.Run) {
	t, ok := trainingOf(run)
	if !ok {
		return
	}
	if t.Error != "" {
		w.TrainingNote = append(w.TrainingNote, "The job: "+t.Error)
	}
	if len(t.Nodes) == 0 {
		return
	}
	unit := firstOf(t.Unit, "per s")
	w.TrainingHeader = []string{"Node", "Steps", "First step s", "Step s: median (min .. max)", "Throughput " + unit,
		"× median step", "GPU memory peak", "Errors, restarts"}
	shown := t.Nodes
	if len(t.Nodes) > fleetRows {
		shown = slices.Clone(t.Nodes)
		slices.SortStableFunc(shown, func(a, b workload.TrainingNode) int { return cmp.Compare(stepMedian(b), stepMedian(a)) })
		shown = shown[:workloadWorst]
		w.TrainingNote = append(w.TrainingNote, fmt.Sprintf("The %d nodes with the slowest median step of %d; every one is in run.json.",
			workloadWorst, len(t.Nodes)))
	}
	for _, n := range shown {
		step := none
		if n.StepSecs.N > 0 {
			step = fmt.Sprintf("%s (%s .. %s)", fig(n.StepSecs.P50), fig(n.StepSecs.Min), fig(n.StepSecs.Max))
		}
		ratio := none
		if t.MedianStepSecs > 0 && n.StepSecs.N > 0 {
			ratio = fmt.Sprintf("%.2f", n.StepSecs.P50/t.MedianStepSecs)
			if n.Node == t.Straggler {
				ratio += fmt.Sprintf(": straggler (> %g)", t.StragglerRatio)
			}
		}
		errs := fmt.Sprintf("%d, %d", n.Errors, n.Restarts)
		if len(n.ErrorLines) > 0 {
			errs += ": " + n.ErrorLines[0]
		}
		w.Training = append(w.Training, []string{n.Node, fmt.Sprint(n.Steps), numPtr(n.FirstStepSecs, ""), step,
			numPtr(n.PerSec, ""), ratio, memPeak(n.GPUMemPeakMiB, n.GPUMemTotalMiB), errs})
	}
	var names []string
	var steps []float64
	for _, n := range t.Nodes {
		if n.StepSecs.N > 0 {
			names = append(names, n.Node)
			steps = append(steps, n.StepSecs.P50)
		}
	}
	if len(t.Nodes) > fleetRows && len(steps) > 0 {
		w.TrainingNote = append(w.TrainingNote, spreadLine("Median step, nodes", record.UnitSeconds, names, steps))
	}
	straggler := "No straggler"
	if t.Straggler != "" {
		straggler = "Straggler: " + t.Straggler
	}
	w.TrainingNote = append(w.TrainingNote, fmt.Sprintf("%s: the median of the nodes' median steps is %s; a node slower than it by more than %g × is one.",
		straggler, record.Figure(t.MedianStepSecs, record.UnitSeconds), t.StragglerRatio))
}

// latency is the all-reduce latency requirements, as the Requirements
// table says them (the worst node and how many passed: bounded at any
// size).
func (w *workloadView) latency(run *record.Run) {
	for _, r := range requirements(run) {
		if r.ID != "NCCL-006" && r.ID != "NCCL-007" {
			continue
		}
		if w.LatencyHeader == nil {
			w.LatencyHeader = []string{"ID", "Requirement", "Status", "Passed", "Held to", "Worst"}
		}
		w.Latency = append(w.Latency, []string{r.ID, r.Title, r.Status, r.passedText(), r.Worst.Rule(), r.worstText()})
	}
}

// notes joins a table's notes as one paragraph.
func notes(ls []string) string { return strings.Join(ls, " ") }
