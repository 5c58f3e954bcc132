// Command fleetbench measures a whole window at fleet size: the demo's
// simulated nodes served by one process (gpuaccept demo --nodes N
// --serve), the window run by another (gpuaccept run), so that the
// coordinator's CPU, memory and bundle are its own. For each size it
// prints the wall time, the coordinator's CPU-seconds and peak RSS (per
// node too), the bundle's size (per node, and of the raw logs in it),
// report.html's size and the time headless Chromium takes to load it, the
// summary's line count, and per phase the wall time with the CPU-seconds
// the coordinator and the node side spent in it (sampled from /proc when
// the coordinator says a phase starts and ends). On one machine the two
// processes share the CPUs, so a phase's wall includes the node side's
// work; its coordinator CPU-seconds are what the coordinator alone costs.
// It prints figures; it asserts nothing.
//
//	go run ./orchestrator/fleetbench [-nodes 256,1000] [-only PHASES] [-keep DIR]
//
// -only runs those phases (and the ones every window runs: connect, tools,
// teardown), as run --only does: a 1,000-node preflight and its bundle and
// report in minutes where the whole window takes hours on a small machine.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuaccept/internal/browser"
	"gpuaccept/internal/gobuild"
)

func main() {
	sizes := flag.String("nodes", "256,1000", "fleet sizes, comma-separated")
	keep := flag.String("keep", "", "a directory to move each size's bundle into (N/), to read it after")
	only := flag.String("only", "", "run only these phases (run --only), comma-separated; all when empty")
	flag.Parse()
	if err := run(*sizes, *keep, *only); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

func run(sizes, keep, only string) error {
	work, err := os.MkdirTemp("", "fleetbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin, err := gobuild.Gpuaccept(work)
	if err != nil {
		return err
	}
	var results []result
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-nodes: %q is not a node count", s)
		}
		fmt.Fprintf(os.Stderr, "fleetbench: %d nodes\n", n)
		dir := filepath.Join(work, strconv.Itoa(n))
		if _, err := os.Stat(filepath.Join(keep, strconv.Itoa(n))); keep != "" && err == nil {
			return fmt.Errorf("-keep: %s is there already (an earlier bench's?): not overwritten", filepath.Join(keep, strconv.Itoa(n)))
		}
		r, err := window(bin, dir, n, only)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		if keep != "" {
			to := filepath.Join(keep, strconv.Itoa(n))
			if err := os.MkdirAll(keep, 0o755); err != nil {
				return fmt.Errorf("-keep: %w", err)
			}
			// A copy, not a rename: -keep may be on another filesystem.
			if err := os.CopyFS(to, os.DirFS(filepath.Join(dir, "runs"))); err != nil {
				return fmt.Errorf("-keep: %w", err)
			}
			fmt.Fprintf(os.Stderr, "fleetbench: %d nodes' bundle kept in %s\n", n, to)
		}
		results = append(results, r)
	}
	printResults(os.Stdout, results)
	return nil
}

type phase struct {
	name                string
	wall                time.Duration
	coordCPU, nodeCPU   float64
	startCoord, startNd float64
	started             time.Time
}

type result struct {
	nodes                     int
	wall                      time.Duration
	coordCPU                  float64
	rssKiB                    int64
	nodeCPU                   float64
	bundle, raw, html         int64
	files                     int
	top                       map[string]int64 // the bundle's top-level files by size
	load                      time.Duration
	loadErr                   string
	summaryLines, summaryCols int
	outcome                   string
	only                      string // the phases run (run --only), "" for all
	phases                    []*phase
}

var (
	phaseStart = regexp.MustCompile(`^== ([a-z-]+) \(\d+ nodes?\)$`)
	phaseEnd   = regexp.MustCompile(`^== ([a-z-]+): `)
)

// lenientSSH are the bench's SSH timings in place of the demo's: the bench
// measures what the coordinator costs, and on a small machine hundreds of
// simulated nodes share its CPUs with it; a node side starved for ten
// seconds is not a lost node here (a 256-node run on two busy cores
// quarantined 74 nodes in preflight at the demo's 2 s x 5, 57 of them for
// unanswered keepalives).
var lenientSSH = map[string]string{"session_timeout": "60s", "keepalive_interval": "10s", "keepalive_misses": "6"}

