// Command bisectbench runs the window's all-reduce and its pairwise
// bisection over lab hosts at fleet size (64 by default, 128 at most):
// one rank a host, every link at -rate (20 Mbit/s), hosts labelled by leaf
// (8 a leaf, written as host ranges), and two faults, each in a window of
// its own:
//
//   - a slow host (h7 at half the rate) and a slow link (h20–h45 at 40%),
//   - a slow leaf uplink (every pair with one end in leaf-3 at 40%).
//
// For each it prints the window's wall time, the bisection's rounds, pair
// runs and the seconds they took, and what NCCL-004 named, against what
// was planted. The rate is low on purpose: a round runs every pair at
// once, and at 100 Mbit/s 32 pairs on two cores ran at half the link, so
// CPU, not the links, set the pace and hid a host at 50. It prints
// figures; it asserts nothing (the 6-host lab test holds the rules).
//
//	go run ./orchestrator/bisectbench [-hosts 64[,128]] [-rate 20mbit]
//
// The lab's hosts get static neighbour entries: every namespace shares the
// machine's one neighbour table, which 48 or more ARP hosts talking all to
// all overflow (lab.sh's warning says so), and the connects that then fail
// would be the lab's fault, not a planted one.
//
// Root on Linux, Open MPI installed (make deps); it brings up its own lab
// (name "bbench") and tears it down.
package main

import (
	"bytes"
	"cmp"
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

	"gpuaccept/internal/gobuild"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

const (
	leafSize = 8
	subnet   = "10.245.0"
)

func main() {
	sizes := flag.String("hosts", "64", "host counts, comma-separated (48..128, a multiple of 8)")
	rate := flag.Int("rate", 20, "every link's rate, Mbit/s")
	flag.Parse()
	if err := run(*sizes, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "bisectbench:", err)
		os.Exit(1)
	}
}

func run(sizes string, rate int) error {
	if ok, why := lab.Supported(); !ok {
		return fmt.Errorf("needs the lab: %s", why)
	}
	var ns []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		// The planted faults are h7, h20-h45 and leaf-3: 48 hosts at least.
		if err != nil || n < 48 || n > lab.MaxHosts || n%leafSize != 0 {
			return fmt.Errorf("-hosts: %q is not 48..%d, a multiple of %d", s, lab.MaxHosts, leafSize)
		}
		ns = append(ns, n)
	}
	work, err := os.MkdirTemp("", "gpuaccept-bisectbench-") // /tmp is shared by the lab hosts
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin, err := gobuild.Gpuaccept(work)
	if err != nil {
		return err
	}
	nccl := filepath.Join(work, "nccl")
	if out, err := exec.Command("bash", "scripts/standins/nccl/build.sh", nccl).CombinedOutput(); err != nil {
		return fmt.Errorf("build the MPI stand-in: %v\n%s", err, out)
	}
	fmt.Printf("%-6s %-30s %8s %6s %6s %8s  %s\n", "HOSTS", "PLANTED", "WINDOW", "ROUNDS", "PAIRS", "PAIR-S", "NAMED (NCCL-004)")
	for _, n := range ns {
		if err := size(n, rate, bin, nccl, work); err != nil {
			return err
		}
	}
	return nil
}

func size(n, rate int, bin, nccl, work string) error {
	ctx := context.Background()
	start := time.Now()
	mbit := func(f float64) string { return fmt.Sprintf("%dkbit", int(f*float64(rate)*1000)) }
	l, err := lab.Up(ctx, lab.Options{Name: "bbench", Hosts: n, Subnet: subnet, Cap: mbit(1), StaticNeigh: true})
	if err != nil {
		return err
	}
	defer l.Down(context.Background())
	fmt.Fprintf(os.Stderr, "%d lab hosts up in %.1f s, links at %d Mbit/s\n", n, time.Since(start).Seconds(), rate)
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
	inv, err := inventory(l, n, rate, work)
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
		link    [2]string // the planted link's pair, when one is planted
		apply   func() error
	}{
		{"node h7 (50%), link h20-h45 (40%)", [2]string{"h20", "h45"}, func() error {
			return firstErr(l.Cap(ctx, "h7", mbit(0.5)), l.CapTo(ctx, "h20", mbit(0.4), "h45"), l.CapTo(ctx, "h45", mbit(0.4), "h20"))
		}},
		{fmt.Sprintf("uplink of leaf-%d (40%%)", leaf), [2]string{}, func() error {
			for _, h := range inside {
				if err := l.CapTo(ctx, h, mbit(0.4), outside...); err != nil {
					return err
				}
			}
			for _, h := range outside {
				if err := l.CapTo(ctx, h, mbit(0.4), inside...); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for i, c := range cases {
		for _, h := range l.Hosts { // every host back at the rate
			if err := firstErr(l.Uncap(ctx, h.Name), l.Cap(ctx, h.Name, mbit(1))); err != nil {
				return err
			}
		}
		if err := c.apply(); err != nil {
			return err
		}
		runs := filepath.Join(work, fmt.Sprintf("runs-%d-%d", n, i))
		t0 := time.Now()
		// The bisection alone: the cluster-wide all-reduce is launchbench's.
		cmd := exec.CommandContext(ctx, bin, "run", inv, "--runs-dir", runs, "--only", "bisect")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run() // not accepted is the point; what it found is read below
		wall := time.Since(t0)
		r, err := readRun(runs)
		if err != nil {
			return fmt.Errorf("%d hosts, %s: %w\n%s", n, c.planted, err, tail(stderr.String(), 3000))
		}
		fmt.Printf("%-6d %-30s %7.0fs %s\n", n, c.planted, wall.Seconds(), bisected(r, c.link))
	}
	return nil
}

// inventory writes the window: the lab's hosts in leaves of eight, each
// leaf one host range; only the bisection runs (and what every window
// runs).
func inventory(l *lab.Lab, n, rate int, dir string) (string, error) {
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
	// What the rate carries as TCP payload (LAB.md: 95.5% of the cap).
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
    timeout: 2m
    bisection:
      iters: 4
    mpi_args: [--mca, pml, ob1, --mca, btl, "tcp,self", --mca, btl_tcp_if_include, eth0, --mca, oob_tcp_if_include, eth0, --mca, btl_tcp_links, "2", --mca, mpi_yield_when_idle, "1"]
`, float64(rate)/1000/8*0.955)
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

// bisected is the bisection's rounds, pair runs and their seconds, and
// what NCCL-004 failed on; for a planted link, whether its pair was among
// those run (a link is seen only when its two ends are paired, and the
// rounds run a few pairs a node, not all n(n-1)/2).
func bisected(r *record.Run, link [2]string) string {
	var b struct {
		Rounds    int                 `json:"rounds"`
		RoundSecs []float64           `json:"round_seconds"`
		Pairs     []fabric.PairResult `json:"pairs"`
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
			named = append(named, cmp.Or(v.Node, "cluster")+": "+v.Measured)
		}
	}
	if len(named) == 0 {
		named = []string{"nothing"}
	}
	if link[0] != "" {
		ran := "not run"
		for _, p := range b.Pairs {
			if (p.A == link[0] && p.B == link[1]) || (p.A == link[1] && p.B == link[0]) {
				ran = fmt.Sprintf("run in round %d", p.Round)
				break
			}
		}
		named = append(named, fmt.Sprintf("(pair %s–%s %s)", link[0], link[1], ran))
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

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
