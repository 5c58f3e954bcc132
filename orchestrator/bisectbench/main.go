// Command bisectbench runs the window's all-reduce and its pairwise
// bisection over lab hosts at fleet size (64 by default, 128 at most):
// one rank a host, every link at 100 Mbit/s, hosts labelled by leaf (8 a
// leaf, written as host ranges), and two faults, each in a window of its
// own:
//
//   - a slow host (h7 at half the rate) and a slow link (h20–h45 at 40%),
//   - a slow leaf uplink (every pair with one end in leaf-3 at 40%).
//
// For each it prints the window's wall time, the cluster all-reduce's
// result, the bisection's rounds, pair runs and the seconds they took, and
// what NCCL-004 named, against what was planted. It prints figures; it
// asserts nothing (the 6-host lab test holds the rules).
//
//	go run ./orchestrator/bisectbench [-hosts 64[,128]]
//
// Root on Linux, Open MPI installed (make deps); it brings up its own lab
// (name "bbench") and tears it down.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

const (
	leafSize = 8
	subnet   = "10.245.0"
)

func main() {
	sizes := flag.String("hosts", "64", "host counts, comma-separated (16..128, a multiple of 8)")
	flag.Parse()
	if err := run(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bisectbench:", err)
		os.Exit(1)
	}
}

func run(sizes string) error {
	if ok, why := lab.Supported(); !ok {
		return fmt.Errorf("needs the lab: %s", why)
	}
	var ns []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 16 || n > lab.MaxHosts || n%leafSize != 0 {
			return fmt.Errorf("-hosts: %q is not 16..%d, a multiple of %d", s, lab.MaxHosts, leafSize)
		}
		ns = append(ns, n)
	}
	work, err := os.MkdirTemp("", "gpuaccept-bisectbench-") // /tmp is shared by the lab hosts
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "gpuaccept")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpuaccept")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	nccl := filepath.Join(work, "nccl")
	if out, err := exec.Command("bash", "scripts/standins/nccl/build.sh", nccl).CombinedOutput(); err != nil {
		return fmt.Errorf("build the MPI stand-in: %v\n%s", err, out)
	}
	fmt.Printf("%-6s %-28s %8s  %-34s %6s %6s %8s  %s\n", "HOSTS", "PLANTED", "WINDOW", "ALL-REDUCE", "ROUNDS", "PAIRS", "PAIR-S", "NAMED (NCCL-004)")
	for _, n := range ns {
		if err := size(n, bin, nccl, work); err != nil {
			return err
		}
	}
	return nil
}

