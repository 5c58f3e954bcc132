package lab_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
)

// This test owns lab name "labt" and subnet 10.232.0; other tests that run labs must pick others.
const (
	testName   = "labt"
	testSubnet = "10.232.0"
)

// sshTo runs the real OpenSSH client against a lab host with the given known_hosts file; connectTimeout in
// seconds covers the TCP connect and the SSH banner.
func sshTo(ctx context.Context, l *lab.Lab, knownHosts string, connectTimeout int, h lab.Host, command string) (string, error) {
	cmd := exec.CommandContext(ctx, "ssh", "-F", "/dev/null",
		"-i", l.ClientKey,
		"-o", "UserKnownHostsFile="+knownHosts,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout="+strconv.Itoa(connectTimeout),
		"-o", "KexAlgorithms=curve25519-sha256", // 0.15 s a connection instead of 0.3 s (LAB.md)
		"root@"+h.Addr, command)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestLab(t *testing.T) {
	if why, err := lab.TestSkip(); err != nil {
		t.Fatalf("root on Linux, yet the lab cannot run: %v", err)
	} else if why != "" {
		t.Skipf("lab not supported here: %s (run as root on Linux: sudo go test ./scripts/lab/)", why)
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("the lab test needs the OpenSSH client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	l, err := lab.Up(ctx, lab.Options{Name: testName, Hosts: 3, Subnet: testSubnet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), testName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	t.Logf("up: %v", time.Since(start))
	if len(l.Hosts) != 3 || l.Hosts[2] != (lab.Host{Name: "h3", Addr: "10.232.0.13", Index: 2}) {
		t.Fatalf("hosts = %+v", l.Hosts)
	}
	if got := l.Host("2"); got.Name != "h2" || l.Host("h2") != got || l.Host("h9") != (lab.Host{}) {
		t.Fatalf("Host lookup: %+v", got)
	}
	h1, h2, h3 := l.Hosts[0], l.Hosts[1], l.Hosts[2]
	// a generous connect timeout (a loaded CI machine), 2 s where a cut link must make ssh fail
	ssh := func(h lab.Host, command string) (string, error) { return sshTo(ctx, l, l.KnownHosts, 15, h, command) }
	mustSSH := func(h lab.Host, command, want string) {
		t.Helper()
		out, err := ssh(h, command)
		if err != nil || out != want {
			t.Fatalf("ssh %s %q = %q, %v; want %q", h.Name, command, out, err, want)
		}
	}

	t.Run("hostnames", func(t *testing.T) {
		for _, h := range l.Hosts {
			mustSSH(h, "hostname", h.Name)
		}
	})

	t.Run("inter-host ssh by name", func(t *testing.T) {
		out, err := l.Exec(ctx, "h1", "ssh", "h2", "hostname")
		if err != nil || strings.TrimSpace(out) != "h2" {
			t.Fatalf("h1: ssh h2 hostname = %q, %v", out, err)
		}
		out, err = l.Exec(ctx, "3", "sh", "-c", "hostname; getent hosts h1")
		if err != nil || !strings.HasPrefix(out, "h3\n10.232.0.11") {
			t.Fatalf("h3: hostname; getent hosts h1 = %q, %v", out, err)
		}
	})

	t.Run("private /srv", func(t *testing.T) {
		mustSSH(h1, "echo one >/srv/marker && cat /srv/marker", "one")
		mustSSH(h2, "test -e /srv/marker && echo shared || echo private", "private")
		if _, err := os.Stat(filepath.Join(l.Dir, "hosts", "h1", "srv", "marker")); err != nil {
			t.Fatalf("h1's /srv is not DIR/hosts/h1/srv: %v", err)
		}
	})

	t.Run("ps", func(t *testing.T) {
		out, err := l.Ps(ctx, "h1")
		if err != nil || !strings.Contains(out, "PID") || !strings.Contains(out, "sshd") {
			t.Fatalf("ps h1 = %q, %v", out, err)
		}
	})

	t.Run("kill and start", func(t *testing.T) {
		if err := l.Kill(ctx, "h2"); err != nil {
			t.Fatal(err)
		}
		if out, err := ssh(h2, "hostname"); err == nil {
			t.Fatalf("ssh to killed h2 worked: %q", out)
		}
		if out, err := l.Ps(ctx, "h2"); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("ps of killed h2 = %q, %v; want the header only", out, err)
		}
		if out, err := l.Exec(ctx, "h2", "hostname"); err != nil || strings.TrimSpace(out) != "h2" {
			t.Fatalf("exec on killed h2 = %q, %v", out, err)
		}
		if err := l.Start(ctx, "h2"); err != nil {
			t.Fatal(err)
		}
		mustSSH(h2, "hostname", "h2")
	})

	t.Run("cut and restore", func(t *testing.T) {
		if err := l.Cut(ctx, "h3"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if out, err := sshTo(ctx, l, l.KnownHosts, 2, h3, "hostname"); err == nil {
			t.Fatalf("ssh to cut h3 worked: %q", out)
		}
		if d := time.Since(t0); d < time.Second {
			t.Errorf("ssh to cut h3 failed after %v, want a timeout (packets vanish)", d)
		}
		if err := l.Restore(ctx, "h3"); err != nil {
			t.Fatal(err)
		}
		mustSSH(h3, "hostname", "h3")
	})

	t.Run("cap and uncap", func(t *testing.T) {
		if err := l.Cap(ctx, "h3", "100mbit"); err != nil {
			t.Fatal(err)
		}
		out, err := l.Exec(ctx, "h3", "tc", "qdisc", "show", "dev", "eth0")
		if err != nil || !strings.Contains(out, "tbf") || !strings.Contains(out, "100Mbit") {
			t.Fatalf("h3 eth0 after cap: %q, %v", out, err)
		}
		if err := l.Uncap(ctx, "h3"); err != nil {
			t.Fatal(err)
		}
		if out, err := l.Exec(ctx, "h3", "tc", "qdisc", "show", "dev", "eth0"); err != nil || strings.Contains(out, "tbf") {
			t.Fatalf("h3 eth0 after uncap: %q, %v", out, err)
		}
		if err := l.Uncap(ctx, "h3"); err != nil {
			t.Fatalf("second uncap: %v", err)
		}
	})

	t.Run("cap-to shapes one link", func(t *testing.T) {
		// h3 sends to h2 at 20 Mbit/s, to h1 at its own cap (100 Mbit/s):
		// what a slow link between two hosts is (cap-to on both ends).
		t.Cleanup(func() { _ = l.Uncap(context.Background(), "h3") })
		if err := l.Cap(ctx, "h3", "100mbit"); err != nil {
			t.Fatal(err)
		}
		if err := l.CapTo(ctx, "h3", "20mbit", "h2"); err != nil {
			t.Fatal(err)
		}
		rate := func(to string) float64 {
			t.Helper()
			const sink = `import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 5201)); s.listen(1); c, _ = s.accept()
while c.recv(65536): pass
c.close()`
			if _, err := l.Exec(ctx, to, "bash", "-c", "timeout 30 python3 -c '"+sink+"' >/dev/null 2>&1 &"); err != nil {
				t.Fatal(err)
			}
			const send = `import socket, sys, time
for _ in range(50):
    try: c = socket.create_connection((sys.argv[1], 5201)); break
    except OSError: time.sleep(0.1)
t = time.time(); b = b"x" * 65536
for _ in range(40): c.sendall(b)
c.shutdown(socket.SHUT_WR); c.recv(1); print(40 * 65536 * 8 / 1e6 / (time.time() - t))`
			out, err := l.Exec(ctx, "h3", "python3", "-c", send, l.Host(to).Addr)
			if err != nil {
				t.Fatal(err)
			}
			mbit, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
			if err != nil {
				t.Fatalf("h3 -> %s: %q", to, out)
			}
			return mbit
		}
		slow, fast := rate("h2"), rate("h1")
		t.Logf("h3 -> h2 %.1f Mbit/s, h3 -> h1 %.1f Mbit/s", slow, fast)
		if slow > 22 || fast < 2*slow {
			t.Errorf("h3 -> h2 %.1f Mbit/s (cap-to 20mbit), h3 -> h1 %.1f Mbit/s (cap 100mbit)", slow, fast)
		}
		if err := l.CapTo(ctx, "h3", "30mbit", "h1"); err == nil || !strings.Contains(err.Error(), "one rate a host") {
			t.Errorf("a second rate on h3: %v", err)
		}
		// Again at the same rate: one more peer, the first kept.
		if err := l.CapTo(ctx, "h3", "20mbit", "h1"); err != nil {
			t.Fatal(err)
		}
		out, err := l.Exec(ctx, "h3", "tc", "filter", "show", "dev", "eth0")
		if err != nil || strings.Count(out, "flowid 1:20") != 2 {
			t.Errorf("h3's filters after a second cap-to: %q, %v", out, err)
		}
	})

	t.Run("rekey", func(t *testing.T) {
		old, err := os.ReadFile(l.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		oldFile := filepath.Join(t.TempDir(), "known_hosts.old")
		if err := os.WriteFile(oldFile, old, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := l.Rekey(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		out, err := sshTo(ctx, l, oldFile, 15, h1, "hostname")
		if err == nil || !strings.Contains(out, "HOST IDENTIFICATION HAS CHANGED") {
			t.Fatalf("ssh h1 with the old known_hosts = %q, %v; want host key changed", out, err)
		}
		mustSSH(h1, "hostname", "h1")
		// the hosts' shared known_hosts has the new key too
		if out, err := l.Exec(ctx, "h2", "ssh", "h1", "hostname"); err != nil || strings.TrimSpace(out) != "h1" {
			t.Fatalf("h2: ssh h1 after rekey = %q, %v", out, err)
		}
	})

	t.Run("errors name the host", func(t *testing.T) {
		err := l.Kill(ctx, "h9")
		if err == nil || !strings.HasPrefix(err.Error(), "lab h9: kill: ") || !strings.Contains(err.Error(), "no such host") {
			t.Fatalf("kill h9: %v", err)
		}
		_, err = l.Exec(ctx, "h1", "false")
		var ee *exec.ExitError
		if err == nil || !strings.HasPrefix(err.Error(), "lab h1: exec false: ") || !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exec false: %v", err)
		}
	})

	t.Run("down", func(t *testing.T) {
		t0 := time.Now()
		if err := l.Down(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("down: %v", time.Since(t0))
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), testName+"-h") {
			t.Errorf("namespaces left: %s", out)
		}
		if out, _ := exec.Command("ip", "-o", "link", "show").Output(); strings.Contains(string(out), testName+"v") ||
			strings.Contains(string(out), "br-"+testName) {
			t.Errorf("interfaces left: %s", out)
		}
		mounts, err := os.ReadFile("/proc/mounts")
		if err != nil {
			t.Fatal(err)
		}
		if s := string(mounts); strings.Contains(s, l.Dir) || strings.Contains(s, "/run/netns/"+testName+"-") {
			t.Errorf("mounts left:\n%s", s)
		}
		if _, err := os.Stat(l.Dir); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", l.Dir, err)
		}
		if err := l.Down(ctx); err != nil {
			t.Errorf("second down: %v", err)
		}
	})
}
