package telemetry

import (
	"strings"
	"testing"
	"time"
)

func f64(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func i64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func b(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func mustRow(t *testing.T, row string) GPUSample {
	t.Helper()
	g, err := ParseGPURow(row, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("%v: %q", err, row)
	}
	return g
}

// expect compares what the row gave with what the genuine capture says.
func expect(t *testing.T, name string, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s = %v, want %v", name, k, got[k], w)
		}
	}
}

func view(g GPUSample) map[string]any {
	m := map[string]any{
		"index": g.Index, "bus": g.BusID, "temp": f64(g.TempC), "memtemp": f64(g.MemTempC),
		"power": f64(g.PowerW), "limit": f64(g.PowerLimitW), "sm": f64(g.SMClockMHz), "mem": f64(g.MemClockMHz),
		"maxsm": f64(g.MaxSMClockMHz), "util": f64(g.UtilPct), "used": f64(g.MemUsedMiB),
		"total": f64(g.MemTotalMiB), "eccCV": i64(g.ECCCorrVolatile), "eccUV": i64(g.ECCUncorrVolatile),
		"eccCA": i64(g.ECCCorrAggregate), "eccUA": i64(g.ECCUncorrAggregate), "sbe": i64(g.RetiredSBE),
		"dbe": i64(g.RetiredDBE), "retire": b(g.RetirePending), "rc": i64(g.RemapCorr),
		"ru": i64(g.RemapUncorr), "rp": b(g.RemapPending), "rf": b(g.RemapFailure), "reasons": nil,
		"names": strings.Join(g.ReasonNames(), ","),
	}
	if g.Reasons != nil {
		m["reasons"] = *g.Reasons
	}
	return m
}

// The H200's idle rows: every capture of them parses to the same GPU.
var h200Idle = map[string]any{
	"index": 0, "bus": "00000000:00:06.0", "temp": 40.0, "memtemp": 39.0, "power": 82.23, "limit": 700.0,
	"sm": 345.0, "mem": 3201.0, "maxsm": 1980.0, "util": 0.0, "used": 0.0, "total": 143771.0,
	"eccCV": int64(0), "eccUV": int64(0), "eccCA": int64(0), "eccUA": int64(0),
	"sbe": nil, "dbe": nil, "retire": nil, "rc": int64(0), "ru": int64(0), "rp": false, "rf": false,
	"reasons": uint64(0x1), "names": "Idle",
}

