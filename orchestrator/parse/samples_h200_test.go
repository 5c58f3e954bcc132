package parse

import (
	"strings"
	"testing"
)

// h200Samples: the genuine outputs of one NVIDIA H200 SXM (driver
// 580.159.04, CUDA 13.0, passed through to a VM; see SOURCES.md of each
// directory), file -> what its parser must extract. Every value below was
// read off the file itself.
var h200Samples = map[string]sampleCheck{
	"nvidia-smi/h200-580.159.04-L.txt": {parser: pList, check: func(t *testing.T, s string) {
		gpus := ok(NvidiaSmiList(s)).must(t)
		checkListNames(t, gpus, "NVIDIA H200")
		eq(t, "UUID", gpus[0].UUID, "GPU-996128e4-23c0-30cf-40ae-e43eb183ea85")
		eq(t, "MIG", len(gpus[0].MIG), 0)
	}},
	"nvidia-smi/h200-580.159.04-q-idle.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "580.159.04", "13.0", 1, 1)
		eq(t, "timestamp", q.Timestamp, "Fri Dec  4 15:18:14 2026")
		g := q.GPUs[0]
		eq(t, "gpu", withoutFields(g), h200Identity)
		checkH200Fields(t, g)
		eq(t, "idle", g.Fields["Clocks Event Reasons.Idle"], "Active")
		eq(t, "no process", g.Fields["Processes"], "None")
		eq(t, "FB used", g.Fields["FB Memory Usage.Used"], "0 MiB")
		h := QHealth(q)[0]
		eq(t, "throttle", h.Throttle, []string(nil))
		eq(t, "SW power cap", h.PowerCap, false)
		eq(t, "volatile uncorrectable (SRAM parity, SEC-DED, DRAM)", *h.VolatileUncorrectable, int64(0))
		eq(t, "retired pages N/A (Hopper remaps rows)", h.RetiredDoubleBit, (*int64)(nil))
		eq(t, "remapped uncorrectable", *h.RemapUncorrect, int64(0))
		eq(t, "remap pending/failed", h.RemapPending || h.RemapFailed, false)
		// The same GPU as the -L and identity csv captures.
		eq(t, "UUID vs -L", g.UUID, ok(NvidiaSmiList(readSample(t, "nvidia-smi/h200-580.159.04-L.txt"))).must(t)[0].UUID)
	}},
	"nvidia-smi/h200-580.159.04-q-bf16-gemm-load-sw-power-cap.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "580.159.04", "13.0", 1, 1)
		eq(t, "timestamp", q.Timestamp, "Fri Dec  4 15:18:42 2026")
		g := q.GPUs[0]
		eq(t, "gpu", withoutFields(g), h200Identity)
		checkH200Fields(t, g)
		eq(t, "not idle", g.Fields["Clocks Event Reasons.Idle"], "Not Active")
		eq(t, "SW Power Cap", g.Fields["Clocks Event Reasons.SW Power Cap"], "Active")
		eq(t, "SW Power Capping counter", g.Fields["Clocks Event Reasons Counters.SW Power Capping"], "10608788 us")
		eq(t, "utilization", g.Fields["Utilization.GPU"], "100 %")
		eq(t, "average power", g.Fields["GPU Power Readings.Average Power Draw"], "691.32 W")
		eq(t, "SM clock", g.Fields["Clocks.SM"], "1500 MHz")
		// The process's details are indented under "Process ID": they are
		// filed under the section, as every -q nests them.
		eq(t, "process", []string{g.Fields["Processes.Process ID"], g.Fields["Processes.Type"], g.Fields["Processes.Name"],
			g.Fields["Processes.Used GPU Memory"]}, []string{"1679", "C", "/opt/torch/.venv/bin/python3", "1130 MiB"})
		h := QHealth(q)[0]
		eq(t, "a power cap under load is no fault", h.Throttle, []string(nil))
		eq(t, "SW power cap", h.PowerCap, true)
	}},
	// -q -d CLOCK,PERFORMANCE,POWER,...: no identity section, so no name,
	// UUID or memory; what it has is read as from any -q.
	"nvidia-smi/h200-580.159.04-q-d-clock-perf-power-temp-ecc-retire-remap-idle.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "580.159.04", "13.0", 1, 1)
		g := q.GPUs[0]
		eq(t, "gpu", withoutFields(g), QueryGPU{BusID: "00000000:00:06.0", PowerLimitW: 700, ECCMode: "Enabled"})
		eq(t, "max power limit", g.Fields["GPU Power Readings.Max Power Limit"], "700.00 W")
		eq(t, "min power limit", g.Fields["GPU Power Readings.Min Power Limit"], "200.00 W")
		eq(t, "max SM clock", g.Fields["Max Clocks.SM"], "1980 MHz")
		eq(t, "memory temperature", g.Fields["Temperature.Memory Current Temp"], "39 C")
		eq(t, "bank remap histogram", g.Fields["Remapped Rows.Bank Remap Availability Histogram.Max"], "3072 bank(s)")
		eq(t, "no board part number in these sections", g.Fields["Board Part Number"], "")
	}},
	// nvidia-smi -q -x: XML, which no parser reads (the -q text is used).
	"nvidia-smi/h200-580.159.04-q-x-idle.xml.txt": {parser: pNone, check: func(t *testing.T, s string) {
		eq(t, "XML", strings.HasPrefix(s, "<?xml"), true)
	}},
	// The plain nvidia-smi table: read by no parser (-q says all of it).
	"nvidia-smi/h200-580.159.04-plain-idle.txt": {parser: pNone},
	// nvidia-smi --help-query-gpu: the field list, documentation only.
	"nvidia-smi/h200-580.159.04-help-query-gpu.txt": {parser: pNone},
	// dmon time series: read by no parser yet (as the other dmon samples).
	"nvidia-smi/h200-580.159.04-dmon-c5-idle.txt":           {parser: pNone},
	"nvidia-smi/h200-580.159.04-dmon-c5-bf16-gemm-load.txt": {parser: pNone},
	"nvidia-smi/h200-580.159.04-dmon-s-pucvmet-c5-idle.txt": {parser: pNone},
	"nvidia-smi/h200-580.159.04-topo-m-single-gpu-vm.txt": {parser: pTopo, check: func(t *testing.T, s string) {
		tp := ok(NvidiaSmiTopo(s)).must(t)
		eq(t, "devices", tp.Devices, []string{"GPU0"})
		eq(t, "links", tp.Links, map[string]map[string]string{"GPU0": {"GPU0": "X"}})
		eq(t, "cpu affinity", tp.CPUAffinity, map[string]string{"GPU0": "0-15"})
		eq(t, "numa affinity", tp.NUMAAffinity, map[string]string{"GPU0": "0"})
		eq(t, "NICs", len(tp.NICs()), 0)
		eq(t, "NIC names", len(tp.NICNames), 0)
		eq(t, "one GPU has no NVLink peer", tp.NVLinked(), false)
	}},
	// The preflight's own query.
	"nvidia-smi/h200-580.159.04-query-gpu-identity-csv.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, 8, 1)
		eq(t, "header", c.Header, []string{"index", "name", "uuid", "serial", "pci.bus_id", "memory.total", "driver_version", "vbios_version"})
		eq(t, "row", c.Rows[0], map[string]string{"index": "0", "name": "NVIDIA H200", "uuid": "GPU-996128e4-23c0-30cf-40ae-e43eb183ea85",
			"serial": "1653824128721", "pci.bus_id": "00000000:00:06.0", "memory.total": "143771 MiB",
			"driver_version": "580.159.04", "vbios_version": "96.00.A5.00.1A"})
	}},
	"nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-idle.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, 47, 1)
		eq(t, "last header field", c.Header[46], "remapped_rows.failure")
		checkH200Telemetry(t, c.Rows[0], map[string]string{
			"timestamp": "2026/12/04 15:18:15.707", "temperature.gpu": "40", "temperature.memory": "39",
			"power.draw": "82.23 W", "power.draw.instant": "81.74 W", "clocks.current.sm": "345 MHz",
			"utilization.gpu": "0 %", "memory.used": "0 MiB", "clocks_event_reasons.active": "0x0000000000000001",
			"clocks_event_reasons.gpu_idle": "Active", "clocks_event_reasons.sw_power_cap": "Not Active",
		})
	}},
	"nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-bf16-gemm-load.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, 47, 1)
		checkH200Telemetry(t, c.Rows[0], map[string]string{
			"timestamp": "2026/12/04 15:18:42.571", "temperature.gpu": "64", "temperature.memory": "52",
			"power.draw": "691.09 W", "power.draw.instant": "717.22 W", "clocks.current.sm": "1530 MHz",
			"utilization.gpu": "100 %", "memory.used": "1139 MiB", "clocks_event_reasons.active": "0x0000000000000004",
			"clocks_event_reasons.gpu_idle": "Not Active", "clocks_event_reasons.sw_power_cap": "Active",
		})
	}},
	// --format=csv,noheader,nounits: without the header the cells have no
	// names, so it is not a query csv to the parser; the cells are the
	// telemetry query's, in its order, without units.
	"nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-nounits-idle.txt": {parser: pCSV, wantErr: ErrNotRecognized, check: func(t *testing.T, s string) {
		header := ok(NvidiaSmiQueryCSV(readSample(t, "nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-idle.txt"))).must(t).Header
		cells := splitCSV(s, len(header))
		if len(cells) != len(header) {
			t.Fatalf("%d cells, the telemetry query has %d fields", len(cells), len(header))
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		for k, want := range map[string]string{"timestamp": "2026/12/04 15:18:15.768", "name": "NVIDIA H200", "power.draw": "82.23",
			"power.max_limit": "700.00", "memory.total": "143771", "clocks.max.sm": "1980", "fan.speed": "[N/A]",
			"clocks_event_reasons.active": "0x0000000000000001", "remapped_rows.failure": "No"} {
			eq(t, k, row[k], want)
		}
	}},
	// Asked for by the older clocks_throttle_reasons.* names, which this
	// driver still accepts: the header answers with the new names.
	"nvidia-smi/h200-580.159.04-query-gpu-legacy-throttle-names-csv-idle.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, 8, 1)
		eq(t, "header", c.Header, []string{"index", "clocks_event_reasons.active", "clocks_event_reasons.gpu_idle",
			"clocks_event_reasons.sw_power_cap", "clocks_event_reasons.hw_slowdown", "clocks_event_reasons.hw_thermal_slowdown",
			"clocks_event_reasons.hw_power_brake_slowdown", "clocks_event_reasons.sw_thermal_slowdown"})
		eq(t, "row", c.Rows[0], map[string]string{"index": "0", "clocks_event_reasons.active": "0x0000000000000001",
			"clocks_event_reasons.gpu_idle": "Active", "clocks_event_reasons.sw_power_cap": "Not Active",
			"clocks_event_reasons.hw_slowdown": "Not Active", "clocks_event_reasons.hw_thermal_slowdown": "Not Active",
			"clocks_event_reasons.hw_power_brake_slowdown": "Not Active", "clocks_event_reasons.sw_thermal_slowdown": "Not Active"})
	}},
	"nvidia-smi/h200-580.159.04-query-gpu-every-field-csv-idle.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		r := checkH200EveryField(t, s)
		eq(t, "timestamp", r["timestamp"], "2026/12/04 15:18:15.883")
		eq(t, "power.draw", r["power.draw"], "82.24 W")
		eq(t, "clocks_event_reasons.gpu_idle", r["clocks_event_reasons.gpu_idle"], "Active")
		eq(t, "clocks_event_reasons.sw_power_cap", r["clocks_event_reasons.sw_power_cap"], "Not Active")
	}},
	"nvidia-smi/h200-580.159.04-query-gpu-every-field-csv-bf16-gemm-load.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		r := checkH200EveryField(t, s)
		eq(t, "timestamp", r["timestamp"], "2026/12/04 15:18:42.732")
		eq(t, "power.draw", r["power.draw"], "693.50 W")
		eq(t, "clocks.current.sm", r["clocks.current.sm"], "1470 MHz")
		eq(t, "clocks_event_reasons.active", r["clocks_event_reasons.active"], "0x0000000000000004")
		eq(t, "clocks_event_reasons.sw_power_cap", r["clocks_event_reasons.sw_power_cap"], "Active")
	}},
	// security.sh's --query-compute-apps (csv,noheader): read line by line
	// by the security phase, not by the query csv parser (no header).
	"nvidia-smi/h200-580.159.04-query-compute-apps-one-python.txt": {parser: pCSV, wantErr: ErrNotRecognized, check: func(t *testing.T, s string) {
		eq(t, "cells", splitCSV(strings.TrimSuffix(s, "\n"), 3), []string{"1679", "/opt/torch/.venv/bin/python3", "1130 MiB"})
	}},

	// dmesg | tail -n 200 of the VM: three NVRM lines and no Xid.
	"kernel/h200-580.159.04-dmesg-boot-vm-nvrm-no-xid.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "events", len(k.Events), 0)
		eq(t, "counts", len(k.Counts), 0)
		eq(t, "neighbour overflows", k.NeighOverflows, 0)
		eq(t, "NVRM lines there are", strings.Count(s, "NVRM: "), 3)
	}},
}

