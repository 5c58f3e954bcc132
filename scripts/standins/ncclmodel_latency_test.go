package standins

import (
	"strconv"
	"testing"

	"gpuaccept/orchestrator/parse"
)

// The small-message sweep the all-reduce phase runs for latency (-b 8 -e
// 64K -f 2) prints a row per size from 8 B to 64 KiB in the genuine
// format, each out-of-place time at the model's latency floor (30 µs
// across hosts, 5 µs inside one, ±1 %) plus the wire time, which at these
// sizes is a fraction of a microsecond; the degraded gpu-03 changes the
// bandwidth, not the floor.
func TestFabricSmallMessagesShowTheLatencyFloor(t *testing.T) {
	small := []string{"-b", "8", "-e", "64K", "-f", "2", "-n", "100", "-w", "10", "-c", "1", "-g", "1"}
	for _, c := range []struct {
		name, node string
		np         int
		hosts      string
		floor      float64 // µs
	}{
		{"4 hosts, gpu-03 degraded", "gpu-01", 32, "gpu-01:8,gpu-02:8,gpu-03:8,gpu-04:8", interLatency * 1e6},
		{"2 hosts", "gpu-02", 16, "gpu-01:8,gpu-02:8", interLatency * 1e6},
		{"inside gpu-03", "gpu-03", 0, "", intraLatency * 1e6},
	} {
		var r fabricRun
		if c.np > 0 {
			r = fabric(fabricEnv(c.node), MPIRun, mpirunLine(c.np, c.hosts, "all_reduce_perf", small...)...)
		} else {
			args := append([]string(nil), small...)
			args[len(args)-1] = strconv.Itoa(8)
			r = fabric(fabricEnv(c.node), "all_reduce_perf", args...)
		}
		n, err := parse.NCCLTests(r.stdout)
		if r.code != 0 || err != nil || !n.OK {
			t.Fatalf("%s: exit %d, parse %v\n%s%s", c.name, r.code, err, r.stdout, r.stderr)
		}
		if len(n.Rows) != 14 || n.Rows[0].Size != 8 || n.Rows[13].Size != 64<<10 {
			t.Fatalf("%s: %d rows from %d to %d B, want 14 from 8 B to 64 KiB", c.name, len(n.Rows), n.Rows[0].Size, n.Rows[len(n.Rows)-1].Size)
		}
		for _, row := range n.Rows {
			if us := row.OOP.TimeUS; us < 0.99*c.floor-0.01 || us > 1.01*c.floor+1 {
				t.Errorf("%s: %d B took %.2f µs, want the floor %.0f µs ±1 %% plus under 1 µs of wire", c.name, row.Size, us, c.floor)
			}
		}
	}
}

// A host's own latency floors (FabricEnv's INTER_US/INTRA_US): a
// collective across hosts waits for the slowest one's, a host alone
// for its own; the other hosts keep the defaults.
func TestFabricLatencyFloorPerHost(t *testing.T) {
	fab := "gpu-01=370/450/8/12/3,gpu-02=370/450/8/12/3,gpu-03=185/450/8/80/9,gpu-04=370/450"
	env := func(node string) []string {
		return []string{FabricEnv + "=" + fab, FabricNodeEnv + "=" + node}
	}
	small := []string{"-b", "8", "-e", "8", "-f", "2", "-n", "100", "-w", "10", "-c", "1", "-g", "1"}
	for _, c := range []struct {
		name, node string
		np         int
		hosts      string
		floor      float64
	}{
		{"gpu-01 and gpu-02: their own 12 µs", "gpu-01", 16, "gpu-01:8,gpu-02:8", 12},
		{"with gpu-03: its 80 µs", "gpu-01", 24, "gpu-01:8,gpu-02:8,gpu-03:8", 80},
		{"with gpu-04: the default 30 µs", "gpu-01", 16, "gpu-01:8,gpu-04:8", 30},
		{"inside gpu-03: its 9 µs", "gpu-03", 0, "", 9},
	} {
		var r fabricRun
		if c.np > 0 {
			r = fabric(env(c.node), MPIRun, mpirunLine(c.np, c.hosts, "all_reduce_perf", small...)...)
		} else {
			args := append([]string(nil), small...)
			args[len(args)-1] = "8"
			r = fabric(env(c.node), "all_reduce_perf", args...)
		}
		n, err := parse.NCCLTests(r.stdout)
		if r.code != 0 || err != nil || len(n.Rows) != 1 {
			t.Fatalf("%s: exit %d, parse %v\n%s%s", c.name, r.code, err, r.stdout, r.stderr)
		}
		if us := n.Rows[0].OOP.TimeUS; us < 0.99*c.floor-0.01 || us > 1.01*c.floor+0.01 {
			t.Errorf("%s: 8 B took %.2f µs, want %.0f µs ±1 %%", c.name, us, c.floor)
		}
	}
}
