package standins

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The genuine telemetry captures of one H200 (driver 580.159.04): the same --query-gpu fields idle and under a
// bf16 GEMM load, with units. The loop answers every GPU of the profile from them, the GPU's identity cells
// (telIdentity) from the profile's own -q, so that -L, preflight's query and the loop agree on the node.
const (
	telIdleCSV   = "nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-idle.txt"
	telLoadCSV   = "nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-bf16-gemm-load.txt"
	telNoUnitCSV = "nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-nounits-idle.txt" // tests only
)

var telIdentity = []string{"index", "name", "pci.bus_id", "driver_version", "memory.total"}

// telCapture is the idle and load rows of the captures, with units, over the same header.
type telCapture struct {
	names, units []string
	idle, load   []string
}

func loadTelCapture() (*telCapture, error) {
	idle, err := parseCSVSample(sample(telIdleCSV))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", telIdleCSV, err)
	}
	load, err := parseCSVSample(sample(telLoadCSV))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", telLoadCSV, err)
	}
	if !slices.Equal(idle.names, load.names) || len(idle.rows) != 1 || len(load.rows) != 1 {
		return nil, fmt.Errorf("%s and %s differ in fields", telIdleCSV, telLoadCSV)
	}
	return &telCapture{names: idle.names, units: idle.units, idle: idle.rows[0], load: load.rows[0]}, nil
}

func (t *telCapture) col(name string) int { return slices.Index(t.names, name) }

// noUnits is nvidia-smi's nounits rule as the idle pair of captures shows it: a cell of a column whose header
// has a unit loses " <unit>"; "[N/A]" and cells of unitless columns stay as they are.
func noUnits(cell, unit string) string {
	if unit == "" {
		return cell
	}
	return strings.TrimSuffix(cell, " "+unit)
}

// smiLoop is `nvidia-smi --query-gpu=F --format=csv,noheader[,nounits] -lms N` (or -l): a row per GPU at once and
// then every interval until the process is killed (SIGTERM, SIGPIPE: the default dispositions end it without a
// word, as they end nvidia-smi) or stop is closed (tests). A failed write ends it quietly too.
type smiLoop struct {
	p        *profile
	l        *smiLog
	genuine  *csvSample
	cap      *telCapture
	fields   []string
	units    bool
	interval time.Duration
	plan     plan
	state    string // "" outside a simulated node: no busy markers, t0 = the loop's own start
	ibDir    string
	now      func() time.Time
}

func runSMILoop(p *profile, l *smiLog, c smiCall, interval time.Duration, args []string,
	stdout, stderr io.Writer, stop <-chan struct{}) int {
	header, units, csvOK := true, true, false
	for _, opt := range strings.Split(c.format, ",") {
		switch opt {
		case "csv":
			csvOK = true
		case "noheader":
			header = false
		case "nounits":
			units = false
		default:
			return notSimulated(p, NvidiaSMI, args, stderr)
		}
	}
	// No sample shows how often a looping query repeats its header: only noheader is simulated.
	if !csvOK || header || c.queryGPU == "" {
		return notSimulated(p, NvidiaSMI, args, stderr)
	}
	tc, err := loadTelCapture()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", standinLabel(p), err)
		return 1
	}
	lp := &smiLoop{p: p, l: l, cap: tc, fields: strings.Split(c.queryGPU, ","), units: units,
		interval: interval, state: stateDir(), ibDir: ibTreeDir(), now: time.Now}
	real := append(realFieldNames(), tc.names...)
	for _, f := range lp.fields {
		if !slices.Contains(real, f) {
			fmt.Fprintf(stdout, "Field \"%s\" is not a valid field to query.\n\n", f)
			return smiExitInvalidArg
		}
	}
	if p.smiCSV != "" {
		if lp.genuine, err = parseCSVSample(sample(p.smiCSV)); err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", standinLabel(p), p.smiCSV, err)
			return 1
		}
	}
	if lp.plan, err = parsePlan(os.Getenv(SimTelemetryEnv)); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", standinLabel(p), err)
		return ExitNotSimulated
	}
	if g := lp.plan.maxGPU(); g >= len(l.gpus) {
		fmt.Fprintf(stderr, "%s: %s: gpu=%d, but the node has %d GPUs\n", standinLabel(p), SimTelemetryEnv, g, len(l.gpus))
		return ExitNotSimulated
	}
	// Every cell that does not move is resolved once: a tick only copies rows and applies the plan.
	for _, f := range lp.fields {
		if lp.cap.col(f) >= 0 && !slices.Contains(telIdentity, f) {
			continue
		}
		for i := range l.gpus {
			if _, _, ok := csvCell(l, lp.genuine, f, i); !ok {
				return notSimulated(p, NvidiaSMI, args, stderr)
			}
		}
	}
	return lp.run(stdout, stop)
}

