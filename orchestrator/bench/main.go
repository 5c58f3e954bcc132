// Command bench measures pushing a pinned image archive to many lab hosts
// with every link capped, the coordinator's included: gpuaccept's chain
// relay (each host forwards the archive to the next as it arrives) against
// naive copies from the coordinator (scp to one host at a time, and to all
// at once). Each figure is divided by the time one copy takes at the cap.
// It also prints the floor this machine's CPUs set: every host pays sshd's
// CPU for its copy, and on a few cores those add up to more than the link
// time. It prints figures; it asserts nothing.
//
//	go run ./orchestrator/bench [-hosts 16] [-size-mib 256] [-rate-mbit 200] [-naive=true]
//
// Root on Linux, podman installed (make deps); it brings up its own lab
// (name "ibench") and tears it down.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

func main() {
	hosts := flag.Int("hosts", 16, "lab hosts")
	sizeMiB := flag.Int("size-mib", 256, "archive size in MiB")
	rate := flag.Int("rate-mbit", 200, "cap on every link, Mbit/s")
	naive := flag.Bool("naive", true, "also time the naive copies (each takes hosts × one copy)")
	flag.Parse()
	if err := run(*hosts, *sizeMiB, *rate, *naive); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(hosts, sizeMiB, rate int, naive bool) error {
	if ok, why := lab.Supported(); !ok {
		return fmt.Errorf("needs the lab: %s", why)
	}
	for _, tool := range []string{"podman", "scp", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed (make deps)", tool)
		}
	}
	ctx := context.Background()
	work, err := os.MkdirTemp("", "gpuaccept-ibench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "gpuaccept")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gpuaccept").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "building a %d MiB test image...\n", sizeMiB)
	pad := int64(sizeMiB)<<20 - 2<<20 // busybox and the layer's tar framing make up the rest
	img, err := lab.BuildTestImage(ctx, filepath.Join(work, "image"), pad)
	if err != nil {
		return err
	}
	id, archive := strings.TrimPrefix(img.ID, "sha256:"), img.DockerArchive
	st, err := os.Stat(archive)
	if err != nil {
		return err
	}
	capStr := fmt.Sprintf("%dmbit", rate)
	fmt.Fprintf(os.Stderr, "bringing up %d lab hosts, every link at %s...\n", hosts, capStr)
	l, err := lab.Up(ctx, lab.Options{Name: "ibench", Hosts: hosts, Subnet: "10.244.0", Cap: capStr})
	if err != nil {
		return err
	}
	defer l.Down(context.Background())
	// The coordinator's own uplink: what it sends into the bridge.
	if out, err := exec.Command("tc", "qdisc", "replace", "dev", "br-ibench", "root", "tbf", "rate", capStr, "burst", "100000", "latency", "20ms").CombinedOutput(); err != nil {
		return fmt.Errorf("cap the coordinator's link: %v: %s", err, out)
	}
	oneCopy := float64(st.Size()) * 8 / (float64(rate) * 1e6)
	fmt.Printf("push a %.0f MiB image archive to %d lab hosts, every link (the coordinator's too) at %d Mbit/s\n", float64(st.Size())/(1<<20), hosts, rate)
	fmt.Printf("  one copy at the cap = %.1f s\n", oneCopy)

	inv := filepath.Join(work, "bench.yaml")
	if err := os.WriteFile(inv, []byte(inventory(l, archive, id)), 0o644); err != nil {
		return err
	}
	runs := filepath.Join(work, "runs")
	cmd := exec.Command(bin, "run", inv, "--runs-dir", runs)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cpu0 := cpuSeconds()
	_ = cmd.Run()
	cpuRun := cpuSeconds() - cpu0
	secs, err := distribution(runs)
	if err != nil {
		return fmt.Errorf("%v\n%s", err, errb.String())
	}
	fmt.Printf("  gpuaccept (chain relay, sha256 on every node)   %6.1f s  = %.2f × one copy  (whole run: %.0f CPU-s)\n", secs, secs/oneCopy, cpuRun)
	scp := func(h lab.Host) error {
		out, err := exec.Command("scp", "-q", "-i", l.ClientKey, "-o", "UserKnownHostsFile="+l.KnownHosts, "-o", "BatchMode=yes",
			archive, "root@"+h.Addr+":/srv/naive.tar").CombinedOutput()
		if err != nil {
			return fmt.Errorf("scp to %s: %v: %s", h.Name, err, out)
		}
		return nil
	}
	// What one host receiving one copy over SSH costs this machine's CPUs
	// (sshd, scp, the disk write): every way of pushing over SSH pays it on
	// every host, so hosts × it over the cores is a floor no relay beats here.
	// /proc/stat counts the whole machine: the least of three copies is the
	// one the least disturbed by anything else running.
	perCopy := math.Inf(1)
	for range 3 {
		cpu0 = cpuSeconds()
		if err := scp(l.Hosts[0]); err != nil {
			return err
		}
		perCopy = min(perCopy, cpuSeconds()-cpu0)
	}
	floor := perCopy * float64(hosts) / float64(runtime.NumCPU())
	fmt.Printf("  CPU floor: one copy over SSH costs %.1f CPU-s here (least of 3); %d hosts on %d cores need >= %.1f s = %.2f × one copy\n",
		perCopy, hosts, runtime.NumCPU(), floor, floor/oneCopy)
	fmt.Printf("             (1.5 × one copy needs >= %.0f cores for the %d hosts' SSH alone)\n", math.Ceil(perCopy*float64(hosts)/(1.5*oneCopy)), hosts)
	if !naive {
		return nil
	}
	start := time.Now()
	for _, h := range l.Hosts {
		if err := scp(h); err != nil {
			return err
		}
	}
	seq := time.Since(start).Seconds()
	fmt.Printf("  scp to one host at a time                        %6.1f s  = %.2f × one copy\n", seq, seq/oneCopy)
	start = time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(l.Hosts))
	for i, h := range l.Hosts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = scp(h) }()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	par := time.Since(start).Seconds()
	fmt.Printf("  scp to all hosts at once                         %6.1f s  = %.2f × one copy\n", par, par/oneCopy)
	return nil
}

