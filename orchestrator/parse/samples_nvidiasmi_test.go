package parse

import (
	"strings"
	"testing"
)

// nvidiaSmiSamples: file -> what its parser must extract.
var nvidiaSmiSamples = map[string]sampleCheck{
	"nvidia-smi/SOURCES.md": {parser: pNone},

	// -L
	"nvidia-smi/deepops-L-2xA100-MIG-head10.txt": {parser: pList, check: func(t *testing.T, s string) {
		gpus := ok(NvidiaSmiList(s)).must(t)
		checkListNames(t, gpus, "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB")
		eq(t, "GPU0 UUID", gpus[0].UUID, "GPU-8e100991-ce97-6694-b8eb-b8b1ff5053af")
		eq(t, "GPU1 UUID", gpus[1].UUID, "GPU-938c4705-98bf-1735-e98b-c2a5872a8022")
		for _, g := range gpus {
			eq(t, "MIG profiles", migProfiles(g), []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"})
			eq(t, "MIG indexes", migIndexes(g), []int{0, 1, 2, 3})
		}
		eq(t, "GPU1 MIG3 UUID", gpus[1].MIG[3].UUID, "MIG-91e26891-6f5b-5ff3-9c66-310e47d6b059")
	}},
	"nvidia-smi/exporter-L-h100-mig-590.48.01.txt": {parser: pList, check: func(t *testing.T, s string) {
		gpus := ok(NvidiaSmiList(s)).must(t)
		checkListNames(t, gpus, "NVIDIA H100 80GB HBM3")
		eq(t, "UUID", gpus[0].UUID, "GPU-00000000-0000-0000-0000-000000000000")
		eq(t, "MIG profiles", migProfiles(gpus[0]), []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"})
		eq(t, "MIG1 UUID", gpus[0].MIG[1].UUID, "MIG-00000001-0000-0000-0000-000000000001")
	}},
	"nvidia-smi/pkb-L-4xP100.txt": {parser: pList, check: func(t *testing.T, s string) {
		gpus := ok(NvidiaSmiList(s)).must(t)
		checkListNames(t, gpus, "Tesla P100-PCIE-16GB", "Tesla P100-PCIE-16GB", "Tesla P100-PCIE-16GB", "Tesla P100-PCIE-16GB")
		eq(t, "GPU3 UUID", gpus[3].UUID, "GPU-69c075e7-cc59-93a1-4eb5-3a35cdaa27ad")
		for _, g := range gpus {
			eq(t, "MIG", len(g.MIG), 0)
		}
	}},
	"nvidia-smi/pkb-L-heterogeneous-K80-P100.txt": {parser: pList, check: func(t *testing.T, s string) {
		gpus := ok(NvidiaSmiList(s)).must(t)
		checkListNames(t, gpus, "Tesla K80", "Tesla P100-PCIE-16GB")
		eq(t, "GPU0 UUID", gpus[0].UUID, "GPU-5c6dd8d9-b3bd-4e11-5d86-e33307f46ea5")
	}},

	// --query-gpu csv
	"nvidia-smi/exporter-2021-query-gpu-csv-rtx2080super-win-471.11.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, 115, 1)
		r := c.Rows[0]
		eq(t, "name", r["name"], "NVIDIA GeForce RTX 2080 SUPER")
		eq(t, "driver_version", r["driver_version"], "471.11")
		eq(t, "memory.total", r["memory.total"], "8192 MiB")
		eq(t, "power.limit", r["power.limit"], "250.00 W")
		eq(t, "fan.speed", r["fan.speed"], "38 %")
		eq(t, "serial", r["serial"], "[N/A]")
		eq(t, "driver_model.current", r["driver_model.current"], "WDDM")
		eq(t, "clocks_throttle_reasons.gpu_idle", r["clocks_throttle_reasons.gpu_idle"], "Active")
		eq(t, "mig.mode.current", r["mig.mode.current"], "[N/A]")
		eq(t, "last header field", c.Header[len(c.Header)-1], "mig.mode.pending")
	}},
	"nvidia-smi/exporter-query-gpu-csv-h100-590.48.01-idle.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, 212, 1)
		r := c.Rows[0]
		eq(t, "name", r["name"], "NVIDIA H100 80GB HBM3")
		eq(t, "driver_version", r["driver_version"], "590.48.01")
		eq(t, "pci.bus_id", r["pci.bus_id"], "00000000:00:09.0")
		eq(t, "memory.total", r["memory.total"], "81559 MiB")
		eq(t, "power.limit", r["power.limit"], "700.00 W")
		eq(t, "clocks.max.sm", r["clocks.max.sm"], "1980 MHz")
		eq(t, "display_mode", r["display_mode"], "[Requested functionality has been deprecated]")
		eq(t, "compute_cap", r["compute_cap"], "9.0")
		eq(t, "ecc.mode.current", r["ecc.mode.current"], "Enabled")
		eq(t, "last header field", c.Header[len(c.Header)-1], "hostname")
		// Same capture as the -q sample: the two views must agree.
		q := ok(NvidiaSmiQ(readSample(t, "nvidia-smi/exporter-q-h100-590.48.01-cuda13.1-idle.txt"))).must(t)
		eq(t, "bus id vs -q", r["pci.bus_id"], q.GPUs[0].BusID)
		eq(t, "vbios vs -q", r["vbios_version"], q.GPUs[0].VBIOS)
	}},
	"nvidia-smi/pkb-query-gpu-index-powerdraw-timestamp-csv.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		eq(t, "header", c.Header, []string{"index", "power.draw", "timestamp"})
		eq(t, "rows", len(c.Rows), 91)
		eq(t, "first power.draw", c.Rows[0]["power.draw"], "16.48 W")
		eq(t, "last power.draw", c.Rows[90]["power.draw"], "70.01 W")
		for i, r := range c.Rows {
			if r["index"] != "0" || r["timestamp"] != "2022/09/28 15:36:51.68" || !strings.HasSuffix(r["power.draw"], " W") {
				t.Errorf("row %d = %v", i, r)
			}
		}
	}},

	// topo -m
	"nvidia-smi/exporter-topo-m-1xH100-ansi-underline.txt": {parser: pTopo, check: func(t *testing.T, s string) {
		tp := ok(NvidiaSmiTopo(s)).must(t)
		eq(t, "devices", tp.Devices, []string{"GPU0"})
		eq(t, "links", tp.Links, map[string]map[string]string{"GPU0": {"GPU0": "X"}})
		eq(t, "cpu affinity", tp.CPUAffinity, map[string]string{"GPU0": "0-19"})
		eq(t, "numa affinity", tp.NUMAAffinity, map[string]string{"GPU0": "0"})
		eq(t, "NICs", len(tp.NICs()), 0)
		eq(t, "NIC names", tp.NICNames, map[string]string(nil))
		eq(t, "NVLinked", tp.NVLinked(), false)
	}},
	"nvidia-smi/topo-m-2xA100-pcie-mlx5-as-column-names-2021.txt": {parser: pTopo, check: func(t *testing.T, s string) {
		tp := ok(NvidiaSmiTopo(s)).must(t)
		eq(t, "devices", tp.Devices, []string{"GPU0", "GPU1", "mlx5_0", "mlx5_1"})
		eq(t, "NICs", tp.NICs(), []string{"mlx5_0", "mlx5_1"})
		eq(t, "GPU0-GPU1", tp.Links["GPU0"]["GPU1"], "SYS")
		eq(t, "GPU0-mlx5_0", tp.Links["GPU0"]["mlx5_0"], "NODE")
		eq(t, "NVLinked", tp.NVLinked(), false)
		eq(t, "cpu affinity", tp.CPUAffinity, map[string]string{"GPU0": "0-63", "GPU1": "64-127"})
		eq(t, "numa affinity", tp.NUMAAffinity, map[string]string{"GPU0": "0", "GPU1": "1"})
		eq(t, "NIC names", tp.NICNames, map[string]string(nil))
		checkTopoSymmetric(t, tp)
	}},
	"nvidia-smi/topo-m-4xV100-NV3-mlx5-as-column-names-2021.txt": {parser: pTopo, check: func(t *testing.T, s string) {
		tp := ok(NvidiaSmiTopo(s)).must(t)
		eq(t, "GPUs", tp.GPUs(), []string{"GPU0", "GPU1", "GPU2", "GPU3"})
		eq(t, "NICs", tp.NICs(), []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"})
		eq(t, "GPU0-GPU1", tp.Links["GPU0"]["GPU1"], "NV3")
		eq(t, "GPU2-GPU3", tp.Links["GPU2"]["GPU3"], "NV3")
		eq(t, "GPU0-GPU2", tp.Links["GPU0"]["GPU2"], "SYS")
		eq(t, "mlx5_0-mlx5_1", tp.Links["mlx5_0"]["mlx5_1"], "PIX")
		eq(t, "NVLinked", tp.NVLinked(), true)
		eq(t, "numa affinity", tp.NUMAAffinity, map[string]string{"GPU0": "0", "GPU1": "0", "GPU2": "8", "GPU3": "8"})
		eq(t, "cpu affinity GPU3", tp.CPUAffinity["GPU3"], "64-127")
		checkTopoSymmetric(t, tp)
	}},
	"nvidia-smi/topo-m-8xA800-NV8-4xmlx5-CRLF.txt": {parser: pTopo, check: func(t *testing.T, s string) {
		tp := ok(NvidiaSmiTopo(s)).must(t)
		eq(t, "GPUs", len(tp.GPUs()), 8)
		eq(t, "NICs", tp.NICs(), []string{"NIC0", "NIC1", "NIC2", "NIC3"})
		checkAllGPUPairs(t, tp, "NV8")
		eq(t, "GPU1-NIC0", tp.Links["GPU1"]["NIC0"], "PIX")
		eq(t, "GPU7-NIC3", tp.Links["GPU7"]["NIC3"], "PIX")
		eq(t, "NIC names", tp.NICNames, map[string]string{"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_2", "NIC3": "mlx5_3"})
		eq(t, "cpu affinity GPU0", tp.CPUAffinity["GPU0"], "0-31,64-95")
		eq(t, "cpu affinity GPU7", tp.CPUAffinity["GPU7"], "32-63,96-127")
		eq(t, "numa affinity GPU3/GPU4", []string{tp.NUMAAffinity["GPU3"], tp.NUMAAffinity["GPU4"]}, []string{"0", "1"})
		checkTopoSymmetric(t, tp)
	}},
	"nvidia-smi/topo-m-8xH100-NV18-6xmlx5-tabs-empty-cpu-affinity.txt": {parser: pTopo, check: func(t *testing.T, s string) {
		tp := ok(NvidiaSmiTopo(s)).must(t)
		eq(t, "GPUs", len(tp.GPUs()), 8)
		eq(t, "NICs", tp.NICs(), []string{"NIC0", "NIC1", "NIC2", "NIC3", "NIC4", "NIC5"})
		checkAllGPUPairs(t, tp, "NV18")
		eq(t, "GPU0 NICs", []string{tp.Links["GPU0"]["NIC0"], tp.Links["GPU0"]["NIC1"], tp.Links["GPU0"]["NIC2"]}, []string{"PIX", "PIX", "NODE"})
		eq(t, "cpu affinity", tp.CPUAffinity, map[string]string{
			"GPU0": "", "GPU1": "", "GPU2": "", "GPU3": "", "GPU4": "1", "GPU5": "1", "GPU6": "1", "GPU7": "1"})
		eq(t, "numa affinity", tp.NUMAAffinity, map[string]string{
			"GPU0": "0", "GPU1": "0", "GPU2": "0", "GPU3": "0", "GPU4": "1", "GPU5": "1", "GPU6": "1", "GPU7": "1"})
		eq(t, "NIC5 name", tp.NICNames["NIC5"], "mlx5_5")
		eq(t, "NIC names", len(tp.NICNames), 6)
		checkTopoSymmetric(t, tp)
	}},

	// -q
	"nvidia-smi/exporter-q-h100-590.48.01-cuda13.1-idle.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "590.48.01", "13.1", 1, 1)
		g := q.GPUs[0]
		eq(t, "gpu", withoutFields(g), QueryGPU{
			BusID: "00000000:00:09.0", ProductName: "NVIDIA H100 80GB HBM3", ProductBrand: "NVIDIA", Architecture: "Hopper",
			Serial: "0000000000000", UUID: "GPU-00000000-0000-0000-0000-000000000000", VBIOS: "96.00.A5.00.01",
			MemoryTotalMiB: 81559, PCIeGen: "5", PCIeWidth: "16x", PowerLimitW: 700, ECCMode: "Enabled", MIGMode: "Disabled", Persistence: "Enabled",
		})
		eq(t, "Fabric.State", g.Fields["Fabric.State"], "Completed")
		eq(t, "nested under a valued key", g.Fields["Clocks Event Reasons.HW Thermal Slowdown"], "Not Active")
		eq(t, "section name with trailing space", g.Fields["GPU Memory Power Readings.Average Power Draw"], "43.19 W")
		eq(t, "value with spaces", g.Fields["PCI.Atomic Caps Outbound"], "FETCHADD_32 FETCHADD_64 SWAP_32 SWAP_64 CAS_32 CAS_64")
		eq(t, "deprecated value kept in Fields", g.Fields["Display Mode"], "Requested functionality has been deprecated")
		eq(t, "module power limit (N/A) in Fields", g.Fields["Module Power Readings.Current Power Limit"], "N/A")
	}},
	"nvidia-smi/gpud-q-1xA10-535.129.03.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "535.129.03", "12.2", 1, 1)
		eq(t, "gpu", withoutFields(q.GPUs[0]), QueryGPU{
			BusID: "00000000:07:00.0", ProductName: "NVIDIA A10", ProductBrand: "NVIDIA", Architecture: "Ampere",
			Serial: "1324521052681", UUID: "GPU-73d12ef7-f589-f867-4259-c7090ab44736", VBIOS: "94.02.5C.00.04",
			MemoryTotalMiB: 23028, PCIeGen: "4", PCIeWidth: "16x", PowerLimitW: 150, ECCMode: "Enabled", MIGMode: "", Persistence: "Enabled",
		})
		eq(t, "MIG Mode.Current (A10 has none)", q.GPUs[0].Fields["MIG Mode.Current"], "N/A")
	}},
	"nvidia-smi/gpud-q-8xH100-535.183.01-cuda12.2.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "535.183.01", "12.2", 8, 8)
		eq(t, "timestamp", q.Timestamp, "Fri Jun 21 02:03:08 2024")
		var buses []string
		uuids := map[string]bool{}
		for _, g := range q.GPUs {
			buses = append(buses, g.BusID)
			uuids[g.UUID] = true
			if g.ProductName != "NVIDIA H100 80GB HBM3" || g.MemoryTotalMiB != 81559 || g.PowerLimitW != 700 ||
				g.ECCMode != "Enabled" || g.MIGMode != "Disabled" || g.PCIeGen != "5" || g.PCIeWidth != "16x" {
				t.Errorf("GPU %s = %+v", g.BusID, withoutFields(g))
			}
		}
		eq(t, "bus ids", buses, []string{"00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0", "00000000:86:00.0",
			"00000000:97:00.0", "00000000:A8:00.0", "00000000:B9:00.0", "00000000:CA:00.0"})
		eq(t, "distinct UUIDs", len(uuids), 8)
		eq(t, "GPU0 serial", q.GPUs[0].Serial, "1655022005478")
		eq(t, "GPU7 UUID", q.GPUs[7].UUID, "GPU-7e78e6c8-c71c-66c7-9ded-f8836cecab32")
		// The "idle" capture has a python process on GPU 00000000:75:00.0.
		eq(t, "GPU2 process", []string{q.GPUs[2].Fields["Processes.Process ID"], q.GPUs[2].Fields["Processes.Name"], q.GPUs[2].Fields["Processes.Used GPU Memory"]},
			[]string{"1002127", "/usr/bin/python", "9212 MiB"})
		eq(t, "GPU0 processes", q.GPUs[0].Fields["Processes"], "None")
	}},
	"nvidia-smi/q-i0-H800-driver525-cuda12.0.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "525.105.17", "12.0", 8, 1) // -i 0: one section of eight GPUs
		eq(t, "gpu", withoutFields(q.GPUs[0]), QueryGPU{
			BusID: "00000000:18:00.0", ProductName: "NVIDIA H800", ProductBrand: "NVIDIA", Architecture: "Hopper",
			Serial: "1651323018291", UUID: "GPU-34bf77d1-c686-6821-79a8-32d326c5039c", VBIOS: "96.00.51.00.0E",
			MemoryTotalMiB: 81559, PCIeGen: "5", PCIeWidth: "16x", PowerLimitW: 700, ECCMode: "Disabled", MIGMode: "Disabled", Persistence: "Enabled",
		})
		eq(t, "old spelling kept in Fields", q.GPUs[0].Fields["Ecc Mode.Current"], "Disabled")
		// The dcgmi discovery sample comes from the same article and node.
		devs := ok(DCGMDiscovery(readSample(t, "dcgmi/discovery-l-8x-h800.txt"))).must(t)
		eq(t, "UUID vs dcgmi discovery GPU 0", q.GPUs[0].UUID, devs[0].UUID)
		eq(t, "bus id vs dcgmi discovery GPU 0", q.GPUs[0].BusID, devs[0].BusID)
	}},

	// -q (and -q -d SECTION) of nodes whose health is in question: the
	// identity is read as from any -q; the health fields stay in Fields.
	"nvidia-smi/gpud-q-8xH100-535.161.08-hw-slowdown-power-brake-active.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "535.161.08", "12.2", 8, 8)
		g := q.GPUs[0]
		eq(t, "product", g.ProductName, "NVIDIA H100 80GB HBM3")
		eq(t, "serial", g.Serial, "1650124031592")
		eq(t, "vbios", g.VBIOS, "96.00.74.00.0D")
		for _, g := range q.GPUs {
			eq(t, g.BusID+" HW Slowdown", g.Fields["Clocks Event Reasons.HW Slowdown"], "Active")
			eq(t, g.BusID+" HW Power Brake Slowdown", g.Fields["Clocks Event Reasons.HW Power Brake Slowdown"], "Active")
			eq(t, g.BusID+" remapped rows pending", g.Fields["Remapped Rows.Pending"], "No")
		}
	}},
	"nvidia-smi/gpud-q-8xRTX4090-535.154.05-sw-power-cap-active-2gpus.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "535.154.05", "12.2", 8, 8)
		eq(t, "product", q.GPUs[0].ProductName, "NVIDIA GeForce RTX 4090")
		eq(t, "no serial (N/A)", q.GPUs[0].Serial, "")
		capped := 0
		for _, g := range q.GPUs {
			if g.Fields["Clocks Event Reasons.SW Power Cap"] == "Active" {
				capped++
			}
		}
		eq(t, "GPUs at their software power cap", capped, 2)
	}},
	"nvidia-smi/mangohud636-q-d-performance-495.44-1gpu-idle-active.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "495.44", "11.5", 1, 1)
		g := q.GPUs[0]
		eq(t, "bus id", g.BusID, "00000000:0E:00.0")
		eq(t, "older name of the section", g.Fields["Clocks Throttle Reasons.Idle"], "Active")
		eq(t, "HW Slowdown", g.Fields["Clocks Throttle Reasons.HW Slowdown"], "Not Active")
		eq(t, "nested under HW Slowdown", g.Fields["Clocks Throttle Reasons.HW Power Brake Slowdown"], "Not Active")
	}},
	"nvidia-smi/azurehpc-q-d-page-retirement-8gpu-535.86.10-zero.txt": {parser: pQ, check: func(t *testing.T, s string) {
		q := ok(NvidiaSmiQ(s)).must(t)
		checkQTop(t, q, "535.86.10", "12.2", 8, 8)
		eq(t, "GPU7 bus id", q.GPUs[7].BusID, "00000008:00:00.0")
		for _, g := range q.GPUs {
			eq(t, g.BusID+" double-bit retired pages", g.Fields["Retired Pages.Double Bit ECC"], "0")
			eq(t, g.BusID+" pending blacklist", g.Fields["Retired Pages.Pending Page Blacklist"], "No")
		}
	}},
	// `nvidia-smi -q | grep -A8`: a section without the -q header is not
	// a -q report.
	"nvidia-smi/kubeflow68-q-grep-A8-clocks-throttle-reasons-2018-narrow-align.txt": {parser: pQ, wantErr: ErrNotRecognized},
	// dmon time series under load: read by no parser yet (the load test's
	// telemetry is to come).
	"nvidia-smi/exporter-dmon-c5-h200-590.48.01-gpuburn-load.txt":       {parser: pNone},
	"nvidia-smi/exporter-dmon-c5-l40s-595.80-nvenc-load-mtemp-dash.txt": {parser: pNone},
	"nvidia-smi/exporter-query-gpu-csv-h200-590.48.01-gpuburn-load.txt": {parser: pCSV, check: func(t *testing.T, s string) {
		c := ok(NvidiaSmiQueryCSV(s)).must(t)
		checkCSVShape(t, c, len(c.Header), 1)
		r := c.Rows[0]
		eq(t, "name", r["name"], "NVIDIA H200")
		eq(t, "memory.total", r["memory.total"], "143771 MiB")
		eq(t, "utilization.gpu under load", r["utilization.gpu"], "100 %")
		eq(t, "hw slowdown", r["clocks_event_reasons.hw_slowdown"], "Not Active")
		eq(t, "remapped rows pending", r["remapped_rows.pending"], "No")
	}},
}

