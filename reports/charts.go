package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"gpuaccept/orchestrator/record"
)

// The charts read phase data from run.json by its field names (the
// documented schema), not through the phases package: a report renders
// what a bundle holds, whichever gpuaccept wrote it.

// chart is one figure of the HTML report.
type chart struct {
	ID, Title, Caption string
	SVG                []byte
}

var (
	quoteColor = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	shade      = color.NRGBA{R: 255, G: 190, B: 0, A: 110}
	passColor  = color.RGBA{R: 46, G: 139, B: 87, A: 255}
	failColor  = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	ruleColor  = color.RGBA{R: 90, G: 90, B: 90, A: 255}
)

// plainTicks are gonum's default ticks labelled as numbers are written
// ("250", not "250.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			// Rounded: a tick of 0.1 steps is 0.30000000000000004.
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 10, 64)
		}
	}
	return ts
}

// byteTicks marks a log axis of message sizes at powers of four, labelled
// in binary units ("64MiB"), the sizes nccl-tests steps through.
type byteTicks struct{}

func (byteTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := 1.0; x <= hi*1.0001; x *= 4 {
		if x >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: x, Label: bytesLabel(x)})
		}
	}
	return ts
}

func bytesLabel(x float64) string {
	for _, u := range []struct {
		n    float64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if x >= u.n {
			return fmt.Sprintf("%g%s", x/u.n, u.name)
		}
	}
	return fmt.Sprintf("%gB", x)
}

func svgOf(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	// Inline in HTML: no XML declaration or doctype.
	out := b.Bytes()
	if i := bytes.Index(out, []byte("<svg")); i > 0 {
		out = out[i:]
	}
	return out, nil
}

type sweepData struct {
	Repeats []struct {
		Judgement *struct {
			GateBytes int64   `json:"gate_bytes"`
			QuotedGBs float64 `json:"quoted_gbs"`
		} `json:"judgement"`
		Points []struct {
			Bytes int64   `json:"bytes"`
			BusBW float64 `json:"busbw_gbs"`
		} `json:"points"`
	} `json:"repeats"`
}