// cpuSeconds is the CPU time this machine has spent so far (user, nice,
// system, irq, softirq: /proc/stat's first line), in seconds.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks float64
	for _, i := range []int{1, 2, 3, 6, 7} {
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
	}
	return ticks / 100 // USER_HZ is 100 on Linux
}

func inventory(l *lab.Lab, archive, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `provider: lab
simulated: true
ssh: {user: root, identity_files: [%s], known_hosts: [%s], config: none, concurrency: 32}
nodes:
`, l.ClientKey, l.KnownHosts)
	for _, h := range l.Hosts {
		fmt.Fprintf(&b, "  - {name: %s, address: %s}\n", h.Name, h.Addr)
	}
	fmt.Fprintf(&b, `image: {reference: "localhost/gpuaccept-lab:1@sha256:%s", runtime: podman, archive: %s, gpus: none, dir: /srv}
phases:
  preflight: {enabled: false}
  diag: {enabled: false}
`, id, archive)
	return b.String()
}

func distribution(runs string) (float64, error) {
	entries, err := os.ReadDir(runs)
	if err != nil || len(entries) != 1 {
		return 0, fmt.Errorf("no run directory in %s (%v)", runs, err)
	}
	data, err := os.ReadFile(filepath.Join(runs, entries[0].Name(), "run.json"))
	if err != nil {
		return 0, err
	}
	var r record.Run
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, err
	}
	for _, p := range r.Phases {
		if p.Phase != "image" {
			continue
		}
		var im phases.Imaged
		if err := json.Unmarshal(p.Data, &im); err != nil {
			return 0, err
		}
		for name, n := range im.Nodes {
			if n.Via != "chain" || !n.Match {
				return 0, fmt.Errorf("%s: via %q, match %v: %s", name, n.Via, n.Match, n.Error)
			}
		}
		return im.DistributionSecs, nil
	}
	return 0, fmt.Errorf("no image phase in the run")
}
