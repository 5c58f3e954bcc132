package phases

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
)

// loadPhases are the phases meant to keep the GPUs busy: the judgements
// made under load (throttling, clocks, stalls) look at their samples only.
var loadPhases = []string{"intranode", "allreduce", "bisect", "training", inferencePhase, "burnin", "failure"}

// judgeTelemetry makes HEALTH-011..016 of every node from its series in
// the bundle and the phases' times in the record, and keeps the per-phase
// summaries in run.json.
func judgeTelemetry(w *orchestrator.Window) []record.Verdict {
	var out []record.Verdict
	rec := w.Record()
	sums := map[string][]record.TelemetryPhase{}
	for _, n := range w.Nodes {
		r, ran := w.Result("telemetry", n.Index, nil)
		if !w.Inv.Telemetry.On() {
			out = append(out, skipAll(n.Name, "disabled in the inventory (telemetry.enabled)")...)
			continue
		}
		s, err := telemetry.ReadFile(filepath.Join(w.Dir, "raw", n.Name, telemetry.FileName))
		switch {
		case s == nil && errors.Is(err, fs.ErrNotExist) && !ran:
			reason := "not run"
			if q, why := n.Quarantined(); q {
				reason = why
			}
			out = append(out, skipAll(n.Name, reason)...)
			continue
		case s == nil && errors.Is(err, fs.ErrNotExist):
			out = append(out, telemetry.JudgeMissing(n.Name, "the sampler did not start: "+firstLine(r.Error))...)
			continue
		case s == nil:
			out = append(out, telemetry.JudgeMissing(n.Name, "the telemetry file is unreadable: "+firstLine(err.Error()))...)
			continue
		}
		spans := telemetrySpans(rec, n.Name)
		out = append(out, telemetry.Judge(n.Name, s, spans, w.Inv.Quote.GPUBaseClockMHz)...)
		if sum := telemetry.Summarise(s, spans); len(sum) > 0 {
			sums[n.Name] = recordSummaries(sum)
		}
	}
	w.SetTelemetry(sums)
	return out
}

// skipAll is every HEALTH verdict of the telemetry skipped on node, for
// a reason that is not a measurement missing (the node left the window
// before, the buyer turned the sampler off).
func skipAll(node, why string) []record.Verdict {
	var out []record.Verdict
	for _, v := range telemetry.JudgeMissing(node, why) {
		out = append(out, record.Verdict{ID: v.ID, Title: v.Title, Node: node, Status: record.Skip, Detail: why})
	}
	return out
}

// telemetrySpans are the phases as they ran on node (its own results and
// the cluster-wide ones), each from its first start to its last end, in
// the order they began; Load marks those that load the GPUs.
func telemetrySpans(rec *record.Run, node string) []telemetry.Span {
	var spans []telemetry.Span
	at := map[string]int{}
	for _, p := range rec.Phases {
		if (p.Node != node && p.Index >= 0) || p.Outcome == record.Skipped || p.Started.IsZero() || p.Ended.Before(p.Started) {
			continue
		}
		i, ok := at[p.Phase]
		if !ok {
			at[p.Phase] = len(spans)
			spans = append(spans, telemetry.Span{Phase: p.Phase, Start: p.Started, End: p.Ended,
				Load: slices.Contains(loadPhases, p.Phase)})
			continue
		}
		sp := &spans[i]
		sp.Start, sp.End = earliest(sp.Start, p.Started), latest(sp.End, p.Ended)
	}
	slices.SortStableFunc(spans, func(a, b telemetry.Span) int { return a.Start.Compare(b.Start) })
	return spans
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func recordSummaries(in []telemetry.GPUPhase) []record.TelemetryPhase {
	st := func(s telemetry.Stat) record.TelemetryStat {
		return record.TelemetryStat{Min: s.Min, Median: s.Median, Max: s.Max, N: s.N}
	}
	out := make([]record.TelemetryPhase, 0, len(in))
	for _, g := range in {
		out = append(out, record.TelemetryPhase{Phase: g.Phase, GPU: g.GPU,
			Temp: st(g.Temp), Power: st(g.Power), SMClock: st(g.SMClock), Util: st(g.Util)})
	}
	return out
}