// busbwChart: the cluster-wide all-reduce's bus bandwidth against message
// size, one line per repeat, the quote as a line and the gating window
// shaded.
func busbwChart(run *record.Run) (*chart, error) {
	var d sweepData
	if !hasData(run, "allreduce", "", &d) {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Cluster all-reduce: bus bandwidth by message size"
	p.X.Label.Text = "message size (log scale)"
	p.Y.Label.Text = "busbw (GB/s)"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, byteTicks{}
	var quote float64
	gate := int64(0)
	minX, maxX, maxY := math.Inf(1), 0.0, 0.0
	lines := 0
	for i, r := range d.Repeats {
		if r.Judgement != nil {
			quote, gate = r.Judgement.QuotedGBs, r.Judgement.GateBytes
		}
		var xys plotter.XYs
		for _, pt := range r.Points {
			if pt.Bytes <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(pt.Bytes), Y: pt.BusBW})
			minX, maxX, maxY = math.Min(minX, float64(pt.Bytes)), math.Max(maxX, float64(pt.Bytes)), math.Max(maxY, pt.BusBW)
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		p.Add(l, s)
		p.Legend.Add(fmt.Sprintf("repeat %d", i+1), l)
		lines++
	}
	if lines == 0 {
		return nil, nil
	}
	// Half a step of the sweep's each side, so that a window of one size
	// (the largest, often) shows as a band, not a line.
	const half = 1.19 // 2^0.25
	p.X.Min, p.X.Max = minX/half, maxX*half
	if gate > 0 && float64(gate) <= maxX {
		top := math.Max(maxY, quote) * 1.05
		lo := math.Max(float64(gate), minX) / half
		poly, err := plotter.NewPolygon(plotter.XYs{{X: lo, Y: 0}, {X: maxX * half, Y: 0}, {X: maxX * half, Y: top}, {X: lo, Y: top}})
		if err != nil {
			return nil, err
		}
		poly.Color, poly.LineStyle.Width = shade, 0
		p.Add(poly)
		p.Legend.Add("gating window", poly)
	}
	if quote > 0 {
		q, err := plotter.NewLine(plotter.XYs{{X: minX, Y: quote}, {X: maxX, Y: quote}})
		if err != nil {
			return nil, err
		}
		q.Color, q.Dashes = quoteColor, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(q)
		p.Legend.Add(fmt.Sprintf("quote %.4g GB/s", quote), q)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Tick.Marker = 0, plainTicks{}
	p.Y.Max = math.Max(maxY, quote) * 1.4
	svg, err := svgOf(p, 18*vg.Centimeter, 10*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: "chart-busbw", Title: p.Title.Text, SVG: svg,
		Caption: "nccl-tests out-of-place busbw of every repeat; the verdict gates on the median over the shaded sizes."}, nil
}

// perNodeBars draws one or more series of a value per node as grouped
// bars. With a pass line (pass > 0) each bar is green when it reaches it
// and red when not, and the quote and the pass line are drawn; what
// colours mean is said in the caption, not in a legend over the bars.
func perNodeBars(id, title, ylabel, caption string, nodes []string, series []string, values [][]float64, quote, pass float64) (*chart, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	w := vg.Points(40 / float64(max(len(series), 1)))
	any := false
	for i := range series {
		vals := values[i]
		add := func(vs plotter.Values, c color.Color) error {
			b, err := plotter.NewBarChart(vs, w)
			if err != nil {
				return err
			}
			b.Color, b.LineStyle.Width = c, 0
			b.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
			p.Add(b)
			return nil
		}
		if pass > 0 {
			// Two bar series, one of the passing values, one of the rest,
			// so each bar has its colour.
			ok, low := make(plotter.Values, len(vals)), make(plotter.Values, len(vals))
			for j, v := range vals {
				if v >= pass {
					ok[j] = v
				} else {
					low[j] = v
				}
			}
			if err := add(ok, passColor); err != nil {
				return nil, err
			}
			if err := add(low, failColor); err != nil {
				return nil, err
			}
		} else if err := add(plotter.Values(vals), plotutil.Color(i+2)); err != nil {
			return nil, err
		}
		for _, v := range vals {
			any = any || v > 0
		}
	}
	if !any {
		return nil, nil
	}
	for _, l := range []struct {
		y float64
		c color.Color
	}{{quote, quoteColor}, {pass, ruleColor}} {
		if l.y <= 0 {
			continue
		}
		q, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: l.y}, {X: float64(len(nodes)) - 0.5, Y: l.y}})
		if err != nil {
			return nil, err
		}
		q.Color, q.Dashes = l.c, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(q)
	}
	p.NominalX(nodes...)
	p.Y.Tick.Marker = plainTicks{}
	if len(nodes) > 12 {
		p.X.Tick.Label.Rotation = math.Pi / 2
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = -1, -0.5
	}
	p.Y.Min = 0
	top := quote
	for _, vs := range values {
		for _, v := range vs {
			top = math.Max(top, v)
		}
	}
	p.Y.Max = top * 1.1
	svg, err := svgOf(p, 18*vg.Centimeter, 9*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: id, Title: title, Caption: caption, SVG: svg}, nil
}

func intraChart(run *record.Run) (*chart, error) {
	var names []string
	var vals []float64
	quote := 0.0
	for _, n := range run.Nodes {
		var d struct {
			Repeats []struct {
				Judgement *struct {
					QuotedGBs float64 `json:"quoted_gbs"`
					BusBW     struct {
						Median float64 `json:"median"`
					} `json:"busbw_gbs"`
				} `json:"judgement"`
			} `json:"repeats"`
		}
		if !hasData(run, "intranode", n.Name, &d) {
			continue
		}
		var ms []float64
		for _, r := range d.Repeats {
			if r.Judgement != nil {
				ms = append(ms, r.Judgement.BusBW.Median)
				quote = r.Judgement.QuotedGBs
			}
		}
		names = append(names, n.Name)
		vals = append(vals, median(ms))
	}
	if len(names) == 0 {
		return nil, nil
	}
	pass := 0.0
	for _, v := range run.Verdicts {
		if b, atMost, ok := v.Bound(); v.ID == "NCCL-003" && ok && !atMost {
			pass = b
		}
	}
	caption := "The median of each node's repeats: green reached the pass line, red did not; dashed red is the quote, dashed grey the pass line (the quote × its tolerance)."
	if pass == 0 {
		caption = "The median of each node's repeats; dashed red is the quote."
	}
	return perNodeBars("chart-intranode", "Intra-node all-reduce busbw per node", "busbw (GB/s)",
		caption, names, []string{"busbw"}, [][]float64{vals}, quote, pass)
}

