package reports

import (
	"fmt"
	"math"

	"gpuaccept/orchestrator/record"
)

// unitFloor is the smallest change of a figure in unit that is a
// regression, however large relative to the baseline: the load generator
// times a token within a millisecond (two runs' TTFT of 5 ms and 6 ms are
// 20 % apart and the same server), nccl-tests prints a small message's
// time to a few tenths of a microsecond, and a share of requests moves by
// one request's share. 0: the threshold alone decides.
func unitFloor(unit string) float64 {
	switch unit {
	case record.UnitMilliseconds:
		return 2
	case record.UnitMicroseconds:
		return 1
	case record.UnitPercentFailed:
		return 0.1
	case record.UnitPercentGood:
		return 1
	}
	return 0
}

// withFloor holds a regression to the unit's floor.
func (m *Metric) withFloor() {
	f := unitFloor(m.Unit)
	if !m.Regression || f == 0 || math.Abs(m.Candidate-m.Baseline) >= f {
		return
	}
	m.Regression, m.Change = false, ChangeWorse
	m.Note = fmt.Sprintf("%s worse, under the %s it resolves", figure(math.Abs(m.Candidate-m.Baseline), m.Unit), figure(f, m.Unit))
}

// workloadFigure is a figure of the load test's evidence that no verdict
// holds but a regression shows in first: the tail of a server's latency
// (a driver upgrade that moved p99 TTFT by 20 % is a regression, whatever
// the p95 the target holds did).
type workloadFigure struct {
	id, name string
	value    func(nodeInference) (float64, bool)
}

var workloadFigures = []workloadFigure{
	{"WORK-002", "p99 TTFT", func(ni nodeInference) (float64, bool) { return ni.At.TTFT.Percentile(99) }},
	{"WORK-003", "p99 ITL", func(ni nodeInference) (float64, bool) { return ni.At.ITL.Percentile(99) }},
	{"WORK-004", "p99 E2EL", func(ni nodeInference) (float64, bool) { return ni.At.E2EL.Percentile(99) }},
}

// compareWorkload compares the inference evidence of the servers both
// runs measured at the same level (the candidate's judged one), figure by
// figure, and returns the regressions' lines.
func (d *Diff) compareWorkload(b, c *record.Run, reg *record.Regression) []string {
	type key struct {
		node  string
		index int
	}
	base := map[key]nodeInference{}
	for _, ni := range inferenceOf(b) {
		base[key{ni.Node, ni.Server.Index}] = ni
	}
	var regs []string
	for _, ci := range inferenceOf(c) {
		bi, ok := base[key{ci.Node, ci.Server.Index}]
		if !ok || ci.At == nil {
			continue
		}
		bi.At = levelNamed(bi.Server.Levels, ci.At.Name)
		if bi.At == nil || bi.At.Name != ci.At.Name {
			continue
		}
		for _, f := range workloadFigures {
			x, okC := f.value(ci)
			y, okB := f.value(bi)
			if !okB || !okC {
				continue
			}
			v := record.Verdict{ID: f.id, Node: ci.label(), Unit: record.UnitMilliseconds}
			m := compareMetric(v, y, x, reg.For(f.id))
			m.Figure = f.name + " at " + ci.At.Name
			m.withFloor()
			d.Metrics = append(d.Metrics, m)
			if m.Regression {
				regs = append(regs, metricLine(m))
			}
		}
	}
	return regs
}