// h200Identity is the GPU as every full -q of the H200 gives it.
var h200Identity = QueryGPU{
	BusID: "00000000:00:06.0", ProductName: "NVIDIA H200", ProductBrand: "NVIDIA", Architecture: "Hopper",
	Serial: "1653824128721", UUID: "GPU-996128e4-23c0-30cf-40ae-e43eb183ea85", VBIOS: "96.00.A5.00.1A",
	MemoryTotalMiB: 143771, PCIeGen: "5", PCIeWidth: "16x", PowerLimitW: 700, ECCMode: "Enabled", MIGMode: "Disabled", Persistence: "Enabled",
}

// checkH200Fields: what tells this H200 from the other SKUs (board part
// number, power limits, PCI device) and that it is a VM's.
func checkH200Fields(t *testing.T, g QueryGPU) {
	t.Helper()
	for k, want := range map[string]string{
		"Board Part Number":                           "692-2G520-0282-000",
		"GPU Part Number":                             "2335-895-A1",
		"PCI.Device Id":                               "0x233510DE",
		"PCI.Sub System Id":                           "0x18BF10DE",
		"GPU Power Readings.Max Power Limit":          "700.00 W",
		"GPU Power Readings.Default Power Limit":      "700.00 W",
		"GPU Power Readings.Min Power Limit":          "200.00 W",
		"Module Power Readings.Max Power Limit":       "N/A",
		"Platform Info.Module Id":                     "2",
		"MultiGPU Board":                              "No",
		"Inforom Version.Image Version":               "G520.0282.02.02",
		"GPU Virtualization Mode.Virtualization Mode": "Pass-Through",
		"Fabric.State":                                "N/A",
		"FB Memory Usage.Reserved":                    "616 MiB",
		"Max Clocks.SM":                               "1980 MHz",
		"Remapped Rows.Pending":                       "No",
		"ECC Errors.Volatile.DRAM Uncorrectable":      "0",
	} {
		eq(t, k, g.Fields[k], want)
	}
}

