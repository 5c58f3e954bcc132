package reports

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
)

// telFixture is a window of nodes sampled every 5 s by 8 GPUs, its
// phases cluster-wide: preflight, allreduce, burnin, teardown.
type telFixture struct {
	nodes []string
	span  time.Duration
	// temp: a node's temperature at a moment (its power, clock and
	// utilisation follow from it).
	temp func(node int, at time.Duration) float64
	// xid: nodes (by index) whose kernel log has an Xid at half time.
	xid map[int]bool
}

// h200Idle is a genuine row of the sampler's query (an idle H200, driver
// 580.159.04: ../shared/samples/nvidia-smi/h200-580.159.04-query-gpu-
// telemetry-csv-nounits-idle.txt), so the rows parse as real ones do.
const h200Idle = "2026/12/04 15:18:15.768, 0, NVIDIA H200, 00000000:00:06.0, 580.159.04, P0, 40, 39, 82.23, 82.23, " +
	"82.06, 700.00, 700.00, 700.00, 345, 345, 3201, 765, 1980, 3201, 0, 0, 0, 143771, [N/A], 0x00000000000001FF, " +
	"0x0000000000000001, Active, Not Active, Not Active, Not Active, Not Active, Not Active, Not Active, Not Active, " +
	"Enabled, 0, 0, 0, 0, [N/A], [N/A], [N/A], 0, 0, No, No"

func telRow(gpu int, temp, power, clock, util float64) string {
	cells := strings.Split(h200Idle, ", ")
	set := func(f, v string) {
		for i, g := range telemetry.Fields {
			if g == f {
				cells[i] = v
			}
		}
	}
	set("index", fmt.Sprint(gpu))
	set("pci.bus_id", fmt.Sprintf("00000000:%02X:00.0", 0x18+gpu))
	set("temperature.gpu", fmt.Sprintf("%.0f", temp))
	set("power.draw", fmt.Sprintf("%.2f", power))
	set("clocks.current.sm", fmt.Sprintf("%.0f", clock))
	set("utilization.gpu", fmt.Sprintf("%.0f", util))
	return strings.Join(cells, ", ")
}

// telText is node i's file, unpacked.
func (f telFixture) telText(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d start interval=5000 fields=%d\n", t0.UnixMilli(), len(telemetry.Fields))
	for at := time.Duration(0); at < f.span; at += 5 * time.Second {
		ms := t0.Add(at).UnixMilli()
		if f.xid[i] && at == f.span/2/(5*time.Second)*(5*time.Second) {
			fmt.Fprintf(&b, "%d kern NVRM: Xid (PCI:0000:19:00): 48, pid=1, name=x, An uncorrectable double bit error\n", ms)
		}
		temp := f.temp(i, at)
		for g := range 8 {
			tg := temp + float64(g%3)*0.4
			fmt.Fprintf(&b, "%d gpu %s\n", ms+int64(g), telRow(g, tg, 10*tg, 1980-2*tg, min(100, tg)))
		}
	}
	return b.String()
}

