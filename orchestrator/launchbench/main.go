// Command launchbench measures Open MPI's ssh launch across lab hosts, as
// the cluster-wide all-reduce starts it: mpirun on h1 over 16, 32, 64 and
// 128 hosts (one rank each, every link at 100 Mbit/s), the time until the
// ranks speak (a host name; nccl-tests' first "#  Rank" line, every rank
// through MPI_Init) and to the end, for `hostname` and for
// the MPI stand-in of all_reduce_perf (one small sweep), with Open MPI's
// defaults and with the flags a large launch is known to need
// (plm_rsh_num_concurrent raised, tree spawn left on), and with ranks that
// yield while they wait (the lab's hosts share two cores). A run that fails
// says which link Open MPI named. It prints figures;
// it asserts nothing.
//
//	go run ./orchestrator/launchbench [-hosts 16,32,64,128] [-links 2]
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
	flag.Parse()
	if err := run(*sizes, *timeout, *rate, *links); err != nil {
		fmt.Fprintln(os.Stderr, "launchbench:", err)
		os.Exit(1)
	}
}

func run(sizes string, timeout time.Duration, rate string, links int) error {
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
	l, err := lab.Up(ctx, lab.Options{Name: "lbench", Hosts: most, Subnet: "10.246.0", Cap: rate})
	if err != nil {
		return err
	}
	defer l.Down(context.Background())
	fmt.Printf("%d lab hosts up in %.1f s, links capped at %q\n", most, time.Since(start).Seconds(), rate)
	flags := "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca btl_tcp_links " + strconv.Itoa(links)
	bench := filepath.Join(work, "all_reduce_perf") + " -b 1M -e 1M -f 2 -n 2 -w 1 -c 1 -g 1"
	fmt.Printf("%-6s %-44s %12s %12s  %s\n", "HOSTS", "LAUNCH", "RANKS UP", "END", "RESULT")
	for _, n := range ns {
		var hosts []string
		for i := 1; i <= n; i++ {
			hosts = append(hosts, fmt.Sprintf("h%d:1", i))
		}
		for _, c := range []struct{ name, extra, prog string }{
			{"hostname, Open MPI's defaults", "", "hostname"},
			{"hostname, plm_rsh_num_concurrent " + strconv.Itoa(n), "--mca plm_rsh_num_concurrent " + strconv.Itoa(n), "hostname"},
			{"all_reduce_perf (1 MiB), defaults", "", bench},
			// The lab's hosts share two cores: ranks that spin while they
			// wait starve the ones they wait for.
			{"all_reduce_perf, mpi_yield_when_idle 1", "--mca mpi_yield_when_idle 1", bench},
		} {
			cmd := fmt.Sprintf("timeout %d mpirun --allow-run-as-root -np %d -H %s %s %s %s", int(timeout.Seconds()), n, strings.Join(hosts, ","), flags, c.extra, c.prog)
			first, end, res := launch(ctx, l, cmd, n, c.prog == "hostname")
			fmt.Printf("%-6d %-44s %11.2fs %11.2fs  %s\n", n, c.name, first.Seconds(), end.Seconds(), res)
		}
	}
	return nil
}

// launch runs cmd on h1 and times its first line of output and its end;
// res says whether every rank answered (hostname: n lines) or the sweep
// printed its result.
func launch(ctx context.Context, l *lab.Lab, cmd string, n int, hostname bool) (time.Duration, time.Duration, string) {
	c, err := lab.Command(ctx, "exec", "--name", l.Name, "h1", "--", "bash", "-c", cmd+" 2>&1")
	if err != nil {
		return 0, 0, err.Error()
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return 0, 0, err.Error()
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return 0, 0, err.Error()
	}
	// The launch is done when the ranks speak: a host name (hostname),
	// nccl-tests' first "#  Rank" line (every rank through MPI_Init).
	var first time.Duration
	lines, ok := 0, false
	var last string
	var all strings.Builder
	sc := bufio.NewScanner(out)
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
	switch {
	case err != nil:
		why := fmt.Sprintf("failed (%v)", err)
		if fs := parse.CollectiveFaults(all.String()); len(fs) > 0 {
			why += fmt.Sprintf("; %d fault(s) said, first: %s could not reach %s: %s", len(fs), fs[0].Local, fs[0].PeerAddr+fs[0].Peer, fs[0].Said)
		} else {
			why += ": " + last
		}
		return first, end, why
	case hostname:
		return first, end, fmt.Sprintf("%d of %d ranks answered", lines, n)
	case ok:
		return first, end, "sweep done"
	}
	return first, end, "no result: " + last
}