// checkH200Telemetry checks the fields the two telemetry captures share
// and the ones given.
func checkH200Telemetry(t *testing.T, r map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range map[string]string{"index": "0", "name": "NVIDIA H200", "pci.bus_id": "00000000:00:06.0", "driver_version": "580.159.04",
		"pstate": "P0", "power.limit": "700.00 W", "enforced.power.limit": "700.00 W", "power.max_limit": "700.00 W",
		"clocks.max.sm": "1980 MHz", "clocks.max.memory": "3201 MHz", "memory.total": "143771 MiB", "fan.speed": "[N/A]",
		"clocks_event_reasons.supported": "0x00000000000001FF", "clocks_event_reasons.hw_slowdown": "Not Active",
		"ecc.mode.current": "Enabled", "ecc.errors.uncorrected.volatile.total": "0", "retired_pages.double_bit.count": "[N/A]",
		"remapped_rows.uncorrectable": "0", "remapped_rows.pending": "No", "remapped_rows.failure": "No"} {
		eq(t, k, r[k], v)
	}
	for k, v := range want {
		eq(t, k, r[k], v)
	}
}

// checkH200EveryField: --query-gpu= every field --help-query-gpu lists,
// aliases included. nvidia-smi heads an alias's column with the field's
// own name ("gpu_name" -> "name"), so 255 columns carry 214 distinct
// names; the row keeps one value per name, and the repeated columns hold
// the same value.
func checkH200EveryField(t *testing.T, s string) map[string]string {
	t.Helper()
	c := ok(NvidiaSmiQueryCSV(s)).must(t)
	eq(t, "header fields", len(c.Header), 255)
	eq(t, "rows", len(c.Rows), 1)
	r := c.Rows[0]
	eq(t, "distinct fields", len(r), 214)
	eq(t, "alias columns", c.Header[4:12], []string{"name", "name", "serial", "serial", "uuid", "uuid", "pci.bus_id", "pci.bus_id"})
	cells := splitCSV(strings.SplitN(strings.TrimSpace(s), "\n", 2)[1], 255)
	for i, h := range c.Header {
		if cells[i] != r[h] {
			t.Errorf("column %d (%s) = %q, the row keeps %q", i, h, cells[i], r[h])
		}
	}
	for k, v := range map[string]string{"name": "NVIDIA H200", "count": "1", "memory.total": "143771 MiB", "driver_version": "580.159.04",
		"vbios_version": "96.00.A5.00.1A", "inforom.img": "G520.0282.02.02", "pci.device_id": "0x233510DE", "pci.sub_device_id": "0x18BF10DE",
		"power.limit": "700.00 W", "power.default_limit": "700.00 W", "power.min_limit": "200.00 W", "power.max_limit": "700.00 W",
		"module.power.max_limit": "[N/A]", "platform.module_id": "2", "compute_cap": "9.0", "mig.mode.current": "Disabled",
		"fabric.state": "N/A", "display_mode": "[Requested functionality has been deprecated]", "hostname": "[N/A]"} {
		eq(t, k, r[k], v)
	}
	eq(t, "last header field", c.Header[len(c.Header)-1], "hostname")
	return r
}