func gz(tb testing.TB, text string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(text)); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// write makes the bundle: the run and each node's telemetry file under
// dir/raw/<node>/.
func (f telFixture) write(tb testing.TB, dir string) *record.Run {
	tb.Helper()
	r := simulatedRun()
	r.Started, r.Ended = t0, t0.Add(f.span)
	r.Nodes, r.Phases, r.Verdicts = nil, nil, nil
	for i, n := range f.nodes {
		r.Nodes = append(r.Nodes, record.Node{Index: i, Name: n, Address: fmt.Sprintf("10.0.%d.%d:22", i/250, i%250)})
		r.Phases = append(r.Phases, withData(phase("telemetry", n, i, record.OK, 0, 1, ""), `{"interval_ns":5000000000}`))
		p := filepath.Join(dir, "raw", n, telemetry.FileName)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, gz(tb, f.telText(i)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	s := int(f.span / time.Second)
	// Out of order on purpose: the chart orders by time.
	r.Phases = append(r.Phases,
		phase("burnin", "", -1, record.OK, s/2, s*4/10, ""),
		phase("preflight", "", -1, record.OK, 1, s/5, ""),
		phase("allreduce", "", -1, record.OK, s/5+2, s/4, ""),
		phase("teardown", "", -1, record.OK, s*9/10+1, s/20, ""))
	return r
}

func telHTML(t *testing.T, r *record.Run, dir string) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, r, &BundleFacts{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// section is the page's telemetry section ("" when none).
func telSection(page string) string {
	i := strings.Index(page, `<section id="telemetry">`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</section>")
	return page[i : i+j]
}

func alike(_ int, at time.Duration) float64 {
	return 60 + float64(at/time.Minute%3)*0.3
}

// 50 alike nodes are a band; the one that runs hot is a line of its
// own, named; the phases are shaded in the order they ran.
func TestTelemetryChartsOutlierAndBand(t *testing.T) {
	f := telFixture{span: 10 * time.Minute}
	for i := range 50 {
		f.nodes = append(f.nodes, fmt.Sprintf("gpu-%02d", i+1))
	}
	f.nodes = append(f.nodes, "gpu-hot")
	f.temp = func(i int, at time.Duration) float64 {
		if i == 50 && at > 3*time.Minute {
			return 88
		}
		return alike(i, at)
	}
	dir := t.TempDir()
	r := f.write(t, dir)
	sec := telSection(telHTML(t, r, dir))
	if sec == "" {
		t.Fatal("no telemetry section")
	}
	for _, id := range []string{"temp", "power", "smclock", "util"} {
		if !strings.Contains(sec, `id="chart-telemetry-`+id+`"`) {
			t.Errorf("no %s chart", id)
		}
	}
	temp := sec[strings.Index(sec, `id="chart-telemetry-temp"`):strings.Index(sec, `id="chart-telemetry-power"`)]
	if !strings.Contains(temp, ">gpu-hot</text>") {
		t.Error("the hot node is not a named line")
	}
	if m := regexp.MustCompile(`>gpu-\d\d</text>`).FindString(temp); m != "" {
		t.Errorf("an alike node is drawn as a line: %s", m)
	}
	if !strings.Contains(temp, "51 nodes: median, p5-p95") {
		t.Error("the fleet is not a band")
	}
	// The phases' labels in the order they ran.
	last := -1
	for _, ph := range []string{">preflight<", ">allreduce<", ">burnin<"} {
		i := strings.Index(temp, ph)
		if i < 0 || i < last {
			t.Errorf("phase %s at %d, after %d: not shaded in order", ph, i, last)
		}
		last = i
	}
	if !strings.Contains(temp, "preflight, allreduce, burnin, teardown") {
		t.Error("the caption does not name the phases in order")
	}
	if n := len(sec); n > 400<<10 {
		t.Errorf("telemetry section is %d bytes for 51 nodes", n)
	}
}

// A node whose kernel logged an Xid is drawn with the event marked, even
// where it does not stand out otherwise; a name is escaped.
func TestTelemetryChartsXidAndEscaping(t *testing.T) {
	f := telFixture{span: 10 * time.Minute, temp: alike, xid: map[int]bool{20: true}}
	for i := range 30 {
		f.nodes = append(f.nodes, fmt.Sprintf("gpu-%02d", i+1))
	}
	f.nodes[20] = `gpu-<script>alert(1)`
	dir := t.TempDir()
	r := f.write(t, dir)
	page := telHTML(t, r, dir)
	sec := telSection(page)
	if strings.Contains(page, "<script") {
		t.Error("a node's name reached the page unescaped")
	}
	if !strings.Contains(sec, "gpu-&lt;script&gt;alert(1)") {
		t.Error("the node with an Xid is not a named line")
	}
	if !strings.Contains(sec, "kernel event (Xid, SXid, off the bus)") {
		t.Error("the Xid is not marked")
	}
}

// A file cut inside its gzip member charts what reads; a node with no
// file is left out.
func TestTelemetryChartsTornFile(t *testing.T) {
	f := telFixture{span: 10 * time.Minute, temp: alike, nodes: []string{"gpu-01", "gpu-02", "gpu-03"}}
	dir := t.TempDir()
	r := f.write(t, dir)
	p := filepath.Join(dir, "raw", "gpu-02", telemetry.FileName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "raw", "gpu-03", telemetry.FileName)); err != nil {
		t.Fatal(err)
	}
	sec := telSection(telHTML(t, r, dir))
	if !strings.Contains(sec, ">gpu-02</text>") || !strings.Contains(sec, ">gpu-01</text>") {
		t.Error("the torn file's node is not charted")
	}
	if strings.Contains(sec, ">gpu-03</text>") {
		t.Error("a node without a file is charted")
	}
}

// No telemetry file (telemetry off, or a bundle made before it): no
// section at all; nor outside a bundle.
func TestTelemetryChartsNone(t *testing.T) {
	f := telFixture{span: 10 * time.Minute, temp: alike, nodes: []string{"gpu-01", "gpu-02"}}
	dir := t.TempDir()
	r := f.write(t, dir)
	if err := os.RemoveAll(filepath.Join(dir, "raw")); err != nil {
		t.Fatal(err)
	}
	page := telHTML(t, r, dir)
	if strings.Contains(page, `id="telemetry"`) || strings.Contains(page, "chart-telemetry") || strings.Contains(page, "Telemetry over") {
		t.Error("a window without telemetry has a telemetry section")
	}
	var b bytes.Buffer
	if err := HTML(&b, r, nil); err != nil || strings.Contains(b.String(), `id="telemetry"`) {
		t.Errorf("outside a bundle: %v, section %v", err, strings.Contains(b.String(), `id="telemetry"`))
	}
}

// The bundle's report.html has the charts, and verify renders the same
// page from run.json and the telemetry files.
func TestTelemetryChartsInBundle(t *testing.T) {
	f := telFixture{span: 10 * time.Minute, temp: alike, nodes: []string{"gpu-01", "gpu-02"}}
	dir := t.TempDir()
	r := f.write(t, dir)
	if err := WriteBundle(dir, r); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLName))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `id="chart-telemetry-temp"`) {
		t.Error("report.html has no telemetry chart")
	}
	problems, err := VerifyAs(dir, r.Tool)
	if err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
}

