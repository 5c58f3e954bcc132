package telemetry

import (
	"strconv"
	"strings"
	"time"
)

// Fields are the --query-gpu fields the sampler asks for, in order: those
// of the genuine H200 capture (driver 580.159.04), every one listed by that
// driver's --help-query-gpu, so the row parser is tested on real rows.
// The legacy clocks_throttle_reasons.* names are not asked for: drivers
// from 535 on print the clocks_event_reasons.* names for both.
var Fields = []string{
	"timestamp", "index", "name", "pci.bus_id", "driver_version", "pstate",
	"temperature.gpu", "temperature.memory",
	"power.draw", "power.draw.average", "power.draw.instant", "power.limit", "enforced.power.limit",
	"power.max_limit",
	"clocks.current.graphics", "clocks.current.sm", "clocks.current.memory", "clocks.current.video",
	"clocks.max.sm", "clocks.max.memory",
	"utilization.gpu", "utilization.memory", "memory.used", "memory.total", "fan.speed",
	"clocks_event_reasons.supported", "clocks_event_reasons.active",
	"clocks_event_reasons.gpu_idle", "clocks_event_reasons.applications_clocks_setting",
	"clocks_event_reasons.sw_power_cap", "clocks_event_reasons.hw_slowdown",
	"clocks_event_reasons.hw_thermal_slowdown", "clocks_event_reasons.hw_power_brake_slowdown",
	"clocks_event_reasons.sw_thermal_slowdown", "clocks_event_reasons.sync_boost",
	"ecc.mode.current",
	"ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
	"ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
	"retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
	"remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending",
	"remapped_rows.failure",
}

// QueryArgs are nvidia-smi's arguments for one row per GPU every interval
// (at least a millisecond: -lms 0 would mean "once").
func QueryArgs(interval time.Duration) []string {
	ms := max(interval.Milliseconds(), 1)
	return []string{
		"--query-gpu=" + strings.Join(Fields, ","),
		"--format=csv,noheader,nounits",
		"-lms", strconv.FormatInt(ms, 10),
	}
}

// The clock event reasons as NVML numbers them (nvmlClocksEventReason*),
// the bits of clocks_event_reasons.active.
const (
	ReasonGPUIdle           uint64 = 0x1
	ReasonAppClocksSetting  uint64 = 0x2
	ReasonSWPowerCap        uint64 = 0x4
	ReasonHWSlowdown        uint64 = 0x8
	ReasonSyncBoost         uint64 = 0x10
	ReasonSWThermalSlowdown uint64 = 0x20
	ReasonHWThermalSlowdown uint64 = 0x40
	ReasonHWPowerBrake      uint64 = 0x80
	ReasonDisplayClock      uint64 = 0x100
)

// FaultReasons are the reasons that slow a GPU for a fault of the GPU or
// its node; SW Power Cap is the normal state of a GPU at its power limit.
const FaultReasons = ReasonHWSlowdown | ReasonSWThermalSlowdown | ReasonHWThermalSlowdown | ReasonHWPowerBrake

// reasonNames: the names nvidia-smi -q prints for each bit.
var reasonNames = []struct {
	bit  uint64
	name string
}{
	{ReasonGPUIdle, "Idle"},
	{ReasonAppClocksSetting, "Applications Clocks Setting"},
	{ReasonSWPowerCap, "SW Power Cap"},
	{ReasonHWSlowdown, "HW Slowdown"},
	{ReasonSyncBoost, "Sync Boost"},
	{ReasonSWThermalSlowdown, "SW Thermal Slowdown"},
	{ReasonHWThermalSlowdown, "HW Thermal Slowdown"},
	{ReasonHWPowerBrake, "HW Power Brake Slowdown"},
	{ReasonDisplayClock, "Display Clock Setting"},
}

// ReasonNames names the reasons set in mask, in NVML's order; a bit NVML
// does not define is named by its value.
func ReasonNames(mask uint64) []string {
	var out []string
	known := uint64(0)
	for _, r := range reasonNames {
		known |= r.bit
		if mask&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	if rest := mask &^ known; rest != 0 {
		out = append(out, "0x"+strconv.FormatUint(rest, 16))
	}
	return out
}

// The columns of a row that the parser reads (indexes into Fields).
var col = func() map[string]int {
	m := make(map[string]int, len(Fields))
	for i, f := range Fields {
		m[f] = i
	}
	return m
}()
