package telemetry

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gpuaccept/orchestrator/record"
)

// window is a synthetic window built from the genuine H200 rows: tools
// (idle) for a minute, intranode (load) for ten, teardown (idle); every
// GPU sampled every 5 s, the idle row outside the load, the load row in
// it. edit changes a row at an offset before it is written.
type window struct {
	t      *testing.T
	gpus   int
	spans  []Span
	idle   []string
	load   []string
	edit   func(gpu int, d time.Duration, cells []string)
	extra  string
	noLoad bool
}

func newWindow(t *testing.T, gpus int) *window {
	idle := project(t, sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-telemetry-csv-idle.txt"))
	load := project(t, sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-telemetry-csv-bf16-gemm-load.txt"))
	return &window{t: t, gpus: gpus, idle: strings.Split(idle[0], ", "), load: strings.Split(load[0], ", "),
		spans: []Span{
			{Phase: "tools", Start: t0, End: t0.Add(time.Minute)},
			{Phase: "intranode", Start: t0.Add(time.Minute), End: t0.Add(11 * time.Minute), Load: true},
			{Phase: "teardown", Start: t0.Add(11 * time.Minute), End: t0.Add(12 * time.Minute)},
		}}
}

func (w *window) series() *Series {
	var text strings.Builder
	text.WriteString(line(0, TagStart, "interval=5000 fields=47"))
	for d := time.Duration(0); d < 12*time.Minute; d += 5 * time.Second {
		for g := range w.gpus {
			src := w.idle
			if !w.noLoad && d >= time.Minute && d < 11*time.Minute {
				src = w.load
			}
			cells := append([]string(nil), src...)
			cells[col["index"]] = fmt.Sprint(g)
			cells[col["pci.bus_id"]] = fmt.Sprintf("00000000:%02X:00.0", 0x18+g)
			if w.edit != nil {
				w.edit(g, d, cells)
			}
			text.WriteString(line(d+time.Duration(g)*time.Millisecond, TagGPU, strings.Join(cells, ", ")))
		}
	}
	text.WriteString(w.extra)
	return mustRead(w.t, members(w.t, text.String()))
}

func verdict(t *testing.T, vs []record.Verdict, id string) record.Verdict {
	t.Helper()
	for _, v := range vs {
		if utf8.RuneCountInString(v.Detail) > Width {
			t.Errorf("%s detail is %d columns: %q", v.ID, utf8.RuneCountInString(v.Detail), v.Detail)
		}
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("no %s in %v", id, vs)
	return record.Verdict{}
}

func want(t *testing.T, v record.Verdict, status record.Status, parts ...string) {
	t.Helper()
	if v.Status != status {
		t.Errorf("%s: %s, want %s: %s", v.ID, v.Status, status, v.Detail)
	}
	for _, p := range parts {
		if !strings.Contains(v.Detail, p) {
			t.Errorf("%s detail %q lacks %q", v.ID, v.Detail, p)
		}
	}
}

// The H200 under load at its power cap is healthy: the cap is recorded,
// never called a fault, and its 1,530 MHz below a 1,590 MHz base clock
// passes as "at its power limit".
func TestJudgeAtThePowerCap(t *testing.T) {
	w := newWindow(t, 2)
	vs := Judge("gpu-01", w.series(), w.spans, 1590)
	if len(vs) != 6 {
		t.Fatalf("%d verdicts", len(vs))
	}
	want(t, verdict(t, vs, "HEALTH-011"), record.Pass, "2 GPUs", "240 load samples",
		"at the power limit (SW Power Cap) in 100%")
	v := verdict(t, vs, "HEALTH-014")
	want(t, v, record.Pass, "2 GPUs below the base clock: GPU 0-1 at its power limit (SW Power Cap), 1,530 MHz")
	if v.Value == nil || *v.Value != 1530 || v.Unit != record.UnitMHz || v.Quoted != "1,590 MHz" {
		t.Errorf("HEALTH-014 value %v %q quoted %q", v.Value, v.Unit, v.Quoted)
	}
	want(t, verdict(t, vs, "HEALTH-012"), record.Pass, "no Xid or SXid in 12m")
	want(t, verdict(t, vs, "HEALTH-013"), record.Pass, "2 GPUs, ECC and remapped-row counts steady")
	want(t, verdict(t, vs, "HEALTH-015"), record.Skip, "no IB port")
	want(t, verdict(t, vs, "HEALTH-016"), record.Pass, "none near idle power (82 W)")
	for _, v := range vs {
		t.Logf("%s %s %s", v.ID, v.Status, v.Detail)
		if v.Node != "gpu-01" || v.Incomplete != "" || v.Title == v.ID {
			t.Errorf("%s: node %q, incomplete %q, title %q", v.ID, v.Node, v.Incomplete, v.Title)
		}
	}
	// At or above the base clock: a plain pass; the quote silent: SKIP.
	want(t, verdict(t, Judge("gpu-01", w.series(), w.spans, 1500), "HEALTH-014"), record.Pass,
		"2 GPUs at or above 1,500 MHz")
	want(t, verdict(t, Judge("gpu-01", w.series(), w.spans, 0), "HEALTH-014"), record.Skip,
		"not stated in the quote")
}

// Below the base clock without the power cap is a slow GPU.
func TestJudgeSlowClockWithoutCap(t *testing.T) {
	w := newWindow(t, 2)
	w.edit = func(g int, d time.Duration, c []string) {
		if g == 1 && c[col["clocks_event_reasons.active"]] == "0x0000000000000004" {
			c[col["clocks_event_reasons.active"]] = "0x0000000000000000"
		}
	}
	v := verdict(t, Judge("gpu-01", w.series(), w.spans, 1590), "HEALTH-014")
	want(t, v, record.Fail, "GPU 1 median 1,530 MHz, no power cap, from +1m00s (intranode)")
	if strings.Contains(v.Detail, "GPU 0") {
		t.Errorf("GPU 0 at its cap named among the slow: %s", v.Detail)
	}
}

func TestJudgeThermalSlowdown(t *testing.T) {
	w := newWindow(t, 8)
	w.edit = func(g int, d time.Duration, c []string) {
		if g == 5 && d >= 5*time.Minute && d < 6*time.Minute {
			c[col["clocks_event_reasons.active"]] = "0x0000000000000044"
			c[col["clocks_event_reasons.hw_thermal_slowdown"]] = "Active"
		}
		// A slowdown outside the load is not this requirement's.
		if g == 2 && d < time.Minute {
			c[col["clocks_event_reasons.active"]] = "0x0000000000000008"
		}
	}
	v := verdict(t, Judge("gpu-07", w.series(), w.spans, 1590), "HEALTH-011")
	want(t, v, record.Fail, "1 GPU slowed under load: GPU 5 from +5m00s (intranode): HW Thermal Slowdown")
	if strings.Contains(v.Detail, "GPU 2") {
		t.Errorf("an idle slowdown failed the load: %s", v.Detail)
	}
}

func TestJudgeECC(t *testing.T) {
	w := newWindow(t, 2)
	w.edit = func(g int, d time.Duration, c []string) {
		if g == 0 && d >= 6*time.Minute {
			c[col["ecc.errors.uncorrected.volatile.total"]] = "2"
			c[col["remapped_rows.uncorrectable"]] = "1"
		}
		if g == 1 && d >= 9*time.Minute {
			c[col["remapped_rows.pending"]] = "Yes"
		}
	}
	want(t, verdict(t, Judge("gpu-02", w.series(), w.spans, 0), "HEALTH-013"), record.Fail,
		"2 GPUs with counts that rose or pending: GPU 0 ECC uncorrected +2 at +6m00s (intranode); (+2 more)")
	w.edit = func(g int, d time.Duration, c []string) {
		if g == 1 && d >= 9*time.Minute {
			c[col["remapped_rows.pending"]] = "Yes"
		}
		if g == 0 && d >= 10*time.Minute {
			c[col["remapped_rows.uncorrectable"]] = "1"
		}
	}
	want(t, verdict(t, Judge("gpu-02", w.series(), w.spans, 0), "HEALTH-013"), record.Fail,
		"2 GPUs with counts that rose or pending: GPU 1 remap pending at +9m00s (intranode); (+1 more)")
	w.edit = func(g int, d time.Duration, c []string) {
		if g == 0 && d >= 10*time.Minute {
			c[col["remapped_rows.uncorrectable"]] = "1"
		}
	}
	want(t, verdict(t, Judge("gpu-02", w.series(), w.spans, 0), "HEALTH-013"), record.Fail,
		"1 GPU with counts that rose or pending: GPU 0 rows remapped +1 at +10m00s (intranode)")
	w.edit = func(g int, d time.Duration, c []string) {
		if g == 1 && d >= 11*time.Minute {
			c[col["ecc.errors.corrected.volatile.total"]] = "12"
		}
	}
	want(t, verdict(t, Judge("gpu-02", w.series(), w.spans, 0), "HEALTH-013"), record.Warn,
		"GPU 1 ECC corrected +12 at +11m00s (teardown)")
}

func TestJudgeXid(t *testing.T) {
	w := newWindow(t, 2) // GPU 1 is 00000000:19:00.0
	xid := ""
	for _, l := range strings.Split(sample(t, "kernel", "gpud-dmesg-iso-xid48-63-94-dbe-rowremap-peermem.txt"), "\n") {
		if strings.Contains(l, "Xid") && strings.Contains(l, ": 48,") {
			xid = l
			break
		}
	}
	w.extra = line(7*time.Minute, TagKernel, xid) +
		line(8*time.Minute, TagKernel, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04")
	want(t, verdict(t, Judge("gpu-03", w.series(), w.spans, 0), "HEALTH-012"), record.Fail,
		"1 kernel event: Xid 48 on GPU 1 (0000:19:00) at +7m00s (intranode)")
	// A device no sampled GPU has is named as the kernel wrote it; a code
	// most often the application's says so.
	w.extra = line(7*time.Minute, TagKernel, strings.Replace(strings.Replace(xid, "0000:19:00", "0000:c1:00", 1),
		": 48,", ": 13,", 1))
	want(t, verdict(t, Judge("gpu-03", w.series(), w.spans, 0), "HEALTH-012"), record.Fail,
		"1 kernel event: Xid 13 (a code most often the application's) on device 0000:c1:00 at +7m00s")
	// A note of the sources found says nothing missing.
	w.extra = line(0, TagNote, "sources: nvidia-smi, dmesg; no ib")
	want(t, verdict(t, Judge("gpu-03", w.series(), w.spans, 0), "HEALTH-012"), record.Pass)
	want(t, verdict(t, Judge("gpu-03", w.series(), w.spans, 0), "HEALTH-015"), record.Skip, "no IB port sampled")
	w.extra = line(0, TagNote, "ib: /sys/class/infiniband: permission denied")
	want(t, verdict(t, Judge("gpu-03", w.series(), w.spans, 0), "HEALTH-015"), record.Skip,
		"no telemetry: ib: /sys/class/infiniband: permission denied")
	w.extra = line(20*time.Second, TagNote, "dmesg: restricted; journalctl: not found")
	v := verdict(t, Judge("gpu-03", w.series(), w.spans, 0), "HEALTH-012")
	want(t, v, record.Skip, "no telemetry: dmesg: restricted")
	if v.Incomplete == "" {
		t.Error("an unread kernel log is not incomplete")
	}
}

func TestJudgeIB(t *testing.T) {
	w := newWindow(t, 1)
	ib := func(down, symbol int, state string) func(time.Duration) string {
		return func(d time.Duration) string {
			n, s, st := 0, 0, "4: ACTIVE"
			if d >= 8*time.Minute {
				n, s, st = down, symbol, state
			}
			return line(d, TagIB, fmt.Sprintf("mlx5_0:1 state=%s symbol_error=%d link_downed=%d", st, s, n)) +
				line(d, TagIB, "mlx5_1:1 state=4: ACTIVE symbol_error=0 link_downed=3")
		}
	}
	run := func(f func(time.Duration) string) record.Verdict {
		var b strings.Builder
		for d := time.Duration(0); d < 12*time.Minute; d += 5 * time.Second {
			b.WriteString(f(d))
		}
		w.extra = b.String()
		return verdict(t, Judge("gpu-04", w.series(), w.spans, 0), "HEALTH-015")
	}
	want(t, run(ib(1, 0, "4: ACTIVE")), record.Fail, "mlx5_0:1 link down +1 at +8m00s (intranode)")
	want(t, run(ib(0, 0, "1: DOWN")), record.Fail, "mlx5_0:1 state 1: DOWN at +8m00s (intranode)")
	want(t, run(ib(0, 40, "4: ACTIVE")), record.Warn, "mlx5_0:1 symbol_error +40")
	want(t, run(ib(0, 0, "4: ACTIVE")), record.Pass, "2 IB ports ACTIVE, no error counted over 12m")
}

func TestJudgeStall(t *testing.T) {
	w := newWindow(t, 2)
	stall := func(n int) func(int, time.Duration, []string) {
		return func(g int, d time.Duration, c []string) {
			if g == 1 && d >= 4*time.Minute && d < 4*time.Minute+time.Duration(n)*5*time.Second {
				c[col["power.draw"]] = "84.10 W"
			}
		}
	}
	w.edit = stall(4)
	want(t, verdict(t, Judge("gpu-05", w.series(), w.spans, 0), "HEALTH-016"), record.Fail,
		"1 GPU stalled (idle 82 W): GPU 1 100% busy at 84 W from +4m00s (intranode)")
	w.edit = stall(2)
	want(t, verdict(t, Judge("gpu-05", w.series(), w.spans, 0), "HEALTH-016"), record.Pass)
}

func TestJudgeNotMeasured(t *testing.T) {
	for _, v := range Judge("gpu-06", nil, nil, 1590) {
		if v.Status != record.Skip || !strings.HasPrefix(v.Incomplete, "no telemetry: ") || v.Node != "gpu-06" {
			t.Errorf("nil series: %+v", v)
		}
	}
	s := mustRead(t, members(t, line(0, TagStart, "interval=5000 fields=47")+
		line(time.Second, TagNote, "nvidia-smi: not found")))
	for _, v := range Judge("gpu-06", s, nil, 1590) {
		switch v.ID {
		case "HEALTH-011", "HEALTH-013", "HEALTH-014", "HEALTH-016":
			if v.Status != record.Skip || v.Incomplete != "no telemetry: nvidia-smi: not found" {
				t.Errorf("no nvidia-smi: %s %s %q", v.ID, v.Status, v.Incomplete)
			}
		}
	}
	// No phase loaded the GPUs: nothing to judge under load.
	w := newWindow(t, 1)
	w.noLoad = true
	w.spans[1].Load = false
	vs := Judge("gpu-06", w.series(), w.spans, 1590)
	want(t, verdict(t, vs, "HEALTH-011"), record.Skip, noLoad)
	want(t, verdict(t, vs, "HEALTH-016"), record.Skip, noLoad)
	if v := verdict(t, vs, "HEALTH-014"); v.Status != record.Skip || v.Incomplete != noLoad {
		t.Errorf("HEALTH-014 quoted, no load: %+v", v)
	}
}

// 1,000 GPUs failing alike still fit one line; node text is escaped.
func TestJudgeWidthAndHostileText(t *testing.T) {
	w := newWindow(t, 64)
	w.edit = func(g int, d time.Duration, c []string) {
		c[col["clocks_event_reasons.active"]] = "0x00000000000000E8"
		c[col["ecc.errors.uncorrected.volatile.total"]] = fmt.Sprint(int(d / time.Second))
	}
	w.extra = line(7*time.Minute, TagKernel, "NVRM: Xid (PCI:0000:19:00\x1b[2J): 79, pid=1, GPU has fallen off the bus.")
	vs := Judge("gpu-07", w.series(), w.spans, 1590)
	for _, v := range vs {
		t.Logf("%s %s %s", v.ID, v.Status, v.Detail)
	}
	want(t, verdict(t, vs, "HEALTH-011"), record.Fail,
		"64 GPUs slowed under load: GPU 0-63 from +1m00s (intranode): HW Slowdown, SW Thermal")
	want(t, verdict(t, vs, "HEALTH-013"), record.Fail, "64 GPUs with counts that rose or pending: GPU 0-63 ECC")
	for _, v := range vs {
		if strings.ContainsAny(v.Detail, "\x1b") {
			t.Errorf("%s detail carries a control character: %q", v.ID, v.Detail)
		}
	}
}

func TestSummarise(t *testing.T) {
	w := newWindow(t, 2)
	sum := Summarise(w.series(), w.spans)
	if len(sum) != 6 {
		t.Fatalf("%d entries: %+v", len(sum), sum)
	}
	load := sum[2]
	if load.Phase != "intranode" || load.GPU != 0 || load.Power.Median != 691.09 || load.SMClock.Max != 1530 ||
		load.Util.Min != 100 || load.Temp.N != 120 {
		t.Errorf("intranode GPU 0: %+v", load)
	}
	if idle := sum[1]; idle.Phase != "tools" || idle.GPU != 1 || idle.Power.Max != 82.23 || idle.Power.N != 12 {
		t.Errorf("tools GPU 1: %+v", idle)
	}
	if Summarise(nil, w.spans) != nil {
		t.Error("a nil series summarised")
	}
}

func TestOffset(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 5 * time.Second: "5s", 12*time.Minute + 5*time.Second: "12m05s",
		50*time.Hour + 2*time.Minute: "50h02m00s",
	} {
		if got := offset(d); got != want {
			t.Errorf("offset(%v) = %q, want %q", d, got, want)
		}
	}
}

// A load phase is not all load: between two collectives, or while a job
// starts, a GPU idles at its idle clock. HEALTH-014 reads only the busy
// samples of a load phase, and a load phase in which no GPU was ever busy
// judges neither the clocks nor a stall: never a PASS over nothing.
func TestJudgeIdleSamplesInALoadPhase(t *testing.T) {
	w := newWindow(t, 2)
	// Every other minute of the load phase idle (the genuine idle row).
	w.edit = func(g int, d time.Duration, cells []string) {
		if d >= time.Minute && d < 11*time.Minute && (d/time.Minute)%2 == 0 {
			copy(cells, w.idle)
			cells[col["index"]] = fmt.Sprint(g)
			cells[col["pci.bus_id"]] = fmt.Sprintf("00000000:%02X:00.0", 0x18+g)
		}
	}
	vs := Judge("gpu-01", w.series(), w.spans, 1500)
	v := verdict(t, vs, "HEALTH-014")
	want(t, v, record.Pass, "2 GPUs at or above 1,500 MHz")
	if v.Value == nil || *v.Value != 1530 {
		t.Errorf("HEALTH-014 median %v, want the busy samples' 1,530 MHz", v.Value)
	}
	want(t, verdict(t, vs, "HEALTH-016"), record.Pass, "none near idle power")

	w = newWindow(t, 2)
	w.noLoad = true // the load phase ran, the GPUs never left idle
	vs = Judge("gpu-01", w.series(), w.spans, 1500)
	v = verdict(t, vs, "HEALTH-014")
	want(t, v, record.Skip, "no GPU was busy (50% or more)")
	if v.Incomplete == "" {
		t.Errorf("HEALTH-014: a quoted base clock nothing measured must leave the window incomplete: %+v", v)
	}
	v = verdict(t, vs, "HEALTH-016")
	want(t, v, record.Skip, "no GPU was busy (90% or more)")
	if v.Incomplete != "" {
		t.Errorf("HEALTH-016: %+v", v)
	}
}