func checkListNames(t *testing.T, gpus []GPU, names ...string) {
	t.Helper()
	if len(gpus) != len(names) {
		t.Fatalf("%d GPUs, want %d: %+v", len(gpus), len(names), gpus)
	}
	for i, g := range gpus {
		eq(t, "index", g.Index, i)
		eq(t, "name", g.Name, names[i])
		if !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %d UUID %q", i, g.UUID)
		}
	}
}

func migProfiles(g GPU) []string {
	var out []string
	for _, m := range g.MIG {
		out = append(out, m.Profile)
	}
	return out
}

func migIndexes(g GPU) []int {
	var out []int
	for _, m := range g.MIG {
		out = append(out, m.Index)
	}
	return out
}

// checkCSVShape checks the header has no unit suffixes and every row has a
// value for every header field.
func checkCSVShape(t *testing.T, c CSV, fields, rows int) {
	t.Helper()
	eq(t, "header fields", len(c.Header), fields)
	eq(t, "rows", len(c.Rows), rows)
	for _, h := range c.Header {
		if strings.ContainsAny(h, "[] ") {
			t.Errorf("header field %q still carries a unit", h)
		}
	}
	for i, r := range c.Rows {
		if len(r) != len(c.Header) {
			t.Errorf("row %d has %d values, header %d", i, len(r), len(c.Header))
		}
	}
}