func ioChart(run *record.Run) (*chart, error) {
	var names []string
	vals := make([][]float64, 3)
	for _, n := range run.Nodes {
		var st, cw, cr struct {
			GBs float64 `json:"gbs"`
		}
		a, b, c := hasData(run, "staging", n.Name, &st), hasData(run, "checkpoint-write", n.Name, &cw), hasData(run, "checkpoint-restore", n.Name, &cr)
		if !a && !b && !c {
			continue
		}
		names = append(names, n.Name)
		vals[0], vals[1], vals[2] = append(vals[0], st.GBs), append(vals[1], cw.GBs), append(vals[2], cr.GBs)
	}
	if len(names) == 0 {
		return nil, nil
	}
	return perNodeBars("chart-io", "Staging and checkpoint throughput per node", "GB/s",
		"Per node, left to right: staging (all sources, blue), checkpoint write with fsync (orange), restore of a neighbour's checkpoint (purple).",
		names, []string{"staging", "checkpoint write", "checkpoint restore"}, vals, 0, 0)
}

// failureChart: each node's steps over time, the failure window shaded.
func failureChart(run *record.Run) (*chart, error) {
	var d struct {
		InjectedAt float64  `json:"injected_at"`
		ResumedAt  *float64 `json:"resumed_at"`
		EndedAt    float64  `json:"ended_at"`
		Victim     string   `json:"victim"`
		Nodes      []string `json:"nodes"`
		Events     []struct {
			At   float64 `json:"at"`
			Node string  `json:"node"`
			Kind string  `json:"kind"`
			Rank int     `json:"rank"`
			Step int     `json:"step"`
		} `json:"events"`
	}
	if !hasData(run, "failure", "", &d) || len(d.Events) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Failure test: training steps per node over time"
	p.X.Label.Text = "seconds since the job was launched"
	p.Y.Label.Text = "step"
	maxStep := 0
	end := d.EndedAt
	for _, e := range d.Events {
		maxStep, end = max(maxStep, e.Step), math.Max(end, e.At)
	}
	stop := end
	if d.ResumedAt != nil {
		stop = *d.ResumedAt
	}
	if d.InjectedAt > 0 {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: d.InjectedAt, Y: 0}, {X: stop, Y: 0}, {X: stop, Y: float64(maxStep) + 1}, {X: d.InjectedAt, Y: float64(maxStep) + 1}})
		if err != nil {
			return nil, err
		}
		poly.Color, poly.LineStyle.Width = shade, 0
		p.Add(poly)
		p.Legend.Add("failure window", poly)
	}
	nodes := record.TimelineNodes(d.Nodes, d.Victim)
	caption := "Every worker's steps as the coordinator received them; shaded from the failure to resumed progress."
	if len(nodes) < len(d.Nodes) {
		caption += fmt.Sprintf(" %d of the job's %d nodes drawn: the rendezvous, the victim and the first others (the others' first and last steps of each run are in run.json, every step in the raw log).", len(nodes), len(d.Nodes))
	}
	nodes = append([]string(nil), nodes...)
	sort.Strings(nodes)
	for i, n := range nodes {
		var xys plotter.XYs
		for _, e := range d.Events {
			if e.Node == n && e.Kind == "step" {
				xys = append(xys, plotter.XY{X: e.At, Y: float64(e.Step)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		s.Color = plotutil.Color(i)
		s.GlyphStyle.Shape = plotutil.Shape(i)
		s.GlyphStyle.Radius = vg.Points(2)
		p.Add(s)
		label := n
		if n == d.Victim {
			label += " (victim)"
		}
		p.Legend.Add(label, s)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.X.Min = 0, 0
	p.Y.Max = float64(maxStep) * 1.4
	svg, err := svgOf(p, 18*vg.Centimeter, 9*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: "chart-failure", Title: p.Title.Text, SVG: svg, Caption: caption}, nil
}

// bisectMatrix is the pairwise bisection as a table: each pair's busbw
// over the typical pair's, coloured from red (slow) to green. Past
// matrixNodes nodes it is the slowest pairs instead (Pairs): the matrix of
// a 1,000-node window was a million cells, 45 MB of report.html that
// Chromium took 73 s to open, and mostly cells of pairs never run.
type bisectMatrix struct {
	Nodes     []string
	Rows      [][]matrixCell
	Pairs     []pairRow
	Total     int // pairs that ran (Pairs holds the slowest of them)
	Reference float64
	Rounds    int
}

type matrixCell struct {
	Text  string
	Style template.CSS
}

// pairRow is one pair in the slowest-pairs table.
type pairRow struct {
	A, B  string
	Cell  matrixCell
	Runs  int
	Error string
}

const (
	matrixNodes = 32 // the most nodes drawn as a matrix
	slowPairs   = 30 // the pairs listed past that
)

func bisection(run *record.Run) *bisectMatrix {
	var d struct {
		Rounds int `json:"rounds"`
		Pairs  []struct {
			A     string  `json:"a"`
			B     string  `json:"b"`
			BusBW float64 `json:"busbw_gbs"`
			Err   string  `json:"error"`
		} `json:"pairs"`
		Reference float64 `json:"reference_gbs"`
	}
	if !hasData(run, "bisect", "", &d) || len(d.Pairs) == 0 || d.Reference <= 0 {
		return nil
	}
	seen := map[string]bool{}
	var nodes []string
	runs := map[[2]string][]float64{}
	errs := map[[2]string]string{}
	var order [][2]string // each pair once, as first run
	for _, p := range d.Pairs {
		for _, n := range []string{p.A, p.B} {
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, n)
			}
		}
		bw := p.BusBW
		if p.Err != "" {
			bw = 0
		}
		k := [2]string{p.A, p.B}
		if p.B < p.A {
			k = [2]string{p.B, p.A}
		}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], bw)
		if p.Err != "" {
			errs[k] = p.Err
		}
	}
	sort.Strings(nodes)
	m := &bisectMatrix{Nodes: nodes, Reference: d.Reference, Rounds: d.Rounds, Total: len(order)}
	ratio := func(k [2]string) float64 { return median(runs[k]) / d.Reference }
	if len(nodes) > matrixNodes {
		sort.SliceStable(order, func(i, j int) bool { return ratio(order[i]) < ratio(order[j]) })
		for _, k := range order[:min(len(order), slowPairs)] {
			m.Pairs = append(m.Pairs, pairRow{A: k[0], B: k[1], Cell: ratioCell(ratio(k)), Runs: len(runs[k]), Error: clip(errs[k], 120)})
		}
		return m
	}
	for _, a := range nodes {
		var row []matrixCell
		for _, b := range nodes {
			k := [2]string{a, b}
			if b < a {
				k = [2]string{b, a}
			}
			if _, ok := runs[k]; a == b || !ok {
				row = append(row, matrixCell{Style: "background:#eee"})
				continue
			}
			row = append(row, ratioCell(ratio(k)))
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

// ratioCell is a pair's busbw over the typical pair's, coloured: 0.4 or
// less red, 1 green.
func ratioCell(r float64) matrixCell {
	hue := math.Max(0, math.Min(120, 120*(r-0.4)/0.6))
	return matrixCell{Text: fmt.Sprintf("%.2f", r), Style: template.CSS(fmt.Sprintf("background:hsl(%.0f,70%%,75%%)", hue))}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
