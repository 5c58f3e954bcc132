package telemetry

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// GPUSample is one gpu row: one GPU at one moment. A field the GPU does not
// report ("[N/A]", "[Not Supported]") is nil.
type GPUSample struct {
	At    time.Time `json:"at"` // the coordinator's clock when the row arrived
	Index int       `json:"index"`
	BusID string    `json:"bus_id"`

	TempC, MemTempC, PowerW, PowerLimitW   *float64
	SMClockMHz, MemClockMHz, MaxSMClockMHz *float64
	UtilPct, MemUsedMiB, MemTotalMiB       *float64

	// Reasons is clocks_event_reasons.active, NVML's bitmask (Reason*);
	// where the GPU gives no mask, the per-reason columns make it.
	Reasons *uint64

	ECCCorrVolatile, ECCUncorrVolatile, ECCCorrAggregate, ECCUncorrAggregate *int64
	RetiredSBE, RetiredDBE                                                   *int64
	RetirePending                                                            *bool
	RemapCorr, RemapUncorr                                                   *int64
	RemapPending, RemapFailure                                               *bool
}

// ReasonNames names the sample's active clock event reasons.
func (g *GPUSample) ReasonNames() []string {
	if g.Reasons == nil {
		return nil
	}
	return ReasonNames(*g.Reasons)
}

var errNotStated = errors.New("not stated")

// ParseGPURow reads one row of `nvidia-smi --query-gpu=<Fields>
// --format=csv,noheader,nounits` (units inside the cells, as --format=csv
// prints them, are read too). A row of another width is an error: the
// columns would be misread.
func ParseGPURow(row string, at time.Time) (GPUSample, error) {
	return parseGPURow(row, at, nil)
}

// parseGPURow splits into buf's room (the reader's, reused row after row).
func parseGPURow(row string, at time.Time, buf []string) (GPUSample, error) {
	cells := buf[:0]
	for len(cells) <= len(Fields) {
		c, rest, more := strings.Cut(row, ",")
		cells = append(cells, c)
		if !more {
			break
		}
		row = rest
	}
	if len(cells) != len(Fields) {
		return GPUSample{}, fmt.Errorf("gpu row: %d cells, want %d", len(cells), len(Fields))
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	get := func(f string) string { return cells[col[f]] }
	idx, err := strconv.Atoi(get("index"))
	if err != nil || idx < 0 || idx > 1<<16 {
		return GPUSample{}, fmt.Errorf("gpu row: index %.40q", get("index"))
	}
	g := GPUSample{At: at, Index: idx, BusID: get("pci.bus_id")}
	if len(g.BusID) > 64 {
		g.BusID = g.BusID[:64]
	}
	// One block for the row's numbers: a day of rows is over 100,000.
	fs := make([]float64, 0, 10)
	num := func(f string) *float64 {
		x, err := number(get(f))
		if err != nil {
			return nil
		}
		fs = append(fs, x)
		return &fs[len(fs)-1]
	}
	g.TempC, g.MemTempC = num("temperature.gpu"), num("temperature.memory")
	g.PowerW, g.PowerLimitW = num("power.draw"), num("power.limit")
	if g.PowerLimitW == nil {
		g.PowerLimitW = num("enforced.power.limit")
	}
	g.SMClockMHz, g.MemClockMHz = num("clocks.current.sm"), num("clocks.current.memory")
	g.MaxSMClockMHz = num("clocks.max.sm")
	g.UtilPct, g.MemUsedMiB, g.MemTotalMiB = num("utilization.gpu"), num("memory.used"), num("memory.total")

	is := make([]int64, 0, 8)
	cnt := func(f string) *int64 {
		c := get(f)
		if c == "" || c[0] == '[' { // [N/A]: not stated (and no error to allocate)
			return nil
		}
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			return nil
		}
		is = append(is, n)
		return &is[len(is)-1]
	}
	g.ECCCorrVolatile = cnt("ecc.errors.corrected.volatile.total")
	g.ECCUncorrVolatile = cnt("ecc.errors.uncorrected.volatile.total")
	g.ECCCorrAggregate = cnt("ecc.errors.corrected.aggregate.total")
	g.ECCUncorrAggregate = cnt("ecc.errors.uncorrected.aggregate.total")
	g.RetiredSBE, g.RetiredDBE = cnt("retired_pages.single_bit_ecc.count"), cnt("retired_pages.double_bit.count")
	g.RemapCorr, g.RemapUncorr = cnt("remapped_rows.correctable"), cnt("remapped_rows.uncorrectable")
	bs := make([]bool, 0, 3)
	yes := func(f string) *bool {
		b, ok := flag(get(f))
		if !ok {
			return nil
		}
		bs = append(bs, b)
		return &bs[len(bs)-1]
	}
	g.RetirePending = yes("retired_pages.pending")
	g.RemapPending, g.RemapFailure = yes("remapped_rows.pending"), yes("remapped_rows.failure")

	if m, err := mask(get("clocks_event_reasons.active")); err == nil {
		g.Reasons = &m
	} else {
		g.Reasons = reasonsFromWords(get)
	}
	return g, nil
}

