package lab_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

// This test owns lab name "labtel" and subnet 10.251.0.
const (
	telName   = "labtel"
	telSubnet = "10.251.0"
)

// TestTelemetryStandinsPerHost: on two lab hosts over ssh, what the telemetry sampler will see. The nvidia-smi
// loop answers the genuine load rows on the host where the nccl stand-in runs and the idle rows on the other (the
// busy marker is per host: each host's own /srv); the planted Xid is in h1's dmesg; every session has
// GPUACCEPT_SYSFS_IB, and h1's tree shows the planted link down once the loop ran.
func TestTelemetryStandinsPerHost(t *testing.T) {
	if why, err := lab.TestSkip(); err != nil {
		t.Fatalf("root on Linux, yet the lab cannot run: %v", err)
	} else if why != "" {
		t.Skipf("lab not supported here: %s", why)
	}
	for _, tool := range []string{"ssh", "mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Name: telName, Hosts: 2, Subnet: telSubnet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), telName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	tmp := t.TempDir() // under /tmp, which the hosts share
	bin := filepath.Join(tmp, "standin")
	if err := lab.BuildStandin(ctx, bin); err != nil {
		t.Fatal(err)
	}
	nccl := filepath.Join(tmp, "nccl")
	if out, err := exec.CommandContext(ctx, "bash", "../standins/nccl/build.sh", nccl).CombinedOutput(); err != nil {
		t.Fatalf("build the nccl stand-in: %v\n%s", err, out)
	}
	plants := map[string]string{"h1": "xid:48@0:gpu=1, linkdown@0:port=mlx5_3:1", "h2": ""}
	for _, h := range l.Hosts {
		dir := l.BinDir(h.Name)
		if err := standins.Install(dir, "h100", []string{bin}); err != nil {
			t.Fatal(err)
		}
		tel := standins.Telemetry{State: l.StandinState(h.Name), Plant: plants[h.Name]}
		if err := standins.InstallTelemetry(dir, "h100", []string{bin}, tel); err != nil {
			t.Fatal(err)
		}
	}
	run := func(host, command string) string {
		t.Helper()
		out, err := sshTo(ctx, l, l.KnownHosts, 10, l.Host(host), command)
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", host, command, err, out)
		}
		return out
	}
	// A second of the loop: its first tick is at once, so every row is GPU index and utilisation.
	utils := func(host string) string {
		t.Helper()
		out, _ := sshTo(ctx, l, l.KnownHosts, 10, l.Host(host),
			"timeout 1 nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -lms 300")
		first := strings.Join(strings.Split(out, "\n")[:8], ";")
		return first
	}
	idle := "0, 0;1, 0;2, 0;3, 0;4, 0;5, 0;6, 0;7, 0"
	load := "0, 100;1, 100;2, 100;3, 100;4, 100;5, 100;6, 100;7, 100"
	if got := utils("h1"); got != idle {
		t.Fatalf("h1 idle: %q", got)
	}
	// The nccl stand-in as the window starts it: mpirun over ssh, no stand-in environment.
	pid := run("h1", "cp "+filepath.Join(nccl, "all_reduce_perf")+" /usr/local/bin/ && "+
		"{ setsid mpirun --allow-run-as-root -np 1 all_reduce_perf -b 1M -e 1M -n 100000000 -w 0 "+
		">/dev/null 2>&1 </dev/null & echo $!; }")
	stop := func() { exec.Command("kill", pid).Run() } // mpirun passes SIGTERM on to its rank
	t.Cleanup(stop)
	lab.Eventually(t, 30*time.Second, "h1 loaded", func() bool { return utils("h1") == load })
	if got := utils("h2"); got != idle {
		t.Errorf("h2 while h1 runs the collective: %q, want idle", got)
	}
	stop()
	lab.Eventually(t, 30*time.Second, "h1 idle again", func() bool { return utils("h1") == idle })

	if got := run("h1", "dmesg"); !strings.Contains(got, "NVRM: Xid (PCI:0000:64:00): 48, pid='<unknown>'") {
		t.Errorf("h1 dmesg: %q", got)
	}
	tree := run("h1", `echo "$GPUACCEPT_SYSFS_IB"; cat "$GPUACCEPT_SYSFS_IB"/mlx5_3/ports/1/state `+
		`"$GPUACCEPT_SYSFS_IB"/mlx5_3/ports/1/counters/link_downed "$GPUACCEPT_SYSFS_IB"/mlx5_0/ports/1/state`)
	if want := standins.IBTreeInHost + "\n1: DOWN\n1\n4: ACTIVE"; tree != want {
		t.Errorf("h1's IB tree:\n%s\nwant:\n%s", tree, want)
	}
	if got := run("h2", `cat "$GPUACCEPT_SYSFS_IB"/mlx5_3/ports/1/state`); got != "4: ACTIVE" {
		t.Errorf("h2's IB tree: %q", got)
	}
}