func checkAllGPUPairs(t *testing.T, tp Topology, want string) {
	t.Helper()
	for _, a := range tp.GPUs() {
		for _, b := range tp.GPUs() {
			w := want
			if a == b {
				w = "X"
			}
			if got := tp.Links[a][b]; got != w {
				t.Errorf("%s-%s = %q, want %q", a, b, got, w)
			}
		}
	}
	if !tp.NVLinked() {
		t.Error("NVLinked() = false")
	}
}

// checkTopoSymmetric: nvidia-smi prints a symmetric matrix; a row/column
// mix-up in the parser would break that.
func checkTopoSymmetric(t *testing.T, tp Topology) {
	t.Helper()
	for _, a := range tp.Devices {
		for _, b := range tp.Devices {
			if tp.Links[a][b] != tp.Links[b][a] {
				t.Errorf("matrix not symmetric: %s-%s = %q, %s-%s = %q", a, b, tp.Links[a][b], b, a, tp.Links[b][a])
			}
		}
	}
}

func checkQTop(t *testing.T, q Query, driver, cuda string, attached, sections int) {
	t.Helper()
	eq(t, "driver", q.DriverVersion, driver)
	eq(t, "cuda", q.CUDAVersion, cuda)
	eq(t, "attached GPUs", q.AttachedGPUs, attached)
	if len(q.GPUs) != sections {
		t.Fatalf("%d GPU sections, want %d", len(q.GPUs), sections)
	}
}

func withoutFields(g QueryGPU) QueryGPU {
	g.Fields = nil
	return g
}

func readSample(t *testing.T, key string) string {
	t.Helper()
	for _, s := range loadSamples(t) {
		if s.key == key {
			return s.text
		}
	}
	t.Fatalf("sample %s not found", key)
	return ""
}
