// Command bench measures the transport against the standard tools on the
// lab: fan-out of `exec true` to 32 hosts against pdsh, and one large
// upload against scp. It prints figures; it asserts nothing.
//
//	go run ./remote/bench [-hosts 32] [-repeats 7] [-size-mib 256]
//
// Root on Linux; it brings up its own lab (name "bench") and tears it down.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

func main() {
	hosts := flag.Int("hosts", 32, "lab hosts for the fan-out figure")
	repeats := flag.Int("repeats", 7, "repeats of each fan-out measurement")
	sizeMiB := flag.Int("size-mib", 256, "upload size in MiB")
	uploads := flag.Int("upload-repeats", 3, "repeats of each upload measurement")
	flag.Parse()
	if err := run(*hosts, *repeats, *sizeMiB, *uploads); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(hosts, repeats, sizeMiB, uploads int) error {
	if ok, why := lab.Supported(); !ok {
		return fmt.Errorf("needs the lab: %s", why)
	}
	for _, tool := range []string{"pdsh", "scp", "ssh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed (make deps)", tool)
		}
	}
	ctx := context.Background()
	fmt.Fprintf(os.Stderr, "bringing up %d lab hosts...\n", hosts)
	l, err := lab.Up(ctx, lab.Options{Name: "bench", Hosts: hosts, Subnet: "10.234.0"})
	if err != nil {
		return err
	}
	defer l.Down(context.Background())

	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{l.KnownHosts}})
	if err != nil {
		return err
	}
	cfgs := make([]remote.SSHConfig, len(l.Hosts))
	addrs := make([]string, len(l.Hosts))
	for i, h := range l.Hosts {
		cfgs[i] = remote.SSHConfig{Name: h.Name, Host: h.Addr, User: "root", IdentityFiles: []string{l.ClientKey},
			SSHConfig: "none", HostKeys: hk}
		addrs[i] = h.Addr
	}
	sshOpts := []string{"-i", l.ClientKey, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + l.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null"}

	// Fan-out: the whole job (connect, run, close) each way, interleaved so
	// that both see the same machine state.
	var ours, oursWarm, pdsh []time.Duration
	clients, errs := remote.DialAll(ctx, cfgs, remote.FanOut{})
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %w", l.Hosts[i].Name, err)
		}
	}
	defer remote.CloseAll(clients)
	for r := 0; r < repeats+1; r++ {
		d, err := timeIt(func() error { return fanOutCold(ctx, cfgs) })
		if err != nil {
			return err
		}
		dw, err := timeIt(func() error { return fanOutWarm(ctx, clients) })
		if err != nil {
			return err
		}
		dp, err := timeIt(func() error {
			cmd := exec.CommandContext(ctx, "pdsh", "-R", "ssh", "-f", fmt.Sprint(len(addrs)), "-l", "root",
				"-w", strings.Join(addrs, ","), "true")
			cmd.Env = append(os.Environ(), "PDSH_SSH_ARGS="+strings.Join(sshOpts, " ")+" -l%u %h")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("pdsh: %v: %s", err, out)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if r == 0 {
			continue // warm-up: page cache, ARP, sshd's first fork
		}
		ours, oursWarm, pdsh = append(ours, d), append(oursWarm, dw), append(pdsh, dp)
	}

	// Upload: one host, uncapped link.
	src, err := os.CreateTemp("", "gpuaccept-bench-*")
	if err != nil {
		return err
	}
	defer os.Remove(src.Name())
	if _, err := io.CopyN(src, rand.Reader, int64(sizeMiB)<<20); err != nil {
		return err
	}
	src.Close()
	var up, scp []time.Duration
	for r := 0; r < uploads; r++ {
		d, err := timeIt(func() error {
			_, err := clients[0].Upload(ctx, src.Name(), "/srv/bench.bin", remote.TransferOptions{})
			return err
		})
		if err != nil {
			return err
		}
		ds, err := timeIt(func() error {
			args := append(append([]string{"-q"}, sshOpts...), src.Name(), "root@"+addrs[0]+":/srv/bench-scp.bin")
			if out, err := exec.CommandContext(ctx, "scp", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("scp: %v: %s", err, out)
			}
			return nil
		})
		if err != nil {
			return err
		}
		up, scp = append(up, d), append(scp, ds)
		_, _ = clients[0].Output(ctx, "rm -f /srv/bench.bin /srv/bench-scp.bin")
	}

	mb := float64(sizeMiB) * (1 << 20) / 1e6
	fmt.Printf("transport benchmark: %d lab hosts (OpenSSH sshd in network namespaces), %d cores\n", len(addrs), numCPU())
	fmt.Printf("\nexec true on %d hosts, median of %d (min..max)\n", len(addrs), repeats)
	fmt.Printf("  gpuaccept dial+exec+close   %8s  (%s..%s)\n", ms(median(ours)), ms(slices.Min(ours)), ms(slices.Max(ours)))
	fmt.Printf("  pdsh -R ssh -f %-3d          %8s  (%s..%s)\n", len(addrs), ms(median(pdsh)), ms(slices.Min(pdsh)), ms(slices.Max(pdsh)))
	fmt.Printf("  gpuaccept on open conns     %8s  (%s..%s)\n", ms(median(oursWarm)), ms(slices.Min(oursWarm)), ms(slices.Max(oursWarm)))
	fmt.Printf("  ratio pdsh / gpuaccept (cold) = %.2fx\n", seconds(median(pdsh))/seconds(median(ours)))
	fmt.Printf("\nupload %d MiB to one host, uncapped, median of %d\n", sizeMiB, uploads)
	fmt.Printf("  gpuaccept (sftp, 64 in flight, sha256 verified on the node, atomic rename)  %6.1f MB/s  %s\n", mb/seconds(median(up)), ms(median(up)))
	fmt.Printf("  scp                                                                       %6.1f MB/s  %s\n", mb/seconds(median(scp)), ms(median(scp)))
	fmt.Printf("  ratio gpuaccept / scp throughput = %.2fx\n", seconds(median(scp))/seconds(median(up)))
	return nil
}

func fanOutCold(ctx context.Context, cfgs []remote.SSHConfig) error {
	res := remote.Each(ctx, len(cfgs), remote.FanOut{}, func(ctx context.Context, i int) (struct{}, error) {
		c, err := remote.Dial(ctx, cfgs[i])
		if err != nil {
			return struct{}{}, err
		}
		defer c.Close()
		return struct{}{}, c.Run(ctx, remote.Cmd{Command: "true"})
	})
	return firstErr(res)
}

func fanOutWarm(ctx context.Context, clients []*remote.Client) error {
	res := remote.Each(ctx, len(clients), remote.FanOut{}, func(ctx context.Context, i int) (struct{}, error) {
		return struct{}{}, clients[i].Run(ctx, remote.Cmd{Command: "true"})
	})
	return firstErr(res)
}

func firstErr[T any](res []remote.Result[T]) error {
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func timeIt(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }

func numCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	var n int
	fmt.Sscan(strings.TrimSpace(string(out)), &n)
	return n
}

var _ = filepath.Join