func (lp *smiLoop) run(stdout io.Writer, stop <-chan struct{}) int {
	start := lp.now()
	t0 := start
	if lp.state != "" {
		if t, err := origin(lp.state, start); err == nil {
			t0 = t
		}
	}
	next := start
	for {
		now := lp.now()
		if lp.state != "" && lp.ibDir != "" && lp.plan.has(evLinkDown) {
			applyIB(lp.ibDir, lp.plan, now.Sub(t0))
		}
		if _, err := stdout.Write(lp.tick(now, now.Sub(t0), busy(lp.state))); err != nil {
			return 0
		}
		next = next.Add(lp.interval)
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-stop:
				t.Stop()
				return 0
			case <-t.C:
			}
		} else {
			next = time.Now() // fell behind (a stopped process): go on from now, do not burst
			select {
			case <-stop:
				return 0
			default:
			}
		}
	}
}

// tick is one interval's rows, one per GPU.
func (lp *smiLoop) tick(now time.Time, el time.Duration, isBusy bool) []byte {
	var b bytes.Buffer
	for i := range lp.l.gpus {
		row := lp.row(i, now, el, isBusy)
		for j, f := range lp.fields {
			if j > 0 {
				b.WriteString(", ")
			}
			var cell, unit string
			if k := lp.cap.col(f); k >= 0 && !slices.Contains(telIdentity, f) {
				cell, unit = row[k], lp.cap.units[k]
			} else {
				cell, unit, _ = csvCell(lp.l, lp.genuine, f, i)
			}
			if !lp.units {
				cell = noUnits(cell, unit)
			}
			b.WriteString(cell)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// row is GPU i's capture row (with units) at elapsed time el: the load row while a workload runs, the idle row
// otherwise, with the planted events applied.
func (lp *smiLoop) row(i int, now time.Time, el time.Duration, isBusy bool) []string {
	base := lp.cap.idle
	stalled := false
	for _, e := range lp.plan {
		if e.kind == evStall && e.gpu == i && e.active(el) {
			stalled = true
		}
	}
	if isBusy || stalled {
		base = lp.cap.load
	}
	row := slices.Clone(base)
	set := func(name, v string) {
		if k := lp.cap.col(name); k >= 0 {
			row[k] = v
		}
	}
	set("timestamp", now.Format("2006/01/02 15:04:05.000"))
	if stalled {
		// Busy to the utilisation counter, idle to the power meter: a GPU that stopped computing mid-load.
		for _, f := range []string{"power.draw", "power.draw.average", "power.draw.instant"} {
			if k := lp.cap.col(f); k >= 0 {
				row[k] = lp.cap.idle[k]
			}
		}
	}
	for _, e := range lp.plan {
		if e.kind == evLinkDown || e.gpu != i {
			continue
		}
		switch {
		case e.kind == evThrottle && e.active(el):
			set("clocks_event_reasons."+e.reason, "Active")
			if k := lp.cap.col("clocks_event_reasons.active"); k >= 0 {
				if v, err := strconv.ParseUint(strings.TrimPrefix(row[k], "0x"), 16, 64); err == nil {
					row[k] = fmt.Sprintf("0x%016X", v|throttleBits[e.reason])
				}
			}
		case e.kind == evECC && el >= e.at:
			kind := "uncorrected"
			if e.corrected {
				kind = "corrected"
			}
			for _, f := range []string{"ecc.errors." + kind + ".volatile.total", "ecc.errors." + kind + ".aggregate.total"} {
				addCount(row, lp.cap.col(f), e.count)
			}
		case e.kind == evRemap && el >= e.at:
			addCount(row, lp.cap.col("remapped_rows.uncorrectable"), 1)
			set("remapped_rows.pending", "Yes")
		}
	}
	return row
}

// addCount adds n to a counter cell; a cell the GPU does not report ("[N/A]") stays so.
func addCount(row []string, k int, n int64) {
	if k < 0 {
		return
	}
	if v, err := strconv.ParseInt(row[k], 10, 64); err == nil {
		row[k] = strconv.FormatInt(v+n, 10)
	}
}

// parseLoopInterval reads -l/--loop (seconds) or -lms/--loop-ms (milliseconds): a whole number from 1.
func parseLoopInterval(v string, unit time.Duration) (time.Duration, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || time.Duration(n) > 24*time.Hour/unit {
		return 0, false
	}
	return time.Duration(n) * unit, true
}
