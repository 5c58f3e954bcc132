package reports

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
)

// The telemetry charts: per metric, the window's time on x, the phases
// shaded. The fleet is a band (per time bucket, the 5th to the 95th
// percentile of the nodes' values, and the median as a line); a node is a
// line of its own only when it stands out (a HEALTH verdict it did not
// pass, a kernel event, or far from the fleet's median), at most
// telLines of them, so that a 1,000-node window is a page that opens. A
// window of telLines nodes or fewer draws every node. Each node's value
// in a bucket is the median over its GPUs of each GPU's mean in it.
const (
	telBuckets = 200 // time buckets per chart
	telLines   = 8   // nodes drawn as lines of their own
	telGPUs    = 16  // GPUs per node charted (by index, the first seen)
	telEvents  = 32  // kernel events marked per node
)

// telMetric is one chart.
type telMetric struct {
	id, title, unit string
	get             func(*telemetry.GPUSample) *float64
	// floor: the least spread counted when judging how far a node is from
	// the fleet (the band of alike nodes can be narrower than the noise of
	// one node's figure).
	floor float64
	// most: the largest figure a GPU could report; a node's figure past
	// it (or below 0) is not charted, so a hostile node cannot squash the
	// fleet into a line at the bottom of the chart.
	most float64
}

var telMetrics = []telMetric{
	{"temp", "GPU temperature", "°C", func(g *telemetry.GPUSample) *float64 { return g.TempC }, 2, 200},
	{"power", "GPU power draw", "W", func(g *telemetry.GPUSample) *float64 { return g.PowerW }, 20, 5000},
	{"smclock", "GPU SM clock", "MHz", func(g *telemetry.GPUSample) *float64 { return g.SMClockMHz }, 30, 10000},
	{"util", "GPU utilisation", "%", func(g *telemetry.GPUSample) *float64 { return g.UtilPct }, 5, 100},
}

// telNode is one node's series, bucketed.
type telNode struct {
	name   string
	v      [][]float32 // [metric][bucket]; NaN where nothing was sampled
	events []telEvent
	any    bool
}

type telEvent struct {
	bucket int
	what   string
}

// telAxis maps the window's time to buckets and to the chart's x.
type telAxis struct {
	t0, t1 time.Time
	n      int
	// gap: the most empty buckets a line bridges (a bucket narrower than
	// two samples' interval is empty now and then).
	gap   int
	unit  time.Duration // x is in seconds, minutes or hours
	uname string
}

// newTelAxis: at most telBuckets buckets, none narrower than the
// sampler's interval.
func newTelAxis(t0, t1 time.Time, interval time.Duration) telAxis {
	span := t1.Sub(t0)
	n := int(min(int64(telBuckets), max(1, int64(span/interval))))
	a := telAxis{t0: t0, t1: t1, n: n, unit: time.Minute, uname: "minutes"}
	width := span / time.Duration(n)
	a.gap = int(max(1, (2*interval+width-1)/width))
	switch {
	case span > 3*time.Hour:
		a.unit, a.uname = time.Hour, "hours"
	case span < 3*time.Minute:
		a.unit, a.uname = time.Second, "seconds"
	}
	return a
}

// telInterval is the sampler's interval as the telemetry phase recorded
// it: the longest of the nodes', within bounds; the default where none
// is recorded.
func telInterval(run *record.Run) time.Duration {
	iv := time.Duration(0)
	for _, p := range run.Phases {
		if p.Phase != "telemetry" || len(p.Data) == 0 {
			continue
		}
		var d struct {
			IntervalNS int64 `json:"interval_ns"`
		}
		if json.Unmarshal(p.Data, &d) == nil {
			iv = max(iv, min(time.Duration(d.IntervalNS), time.Hour))
		}
	}
	if iv < 100*time.Millisecond {
		return telemetry.DefaultInterval
	}
	return iv
}

func (a telAxis) bucket(t time.Time) (int, bool) {
	if t.Before(a.t0) || !t.Before(a.t1) {
		return 0, false
	}
	// In float: ns × buckets overflows int64 past a window of 500 days.
	return min(a.n-1, int(float64(t.Sub(a.t0))*float64(a.n)/float64(a.t1.Sub(a.t0)))), true
}

func (a telAxis) x(t time.Time) float64 { return float64(t.Sub(a.t0)) / float64(a.unit) }

// xb is the middle of bucket b.
func (a telAxis) xb(b int) float64 {
	return (float64(b) + 0.5) * float64(a.t1.Sub(a.t0)) / float64(a.n) / float64(a.unit)
}

