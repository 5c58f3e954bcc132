package phases

import (
	"fmt"
	"math"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// trainingIDs are the verdicts the training load test gives, per node.
var trainingIDs = []string{"WORK-001", "WORK-008", "WORK-009", "WORK-010", "WORK-011"}

// judgeTraining: per node, time to the first step (WORK-001), steady
// throughput (WORK-008), the straggler (WORK-009), memory headroom
// (WORK-010), errors and restarts (WORK-011); WORK-008 and WORK-009 with
// the history of their retests. Figures over a measurement's repeats are
// medians, never the best run.
func judgeTraining(w *orchestrator.Window) []record.Verdict {
	var res workload.Training
	pr, ok := w.Result("training", -1, &res)
	if !ok || !trainingOn(w.Inv) {
		return nil
	}
	if vs, ok := unmeasuredVerdicts(pr, "", trainingIDs...); ok {
		return vs
	}
	if vs, few := tooFewVerdicts(w, "training", trainingIDs...); few {
		return vs
	}
	trials := trialsOf(res)
	if len(trials) == 0 {
		var out []record.Verdict
		for _, id := range trainingIDs {
			v := record.NewVerdict(id, "")
			v.Status, v.Measured, v.Detail = record.Fail, "the job did not run", firstNonEmpty(res.Error, pr.Error, "no run recorded")
			out = append(out, v)
		}
		return out
	}
	inv := w.Inv
	last := trialNodes(trials[len(trials)-1])
	_, strag, ratios := straggler(last, inv.Phases.Workload.Training.StragglerRatio)
	var out []record.Verdict
	for _, f := range last {
		out = append(out, trainingReadyVerdict(inv, f))
		tp := trainingThroughputVerdict(inv, f, res.Unit)
		tp.Retest = retestOf(trials, record.UnitPerSecond, func(t trainingTrial) (*float64, string) {
			return nodeThroughput(inv, t, f.Node, res.Unit)
		})
		out = append(out, tp)
		sv := trainingStragglerVerdict(inv, f, ratios, strag)
		sv.Retest = retestOf(trials, record.UnitTimesMedian, func(t trainingTrial) (*float64, string) {
			return nodeStraggler(inv, t, f.Node)
		})
		out = append(out, sv)
		out = append(out, trainingHeadroomVerdict(inv, f), trainingErrorsVerdict(inv, trials, f.Node))
	}
	return out
}

// trialsOf splits the record's runs into its measurements.
func trialsOf(res workload.Training) []trainingTrial {
	runs := res.Runs
	if len(runs) == 0 {
		if len(res.Nodes) == 0 {
			return nil
		}
		runs = [][]workload.TrainingNode{res.Nodes}
	}
	per := max(res.Repeats, 1)
	var out []trainingTrial
	for i := 0; i < len(runs); i += per {
		out = append(out, trainingTrial(runs[i:min(i+per, len(runs))]))
	}
	return out
}

// trialFails says why trial fails WORK-008 or WORK-009 on some node, the
// rule the judge applies ("" when it passes): what the phase retests.
func trialFails(inv *inventory.Inventory, trial trainingTrial, unit string) string {
	var why []string
	for _, f := range trialNodes(trial) {
		if _, failed := nodeThroughput(inv, trainingTrial(trial), f.Node, unit); failed != "" {
			why = append(why, f.Node+": "+failed)
		}
		if _, failed := nodeStraggler(inv, trial, f.Node); failed != "" {
			why = append(why, f.Node+": "+failed)
		}
	}
	if len(why) > 3 {
		why = append(why[:3], fmt.Sprintf("and %d more", len(why)-3))
	}
	return strings.Join(why, "; ")
}

func nodeOf(trial trainingTrial, node string) (nodeFigure, bool) {
	for _, f := range trialNodes(trial) {
		if f.Node == node {
			return f, true
		}
	}
	return nodeFigure{}, false
}

// nodeThroughput is node's WORK-008 figure in trial and why it fails.
func nodeThroughput(inv *inventory.Inventory, trial trainingTrial, node, unit string) (*float64, string) {
	f, ok := nodeOf(trial, node)
	if !ok {
		return nil, ""
	}
	v := trainingThroughputVerdict(inv, f, unit)
	return v.Value, failedWhy(v)
}

// nodeStraggler is node's WORK-009 figure in trial and why it fails.
func nodeStraggler(inv *inventory.Inventory, trial trainingTrial, node string) (*float64, string) {
	nodes := trialNodes(trial)
	_, strag, ratios := straggler(nodes, inv.Phases.Workload.Training.StragglerRatio)
	for _, f := range nodes {
		if f.Node == node {
			v := trainingStragglerVerdict(inv, f, ratios, strag)
			return v.Value, failedWhy(v)
		}
	}
	return nil, ""
}

func failedWhy(v record.Verdict) string {
	if v.Status != record.Fail {
		return ""
	}
	return firstNonEmpty(v.Measured, "failed")
}

// noTarget is a figure measured with no target set: recorded, not
// judged, as a quoted figure the quote leaves out.
func noTarget(v *record.Verdict, key string) {
	v.Status, v.Detail = record.Skip, join(v.Detail, "no target set (acceptance.workload."+key+")")
}

// unmeasuredFigure: a figure nothing measured. With a target set the
// window cannot be judged on it (INCOMPLETE); without one it is only
// noted. A node whose job failed fails instead: the workload did not run.
func unmeasuredFigure(v *record.Verdict, f nodeFigure, what, key string, target bool) {
	switch {
	case f.Failed:
		v.Status, v.Measured = record.Fail, what+" not reached: the job logged errors or restarts"
		v.Detail = strings.Join(f.ErrorLines, "; ")
	case target:
		notMeasured(v, fmt.Sprintf("%s: %s not measured (no step line of the log read; acceptance.workload.%s is set)", f.Node, what, key))
	default:
		v.Status, v.Measured, v.Detail = record.Skip, "not measured", "no target set (acceptance.workload."+key+")"
	}
}

func trainingReadyVerdict(inv *inventory.Inventory, f nodeFigure) record.Verdict {
	v := record.NewVerdict("WORK-001", f.Node)
	within := inv.Acceptance.Workload.Ready
	if math.IsNaN(f.FirstStep) {
		unmeasuredFigure(&v, f, "the first step", "ready_within", within > 0)
		return v
	}
	v.Measured = fmt.Sprintf("first step %.1f s after the launch", f.FirstStep)
	v.Measure(f.FirstStep, record.UnitSeconds)
	if within <= 0 {
		noTarget(&v, "ready_within")
		return v
	}
	v.Quoted = "≤ " + record.Figure(within.Seconds(), record.UnitSeconds)
	v.Status = record.Pass
	if f.FirstStep > within.Seconds() {
		v.Status = record.Fail
	}
	return v
}

func trainingThroughputVerdict(inv *inventory.Inventory, f nodeFigure, unit string) record.Verdict {
	v := record.NewVerdict("WORK-008", f.Node)
	t := inv.Acceptance.Workload
	want, key := t.SamplesPerSec, "samples_per_s"
	if unit == "tokens/s" {
		want, key = t.TokensPerSec, "tokens_per_s"
	}
	stepTarget := t.StepTime > 0
	if math.IsNaN(f.PerSec) && math.IsNaN(f.StepAll) {
		k := key
		if want <= 0 && stepTarget {
			k = "step_time"
		}
		unmeasuredFigure(&v, f, "steady throughput", k, want > 0 || stepTarget)
		return v
	}
	var measured, quoted, fails []string
	if !math.IsNaN(f.PerSec) {
		m := fmt.Sprintf("%.4g %s", f.PerSec, unit)
		if f.Runs > 1 {
			m += fmt.Sprintf(" median of %d runs (%.4g..%.4g)", f.Runs, f.PerMin, f.PerMax)
		}
		measured = append(measured, m)
		v.Measure(f.PerSec, record.UnitPerSecond)
	}
	if !math.IsNaN(f.StepAll) {
		measured = append(measured, fmt.Sprintf("median step %.3g s", f.StepAll))
	}
	v.Measured = strings.Join(measured, ", ")
	if want > 0 {
		quoted = append(quoted, fmt.Sprintf("≥ %.4g %s", want, unit))
		switch {
		case math.IsNaN(f.PerSec):
			notMeasured(&v, fmt.Sprintf("%s: the log gives no samples or tokens a step (acceptance.workload.%s is set)", f.Node, key))
			return v
		case f.PerSec < want:
			fails = append(fails, fmt.Sprintf("%.4g %s", f.PerSec, unit))
		}
	}
	if stepTarget {
		quoted = append(quoted, "step ≤ "+record.Figure(t.StepTime.Seconds(), record.UnitSeconds))
		if !math.IsNaN(f.StepAll) && f.StepAll > t.StepTime.Seconds() {
			fails = append(fails, fmt.Sprintf("step %.3g s", f.StepAll))
		}
	}
	if len(quoted) == 0 {
		noTarget(&v, key)
		return v
	}
	v.Quoted = strings.Join(quoted, ", ")
	v.Status = record.Pass
	if len(fails) > 0 {
		v.Status = record.Fail
	}
	return v
}

func trainingStragglerVerdict(inv *inventory.Inventory, f nodeFigure, ratios map[string]float64, strag string) record.Verdict {
	v := record.NewVerdict("WORK-009", f.Node)
	limit := inv.Phases.Workload.Training.StragglerRatio
	r, ok := ratios[f.Node]
	if !ok {
		// Always judged (straggler_ratio has a default): a node without a
		// steady step cannot be cleared.
		unmeasuredFigure(&v, f, "the median step", "", true)
		if v.Status == record.Skip {
			v.Detail = f.Node + ": no steady step logged: the straggler could not be judged"
			v.Incomplete = v.Detail
		}
		return v
	}
	v.Measured = fmt.Sprintf("median %s %.3g s, %.2f× the nodes' median", f.Basis, f.Step, r)
	v.Measure(r, record.UnitTimesMedian)
	v.Quoted = fmt.Sprintf("≤ %.2f× the median", limit)
	v.Status = record.Pass
	if r > limit {
		v.Status = record.Fail
		if f.Node == strag {
			v.Measured = "straggler: " + v.Measured
		}
	}
	return v
}

func trainingHeadroomVerdict(inv *inventory.Inventory, f nodeFigure) record.Verdict {
	v := record.NewVerdict("WORK-010", f.Node)
	want := inv.Acceptance.Workload.MemoryHeadroom
	if math.IsNaN(f.Peak) || math.IsNaN(f.Total) || f.Total <= 0 {
		if want > 0 {
			notMeasured(&v, f.Node+": GPU memory not measured (the log gives no peak and nvidia-smi answered nothing; acceptance.workload.memory_headroom is set)")
		} else {
			v.Status, v.Measured, v.Detail = record.Skip, "not measured", "no target set (acceptance.workload.memory_headroom)"
		}
		return v
	}
	free := 100 * (f.Total - f.Peak) / f.Total
	v.Measured = fmt.Sprintf("%.1f%% free: peak %.0f of %.0f MiB", free, f.Peak, f.Total)
	v.Measure(free, record.UnitPercentGood)
	if want <= 0 {
		noTarget(&v, "memory_headroom")
		return v
	}
	v.Quoted = fmt.Sprintf("≥ %.4g%% free", 100*want)
	v.Status = record.Pass
	if free < 100*want {
		v.Status = record.Fail
	}
	return v
}

// trainingErrorsVerdict counts errors and restarts over every run: a retest
// that passed does not undo an error the job logged.
func trainingErrorsVerdict(inv *inventory.Inventory, trials []trainingTrial, node string) record.Verdict {
	v := record.NewVerdict("WORK-011", node)
	errs, restarts, runs := 0, 0, 0
	var lines []string
	for _, t := range trials {
		for _, run := range t {
			for _, tn := range run {
				if tn.Node != node {
					continue
				}
				runs++
				errs += tn.Errors
				restarts += tn.Restarts
				if len(lines) == 0 {
					lines = tn.ErrorLines
				}
			}
		}
	}
	limit := inv.Acceptance.Workload.MaxErrors
	v.Measured = fmt.Sprintf("%d error(s), %d restart(s) in %d run(s)", errs, restarts, runs)
	v.Quoted = fmt.Sprintf("≤ %d", limit)
	v.Status = record.Pass
	if errs+restarts > limit {
		v.Status = record.Fail
		v.Detail = strings.Join(lines, "; ")
	}
	return v
}
