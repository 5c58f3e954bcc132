package reports

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

// chartLines bounds the lines of a per-server chart: past it the worst
// are drawn and the caption says how many of how many (a line per node
// of 1,000 is neither readable nor a page that opens).
const chartLines = 12

// msTarget reads the target of a latency verdict's Quoted ("≤ 800 ms at
// p95, concurrency:32"), in ms; ok false when it states none.
var msTarget = regexp.MustCompile(`^(?:≤|<=?)\s*([0-9.]+)\s*(ms|s)\b`)

func latencyTarget(run *record.Run, id string) (float64, string, bool) {
	for _, v := range run.Verdicts {
		if v.ID != id {
			continue
		}
		if m := msTarget.FindStringSubmatch(v.Quoted); m != nil {
			x, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				continue
			}
			if m[2] == "s" {
				x *= 1000
			}
			return x, v.Quoted, true
		}
	}
	return 0, "", false
}

// ttftCDFChart: each server's time-to-first-token CDF at its judged
// level (Dist.CDF: every 5th percentile), the buyer's target a line.
func ttftCDFChart(run *record.Run) (*chart, error) {
	all := inferenceOf(run)
	var drawn []nodeInference
	for _, ni := range worstInference(all) {
		if ni.At != nil && len(ni.At.TTFT.CDF) >= 2 {
			drawn = append(drawn, ni)
		}
	}
	if len(drawn) == 0 {
		return nil, nil
	}
	total := len(drawn)
	drawn = drawn[:min(len(drawn), chartLines)]
	p := plot.New()
	p.Title.Text = "Time to first token: CDF per server at the judged level"
	p.X.Label.Text = "TTFT (ms)"
	p.Y.Label.Text = "percentile"
	top := 0.0
	for i, ni := range drawn {
		cdf := ni.At.TTFT.CDF
		xys := make(plotter.XYs, len(cdf))
		for j, x := range cdf {
			xys[j] = plotter.XY{X: x, Y: float64(j) * 100 / float64(len(cdf)-1)}
			top = math.Max(top, x)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		p.Add(l)
		p.Legend.Add(ni.label()+" ("+ni.At.Name+")", l)
	}
	caption := "Each line is one server's requests, fastest to slowest, at the level its targets were judged at."
	if target, quoted, ok := latencyTarget(run, "WORK-002"); ok {
		q, err := plotter.NewLine(plotter.XYs{{X: target, Y: 0}, {X: target, Y: 100}})
		if err != nil {
			return nil, err
		}
		q.Color, q.Dashes = quoteColor, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(q)
		p.Legend.Add("target "+quoted, q)
		top = math.Max(top, target)
		caption += " Dashed red: the target; a line that crosses it below the judged percentile misses it."
	}
	if total > len(drawn) {
		caption += fmt.Sprintf(" The %d servers with the worst judged TTFT of %d.", len(drawn), total)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = 0
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, top*1.05, 0, 100
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	svg, err := svgOf(p, 18*vg.Centimeter, 10*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: "chart-ttft-cdf", Title: p.Title.Text, Caption: caption, SVG: svg}, nil
}

// tokensChart: output tokens/s against the sweep's levels, a line per
// server (past chartLines, the median and the lowest server at each
// level).
func tokensChart(run *record.Run) (*chart, error) {
	all := inferenceOf(run)
	var order []string
	for _, ni := range all {
		for _, l := range ni.Server.Levels {
			if !slices.Contains(order, l.Name) {
				order = append(order, l.Name)
			}
		}
	}
	if len(order) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Output tokens/s by load level"
	p.X.Label.Text = "level"
	p.Y.Label.Text = "output tokens/s"
	line := func(name string, i int, xys plotter.XYs) error {
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, s.Color, s.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(name, l)
		return nil
	}
	at := func(l workload.Level) float64 { return float64(slices.Index(order, l.Name)) }
	caption := "Each server's output token throughput at each level of the sweep."
	if len(all) <= chartLines {
		for i, ni := range all {
			var xys plotter.XYs
			for _, l := range ni.Server.Levels {
				xys = append(xys, plotter.XY{X: at(l), Y: l.OutputTokensPerSec})
			}
			if len(xys) > 0 {
				if err := line(ni.label(), i, xys); err != nil {
					return nil, err
				}
			}
		}
	} else {
		caption = fmt.Sprintf("Over %d servers: the median and the lowest output token throughput at each level.", len(all))
		var med, low plotter.XYs
		for i, name := range order {
			var xs []float64
			for _, ni := range all {
				for _, l := range ni.Server.Levels {
					if l.Name == name {
						xs = append(xs, l.OutputTokensPerSec)
					}
				}
			}
			med = append(med, plotter.XY{X: float64(i), Y: median(xs)})
			low = append(low, plotter.XY{X: float64(i), Y: slices.Min(xs)})
		}
		if err := line("median", 0, med); err != nil {
			return nil, err
		}
		if err := line("lowest", 1, low); err != nil {
			return nil, err
		}
	}
	p.NominalX(order...)
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Tick.Marker = 0, plainTicks{}
	svg, err := svgOf(p, 18*vg.Centimeter, 9*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: "chart-tokens", Title: p.Title.Text, Caption: caption, SVG: svg}, nil
}

// stepChart: each node's median steady step time, the straggler red, the
// median of the nodes and the straggler line dashed.
func stepChart(run *record.Run) (*chart, error) {
	t, ok := trainingOf(run)
	if !ok {
		return nil, nil
	}
	nodes := slices.Clone(t.Nodes)
	nodes = slices.DeleteFunc(nodes, func(n workload.TrainingNode) bool { return n.StepSecs.N == 0 })
	if len(nodes) == 0 {
		return nil, nil
	}
	caption := "Each node's median steady step (warm-up excluded)"
	if len(nodes) > 2*matrixNodes {
		slices.SortStableFunc(nodes, func(a, b workload.TrainingNode) int { return cmp.Compare(b.StepSecs.P50, a.StepSecs.P50) })
		caption += fmt.Sprintf(", the %d slowest of %d nodes", matrixNodes, len(nodes))
		nodes = nodes[:matrixNodes]
	}
	names := make([]string, len(nodes))
	normal, slow := make(plotter.Values, len(nodes)), make(plotter.Values, len(nodes))
	top := 0.0
	for i, n := range nodes {
		names[i] = n.Node
		if n.Node == t.Straggler {
			names[i] += " (straggler)"
			slow[i] = n.StepSecs.P50
		} else {
			normal[i] = n.StepSecs.P50
		}
		top = math.Max(top, n.StepSecs.P50)
	}
	p := plot.New()
	p.Title.Text = "Training: median step time per node"
	p.Y.Label.Text = "step (s)"
	for _, s := range []struct {
		vs plotter.Values
		c  color.Color
	}{{normal, passColor}, {slow, failColor}} {
		b, err := plotter.NewBarChart(s.vs, vg.Points(20))
		if err != nil {
			return nil, err
		}
		b.Color, b.LineStyle.Width = s.c, 0
		p.Add(b)
	}
	for _, l := range []struct {
		y    float64
		dash bool
	}{{t.MedianStepSecs, false}, {t.MedianStepSecs * t.StragglerRatio, true}} {
		if l.y <= 0 {
			continue
		}
		q, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: l.y}, {X: float64(len(nodes)) - 0.5, Y: l.y}})
		if err != nil {
			return nil, err
		}
		q.Color = ruleColor
		if l.dash {
			q.Color, q.Dashes = quoteColor, []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(q)
		top = math.Max(top, l.y)
	}
	p.NominalX(names...)
	if len(names) > 8 {
		p.X.Tick.Label.Rotation = math.Pi / 2
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = -1, -0.5
	}
	p.Y.Min, p.Y.Max, p.Y.Tick.Marker = 0, top*1.15, plainTicks{}
	caption += fmt.Sprintf("; grey: the median of the nodes (%s), dashed red: %g × it, past which a node is the straggler (red).",
		record.Figure(t.MedianStepSecs, record.UnitSeconds), t.StragglerRatio)
	svg, err := svgOf(p, 18*vg.Centimeter, 9*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: "chart-steps", Title: p.Title.Text, Caption: caption, SVG: svg}, nil
}