func size(n int, bin, nccl, work string) error {
	ctx := context.Background()
	start := time.Now()
	l, err := lab.Up(ctx, lab.Options{Name: "bbench", Hosts: n, Subnet: subnet, Cap: "100mbit"})
	if err != nil {
		return err
	}
	defer l.Down(context.Background())
	fmt.Fprintf(os.Stderr, "%d lab hosts up in %.1f s, links at 100 Mbit/s\n", n, time.Since(start).Seconds())
	for _, h := range l.Hosts {
		if err := standins.Install(l.BinDir(h.Name), "h100", []string{bin, "standin"}); err != nil {
			return err
		}
		for _, b := range []string{"all_reduce_perf", "all_gather_perf"} {
			if err := os.Symlink(filepath.Join(nccl, b), filepath.Join(l.BinDir(h.Name), b)); err != nil {
				return err
			}
		}
	}
	inv, err := inventory(l, n, work)
	if err != nil {
		return err
	}
	host := func(i int) string { return fmt.Sprintf("h%d", i) }
	leaf := 3 // its members are h17..h24
	var inside, outside []string
	for i := 1; i <= n; i++ {
		if (i-1)/leafSize+1 == leaf {
			inside = append(inside, host(i))
		} else {
			outside = append(outside, host(i))
		}
	}
	cases := []struct {
		planted string
		apply   func() error
	}{
		{"node h7, link h20-h45", func() error {
			return firstErr(l.Cap(ctx, "h7", "50mbit"), l.CapTo(ctx, "h20", "40mbit", "h45"), l.CapTo(ctx, "h45", "40mbit", "h20"))
		}},
		{fmt.Sprintf("uplink of leaf-%d", leaf), func() error {
			for _, h := range inside {
				if err := l.CapTo(ctx, h, "40mbit", outside...); err != nil {
					return err
				}
			}
			for _, h := range outside {
				if err := l.CapTo(ctx, h, "40mbit", inside...); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, c := range cases {
		for _, h := range l.Hosts { // every host back at 100 Mbit/s
			if err := firstErr(l.Uncap(ctx, h.Name), l.Cap(ctx, h.Name, "100mbit")); err != nil {
				return err
			}
		}
		if err := c.apply(); err != nil {
			return err
		}
		runs := filepath.Join(work, "runs-"+strconv.Itoa(n)+"-"+strconv.Itoa(len(c.planted)))
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, bin, "run", inv, "--runs-dir", runs, "--only", "allreduce,bisect")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run() // not accepted is the point; what it found is read below
		wall := time.Since(t0)
		r, err := readRun(runs)
		if err != nil {
			return fmt.Errorf("%d hosts, %s: %w\n%s", n, c.planted, err, tail(stderr.String(), 3000))
		}
		fmt.Printf("%-6d %-28s %7.0fs  %-34s %s\n", n, c.planted, wall.Seconds(), clip(allReduce(r), 34), bisected(r))
	}
	return nil
}

// inventory writes the window: the lab's hosts in leaves of eight, each
// leaf one host range; only the all-reduce and the bisection run (and what
// every window runs).
func inventory(l *lab.Lab, n int, dir string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `provider: lab
region: local
window: bisectbench
simulated: true
ssh:
  user: root
  identity_files: [%s]
  known_hosts: [%s]
  config: none
  keepalive_interval: 5s
  keepalive_misses: 6
nodes:
`, l.ClientKey, l.KnownHosts)
	for first := 1; first <= n; first += leafSize {
		last := first + leafSize - 1
		fmt.Fprintf(&b, "  - {name: \"h[%d-%d]\", address: \"%s.[%d-%d]\", labels: {leaf: leaf-%d}}\n",
			first, last, subnet, 10+first, 10+last, (first-1)/leafSize+1)
	}
	// What 100 Mbit/s carries as TCP payload (LAB.md: 95.5% of the cap).
	fmt.Fprintf(&b, `quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  inter_busbw_gbs: %g
  busbw_size: 2MiB
acceptance:
  tolerance: 0.9
phases:
  allreduce:
    enabled: true
    intra_node: false
    min_bytes: 2MiB
    max_bytes: 2MiB
    iters: 2
    warmup: 1
    repeats: 1
    ranks_per_node: 1
    timeout: 4m
    bisection:
      iters: 4
    mpi_args: [--mca, pml, ob1, --mca, btl, "tcp,self", --mca, btl_tcp_if_include, eth0, --mca, oob_tcp_if_include, eth0, --mca, btl_tcp_links, "2", --mca, mpi_yield_when_idle, "1"]
`, 0.1/8*0.955)
	path := filepath.Join(dir, fmt.Sprintf("bench-%d.yaml", n))
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func readRun(runs string) (*record.Run, error) {
	dirs, err := filepath.Glob(filepath.Join(runs, "*", "run.json"))
	if err != nil || len(dirs) != 1 {
		return nil, fmt.Errorf("want one run.json under %s, found %d (%v)", runs, len(dirs), err)
	}
	b, err := os.ReadFile(dirs[0])
	if err != nil {
		return nil, err
	}
	var r record.Run
	return &r, json.Unmarshal(b, &r)
}

func verdict(r *record.Run, id string) []record.Verdict {
	var out []record.Verdict
	for _, v := range r.Verdicts {
		if v.ID == id {
			out = append(out, v)
		}
	}
	return out
}

func allReduce(r *record.Run) string {
	for _, v := range verdict(r, "NCCL-002") {
		return fmt.Sprintf("%s %s", v.Status, firstNonEmpty(v.Measured, v.Detail))
	}
	return "no NCCL-002 verdict"
}

// bisected is the bisection's rounds, pair runs and their seconds, and
// what NCCL-004 failed on.
func bisected(r *record.Run) string {
	var b struct {
		Rounds    int               `json:"rounds"`
		RoundSecs []float64         `json:"round_seconds"`
		Pairs     []json.RawMessage `json:"pairs"`
	}
	for _, p := range r.Phases {
		if p.Phase == "bisect" && len(p.Data) > 0 {
			_ = json.Unmarshal(p.Data, &b)
		}
	}
	var secs float64
	for _, s := range b.RoundSecs {
		secs += s
	}
	var named []string
	for _, v := range verdict(r, "NCCL-004") {
		if v.Status == record.Fail {
			named = append(named, firstNonEmpty(v.Node, "cluster")+": "+v.Measured)
		}
	}
	if len(named) == 0 {
		named = []string{"nothing"}
	}
	return fmt.Sprintf("%6d %6d %7.1fs  %s", b.Rounds, len(b.Pairs), secs, strings.Join(named, " | "))
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
