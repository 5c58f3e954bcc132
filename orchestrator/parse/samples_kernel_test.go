package parse

import (
	"sort"
	"testing"
)

// kernelSamples: file -> what the kernel log reader must find: every Xid
// and SXid line with its device and code, every GPU fallen off the bus,
// whatever the timestamp form.
var kernelSamples = map[string]sampleCheck{
	"kernel/SOURCES.md": {parser: pNone},

	"kernel/gpud-dmesg-ctime-xid119-gsp-rpc-timeout-xe9680.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "first", k.Events[0].Device+" "+k.Events[0].Kind, "0000:9b:00 xid")
		eq(t, "code", k.Events[0].Code, 119)
		eq(t, "only Xid 119", keys(k.Counts), []string{"xid 119"})
		eq(t, "severity", XidSeverity(119), "fail")
	}},
	"kernel/gpud-dmesg-decode-iso-xid13-43-sm-warp-exception-excerpt.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "codes", keys(k.Counts), []string{"xid 13", "xid 43"})
		eq(t, "device", k.Events[0].Device, "0000:38:00")
		eq(t, "13 and 43 are the application's", XidSeverity(13)+" "+XidSeverity(43), "warn warn")
	}},
	"kernel/gpud-dmesg-iso-xid48-63-94-dbe-rowremap-peermem.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "codes", keys(k.Counts), []string{"xid 48", "xid 63", "xid 94"})
		eq(t, "Xid 48 once", k.Counts["xid 48"], 1)
		eq(t, "Xid 94 on every channel", k.Counts["xid 94"], 9)
		eq(t, "device", k.Events[0].Device, "0000:19:00")
	}},
	"kernel/nvsentinel155-dmesg-fallen-off-bus-multiline-no-xid-570.158.01.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "counts", k.Counts, map[string]int{"off-bus": 1})
		eq(t, "the GPU named two lines up", k.Events[0].Device, "0000:b3:00.0")
	}},
	"kernel/nvtrust124-dmesg-nvswitch-probe-sxid22013-nonfatal-h100-tdx-excerpt.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "codes", keys(k.Counts), []string{"sxid 22013"})
		eq(t, "device", k.Events[0].Device, "0000:02:00.0")
	}},
	"kernel/ogkm1150-journal-kernel-xid45-caused-by-previous-xid149-145-excerpt.txt": {parser: pKernel, check: func(t *testing.T, s string) {
		k := ok(KernelMessages(s)).must(t)
		eq(t, "codes", keys(k.Counts), []string{"xid 45"})
		eq(t, "four GPUs", len(devices(k)), 4)
	}},
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func devices(k KernelLog) map[string]bool {
	d := map[string]bool{}
	for _, e := range k.Events {
		d[e.Device] = true
	}
	return d
}

// TestQHealthOfTheSamples: the health -q reports, as every genuine -q
// sample says it.
func TestQHealthOfTheSamples(t *testing.T) {
	health := func(rel string) []GPUHealth {
		return QHealth(ok(NvidiaSmiQ(readSample(t, "nvidia-smi/"+rel))).must(t))
	}
	hw := health("gpud-q-8xH100-535.161.08-hw-slowdown-power-brake-active.txt")
	eq(t, "GPUs", len(hw), 8)
	for _, g := range hw {
		eq(t, g.BusID+" throttle", g.Throttle, []string{"HW Slowdown", "HW Power Brake Slowdown"})
		eq(t, g.BusID+" volatile uncorrectable", *g.VolatileUncorrectable, int64(0))
		eq(t, g.BusID+" remap", g.RemapPending || g.RemapFailed, false)
	}
	capped := 0
	for _, g := range health("gpud-q-8xRTX4090-535.154.05-sw-power-cap-active-2gpus.txt") {
		eq(t, g.BusID+" throttle", len(g.Throttle), 0)
		if g.PowerCap {
			capped++
		}
	}
	eq(t, "SW power cap on", capped, 2)
	for _, g := range health("azurehpc-q-d-page-retirement-8gpu-535.86.10-zero.txt") {
		eq(t, g.BusID+" retired DBE", *g.RetiredDoubleBit, int64(0))
		eq(t, g.BusID+" pending", g.RetirePending, false)
	}
	idle := health("mangohud636-q-d-performance-495.44-1gpu-idle-active.txt")
	eq(t, "idle is no fault", len(idle[0].Throttle), 0)
	// Captured with one GPU under load: 00000000:75:00.0 in HW power brake
	// and SW thermal slowdown, at its SW power cap.
	for _, g := range health("gpud-q-8xH100-535.183.01-cuda12.2.txt") {
		want := []string(nil)
		if g.BusID == "00000000:75:00.0" {
			want = []string{"HW Power Brake Slowdown", "SW Thermal Slowdown"}
		}
		eq(t, g.BusID+" throttle", g.Throttle, want)
		eq(t, g.BusID+" power cap", g.PowerCap, want != nil)
	}
	// The A10 capture: four rows remapped for uncorrectable errors, one
	// remap pending (the GPU needs a reset).
	a10 := health("gpud-q-1xA10-535.129.03.txt")[0]
	eq(t, "A10 remapped uncorrectable", *a10.RemapUncorrect, int64(4))
	eq(t, "A10 remap pending", a10.RemapPending, true)
	for _, rel := range []string{"exporter-q-h100-590.48.01-cuda13.1-idle.txt", "q-i0-H800-driver525-cuda12.0.txt"} {
		for _, g := range health(rel) {
			if len(g.Throttle) > 0 || g.PowerCap || g.RetirePending || g.RemapPending || g.RemapFailed ||
				g.VolatileUncorrectable != nil && *g.VolatileUncorrectable > 0 {
				t.Errorf("%s %s: a healthy capture judged unhealthy: %+v", rel, g.BusID, g)
			}
		}
	}
}

// TestKernelLogCountsNeighbourOverflows: the kernel's own overflow line
// (net/core/neighbour.c, as dmesg printed it here with 1,100 entries in a
// table of 1,024) is counted beside the GPUs' events, not as one of them.
func TestKernelLogCountsNeighbourOverflows(t *testing.T) {
	log := "[ 2181.906223] neighbour: arp_cache: neighbor table overflow!\n" +
		"[ 2190.100000] NVRM: Xid (PCI:0000:19:00): 48, pid=1, DBE (0x1,0x2).\n" +
		"[ 2206.324456] neighbour: arp_cache: neighbor table overflow!\n"
	k := ParseKernelLog(log)
	eq(t, "overflows", k.NeighOverflows, 2)
	eq(t, "last", k.NeighOverflow, "[ 2206.324456] neighbour: arp_cache: neighbor table overflow!")
	eq(t, "GPU events", k.Counts, map[string]int{"xid 48": 1})
	eq(t, "none", ParseKernelLog("[ 1.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n").NeighOverflows, 0)
}