func TestGenuineTelemetryRows(t *testing.T) {
	load := project(t, sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-telemetry-csv-bf16-gemm-load.txt"))
	idle := project(t, sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-telemetry-csv-idle.txt"))
	if len(load) != 1 || len(idle) != 1 {
		t.Fatalf("rows: %d load, %d idle", len(load), len(idle))
	}
	// Under the bf16 load: 691 W of 700 at the power cap, SM at 1,530 MHz.
	expect(t, "load", view(mustRow(t, load[0])), map[string]any{
		"index": 0, "bus": "00000000:00:06.0", "temp": 64.0, "memtemp": 52.0, "power": 691.09,
		"limit": 700.0, "sm": 1530.0, "mem": 3201.0, "maxsm": 1980.0, "util": 100.0, "used": 1139.0,
		"total": 143771.0, "eccUV": int64(0), "rc": int64(0), "ru": int64(0), "rp": false, "rf": false,
		"sbe": nil, "dbe": nil, "retire": nil, "reasons": uint64(0x4), "names": "SW Power Cap",
	})
	expect(t, "idle", view(mustRow(t, idle[0])), h200Idle)
}

// The nounits capture is the sampler's own format, read as it comes.
func TestGenuineNounitsRow(t *testing.T) {
	rows := strings.Split(strings.TrimSpace(sample(t, "nvidia-smi",
		"h200-580.159.04-query-gpu-telemetry-csv-nounits-idle.txt")), "\n")
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	want := map[string]any{}
	for k, v := range h200Idle {
		want[k] = v
	}
	want["power"] = 82.23
	expect(t, "nounits", view(mustRow(t, rows[0])), want)
}

// The legacy names capture holds the reasons only: its bitmask and words
// agree, and a row without a mask is read from the words.
func TestGenuineLegacyReasonRow(t *testing.T) {
	rows := project(t, sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-legacy-throttle-names-csv-idle.txt"))
	g := mustRow(t, rows[0])
	expect(t, "legacy", view(g), map[string]any{"index": 0, "reasons": uint64(1), "names": "Idle",
		"power": nil, "sm": nil, "eccUV": nil})
	noMask := strings.Replace(rows[0], "0x0000000000000001", "[N/A]", 1)
	expect(t, "legacy words", view(mustRow(t, noMask)), map[string]any{"reasons": uint64(1)})
}

// The every-field captures, projected onto Fields: the same GPU, the mask
// agrees with the per-reason words of the same row.
func TestGenuineEveryFieldRows(t *testing.T) {
	for name, want := range map[string]map[string]any{
		"h200-580.159.04-query-gpu-every-field-csv-idle.txt": {"power": 82.24, "sm": 345.0,
			"reasons": uint64(1), "util": 0.0, "eccUV": int64(0), "rp": false},
		"h200-580.159.04-query-gpu-every-field-csv-bf16-gemm-load.txt": {"power": 693.5, "sm": 1470.0,
			"reasons": uint64(4), "util": 100.0, "limit": 700.0, "names": "SW Power Cap"},
	} {
		rows := project(t, sample(t, "nvidia-smi", name))
		g := mustRow(t, rows[0])
		expect(t, name, view(g), want)
		cells := strings.Split(rows[0], ", ")
		cells[col["clocks_event_reasons.active"]] = "[N/A]"
		w := mustRow(t, strings.Join(cells, ", "))
		if w.Reasons == nil || *w.Reasons != *g.Reasons {
			t.Errorf("%s: the per-reason words say %v, the mask %#x", name, view(w)["reasons"], *g.Reasons)
		}
	}
}

func TestRowCellForms(t *testing.T) {
	cells := strings.Split(strings.TrimSpace(sample(t, "nvidia-smi",
		"h200-580.159.04-query-gpu-telemetry-csv-nounits-idle.txt")), ", ")
	set := func(f, v string) string {
		c := append([]string(nil), cells...)
		c[col[f]] = v
		return strings.Join(c, ", ")
	}
	for _, tc := range []struct {
		row  string
		key  string
		want any
	}{
		{set("power.draw", "[Not Supported]"), "power", nil},
		{set("power.draw", "N/A"), "power", nil},
		{set("power.draw", "NaN"), "power", nil},
		{set("power.draw", "691.09 W"), "power", 691.09},
		{set("remapped_rows.pending", "Yes"), "rp", true},
		{set("retired_pages.pending", "Yes"), "retire", true},
		{set("remapped_rows.failure", "[N/A]"), "rf", nil},
		{set("clocks_event_reasons.active", "0x0000000000000048"), "names", "HW Slowdown,HW Thermal Slowdown"},
		{set("ecc.errors.uncorrected.volatile.total", "-1"), "eccUV", nil},
		{set("ecc.errors.uncorrected.volatile.total", "7"), "eccUV", int64(7)},
	} {
		if got := view(mustRow(t, tc.row))[tc.key]; got != tc.want {
			t.Errorf("%s = %v, want %v", tc.key, got, tc.want)
		}
	}
	for _, bad := range []string{"", strings.Join(cells[:10], ", "), strings.Join(cells, ", ") + ", 1",
		set("index", "x"), set("index", "-1")} {
		if _, err := ParseGPURow(bad, time.Time{}); err == nil {
			t.Errorf("row %.60q parsed", bad)
		}
	}
}
