// Command srunbench measures what reaching a fleet costs the coordinator
// by SSH to every node against by srun through the Slurm login node
// (transport: srun), with a job step per command (slurm.steps: each) and
// with the steps the nodes' commands share (the default): the same
// window (connect, tools, preflight, teardown on every lab host, the GPU
// tools the lab's stand-ins) over 32 hosts, then 127, the most the lab
// holds. For each it prints the window's wall time, the coordinator's
// CPU time and peak memory (the gpuaccept process's rusage), the SSH
// logins it made (sshd's "Accepted publickey" lines): one per node by
// SSH, a few to the login node by srun, which shares its connections (8
// commands each), and the job steps srun asked slurmctld for (the
// window's own count, on its stderr). It asserts nothing.
//
//	go run ./orchestrator/srunbench [-hosts 32,127] [-ways ssh,srun-each,srun] [-keep DIR]
//
// Root on Linux, Slurm installed (make deps); it brings up its own lab
// (name "sbench": the login node h1 and the measured hosts h2...) and
// tears it down.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

func main() {
	sizes := flag.String("hosts", "32,127", "measured host counts, comma-separated (the lab adds the login node)")
	keep := flag.String("keep", "", "a directory to keep each window's run directory in")
	ways := flag.String("ways", "ssh,srun-each,srun", "the ways measured, comma-separated: ssh, srun-each, srun")
	flag.Parse()
	if err := run(*sizes, *keep, strings.Split(*ways, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "srunbench:", err)
		os.Exit(1)
	}
}

type figures struct {
	wall, cpu time.Duration
	maxRSS    int64 // KiB
	logins    int
	exit      int
}

func run(sizes, keep string, ways []string) error {
	for _, w := range ways {
		if w != "ssh" && w != "srun-each" && w != "srun" {
			return fmt.Errorf("-ways: %q is not ssh, srun-each or srun", w)
		}
	}
	var counts []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 || n > 127 {
			return fmt.Errorf("-hosts: %q is not a count from 2 to 127", s)
		}
		counts = append(counts, n)
	}
	work, err := os.MkdirTemp("", "srunbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// The lab's hosts see /tmp: the binary the stand-ins run must be
	// readable there.
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(work, "gpuaccept")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gpuaccept").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	fmt.Printf("%-6s %-9s %10s %10s %10s %7s %12s %5s\n", "hosts", "way", "wall", "cpu", "max rss", "logins", "steps", "exit")
	for _, n := range counts {
		ctx := context.Background()
		l, err := lab.Up(ctx, lab.Options{Name: "sbench", Hosts: n + 1, Subnet: "10.247.0", StaticNeigh: n+1 > 30})
		if err != nil {
			return err
		}
		err = measure(ctx, l, n, bin, work, keep, ways)
		if derr := l.Down(context.Background()); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func measure(ctx context.Context, l *lab.Lab, n int, bin, work, keep string, ways []string) error {
	for _, h := range l.Hosts {
		if err := standins.Install(l.BinDir(h.Name), "h100", []string{bin, "standin"}); err != nil {
			return err
		}
	}
	if err := l.Slurm(ctx); err != nil {
		return err
	}
	hosts := l.Hosts[1:]
	for _, way := range ways {
		inv := filepath.Join(work, fmt.Sprintf("%s-%d.yaml", way, n))
		if err := os.WriteFile(inv, []byte(inventory(l, hosts, way)), 0o644); err != nil {
			return err
		}
		before := logins(l)
		runs := filepath.Join(work, fmt.Sprintf("runs-%s-%d", way, n))
		if keep != "" {
			runs = filepath.Join(keep, filepath.Base(runs))
		}
		cmd := exec.CommandContext(ctx, bin, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,teardown")
		cmd.Stdout = nil
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		f := figures{wall: time.Since(start), logins: logins(l) - before}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return err
		}
		f.exit = cmd.ProcessState.ExitCode()
		if keep != "" {
			_ = os.WriteFile(runs+".stderr", []byte(stderr.String()), 0o644)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			f.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			f.maxRSS = ru.Maxrss
		}
		steps := "-"
		if m := stepsSaid.FindStringSubmatch(stderr.String()); m != nil {
			steps = m[1] + "+" + m[2]
		}
		fmt.Printf("%-6d %-9s %10s %10s %7d MiB %7d %12s %5d\n", n, way, f.wall.Round(10*time.Millisecond),
			f.cpu.Round(10*time.Millisecond), f.maxRSS/1024, f.logins, steps, f.exit)
		if f.exit != 0 && f.exit != 3 {
			tail := stderr.String()
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			fmt.Fprintf(os.Stderr, "srunbench: %s over %d hosts exited %d:\n%s\n", way, n, f.exit, tail)
		}
	}
	return nil
}

// stepsSaid is the window's count of the job steps it took, shared and
// commands' own (orchestrator/allocation.go).
var stepsSaid = regexp.MustCompile(`ran in (\d+) shared job steps, (\d+) of their own`)

// logins counts the SSH logins every host's sshd accepted so far.
func logins(l *lab.Lab) int {
	n := 0
	for _, h := range l.Hosts {
		b, _ := os.ReadFile(filepath.Join(l.Dir, "hosts", h.Name, "sshd.log"))
		n += strings.Count(string(b), "Accepted publickey")
	}
	return n
}

// inventory is a window over hosts, reached over SSH one by one (ssh) or
// as the window's own allocation by srun through h1, a step per command
// (srun-each) or steps shared (srun).
func inventory(l *lab.Lab, hosts []lab.Host, way string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `provider: lab
window: srunbench
simulated: true
ssh:
  user: root
  identity_files: [%s]
  known_hosts: [%s]
  config: none
quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  form_factor: SXM
`, l.ClientKey, l.KnownHosts)
	if way == "ssh" {
		b.WriteString("nodes:\n")
		for _, h := range hosts {
			fmt.Fprintf(&b, "  - {name: %s, address: %s}\n", h.Name, h.Addr)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "transport: srun\nslurm:\n  login: {address: %s}\n  partition: lab\n  allocate: {nodelist: \"h[2-%d]\"}\n",
		l.Hosts[0].Addr, len(hosts)+1)
	if way == "srun-each" {
		b.WriteString("  steps: each\n")
	}
	return b.String()
}