// reasonWords are the per-reason columns and the bit each says in words.
var reasonWords = []struct {
	field string
	bit   uint64
}{
	{"clocks_event_reasons.gpu_idle", ReasonGPUIdle},
	{"clocks_event_reasons.applications_clocks_setting", ReasonAppClocksSetting},
	{"clocks_event_reasons.sw_power_cap", ReasonSWPowerCap},
	{"clocks_event_reasons.hw_slowdown", ReasonHWSlowdown},
	{"clocks_event_reasons.hw_thermal_slowdown", ReasonHWThermalSlowdown},
	{"clocks_event_reasons.hw_power_brake_slowdown", ReasonHWPowerBrake},
	{"clocks_event_reasons.sw_thermal_slowdown", ReasonSWThermalSlowdown},
	{"clocks_event_reasons.sync_boost", ReasonSyncBoost},
}

func reasonsFromWords(get func(string) string) *uint64 {
	var m uint64
	stated := false
	for _, r := range reasonWords {
		switch v := get(r.field); {
		case strings.EqualFold(v, "Active"):
			m |= r.bit
			stated = true
		case strings.EqualFold(v, "Not Active"):
			stated = true
		}
	}
	if !stated {
		return nil
	}
	return &m
}

// number reads a numeric cell, with or without its unit ("691.09" or
// "691.09 W"); "[N/A]", "N/A", "[Not Supported]" and the like are not
// stated.
func number(cell string) (float64, error) {
	if cell == "" || cell[0] == '[' || strings.EqualFold(cell, "N/A") {
		return 0, errNotStated
	}
	if i := strings.IndexByte(cell, ' '); i > 0 {
		cell = cell[:i]
	}
	x, err := strconv.ParseFloat(cell, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, errNotStated
	}
	return x, nil
}

// mask reads a hex bitmask cell: "0x0000000000000004".
func mask(cell string) (uint64, error) {
	if len(cell) < 3 || cell[0] != '0' || (cell[1] != 'x' && cell[1] != 'X') {
		return 0, errNotStated
	}
	return strconv.ParseUint(cell[2:], 16, 64)
}

// flag reads a yes/no cell ("Yes"/"No", "Active"/"Not Active",
// "Enabled"/"Disabled"); anything else is not stated.
func flag(cell string) (bool, bool) {
	for _, w := range []string{"yes", "active", "enabled", "true"} {
		if strings.EqualFold(cell, w) {
			return true, true
		}
	}
	for _, w := range []string{"no", "not active", "disabled", "false"} {
		if strings.EqualFold(cell, w) {
			return false, true
		}
	}
	return false, false
}