// telemetrySpan is the window's time: its start to its end (the last
// phase's end where the run has none).
func telemetrySpan(run *record.Run) (time.Time, time.Time, bool) {
	t0, t1 := run.Started, run.Ended
	for _, p := range run.Phases {
		if t0.IsZero() || (!p.Started.IsZero() && p.Started.Before(t0)) {
			t0 = p.Started
		}
		if p.Ended.After(t1) {
			t1 = p.Ended
		}
	}
	return t0, t1, !t0.IsZero() && t1.Sub(t0) >= time.Second
}

// telemetryFile is node's file in the bundle dir, if it is a regular file
// under raw/ (a node's name is one path element, never a way out of it).
func telemetryFile(dir, node string) (*os.File, bool) {
	if node == "" || node == "." || node == ".." || strings.ContainsAny(node, `/\`) || strings.ContainsRune(node, 0) {
		return nil, false
	}
	path := filepath.Join(dir, "raw", node, telemetry.FileName)
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	return f, true
}

// telAcc accumulates one node's rows, reused from node to node.
type telAcc struct {
	sum   [][]float64 // [metric][bucket*telGPUs+slot]
	cnt   [][]int32
	slots map[int]int // GPU index → slot
	vals  []float64
}

func newTelAcc() *telAcc {
	a := &telAcc{slots: map[int]int{}}
	for range telMetrics {
		a.sum = append(a.sum, make([]float64, telBuckets*telGPUs))
		a.cnt = append(a.cnt, make([]int32, telBuckets*telGPUs))
	}
	return a
}

func (a *telAcc) reset() {
	for m := range telMetrics {
		clear(a.sum[m])
		clear(a.cnt[m])
	}
	clear(a.slots)
}

// readTelNode reads node's file into buckets; nil when it has no file or
// no sample in the window.
func readTelNode(dir, node string, ax telAxis, acc *telAcc) *telNode {
	f, ok := telemetryFile(dir, node)
	if !ok {
		return nil
	}
	defer f.Close()
	acc.reset()
	tn := &telNode{name: node}
	// A torn or cut file charts what reads: Visit stops at the tear.
	_, _ = telemetry.Visit(f, telemetry.Visitor{
		GPU: func(g *telemetry.GPUSample) {
			b, ok := ax.bucket(g.At)
			if !ok {
				return
			}
			slot, ok := acc.slots[g.Index]
			if !ok {
				if len(acc.slots) >= telGPUs {
					return
				}
				slot = len(acc.slots)
				acc.slots[g.Index] = slot
			}
			for m, tm := range telMetrics {
				// Bounded: a node's number is charted only if it is one a
				// GPU could say (NaN and ±Inf never parse).
				if x := tm.get(g); x != nil && *x >= 0 && *x <= tm.most {
					acc.sum[m][b*telGPUs+slot] += *x
					acc.cnt[m][b*telGPUs+slot]++
				}
			}
		},
		Kernel: func(e *telemetry.KernelEvent) {
			if e.Kind == "" || len(tn.events) >= telEvents {
				return
			}
			b, ok := ax.bucket(e.At)
			if !ok {
				return
			}
			what := e.Kind
			if e.Xid > 0 {
				what = fmt.Sprintf("%s %d", e.Kind, e.Xid)
			}
			tn.events = append(tn.events, telEvent{bucket: b, what: what})
		},
	})
	tn.v = make([][]float32, len(telMetrics))
	for m := range telMetrics {
		tn.v[m] = make([]float32, telBuckets)
		for b := range telBuckets {
			acc.vals = acc.vals[:0]
			for s := range len(acc.slots) {
				if c := acc.cnt[m][b*telGPUs+s]; c > 0 {
					acc.vals = append(acc.vals, acc.sum[m][b*telGPUs+s]/float64(c))
				}
			}
			if len(acc.vals) == 0 {
				tn.v[m][b] = float32(math.NaN())
				continue
			}
			tn.v[m][b] = float32(medianInPlace(acc.vals))
			tn.any = true
		}
	}
	if !tn.any && len(tn.events) == 0 {
		return nil
	}
	return tn
}

func medianInPlace(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// quantile of sorted xs, by nearest rank.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Round(q * float64(len(sorted)-1)))
	return sorted[max(0, min(len(sorted)-1, i))]
}

// telBand is the fleet per bucket of one metric.
type telBand struct{ lo, med, hi []float64 }

func fleetBand(nodes []*telNode, m int) telBand {
	bd := telBand{lo: make([]float64, telBuckets), med: make([]float64, telBuckets), hi: make([]float64, telBuckets)}
	vals := make([]float64, 0, len(nodes))
	for b := range telBuckets {
		vals = vals[:0]
		for _, n := range nodes {
			if x := n.v[m][b]; !math.IsNaN(float64(x)) {
				vals = append(vals, float64(x))
			}
		}
		if len(vals) == 0 {
			bd.lo[b], bd.med[b], bd.hi[b] = math.NaN(), math.NaN(), math.NaN()
			continue
		}
		slices.Sort(vals)
		bd.lo[b], bd.med[b], bd.hi[b] = quantile(vals, 0.05), quantile(vals, 0.5), quantile(vals, 0.95)
	}
	return bd
}

// telOutliers picks the nodes drawn as lines: those a HEALTH verdict did
// not pass, then those with a kernel event, then those furthest from the
// fleet's median (on average more than the band's width, or the metric's
// floor, away from it in some metric), at most telLines.
func telOutliers(run *record.Run, nodes []*telNode, bands []telBand) []*telNode {
	if len(nodes) <= telLines {
		return nodes
	}
	health := map[string]bool{}
	for _, v := range run.Verdicts {
		if strings.HasPrefix(v.ID, "HEALTH-") && v.Node != "" && (v.Status == record.Fail || v.Status == record.Warn) {
			health[v.Node] = true
		}
	}
	type cand struct {
		n     *telNode
		rank  int // 0 health, 1 kernel event, 2 far from the fleet
		score float64
	}
	var cs []cand
	for _, n := range nodes {
		c := cand{n: n, rank: 3, score: telScore(n, bands)}
		switch {
		case health[n.name]:
			c.rank = 0
		case len(n.events) > 0:
			c.rank = 1
		case c.score >= 1:
			c.rank = 2
		}
		if c.rank < 3 {
			cs = append(cs, c)
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.rank != b.rank {
			return cmp.Compare(a.rank, b.rank)
		}
		return cmp.Compare(b.score, a.score)
	})
	out := make([]*telNode, 0, telLines)
	for _, c := range cs[:min(len(cs), telLines)] {
		out = append(out, c.n)
	}
	return out
}

// telScore is how far n is from the fleet's median: per metric, the mean
// over the buckets of its distance over the band's width (at least the
// metric's floor); the largest of the metrics.
func telScore(n *telNode, bands []telBand) float64 {
	worst := 0.0
	for m, tm := range telMetrics {
		sum, k := 0.0, 0
		for b := range telBuckets {
			x := float64(n.v[m][b])
			if math.IsNaN(x) || math.IsNaN(bands[m].med[b]) {
				continue
			}
			w := max(bands[m].hi[b]-bands[m].lo[b], tm.floor)
			sum += min(math.Abs(x-bands[m].med[b])/w, 10)
			k++
		}
		if k > 0 {
			worst = max(worst, sum/float64(k))
		}
	}
	return worst
}

// telPhase is one phase of the window as shaded: the earliest start and
// latest end of its results, cluster-wide (Index -1) or per node.
type telPhase struct {
	name       string
	start, end time.Time
}

func telPhases(run *record.Run) []telPhase {
	var out []telPhase
	at := map[string]int{}
	released := map[string]time.Time{}
	for _, n := range run.Nodes {
		if !n.ReleasedAt.IsZero() {
			released[n.Name] = n.ReleasedAt
		}
	}
	for _, p := range run.Phases {
		if p.Outcome == record.Skipped || p.Started.IsZero() || !p.Ended.After(p.Started) {
			continue
		}
		if r, ok := released[p.Node]; ok && !p.Ended.After(r) && p.Index >= 0 && slices.Contains(releasePhases, p.Phase) {
			// A node's teardown at its idle release is not the window's:
			// shaded as one, it covered the phases the others still ran.
			continue
		}
		i, ok := at[p.Phase]
		if !ok {
			at[p.Phase] = len(out)
			out = append(out, telPhase{name: p.Phase, start: p.Started, end: p.Ended})
			continue
		}
		if p.Started.Before(out[i].start) {
			out[i].start = p.Started
		}
		if p.Ended.After(out[i].end) {
			out[i].end = p.Ended
		}
	}
	slices.SortStableFunc(out, func(a, b telPhase) int { return a.start.Compare(b.start) })
	return out
}

// releasePhases are the teardown phases a node the idle guard releases
// runs then (orchestrator.Phase.Release).
var releasePhases = []string{"teardown"}

var (
	phaseShades = []color.Color{color.NRGBA{R: 70, G: 110, B: 200, A: 28}, color.NRGBA{R: 120, G: 120, B: 120, A: 34}}
	bandColor   = color.NRGBA{R: 46, G: 139, B: 87, A: 70}
	medianColor = color.RGBA{R: 46, G: 110, B: 70, A: 255}
	eventColor  = color.RGBA{R: 200, G: 0, B: 0, A: 255}
)

// telemetryCharts reads each node's telemetry file in the bundle dir and
// draws a chart per metric; none when no node has a sample in the window
// (telemetry off, or a bundle made before the sampler).
func telemetryCharts(run *record.Run, dir string) ([]*chart, error) {
	if dir == "" || run == nil {
		return nil, nil
	}
	t0, t1, ok := telemetrySpan(run)
	if !ok {
		return nil, nil
	}
	ax := newTelAxis(t0, t1, telInterval(run))
	// The files are read a few at once, each reader with its buckets;
	// the nodes stay in the run's order.
	read := make([]*telNode, len(run.Nodes))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), 8, len(run.Nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc := newTelAcc()
			for i := range next {
				read[i] = readTelNode(dir, run.Nodes[i].Name, ax, acc)
			}
		}()
	}
	for i := range run.Nodes {
		next <- i
	}
	close(next)
	wg.Wait()
	var nodes []*telNode
	for _, tn := range read {
		if tn != nil {
			nodes = append(nodes, tn)
		}
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	bands := make([]telBand, len(telMetrics))
	for m := range telMetrics {
		bands[m] = fleetBand(nodes, m)
	}
	lines := telOutliers(run, nodes, bands)
	phases := telPhases(run)
	var out []*chart
	for m := range telMetrics {
		c, err := telemetryChart(m, ax, nodes, lines, bands[m], phases)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// stretches are the runs of buckets where ys is a number, each as its
// buckets; a gap of at most ax.gap empty buckets does not end one.
func stretches(ax telAxis, ys func(int) float64) [][]int {
	var out [][]int
	var cur []int
	empty := 0
	for b := range ax.n {
		if math.IsNaN(ys(b)) {
			empty++
			continue
		}
		if len(cur) > 0 && empty > ax.gap {
			out, cur = append(out, cur), nil
		}
		cur, empty = append(cur, b), 0
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// runs are a series' stretches as lines.
func runs(ax telAxis, ys func(int) float64) []plotter.XYs {
	var out []plotter.XYs
	for _, st := range stretches(ax, ys) {
		xys := make(plotter.XYs, 0, len(st))
		for _, b := range st {
			xys = append(xys, plotter.XY{X: ax.xb(b), Y: ys(b)})
		}
		out = append(out, xys)
	}
	return out
}

func telemetryChart(m int, ax telAxis, nodes, lines []*telNode, band telBand, phases []telPhase) (*chart, error) {
	tm := telMetrics[m]
	lo, hi := math.Inf(1), math.Inf(-1)
	see := func(y float64) {
		if !math.IsNaN(y) {
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
	}
	asBand := len(lines) < len(nodes)
	if asBand {
		for b := range telBuckets {
			see(band.lo[b])
			see(band.hi[b])
		}
	}
	for _, n := range lines {
		for _, y := range n.v[m] {
			see(float64(y))
		}
	}
	if math.IsInf(lo, 0) {
		return nil, nil
	}
	if hi-lo < tm.floor {
		lo, hi = lo-tm.floor/2, hi+tm.floor/2
	}
	pad := (hi - lo) * 0.08
	lo, hi = math.Max(0, lo-pad), hi+pad
	// Room above the data for the phase labels and the legend.
	top := hi + (hi-lo)*0.45

	p := plot.New()
	p.Title.Text = tm.title + " per node over the window"
	p.X.Label.Text = fmt.Sprintf("%s since the window started (%s UTC)", ax.uname, ax.t0.UTC().Format("2006-01-02 15:04"))
	p.Y.Label.Text = tm.unit
	p.X.Min, p.X.Max = 0, ax.x(ax.t1)
	p.Y.Min, p.Y.Max = lo, top
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}

	// The phases, shaded in turn, each labelled at the top where it is
	// wide enough to hold its name (every phase is named in the caption).
	var labels plotter.XYLabels
	for i, ph := range phases {
		x0, x1 := math.Max(0, ax.x(ph.start)), math.Min(p.X.Max, ax.x(ph.end))
		if x1 <= x0 {
			continue
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: lo}, {X: x1, Y: lo}, {X: x1, Y: top}, {X: x0, Y: top}})
		if err != nil {
			return nil, err
		}
		poly.Color, poly.LineStyle.Width = phaseShades[i%2], 0
		p.Add(poly)
		if (x1-x0)/p.X.Max >= 0.06 {
			y := top - (top-lo)*0.04
			if len(labels.XYs)%2 == 1 {
				y = top - (top-lo)*0.10
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: x0 + (x1-x0)*0.02, Y: y})
			labels.Labels = append(labels.Labels, clip(ph.name, 24))
		}
	}

	if asBand {
		for _, st := range stretches(ax, func(b int) float64 { return band.hi[b] }) {
			// The band between p5 and p95 of this stretch.
			poly := make(plotter.XYs, 0, 2*len(st))
			for _, b := range st {
				poly = append(poly, plotter.XY{X: ax.xb(b), Y: band.hi[b]})
			}
			for _, b := range slices.Backward(st) {
				poly = append(poly, plotter.XY{X: ax.xb(b), Y: band.lo[b]})
			}
			pg, err := plotter.NewPolygon(poly)
			if err != nil {
				return nil, err
			}
			pg.Color, pg.LineStyle.Width = bandColor, 0
			p.Add(pg)
		}
		first := true
		for _, xys := range runs(ax, func(b int) float64 { return band.med[b] }) {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = medianColor, vg.Points(1)
			p.Add(l)
			if first {
				p.Legend.Add(fmt.Sprintf("%d nodes: median, p5-p95", len(nodes)), l)
				first = false
			}
		}
	}
	var marks plotter.XYs
	for i, n := range lines {
		first := true
		for _, xys := range runs(ax, func(b int) float64 { return float64(n.v[m][b]) }) {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = plotutil.Color(i), vg.Points(1.2)
			l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
			p.Add(l)
			if first {
				p.Legend.Add(clip(n.name, 40), l)
				first = false
			}
		}
		for _, e := range n.events {
			y := float64(n.v[m][e.bucket])
			if math.IsNaN(y) {
				y = lo
			}
			marks = append(marks, plotter.XY{X: ax.xb(e.bucket), Y: y})
		}
	}
	if len(marks) > 0 {
		s, err := plotter.NewScatter(marks)
		if err != nil {
			return nil, err
		}
		s.Color, s.Shape, s.Radius = eventColor, draw.CrossGlyph{}, vg.Points(4)
		p.Add(s)
		p.Legend.Add("kernel event (Xid, SXid, off the bus)", s)
	}
	if len(labels.XYs) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font.Size = vg.Points(7)
			l.TextStyle[i].Color = ruleColor
		}
		p.Add(l)
	}
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	p.Legend.YOffs = -vg.Points(22)
	svg, err := svgOf(p, 18*vg.Centimeter, 9*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &chart{ID: "chart-telemetry-" + tm.id, Title: p.Title.Text, SVG: svg,
		Caption: telCaption(nodes, lines, phases, ax)}, nil
}

func telCaption(nodes, lines []*telNode, phases []telPhase, ax telAxis) string {
	var b strings.Builder
	each := ax.t1.Sub(ax.t0) / time.Duration(ax.n)
	fmt.Fprintf(&b, "Each node's value is the median over its GPUs, in %d steps of %s. ", ax.n, each.Round(time.Second))
	if len(lines) < len(nodes) {
		fmt.Fprintf(&b, "The %d nodes are a band (5th to 95th percentile across nodes, the median a line); ", len(nodes))
		if len(lines) == 0 {
			b.WriteString("no node stood out. ")
		} else {
			fmt.Fprintf(&b, "drawn on their own: %d node(s) that a HEALTH verdict did not pass, that logged a kernel event, or furthest from the median. ", len(lines))
		}
		drawn := map[*telNode]bool{}
		for _, n := range lines {
			drawn[n] = true
		}
		unmarked := 0
		for _, n := range nodes {
			if len(n.events) > 0 && !drawn[n] {
				unmarked++
			}
		}
		if unmarked > 0 {
			fmt.Fprintf(&b, "%d more node(s) logged kernel events, not marked here (HEALTH-012 names them). ", unmarked)
		}
	} else {
		b.WriteString("One line per node. ")
	}
	if len(phases) > 0 {
		names := make([]string, 0, len(phases))
		for _, ph := range phases {
			names = append(names, clip(ph.name, 24))
		}
		fmt.Fprintf(&b, "Shaded, in turn: the phases %s. ", strings.Join(names, ", "))
	}
	b.WriteString("Every sample is in raw/<node>/" + telemetry.FileName + ".")
	return b.String()
}
