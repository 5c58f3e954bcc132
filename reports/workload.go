package reports

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// The load test's evidence as run.json keeps it (SCHEMA.md): phase
// "inference" has one result per node whose data is a workload.Inference,
// phase "training" one cluster-wide result whose data is a
// workload.Training. The reports read it through orchestrator/workload,
// which imports nothing of the window.

// Phase names of the load test.
const (
	inferencePhase = "inference"
	trainingPhase  = "training"
)

// nodeInference is one server of a node and the level its figures were
// judged at.
type nodeInference struct {
	Node   string
	Server workload.Server
	// Servers is how many servers the node ran (the table names the GPU
	// group only when more than one).
	Servers int
	// At is the level judged (nil: the server measured none).
	At *workload.Level
	// Pct is the percentile the latency targets hold.
	Pct int
}

// levelAt is ", concurrency:32" or ", rate:8" in a verdict's Quoted,
// which the inference judge writes as "≤ 800 ms at p95, concurrency:32".
var (
	levelAt = regexp.MustCompile(`\b((?:concurrency|rate):[0-9.]+)`)
	pctAt   = regexp.MustCompile(`\bat p(50|90|95|99)\b`)
)

// judgedAt is the level and percentile the WORK-002..007 verdicts of node
// name in their texts ("" and the default 95 when none does).
func judgedAt(run *record.Run, node string) (string, int) {
	level, pct := "", 95
	for _, v := range run.Verdicts {
		if v.Node != node || !strings.HasPrefix(v.ID, "WORK-00") || v.ID < "WORK-002" || v.ID > "WORK-007" {
			continue
		}
		text := v.Quoted + " " + v.Measured + " " + v.Detail
		if m := levelAt.FindStringSubmatch(text); m != nil && level == "" {
			level = m[1]
		}
		if m := pctAt.FindStringSubmatch(text); m != nil {
			pct, _ = strconv.Atoi(m[1])
		}
	}
	return level, pct
}

// inferenceOf is every server of every node that recorded inference
// evidence, in the run's node order.
func inferenceOf(run *record.Run) []nodeInference {
	var out []nodeInference
	for _, n := range run.Nodes {
		var in workload.Inference
		if !hasData(run, inferencePhase, n.Name, &in) {
			continue
		}
		name, pct := judgedAt(run, n.Name)
		for _, s := range in.Servers {
			ni := nodeInference{Node: n.Name, Server: s, Servers: len(in.Servers), Pct: pct}
			ni.At = levelNamed(s.Levels, name)
			out = append(out, ni)
		}
	}
	return out
}

// levelNamed is the level of that name, else the sweep's last (the
// judge's default, the highest); nil for a server that measured none.
func levelNamed(levels []workload.Level, name string) *workload.Level {
	if len(levels) == 0 {
		return nil
	}
	for i := range levels {
		if levels[i].Name == name {
			return &levels[i]
		}
	}
	return &levels[len(levels)-1]
}

// label is the node, with the server's GPU group when it ran several.
func (ni nodeInference) label() string {
	if ni.Servers <= 1 {
		return ni.Node
	}
	g := ni.Server.GPUs
	if g == "" {
		g = strconv.Itoa(ni.Server.Index)
	}
	return ni.Node + " (GPUs " + g + ")"
}

// ttft is the server's TTFT at its judged level and percentile; ok false
// when it measured none.
func (ni nodeInference) ttft() (float64, bool) {
	if ni.At == nil {
		return 0, false
	}
	return ni.At.TTFT.Percentile(ni.Pct)
}

// trainingOf is the training evidence of the run.
func trainingOf(run *record.Run) (workload.Training, bool) {
	var t workload.Training
	ok := hasData(run, trainingPhase, "", &t)
	return t, ok && (len(t.Nodes) > 0 || t.Error != "")
}

// fleetRows is how many nodes a workload table lists one by one; past it
// the table lists the worst workloadWorst and a line says how the rest
// spread (a 1,000-node table is for run.json, not a reader).
const (
	fleetRows     = 16
	workloadWorst = 10
)

// worstInference orders the servers worst first by the judged TTFT (a
// server that measured nothing first of all: it is the worst news).
func worstInference(all []nodeInference) []nodeInference {
	s := slices.Clone(all)
	slices.SortStableFunc(s, func(a, b nodeInference) int {
		x, okA := a.ttft()
		y, okB := b.ttft()
		if okA != okB {
			if !okA {
				return -1
			}
			return 1
		}
		return cmp.Compare(y, x)
	})
	return s
}

// spreadLine says how a figure spread over the nodes: "p95 TTFT over 1000
// servers: median 480 ms, 420 ms (gpu-0311) .. 912 ms (gpu-0017)".
func spreadLine(what, unit string, names []string, xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	lo, hi := 0, 0
	for i, x := range xs {
		if x < xs[lo] {
			lo = i
		}
		if x > xs[hi] {
			hi = i
		}
	}
	return fmt.Sprintf("%s over %d: median %s, %s (%s) .. %s (%s)", what, len(xs), record.Figure(median(xs), unit),
		record.Figure(xs[lo], unit), names[lo], record.Figure(xs[hi], unit), names[hi])
}

// dist3 is a distribution's p50 / p95 / p99, "-" when it has no samples.
func dist3(d workload.Dist) string {
	if d.N == 0 {
		return none
	}
	return fmt.Sprintf("%s / %s / %s", fig(d.P50), fig(d.P95), fig(d.P99))
}

// num is a figure with three significant digits, whole from 1000 up.
func fig(x float64) string { return record.Figure(x, "") }

func numPtr(x *float64, unit string) string {
	if x == nil {
		return none
	}
	return record.Figure(*x, unit)
}

// memPeak is "71.2 of 80 GiB (11 % free)".
func memPeak(peak, total *float64) string {
	if peak == nil {
		return none
	}
	if total == nil || *total <= 0 {
		return record.Figure(*peak/1024, "GiB")
	}
	free := (1 - *peak / *total) * 100
	return fmt.Sprintf("%s of %s GiB (%.0f %% free)", fig(*peak/1024), fig(*total/1024), free)
}

// levelErrors is a level's failed and timed-out requests over those sent,
// with the retried: "3 of 1920 (0.16 %), 1 retried".
func levelErrors(l workload.Level) string {
	bad := l.Failed + l.TimedOut
	s := fmt.Sprintf("%d of %d", bad, l.Requests)
	if l.Requests > 0 && bad > 0 {
		s += fmt.Sprintf(" (%.2g %%)", 100*float64(bad)/float64(l.Requests))
	}
	if l.TimedOut > 0 {
		s += fmt.Sprintf(", %d timed out", l.TimedOut)
	}
	if l.Retried > 0 {
		s += fmt.Sprintf(", %d retried", l.Retried)
	}
	return s
}

func goodputText(g *float64) string {
	if g == nil {
		return none
	}
	return fmt.Sprintf("%.1f %%", *g*100)
}
