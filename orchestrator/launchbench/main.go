// Command launchbench measures Open MPI's ssh launch across lab hosts, as
// the cluster-wide all-reduce starts it: mpirun on h1 over 16, 32, 64 and
// 128 hosts (one rank each, every link at 100 Mbit/s), the time until the
// ranks speak (a host name; nccl-tests' first "#  Rank" line, every rank
// through MPI_Init) and to the end, for `hostname` and for
// the MPI stand-in of all_reduce_perf (one small sweep), with Open MPI's
// defaults and with the flags a large launch is known to need
// (plm_rsh_num_concurrent raised, tree spawn left on), and with ranks that
// yield while they wait (the lab's hosts share two cores), over Open MPI's
// TCP transport or UCX's. The lab's hosts get static neighbour entries by
// default: with ARP, 128 hosts' first connections failed ("No route to
// host"), because every namespace shares the machine's one neighbour table
// and 128x127 entries overflow its 1,024 — the lab, not the launch. A
// run that fails says which link Open MPI named. It prints figures; it
// asserts nothing.
//
//	go run ./orchestrator/launchbench [-hosts 16,32,64,128] [-links 2] [-transport ob1|ucx|both] [-neigh static|arp] [-logs DIR]
//
// Root on Linux, Open MPI installed (make deps); it brings up its own lab
// (name "lbench") and tears it down.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/parse"
	"gpuaccept/scripts/lab"
)

var hostLine = regexp.MustCompile(`^h\d+$`)

func main() {
	sizes := flag.String("hosts", "16,32,64,128", "host counts, comma-separated")
	timeout := flag.Duration("timeout", 4*time.Minute, "how long one launch may take")
	rate := flag.String("cap", "100mbit", "tc cap on every host's link; \"\" for none")
	links := flag.Int("links", 2, "Open MPI's btl_tcp_links (LAB.md: 2 makes a lab link full duplex)")
	transport := flag.String("transport", "ob1", "the all-reduce's transport: ob1 (Open MPI's btl tcp), ucx (UCX over TCP), or both")
	neigh := flag.String("neigh", "static", "the lab's neighbour entries: static (lab.sh up --neigh static) or arp (the kernel's own)")
	logs := flag.String("logs", "", "a directory to write each launch's whole output into, to read after")
	flag.Parse()
	if *transport != "ob1" && *transport != "ucx" && *transport != "both" {
		fmt.Fprintf(os.Stderr, "launchbench: -transport: %q is not ob1, ucx or both\n", *transport)
		os.Exit(2)
	}
	if *neigh != "static" && *neigh != "arp" {
		fmt.Fprintf(os.Stderr, "launchbench: -neigh: %q is not static or arp\n", *neigh)
		os.Exit(2)
	}
	if err := run(*sizes, *timeout, *rate, *links, *transport, *logs, *neigh == "static"); err != nil {
		fmt.Fprintln(os.Stderr, "launchbench:", err)
		os.Exit(1)
	}
}

