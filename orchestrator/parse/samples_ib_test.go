package parse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// ibSamples: file -> what its parser must extract. The ib_write_bw captures
// belong to no parser here (perftest output); every parser must reject them.
var ibSamples = map[string]sampleCheck{
	"ib/SOURCES.md": {parser: pNone},
	"ib/deepops-ib_write_bw-roce-client-cpu-freq-warning-dedented.txt": {parser: pNone},
	"ib/sb-ib_write_bw-loopback-8M-server-client-interleaved.txt":      {parser: pNone},
	"ib/sb-ib_write_bw-loopback-all-sizes-interleaved.txt":             {parser: pNone},

	"ib/books-ibstat-2xConnectX3-mlx4-dualport.txt": {parser: pIBStat, check: func(t *testing.T, s string) {
		devs := ok(IBStat(s)).must(t)
		eq(t, "CAs", caSummary(devs), []string{"mlx4_0 MT4099 2.42.5000", "mlx4_1 MT4099 2.42.5000"})
		eq(t, "node GUIDs", []string{devs[0].NodeGUID, devs[1].NodeGUID}, []string{"0xec0d9a03000c8980", "0xf45214030033b850"})
		eq(t, "ports", portSummary(devs), []string{
			"mlx4_0/1 Active LinkUp 56 InfiniBand lid=10", "mlx4_0/2 Active LinkUp 56 InfiniBand lid=12",
			"mlx4_1/1 Active LinkUp 56 InfiniBand lid=1", "mlx4_1/2 Active LinkUp 56 InfiniBand lid=4",
		})
	}},
	"ib/gpud-ibstat-8xA100-mt4124-ibpanic-exit255.txt": {parser: pIBStat, wantErr: ErrToolFailed, check: func(t *testing.T, s string) {
		devs, err := IBStat(s)
		if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "stat of IB device 'mlx5_8' failed") {
			t.Fatalf("err = %v, want ErrToolFailed quoting the ibpanic line", err)
		}
		eq(t, "CAs before the panic", len(devs), 8)
		for i, d := range devs {
			eq(t, "CA", caSummary(devs[i:i+1]), []string{fmt.Sprintf("mlx5_%d MT4124 20.41.1000", i)})
			eq(t, "port", portSummary(devs[i:i+1]), []string{fmt.Sprintf("mlx5_%d/1 Active LinkUp 200 InfiniBand lid=%s", i, d.Ports[0].LID)})
		}
		eq(t, "mlx5_0 GUID/LID", []string{devs[0].NodeGUID, devs[0].Ports[0].LID}, []string{"0x00155dfffe3411eb", "13247"})
	}},
	"ib/gpud-ibstat-a100-node-9ca-8ib-1eth-all-active.txt": {parser: pIBStat, check: func(t *testing.T, s string) {
		devs := ok(IBStat(s)).must(t)
		eq(t, "CAs", len(devs), 9)
		eq(t, "mlx5_0", caSummary(devs[:1]), []string{"mlx5_0 MT4126 22.35.2302"})
		eq(t, "mlx5_0 port", portSummary(devs[:1]), []string{"mlx5_0/1 Active LinkUp 200 Ethernet lid=0"})
		for i, d := range devs[1:] {
			eq(t, d.CA, caSummary([]IBDevice{d}), []string{fmt.Sprintf("mlx5_%d MT4126 28.37.1014", i+1)})
			p := d.Ports[0]
			eq(t, d.CA+" port", []any{p.State, p.PhysicalState, p.RateGbps, p.LinkLayer}, []any{"Active", "LinkUp", 200.0, "InfiniBand"})
		}
		eq(t, "mlx5_1 LID", devs[1].Ports[0].LID, "1369")
	}},
	"ib/gpud-ibstat-h100-node-12ca-roce-ethernet-all-active.txt": {parser: pIBStat, check: func(t *testing.T, s string) {
		devs := ok(IBStat(s)).must(t)
		eq(t, "CA order as printed", caNames(devs), []string{"mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2", "mlx5_3",
			"mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"})
		slow := map[string]bool{"mlx5_1": true, "mlx5_2": true, "mlx5_7": true, "mlx5_8": true}
		for _, d := range devs {
			typ, fw, rate := "MT4129", "28.39.1002", 400.0
			if slow[d.CA] {
				typ, fw, rate = "MT4125", "22.39.1002", 100.0
			}
			eq(t, d.CA, []any{d.Type, d.Firmware, len(d.Ports)}, []any{typ, fw, 1})
			p := d.Ports[0]
			eq(t, d.CA+" port", []any{p.State, p.PhysicalState, p.RateGbps, p.LinkLayer, p.LID}, []any{"Active", "LinkUp", rate, "Ethernet", "0"})
		}
		eq(t, "mlx5_0 GUID", devs[0].NodeGUID, "0xa088c20300e3142a")
	}},
	"ib/gpud-ibstat-h100-node-some-ports-down.txt": {parser: pIBStat, check: func(t *testing.T, s string) {
		devs := ok(IBStat(s)).must(t)
		eq(t, "CAs", len(devs), 12)
		var down, eth, ib []string
		for _, d := range devs {
			p := d.Ports[0]
			switch {
			case p.State == "Down":
				down = append(down, fmt.Sprintf("%s %s %g %s", d.CA, p.PhysicalState, p.RateGbps, p.LinkLayer))
			case p.LinkLayer == "Ethernet":
				eth = append(eth, fmt.Sprintf("%s %s %g", d.CA, d.Type, p.RateGbps))
			default:
				ib = append(ib, fmt.Sprintf("%s %s %g %s", d.CA, d.Type, p.RateGbps, p.State))
			}
		}
		eq(t, "down ports", down, []string{"mlx5_2 Disabled 40 Ethernet", "mlx5_7 Disabled 40 Ethernet", "mlx5_8 Disabled 40 Ethernet"})
		eq(t, "active Ethernet", eth, []string{"mlx5_1 MT4125 100"})
		eq(t, "InfiniBand ports", len(ib), 8)
		for _, p := range ib {
			if !strings.HasSuffix(p, "MT4129 400 Active") {
				t.Errorf("InfiniBand port %q", p)
			}
		}
	}},

	"ib/books-ibv_devinfo-2xConnectX3-mlx4-dualport-one-down.txt": {parser: pIBV, check: func(t *testing.T, s string) {
		devs := ok(IBVDevinfo(s)).must(t)
		eq(t, "CAs", caSummary(devs), []string{"mlx4_1 MT4099 2.42.5000", "mlx4_0 MT4099 2.42.5000"})
		eq(t, "node GUIDs (ibstat form)", []string{devs[0].NodeGUID, devs[1].NodeGUID}, []string{"0x7cfe900300a595c0", "0xe41d2d0300e0c740"})
		// Without -v there is no speed or width, so no rate and no phys state.
		eq(t, "ports", portSummary(devs), []string{
			"mlx4_1/1 Active  0 InfiniBand lid=22", "mlx4_1/2 Down  0 InfiniBand lid=0",
			"mlx4_0/1 Active  0 InfiniBand lid=32", "mlx4_0/2 Down  0 InfiniBand lid=0",
		})
	}},
	"ib/books-ibv_devinfo-v-mlx4-port2-verbose.txt": {parser: pIBV, check: func(t *testing.T, s string) {
		devs := ok(IBVDevinfo(s)).must(t)
		eq(t, "CAs", caSummary(devs), []string{"mlx4_1 MT4099 2.42.5000"})
		eq(t, "node GUID", devs[0].NodeGUID, "0x7cfe900300a595c0")
		// -i 2: only port 2; 4X x 2.5 Gbps while polling for a peer.
		eq(t, "ports", portSummary(devs), []string{"mlx4_1/2 Down Polling 10 InfiniBand lid=0"})
	}},

	"ib/dgxspark-ib_write_bw-roce-run_infinitely-client1-gbits.txt":                {parser: pNone},
	"ib/treydock-perfquery-E-rcverr-details-lid1719-port1.txt":                     {parser: pNone},
	"ib/treydock-perfquery-x-edr-switch-lid1719-two-ports.txt":                     {parser: pNone},
	"ib/treydock-perfquery-x-edr-switch-lid2052-linkdowned1-xmitdiscards20046.txt": {parser: pNone},
}

func caNames(devs []IBDevice) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.CA)
	}
	return out
}

func caSummary(devs []IBDevice) []string {
	var out []string
	for _, d := range devs {
		out = append(out, fmt.Sprintf("%s %s %s", d.CA, d.Type, d.Firmware))
	}
	return out
}

func portSummary(devs []IBDevice) []string {
	var out []string
	for _, d := range devs {
		for _, p := range d.Ports {
			out = append(out, fmt.Sprintf("%s/%d %s %s %g %s lid=%s", d.CA, p.Port, p.State, p.PhysicalState, p.RateGbps, p.LinkLayer, p.LID))
		}
	}
	return out
}
