package phases

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gpuaccept/orchestrator/telemetry"
)

// BenchmarkTelemetryFleet is the coordinator's side of the window's
// telemetry at fleet size: a sink per node (as the phase opens them), each
// fed what one node's sampler sends every 5 s — eight GPU rows of a
// genuine H200's query and eight IB ports' counters — for 10 simulated
// minutes, as fast as the sinks take it. It reports the coordinator's CPU
// per node-hour of telemetry, the share of one core that sampling every
// node every 5 s costs, the heap the open sinks hold per node, and the
// bundle's bytes per node-hour. (make bench; figures in the README.)
func BenchmarkTelemetryFleet(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for range b.N {
				benchTelemetryFleet(b, nodes, 10*time.Minute, false)
			}
		})
	}
	// With the idle guard on, each GPU row is also parsed as it arrives
	// (startTelemetry's onGPU), for its utilisation.
	b.Run("nodes=1000/idle-guard", func(b *testing.B) {
		for range b.N {
			benchTelemetryFleet(b, 1000, 10*time.Minute, true)
		}
	})
}

func benchTelemetryFleet(b *testing.B, nodes int, span time.Duration, guard bool) {
	const interval = 5 * time.Second
	rows, err := genuineIdleRows()
	if err != nil {
		b.Skipf("the genuine sample is not here: %v", err)
	}
	var tick strings.Builder
	for g := range 8 {
		tick.WriteString("gpu " + rows[g%len(rows)] + "\n")
	}
	for p := range 8 {
		fmt.Fprintf(&tick, "ib mlx5_%d:1 state=4: ACTIVE symbol_error=0 link_downed=0 link_error_recovery=0 "+
			"port_rcv_errors=0 port_xmit_discards=%d excessive_buffer_overrun_errors=0 local_link_integrity_errors=0\n", p, 12+p)
	}
	payload := []byte(tick.String())
	var heard atomic.Int64
	dir := b.TempDir()
	clock := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	sinks := make([]*telemetrySink, nodes)
	for i := range sinks {
		path := filepath.Join(dir, fmt.Sprintf("n%04d", i), telemetry.FileName)
		s, err := openTelemetrySink(path, interval, len(telemetry.Fields), 64<<20, now)
		if err != nil {
			b.Fatal(err)
		}
		sinks[i] = s
		if guard {
			s.onGPU = func(at time.Time, row string) {
				if g, err := telemetry.ParseGPURow(row, at); err == nil && g.UtilPct != nil {
					heard.Add(1)
				}
			}
		}
	}
	ticks := int(span / interval)
	for k := range ticks {
		clock = clock.Add(interval)
		for _, s := range sinks {
			s.Write(payload)
		}
		if k == ticks/2 {
			runtime.ReadMemStats(&m1) // every sink open and written to
		}
	}
	for _, s := range sinks {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	var bytes int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			bytes += fi.Size()
		}
		return nil
	})
	nodeHours := float64(nodes) * span.Hours()
	if guard && heard.Load() == 0 {
		b.Fatal("the idle guard's hook heard no utilisation")
	}
	b.ReportMetric(float64(cpu.Milliseconds())/nodeHours, "cpu-ms/node-hour")
	// Sampling every node every 5 s in real time: the CPU spent over the
	// wall time it would take.
	b.ReportMetric(cpu.Seconds()/span.Seconds(), "cores-at-5s")
	b.ReportMetric(float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/float64(nodes)/1024, "heap-KiB/node")
	b.ReportMetric(float64(bytes)/nodeHours/1024, "bundle-KiB/node-hour")
	b.ReportMetric(float64(len(payload))*float64(ticks)/span.Hours()/1024, "sent-KiB/node-hour")
}

// cpuTime is this process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