// lenient rewrites the inventory's ssh timings to lenientSSH.
func lenient(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	for k, v := range lenientSSH {
		re := regexp.MustCompile(`(?m)^(  ` + k + `:) .*$`)
		if !re.MatchString(s) {
			return fmt.Errorf("%s: no ssh.%s to set", path, k)
		}
		s = re.ReplaceAllString(s, "${1} "+v)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

func window(bin, dir string, n int, only string) (result, error) {
	res := result{nodes: n, only: only}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	inv := filepath.Join(dir, "fleet.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := exec.CommandContext(ctx, bin, "demo", "--nodes", strconv.Itoa(n), "--serve", inv)
	serve.Cancel = func() error { return serve.Process.Signal(syscall.SIGTERM) }
	serve.Stderr = os.Stderr
	out, err := serve.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := serve.Start(); err != nil {
		return res, err
	}
	// Ended before waited for, on every return: Wait alone, deferred after
	// cancel, ran first and hung any run that failed.
	defer func() {
		cancel()
		serve.Wait()
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "serving ") {
				ready <- nil
				io.Copy(io.Discard, out)
				return
			}
		}
		ready <- fmt.Errorf("the node side ended before serving")
	}()
	select {
	case err := <-ready:
		if err != nil {
			return res, err
		}
	case <-time.After(10 * time.Minute):
		return res, fmt.Errorf("the node side did not serve in 10 minutes")
	}
	if err := lenient(inv); err != nil {
		return res, err
	}
	nodeStart := cpuOf(serve.Process.Pid)

	runs := filepath.Join(dir, "runs")
	args := []string{"run", inv, "--runs-dir", runs}
	if only != "" {
		args = append(args, "--only", only)
	}
	coord := exec.Command(bin, args...)
	coord.Env = append(os.Environ(), "COLUMNS=100")
	var stdout bytes.Buffer
	coord.Stdout = &stdout
	stderr, err := coord.StderrPipe()
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := coord.Start(); err != nil {
		return res, err
	}
	open := map[string]*phase{}
	last := "" // what run said last: why it stopped, when it did
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		last = line
		if m := phaseStart.FindStringSubmatch(line); m != nil {
			p := &phase{name: m[1], started: time.Now(), startCoord: cpuOf(coord.Process.Pid), startNd: cpuOf(serve.Process.Pid)}
			open[m[1]] = p
			res.phases = append(res.phases, p)
		} else if m := phaseEnd.FindStringSubmatch(line); m != nil {
			if p := open[m[1]]; p != nil {
				p.wall = time.Since(p.started)
				p.coordCPU = cpuOf(coord.Process.Pid) - p.startCoord
				p.nodeCPU = cpuOf(serve.Process.Pid) - p.startNd
				delete(open, m[1])
			}
		}
	}
	err = coord.Wait()
	res.wall = time.Since(start)
	if code := coord.ProcessState.ExitCode(); err != nil && code != 1 && code != 3 {
		return res, fmt.Errorf("gpuaccept run: exit %d: %s", code, last)
	}
	ru := coord.ProcessState.SysUsage().(*syscall.Rusage)
	res.coordCPU = tv(ru.Utime) + tv(ru.Stime)
	res.rssKiB = ru.Maxrss
	res.nodeCPU = cpuOf(serve.Process.Pid) - nodeStart
	cancel()

	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	res.summaryLines = len(lines)
	for _, l := range lines {
		res.summaryCols = max(res.summaryCols, len([]rune(l)))
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "ACCEPTED") || strings.HasPrefix(l, "NOT ACCEPTED") || strings.HasPrefix(l, "INCOMPLETE") {
			res.outcome = l
		}
	}
	dirs, err := filepath.Glob(filepath.Join(runs, "*", "run.json"))
	if err != nil || len(dirs) != 1 {
		return res, fmt.Errorf("no run directory in %s", runs)
	}
	rd := filepath.Dir(dirs[0])
	res.top = map[string]int64{}
	filepath.Walk(rd, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			res.bundle += fi.Size()
			res.files++
			rel, _ := filepath.Rel(rd, p)
			if strings.HasPrefix(rel, "raw"+string(filepath.Separator)) {
				res.raw += fi.Size()
			} else {
				res.top[rel] = fi.Size()
			}
		}
		return nil
	})
	html := filepath.Join(rd, "report.html")
	if fi, err := os.Stat(html); err == nil {
		res.html = fi.Size()
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer lcancel()
	if d, err := browser.LoadTime(lctx, html, dir); err != nil {
		res.loadErr = err.Error()
	} else {
		res.load = d
	}
	return res, nil
}

// cpuOf is the CPU-seconds pid and its waited-for children have used
// (/proc/PID/stat: utime, stime, cutime, cstime in clock ticks).
func cpuOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
	}
	return ticks / 100 // USER_HZ
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func mib(b int64) string   { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func kib(b float64) string { return fmt.Sprintf("%.0f KiB", b/1024) }

func printResults(w io.Writer, rs []result) {
	for _, r := range rs {
		n := float64(r.nodes)
		fmt.Fprintf(w, "\n%d simulated nodes: %s\n", r.nodes, r.outcome)
		if r.only != "" {
			fmt.Fprintf(w, "  only %s (run --only), with the phases every window runs\n", r.only)
		}
		fmt.Fprintf(w, "  window wall %.1f s; coordinator %.1f CPU-s, peak RSS %s (%s per node); node side %.1f CPU-s\n",
			r.wall.Seconds(), r.coordCPU, mib(r.rssKiB*1024), kib(float64(r.rssKiB*1024)/n), r.nodeCPU)
		fmt.Fprintf(w, "  bundle %s in %d files (%s per node), raw logs %s of it (gzip); without them %s per node:\n", mib(r.bundle), r.files,
			kib(float64(r.bundle)/n), mib(r.raw), kib(float64(r.bundle-r.raw)/n))
		var names []string
		for k := range r.top {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool { return r.top[names[i]] > r.top[names[j]] })
		var parts []string
		for _, k := range names {
			parts = append(parts, fmt.Sprintf("%s %s", k, kib(float64(r.top[k])/n)))
		}
		fmt.Fprintf(w, "    per node: %s\n", strings.Join(parts, ", "))
		load := fmt.Sprintf("%.2f s", r.load.Seconds())
		if r.loadErr != "" {
			load = "not measured: " + r.loadErr
		}
		fmt.Fprintf(w, "  report.html %s, loads in Chromium in %s; summary %d lines, %d columns at most\n", mib(r.html), load, r.summaryLines, r.summaryCols)
		fmt.Fprintf(w, "  %-20s %9s %14s %14s\n", "PHASE", "WALL", "COORD CPU-S", "NODE CPU-S")
		for _, p := range r.phases {
			fmt.Fprintf(w, "  %-20s %8.2fs %14.2f %14.2f\n", p.name, p.wall.Seconds(), p.coordCPU, p.nodeCPU)
		}
	}
}
