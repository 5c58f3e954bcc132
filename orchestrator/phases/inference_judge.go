package phases

import (
	"fmt"
	"slices"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// inferenceIDs are the requirements the inference load test judges, in
// the order their verdicts come.
var inferenceIDs = []string{"WORK-001", "WORK-002", "WORK-003", "WORK-004", "WORK-005", "WORK-006", "WORK-007", "WORK-010"}

// infNodeResult is what the judge knows of one node.
type infNodeResult struct {
	name   string
	res    *workload.Inference
	absent string // why it took no part
	nm     string // why it could not be measured (a tool it lacks)
	err    string // why the phase failed on it
}

// judgeInference: per node, the start (WORK-001), the load's figures at
// the judged level (WORK-002..007) and the GPU memory left (WORK-010).
// No cluster line: it would repeat the worst node's failure in the
// reasons; the summary's WORST column and the card row name that node.
func judgeInference(w *orchestrator.Window) []record.Verdict {
	if !inferenceEnabled(w.Inv) {
		return nil
	}
	var nodes []infNodeResult
	for _, n := range w.Nodes {
		r := infNodeResult{name: n.Name}
		var res workload.Inference
		pr, ok := w.Result(inferencePhase, n.Index, &res)
		switch {
		case !ok:
			r.absent = "not run"
			if q, why := n.Quarantined(); q {
				r.absent = why
			}
		case pr.Outcome == record.Skipped:
			r.absent = firstNonEmpty(pr.Error, "skipped")
		case pr.Outcome == record.NotMeasured:
			r.nm = pr.Error
		case pr.Outcome == record.Interrupted:
			r.absent = "interrupted: " + firstNonEmpty(pr.Error, "the window was stopped")
		default:
			r.err = pr.Error
			if len(pr.Data) > 0 {
				r.res = &res
			}
		}
		nodes = append(nodes, r)
	}
	var out []record.Verdict
	for _, id := range inferenceIDs {
		var vs []record.Verdict
		for _, r := range nodes {
			vs = append(vs, inferenceVerdict(w.Inv, id, r))
		}
		out = append(out, vs...)
	}
	return out
}

// inferenceVerdict is requirement id on one node.
func inferenceVerdict(inv *inventory.Inventory, id string, r infNodeResult) record.Verdict {
	v := record.NewVerdict(id, r.name)
	switch {
	case r.absent != "":
		v.Status, v.Detail = record.Skip, r.absent
		return v
	case r.nm != "":
		notMeasured(&v, r.nm)
		return v
	case r.res == nil:
		if id == "WORK-001" {
			v.Status, v.Measured, v.Detail = record.Fail, "not started", firstNonEmpty(r.err, "no result")
		} else {
			v.Status, v.Detail = record.Skip, "not measured: "+firstNonEmpty(r.err, "no result")
		}
		return v
	}
	switch id {
	case "WORK-001":
		readyVerdict(inv, &v, r.res.Servers)
		return v
	case "WORK-010":
		headroomVerdict(inv, &v, r.res.Servers)
		return v
	}
	f := nodeFigures(inv, r.res.Servers)
	g := workFigure(inv, id, f)
	if !serversReady(r.res.Servers) && g.value == nil {
		// WORK-001 fails the node; this figure was never measured.
		v.Status, v.Detail = record.Skip, "not measured: "+firstNonEmpty(g.missing, "no server got ready")
		return v
	}
	setFigure(&v, g)
	// A last run that could not be measured (its generator fell behind)
	// leaves the figure NOT MEASURED: the verdict rests on that run, and
	// its earlier runs neither pass nor fail it.
	if len(r.res.Runs) > 1 && !(g.incomplete && g.value == nil) {
		figure := func(servers []workload.Server) (*float64, string) {
			x := workFigure(inv, id, nodeFigures(inv, servers))
			return x.value, firstNonEmpty(x.failed, onlyIf(x.quoted != "" && x.value == nil, x.missing))
		}
		if h := retestOf(r.res.Runs, g.unit, figure); h != nil && slices.ContainsFunc(h.Runs, func(x record.RetestRun) bool { return x.Failed != "" }) {
			v.Retest = h
			if h.Failed() {
				v.Status = record.Fail
			}
		}
	}
	return v
}

func onlyIf(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// serversReady: some server of the node got ready.
func serversReady(servers []workload.Server) bool {
	for _, sv := range servers {
		if sv.ReadySecs != nil {
			return true
		}
	}
	return false
}

// setFigure makes v of figure g: a figure with no target set is
// recorded, not judged (SKIP, as a figure the quote leaves out); one
// with a target passes or fails it; a target nothing measured fails, or
// leaves the window INCOMPLETE when no node could have measured it.
func setFigure(v *record.Verdict, g fig) {
	v.Quoted, v.Measured = g.quoted, g.measured
	if g.value != nil {
		v.Measure(*g.value, g.unit)
	}
	switch {
	case g.value == nil && g.quoted == "":
		v.Status, v.Detail = record.Skip, "not measured: "+g.missing
	case g.value == nil && g.incomplete:
		notMeasured(v, g.missing)
		v.Quoted = g.quoted
	case g.value == nil:
		v.Status, v.Measured, v.Detail = record.Fail, "not measured", g.missing
	case g.quoted == "":
		v.Status, v.Detail = record.Skip, join("no target set (acceptance.workload)", g.detail)
	case g.failed != "":
		v.Status, v.Detail = record.Fail, join(g.failed, g.detail)
	default:
		v.Status, v.Detail = record.Pass, g.detail
	}
}

// readyVerdict: the slowest server's start, against ready_within; a
// server that never got ready fails with its error and its log's end.
func readyVerdict(inv *inventory.Inventory, v *record.Verdict, servers []workload.Server) {
	target := inv.Acceptance.Workload.Ready
	if target > 0 {
		v.Quoted = "≤ " + record.Figure(target.Seconds(), record.UnitSeconds)
	}
	var slowest *workload.Server
	for i := range servers {
		sv := &servers[i]
		if sv.ReadySecs == nil {
			v.Status, v.Measured = record.Fail, fmt.Sprintf("server %d (port %d) not ready", sv.Index, sv.Port)
			v.Detail = firstNonEmpty(sv.Error, "never answered")
			if sv.LogTail != "" {
				v.Detail += "; its log ends:\n" + sv.LogTail
			}
			return
		}
		if slowest == nil || *sv.ReadySecs > *slowest.ReadySecs {
			slowest = sv
		}
	}
	if slowest == nil {
		v.Status, v.Detail = record.Fail, "no server"
		return
	}
	v.Measure(*slowest.ReadySecs, record.UnitSeconds)
	v.Measured = fmt.Sprintf("ready in %s", record.Figure(*slowest.ReadySecs, record.UnitSeconds))
	if len(servers) > 1 {
		v.Measured += fmt.Sprintf(" (slowest of %d: server %d)", len(servers), slowest.Index)
	}
	if slowest.HealthSecs != nil {
		v.Detail = fmt.Sprintf("health endpoint answered at %s, the first completion at %s",
			record.Figure(*slowest.HealthSecs, record.UnitSeconds), record.Figure(*slowest.ReadySecs, record.UnitSeconds))
	}
	switch {
	case target <= 0:
		v.Status, v.Detail = record.Skip, join("no target set (acceptance.workload.ready_within)", v.Detail)
	case *slowest.ReadySecs > target.Seconds():
		v.Status = record.Fail
	default:
		v.Status = record.Pass
	}
}

// headroomVerdict: the GPU memory left free at the peak of the load, the
// least of the node's servers' (nvidia-smi, sampled every second).
func headroomVerdict(inv *inventory.Inventory, v *record.Verdict, servers []workload.Server) {
	target := inv.Acceptance.Workload.MemoryHeadroom
	if target > 0 {
		v.Quoted = fmt.Sprintf("≥ %s%% free at the peak", record.Figure(target*100, ""))
	}
	var least *float64
	for _, sv := range servers {
		if sv.GPUMemPeakMiB == nil || sv.GPUMemTotalMiB == nil || *sv.GPUMemTotalMiB <= 0 {
			continue
		}
		free := 1 - *sv.GPUMemPeakMiB / *sv.GPUMemTotalMiB
		if least == nil || free < *least {
			least = &free
			v.Measured = fmt.Sprintf("%s%% free: peak %s of %s MiB", record.Figure(free*100, ""),
				record.Figure(*sv.GPUMemPeakMiB, ""), record.Figure(*sv.GPUMemTotalMiB, ""))
			if len(servers) > 1 {
				v.Measured += fmt.Sprintf(" (server %d)", sv.Index)
			}
		}
	}
	switch {
	case least == nil:
		why := "GPU memory not sampled (nvidia-smi not installed, or it gave no memory figures)"
		if !serversReady(servers) {
			why = "no server got ready"
		}
		v.Status, v.Measured, v.Detail = record.Skip, "not measured", why
		if target > 0 && serversReady(servers) {
			v.Incomplete = why
		}
		return
	case target <= 0:
		v.Status, v.Detail = record.Skip, "no target set (acceptance.workload.memory_headroom)"
	case *least < target:
		v.Status = record.Fail
	default:
		v.Status = record.Pass
	}
	v.Measure(*least*100, record.UnitPercentGood)
}

// worse: a is a worse figure than b in unit.
func worse(a, b float64, unit string) bool {
	if record.LowerIsBetter(unit) {
		return a > b
	}
	return a < b
}
