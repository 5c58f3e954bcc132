package phases

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

func judgeFailure(w *orchestrator.Window) []record.Verdict {
	var res Failed
	pr, ok := w.Result("failure", -1, &res)
	if !ok || !w.Inv.Phases.Failure.Enabled {
		return nil
	}
	if vs, ok := unmeasuredVerdicts(pr, "", "RECOV-001", "RECOV-002", "RECOV-003"); ok {
		return vs
	}
	if vs, few := tooFewVerdicts(w, "failure", "RECOV-001", "RECOV-002", "RECOV-003", "RECOV-004"); few {
		return vs
	}
	f := w.Inv.Phases.Failure
	v := func(id string) record.Verdict { return record.NewVerdict(id, "") }
	if res.InjectedAt == 0 {
		// The test never got to the failure: say why on the first one.
		r := v("RECOV-001")
		r.Status, r.Detail = record.Fail, firstNonEmpty(pr.Error, "the job never ran steadily")
		if t := torchText(res.Nodes, res.Torch); t != "" {
			r.Detail += " (" + t + ")"
		}
		return []record.Verdict{r, leftVerdict(res, v("RECOV-004"))}
	}
	how := fmt.Sprintf("%s of %s, %s recovery", res.Inject, res.Victim, res.Recovery)
	if t := torchText(res.Nodes, res.Torch); t != "" {
		how += " (" + t + ")"
	}
	resumed := v("RECOV-001")
	resumed.Quoted = "≤ " + f.ResumeWithin.String()
	switch {
	case res.ResumeSecs == nil || !res.Resumed:
		resumed.Status = record.Fail
		resumed.Measured = "did not resume"
		resumed.Detail = how + "; " + firstNonEmpty(pr.Error, lastAction(res))
	default:
		resumed.Measured = fmt.Sprintf("resumed %.1f s after the failure (detected in %s)", *res.ResumeSecs, secsText(res.DetectionSecs))
		resumed.Measure(*res.ResumeSecs, record.UnitSeconds)
		resumed.Status = record.Pass
		if *res.ResumeSecs > f.ResumeWithin.Seconds() {
			resumed.Status = record.Fail
		}
		resumed.Detail = how + fmt.Sprintf("; billed while stalled: %.0f node-seconds, %.3f GPU-hours%s", res.BilledNodeSecs, res.BilledGPUHours, costText(res))
	}
	lost := v("RECOV-002")
	lost.Quoted = fmt.Sprintf("≤ %d step(s)", *f.MaxStepsLost)
	switch {
	case res.StepsLost == nil:
		lost.Status, lost.Detail = record.Fail, "the job never started again, so nothing was resumed"
	default:
		lost.Measured = fmt.Sprintf("%d step(s): resumed from step %d, step %d reached before the failure (last checkpoint %d)",
			*res.StepsLost, *res.ResumedFrom, res.LastStep, res.LastCheckpoint)
		lost.Measure(float64(*res.StepsLost), record.UnitSteps)
		lost.Status = record.Pass
		if *res.StepsLost > *f.MaxStepsLost {
			lost.Status = record.Fail
		}
		if *res.ResumedFrom < res.LastCheckpoint {
			lost.Status = record.Fail
			lost.Detail = fmt.Sprintf("resumed from step %d although step %d was checkpointed", *res.ResumedFrom, res.LastCheckpoint)
		}
	}
	back := v("RECOV-003")
	if res.VictimBackAt != nil {
		back.Status, back.Measured = record.Pass, fmt.Sprintf("%s logged steps again %.1f s after the failure", res.Victim, *res.VictimBackAt-res.InjectedAt)
		back.Measure(*res.VictimBackAt-res.InjectedAt, record.UnitSeconds)
	} else {
		// The job may well go on without it (elastic): a warning, not a
		// rejection.
		back.Status, back.Measured = record.Warn, res.Victim+" did not come back into the job"
	}
	back.Node = res.Victim
	return []record.Verdict{resumed, lost, back, leftVerdict(res, v("RECOV-004"))}
}

func leftVerdict(res Failed, v record.Verdict) record.Verdict {
	// Grouped, as host ranges: at 1,000 nodes one clause a node was a
	// thousand of them.
	silent, byCount := []string{}, map[int][]string{}
	for _, n := range res.Nodes {
		switch c, ok := res.Left[n]; {
		case !ok || c < 0:
			silent = append(silent, n)
		case c > 0:
			byCount[c] = append(byCount[c], n)
		}
	}
	var bad []string
	if len(silent) > 0 {
		bad = append(bad, hostlist.Compress(silent)+" did not answer")
	}
	for _, c := range slices.Sorted(maps.Keys(byCount)) {
		bad = append(bad, fmt.Sprintf("%s: %d process(es)", hostlist.Compress(byCount[c]), c))
	}
	v.Status, v.Measured = record.Pass, "no process of the test left on any node"
	if len(bad) > 0 {
		v.Status, v.Measured = record.Fail, strings.Join(bad, "; ")
	}
	return v
}

func lastAction(res Failed) string {
	if len(res.Actions) == 0 {
		return ""
	}
	a := res.Actions[len(res.Actions)-1]
	return strings.TrimSpace(a.What + ": " + a.Output)
}

func secsText(s *float64) string {
	if s == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f s", *s)
}

func costText(res Failed) string {
	if res.BilledCost == nil {
		return ""
	}
	return fmt.Sprintf(", %.2f %s", *res.BilledCost, res.Currency)
}
