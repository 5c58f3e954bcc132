package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// benchServerEnv makes the test binary the benchmark's server: another
// process, so that the generator's CPU is all the benchmark counts.
const benchServerEnv = "GPUACCEPT_LOADGEN_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		benchServer()
		return
	}
	os.Exit(m.Run())
}

// benchServer serves the fake server on loopback until stdin closes.
func benchServer() {
	var ttft, delay time.Duration
	fmt.Sscanf(os.Getenv(benchServerEnv), "%d,%d", &ttft, &delay)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f := &fakeServer{ttft: ttft, tokenDelay: delay, noTruth: true}
	go func() { _ = http.Serve(l, f.mux()) }()
	fmt.Println("http://" + l.Addr().String())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// startBenchServer runs the server in a child process with every core.
func startBenchServer(b *testing.B, ttft, delay time.Duration) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", benchServerEnv, ttft, delay),
		fmt.Sprintf("GOMAXPROCS=%d", runtime.NumCPU()))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(url)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreams is how much one core drives: run it with GOMAXPROCS=1
// (make bench does). Each stream asks for 32 tokens, one every 20 ms
// after a 10 ms TTFT (50 tokens/s a stream, about a large model's decode
// rate); the server is another process. Figures per CPU-second of the
// generator: streams (at that token rate), requests and SSE events; and the
// TTFT and ITL the generator saw (truth: 10 and 20 ms), which say whether
// the server kept up.
func BenchmarkStreams(b *testing.B) {
	const ttft, delay, tokens = 10 * time.Millisecond, 20 * time.Millisecond, 32
	url := startBenchServer(b, ttft, delay)
	for _, n := range []int{64, 256, 512, 1024} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			for b.Loop() {
				cfg := Config{URL: url, Model: "m", Levels: []inventory.Level{{Concurrency: n}}, Duration: 3 * time.Second,
					Warmup: time.Second, Input: Lengths{Mean: 32}, Output: Lengths{Mean: tokens}, Seed: 1,
					RequestTimeout: 30 * time.Second}
				// The warm-up's CPU (connections opened) is left out as its
				// requests are: the level's CPU is measured from its end.
				var cpu0 time.Duration
				var t0 time.Time
				go func() {
					time.Sleep(cfg.Warmup)
					cpu0, t0 = cpuTime(), time.Now()
				}()
				ls, err := Run(context.Background(), cfg)
				cpu, wall := cpuTime()-cpu0, time.Since(t0)
				if err != nil || len(ls) != 1 || ls[0].Failed+ls[0].TimedOut > 0 {
					b.Fatalf("%v %+v", err, ls)
				}
				lv := ls[0]
				busy := cpu.Seconds() / wall.Seconds()
				events := float64(lv.Completed) * (tokens + 2) / lv.Seconds
				b.ReportMetric(busy, "cpu/wall")
				b.ReportMetric(lv.RequestsPerSec, "req/s")
				b.ReportMetric(float64(n)/busy, "streams/core")
				b.ReportMetric(lv.RequestsPerSec/busy, "req/s/core")
				b.ReportMetric(events/busy, "events/s/core")
				// The truth is 10 ms: far above it, the server (or the machine)
				// was the bottleneck, and streams/core overstates the core.
				b.ReportMetric(lv.TTFT.P50, "ttft-p50-ms")
				b.ReportMetric(lv.ITL.P50, "itl-p50-ms")
			}
		})
	}
}