// BenchmarkTelemetryCharts: report.html's telemetry charts over 1,000
// nodes × 10 minutes sampled every 5 s by 8 GPUs (960,000 rows), read
// from the bundle's files. Reports the section's and the SVGs' bytes and
// the heap's sampled peak, besides time and allocations.
func BenchmarkTelemetryCharts(b *testing.B) {
	f := telFixture{span: 10 * time.Minute, xid: map[int]bool{500: true}}
	for i := range 1000 {
		f.nodes = append(f.nodes, fmt.Sprintf("gpu-%04d", i+1))
	}
	f.temp = func(i int, at time.Duration) float64 {
		if i == 7 && at > 4*time.Minute {
			return 90
		}
		return 55 + float64(i%10)*0.3 + float64(at/time.Minute%4)
	}
	dir := b.TempDir()
	r := f.write(b, dir)
	// The heap's peak while the charts are made, sampled.
	var peak uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	var last string
	for range b.N {
		var page bytes.Buffer
		if err := HTML(&page, r, &BundleFacts{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		last = page.String()
		size = len(telSection(last))
	}
	b.StopTimer()
	close(stop)
	<-done
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(size), "section-bytes")
	if size == 0 || !strings.Contains(last, ">gpu-0008</text>") {
		b.Fatal("no telemetry section, or the hot node is not named")
	}
}

// What a node wrote is bounded: a figure no GPU could report is not
// charted (the axis stays the fleet's), a file that is a link is not
// followed, and a node's name never leads out of raw/.
func TestTelemetryChartsHostile(t *testing.T) {
	f := telFixture{span: 10 * time.Minute, nodes: []string{"gpu-01", "gpu-02", "gpu-03"}}
	f.temp = func(i int, at time.Duration) float64 {
		if i == 1 {
			return 90000 // and power 900 kW
		}
		return alike(i, at)
	}
	dir := t.TempDir()
	r := f.write(t, dir)
	// gpu-03's file is a link to another's.
	p := filepath.Join(dir, "raw", "gpu-03", telemetry.FileName)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "raw", "gpu-01", telemetry.FileName), p); err != nil {
		t.Fatal(err)
	}
	sec := telSection(telHTML(t, r, dir))
	temp := sec[strings.Index(sec, `id="chart-telemetry-temp"`):strings.Index(sec, `id="chart-telemetry-power"`)]
	if tick := regexp.MustCompile(`>[1-9]\d{3,}</text>`).FindString(temp); tick != "" {
		t.Errorf("the temperature axis reaches %s", tick)
	}
	if strings.Contains(sec, ">gpu-03</text>") {
		t.Error("a link was followed")
	}
	for _, name := range []string{"..", ".", "", "a/b", `a\b`, "../raw"} {
		if f, ok := telemetryFile(dir, name); ok {
			f.Close()
			t.Errorf("node name %q opened a file", name)
		}
	}
}
