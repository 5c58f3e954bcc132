package telemetry

import (
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// The requirements Judge makes, in its order.
var judged = []string{"HEALTH-011", "HEALTH-012", "HEALTH-013", "HEALTH-014", "HEALTH-015", "HEALTH-016"}

// Judge makes HEALTH-011..016 for node from its series. A nil series is
// not measured: every verdict SKIP with an Incomplete reason (JudgeMissing
// names a better one where the caller knows it). spans are the window's
// phases; Load marks those that load the GPUs. baseClockMHz is the quote's
// base clock, 0 where the quote does not state it.
func Judge(node string, s *Series, spans []Span, baseClockMHz float64) []record.Verdict {
	if s == nil {
		return JudgeMissing(node, "no telemetry recorded for the node")
	}
	j := newJudge(node, s, spans)
	return []record.Verdict{j.throttle(), j.xid(), j.ecc(), j.clocks(baseClockMHz), j.ib(), j.stall()}
}

// JudgeMissing is every verdict of Judge not measured on node, for why
// ("nvidia-smi not found on the node", "the telemetry file is unreadable").
func JudgeMissing(node, why string) []record.Verdict {
	out := make([]record.Verdict, 0, len(judged))
	for _, id := range judged {
		out = append(out, notMeasured(id, node, why))
	}
	return out
}

func notMeasured(id, node, why string) record.Verdict {
	v := record.NewVerdict(id, node)
	v.Status = record.Skip
	v.Incomplete = fit("no telemetry: " + clean(why, 200))
	v.Detail = v.Incomplete
	return v
}

func skip(id, node, detail string) record.Verdict {
	v := record.NewVerdict(id, node)
	v.Status, v.Detail = record.Skip, fit(detail)
	return v
}

type judge struct {
	node  string
	s     *Series
	spans []Span
	t0    time.Time
	// byGPU: each GPU's samples in time order; load: whether each sample
	// fell in a Load span (same shape).
	gpus  []int
	byGPU map[int][]*GPUSample
	load  map[*GPUSample]bool
	nLoad int
}

func newJudge(node string, s *Series, spans []Span) *judge {
	j := &judge{node: node, s: s, spans: spans, byGPU: map[int][]*GPUSample{}, load: map[*GPUSample]bool{}}
	for _, sp := range spans {
		if !sp.Start.IsZero() && (j.t0.IsZero() || sp.Start.Before(j.t0)) {
			j.t0 = sp.Start
		}
	}
	if len(s.Starts) > 0 && (j.t0.IsZero() || s.Starts[0].Before(j.t0)) {
		j.t0 = s.Starts[0]
	}
	if j.t0.IsZero() && len(s.GPUs) > 0 {
		j.t0 = s.GPUs[0].At
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		if _, ok := j.byGPU[g.Index]; !ok {
			j.gpus = append(j.gpus, g.Index)
		}
		j.byGPU[g.Index] = append(j.byGPU[g.Index], g)
		for _, sp := range spans {
			if sp.Load && sp.contains(g.At) {
				j.load[g] = true
				j.nLoad++
				break
			}
		}
	}
	slices.Sort(j.gpus)
	for _, gs := range j.byGPU {
		slices.SortStableFunc(gs, func(a, b *GPUSample) int { return a.At.Compare(b.At) })
	}
	return j
}

// covered: how long the samples ran, for a verdict that found nothing.
func (j *judge) covered() string {
	if len(j.s.GPUs) == 0 {
		return "0s"
	}
	first, last := j.s.GPUs[0].At, j.s.GPUs[0].At
	for _, g := range j.s.GPUs {
		first, last = minTime(first, g.At), maxTime(last, g.At)
	}
	return span(last.Sub(first))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sourceMissing is the sampler's note that a source was not found or not
// readable ("nvidia-smi not found", "dmesg restricted, journalctl not
// found"): a note naming one of names and saying it is missing.
func (j *judge) sourceMissing(names ...string) string {
	for _, n := range j.s.Notes {
		l := strings.ToLower(n)
		named := slices.ContainsFunc(names, func(s string) bool { return strings.Contains(l, s) })
		missing := slices.ContainsFunc([]string{"not found", "missing", "unreadable", "restricted",
			"not readable", "cannot", "can't", "failed", "denied", "no "},
			func(s string) bool { return strings.Contains(l, s) })
		if named && missing {
			return n
		}
	}
	return ""
}

// noGPUs is the verdict of a GPU requirement when no gpu row came.
func (j *judge) noGPUs(id string) record.Verdict {
	why := j.sourceMissing("nvidia-smi")
	if why == "" {
		why = "no GPU sample recorded"
	}
	return notMeasured(id, j.node, why)
}