func run(sizes string, timeout time.Duration, rate string, links int, transport, logs string, static bool) error {
	if ok, why := lab.Supported(); !ok {
		return fmt.Errorf("needs the lab: %s", why)
	}
	var ns []int
	most := 0
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 || n > lab.MaxHosts {
			return fmt.Errorf("-hosts: %q is not 2..%d", s, lab.MaxHosts)
		}
		ns = append(ns, n)
		most = max(most, n)
	}
	if logs != "" {
		if err := os.MkdirAll(logs, 0o755); err != nil {
			return fmt.Errorf("-logs: %w", err)
		}
	}
	ctx := context.Background()
	work, err := os.MkdirTemp("", "gpuaccept-nccl-") // /tmp is shared by the lab hosts
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if out, err := exec.Command("bash", "scripts/standins/nccl/build.sh", work).CombinedOutput(); err != nil {
		return fmt.Errorf("build the MPI stand-in: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "bringing up %d lab hosts, links capped at %q...\n", most, rate)
	start := time.Now()
	l, err := lab.Up(ctx, lab.Options{Name: "lbench", Hosts: most, Subnet: "10.246.0", Cap: rate, StaticNeigh: static})
	if err != nil {
		return err
	}
	defer l.Down(context.Background())
	neighbours := "ARP"
	if static {
		neighbours = "static neighbour entries"
	}
	fmt.Printf("%d lab hosts up in %.1f s, links capped at %q, %s\n", most, time.Since(start).Seconds(), rate, neighbours)
	flags := "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca btl_tcp_links " + strconv.Itoa(links)
	// UCX's TCP transport connects its peers its own way (one socket a
	// peer, its own progress), where ob1's btl tcp failed to connect some
	// pairs at 128 hosts. pml ucx opens only on InfiniBand or RoCE devices
	// unless told any will do.
	ucxFlags := "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca oob_tcp_if_include eth0 -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0 -x UCX_WARN_UNUSED_ENV_VARS=n"
	bench := filepath.Join(work, "all_reduce_perf") + " -b 1M -e 1M -f 2 -n 2 -w 1 -c 1 -g 1"
	fmt.Printf("%-6s %-44s %12s %12s  %s\n", "HOSTS", "LAUNCH", "RANKS UP", "END", "RESULT")
	for _, n := range ns {
		var hosts []string
		for i := 1; i <= n; i++ {
			hosts = append(hosts, fmt.Sprintf("h%d:1", i))
		}
		type launchCase struct{ name, flags, extra, prog string }
		cases := []launchCase{
			{"hostname, Open MPI's defaults", flags, "", "hostname"},
			{"hostname, plm_rsh_num_concurrent " + strconv.Itoa(n), flags, "--mca plm_rsh_num_concurrent " + strconv.Itoa(n), "hostname"},
		}
		if transport != "ucx" {
			cases = append(cases, launchCase{"all_reduce_perf (1 MiB), defaults", flags, "", bench},
				// The lab's hosts share two cores: ranks that spin while
				// they wait starve the ones they wait for.
				launchCase{"all_reduce_perf, mpi_yield_when_idle 1", flags, "--mca mpi_yield_when_idle 1", bench})
		}
		if transport != "ob1" {
			cases = append(cases, launchCase{"all_reduce_perf, UCX over TCP, yield", ucxFlags, "--mca mpi_yield_when_idle 1", bench})
		}
		for _, c := range cases {
			cmd := fmt.Sprintf("timeout %d mpirun --allow-run-as-root -np %d -H %s %s %s %s", int(timeout.Seconds()), n, strings.Join(hosts, ","), c.flags, c.extra, c.prog)
			first, end, res, out := launch(ctx, l, cmd, n, c.prog == "hostname")
			if logs != "" {
				name := fmt.Sprintf("%d-%s.log", n, strings.NewReplacer(" ", "-", ",", "", "'", "", "(", "", ")", "").Replace(c.name))
				if err := os.WriteFile(filepath.Join(logs, name), []byte("$ "+cmd+"\n"+out), 0o644); err != nil {
					return fmt.Errorf("-logs: %w", err)
				}
			}
			fmt.Printf("%-6d %-44s %11.2fs %11.2fs  %s\n", n, c.name, first.Seconds(), end.Seconds(), res)
		}
	}
	return nil
}

// launch runs cmd on h1 and times its first line of output and its end;
// res says whether every rank answered (hostname: n lines) or the sweep
// printed its result; out is everything it printed.
func launch(ctx context.Context, l *lab.Lab, cmd string, n int, hostname bool) (time.Duration, time.Duration, string, string) {
	c, err := lab.Command(ctx, "exec", "--name", l.Name, "h1", "--", "bash", "-c", cmd+" 2>&1")
	if err != nil {
		return 0, 0, err.Error(), ""
	}
	pipe, err := c.StdoutPipe()
	if err != nil {
		return 0, 0, err.Error(), ""
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return 0, 0, err.Error(), ""
	}
	// The launch is done when the ranks speak: a host name (hostname),
	// nccl-tests' first "#  Rank" line (every rank through MPI_Init).
	var first time.Duration
	lines, ok := 0, false
	var last string
	var all strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		rank := hostname && hostLine.MatchString(line) || !hostname && strings.HasPrefix(line, "#  Rank")
		if rank {
			lines++
			if first == 0 {
				first = time.Since(start)
			}
		}
		last = line
		if strings.Contains(line, "Avg bus bandwidth") {
			ok = true
		}
	}
	err = c.Wait()
	end := time.Since(start)
	out := all.String()
	switch {
	case err != nil:
		why := fmt.Sprintf("failed (%v)", err)
		if fs := parse.CollectiveFaults(out); len(fs) > 0 {
			why += fmt.Sprintf("; %d fault(s) said, first: %s could not reach %s: %s", len(fs), fs[0].Local, fs[0].PeerAddr+fs[0].Peer, fs[0].Said)
		} else if e := firstError(out); e != "" {
			why += ": " + e
		} else {
			why += ": " + last
		}
		return first, end, why, out
	case hostname:
		return first, end, fmt.Sprintf("%d of %d ranks answered", lines, n), out
	case ok:
		return first, end, "sweep done", out
	}
	return first, end, "no result: " + last, out
}

// errorLine is a line a failed launch's cause is likely on: UCX's and
// Open MPI's own error lines, past the help-aggregation chatter.
var errorLine = regexp.MustCompile(`(?i)(\berror\b|failed|unreachable|refused|timed out)`)

// firstError is the first such line of out, "" when none.
func firstError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if errorLine.MatchString(l) && !strings.Contains(l, "help message") && !strings.Contains(l, "orte_base_help_aggregate") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
