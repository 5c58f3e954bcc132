package labtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
)

func TestDialSixteenHostsAtOnce(t *testing.T) {
	l := needLab(t)
	cfgs := make([]remote.SSHConfig, len(l.Hosts))
	for i, h := range l.Hosts {
		cfgs[i] = config(t, l, h.Name)
	}
	clients, errs := remote.DialAll(t.Context(), cfgs, remote.FanOut{Limit: len(cfgs)})
	defer remote.CloseAll(clients)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", l.Hosts[i].Name, err)
		}
	}
	res := remote.Each(t.Context(), len(clients), remote.FanOut{}, func(ctx context.Context, i int) (string, error) {
		out, err := clients[i].Output(ctx, "hostname")
		return strings.TrimSpace(string(out)), err
	})
	for i, r := range res {
		if r.Err != nil || r.Value != l.Hosts[i].Name {
			t.Errorf("%s: hostname %q, %v", l.Hosts[i].Name, r.Value, r.Err)
		}
	}
}

func TestUpload64MiBToEveryHost(t *testing.T) {
	l := needLab(t)
	src := filepath.Join(t.TempDir(), "payload")
	data := make([]byte, 64<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	res := remote.Each(t.Context(), len(l.Hosts), remote.FanOut{Limit: 8}, func(ctx context.Context, i int) (time.Duration, error) {
		c, err := remote.Dial(ctx, config(t, l, l.Hosts[i].Name))
		if err != nil {
			return 0, err
		}
		defer c.Close()
		r, err := c.Upload(ctx, src, "/srv/payload", remote.TransferOptions{})
		if err != nil {
			return 0, err
		}
		if r.SHA256 != want {
			return 0, fmt.Errorf("sha256 %s, want %s", r.SHA256, want)
		}
		// Independently of Upload's own check: what is on the node's disk.
		out, err := c.Output(ctx, "sha256sum /srv/payload")
		if err != nil {
			return 0, err
		}
		if got := strings.Fields(string(out))[0]; got != want {
			return 0, fmt.Errorf("on disk %s, want %s", got, want)
		}
		return r.Elapsed, nil
	})
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("%s: %v", l.Hosts[i].Name, r.Err)
		}
	}
	// /srv is private per host: each host holds exactly its own copy.
	for _, h := range l.Hosts[:2] {
		if _, err := os.Stat(filepath.Join(l.Dir, "hosts", h.Name, "srv", "payload")); err != nil {
			t.Errorf("%s: payload not in its private /srv: %v", h.Name, err)
		}
	}
}

func TestProxyJumpThroughLabHosts(t *testing.T) {
	l := needLab(t)
	cfg := config(t, l, "h3")
	cfg.Jump = []string{"root@" + l.Host("h1").Addr}
	c, err := remote.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// sshd on h3 sees the connection coming from h1, not the coordinator.
	out, err := c.Output(t.Context(), "echo $SSH_CONNECTION; hostname")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) < 5 || f[0] != l.Host("h1").Addr || f[4] != "h3" {
		t.Fatalf("one hop: %q", out)
	}

	cfg = config(t, l, "h4")
	cfg.Jump = []string{l.Host("h1").Addr, l.Host("h2").Addr}
	c2, err := remote.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	out, err = c2.Output(t.Context(), "echo $SSH_CONNECTION; hostname")
	f = strings.Fields(string(out))
	if err != nil || len(f) < 5 || f[0] != l.Host("h2").Addr || f[4] != "h4" {
		t.Fatalf("two hops: %q %v", out, err)
	}
}

func TestSSHConfigAliasOnRealHost(t *testing.T) {
	l := needLab(t)
	path := filepath.Join(t.TempDir(), "ssh_config")
	text := fmt.Sprintf("Host lab-five\n  HostName %s\n  User root\n  IdentityFile %s\n", l.Host("h5").Addr, l.ClientKey)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, l, "h5")
	cfg.Host, cfg.User, cfg.IdentityFiles, cfg.SSHConfig = "lab-five", "", nil, path
	c, err := remote.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out, err := c.Output(t.Context(), "hostname"); err != nil || strings.TrimSpace(string(out)) != "h5" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestKilledHostFailsFastWhileOthersFinish(t *testing.T) {
	l := needLab(t)
	hosts := []string{"h6", "h7", "h8", "h9"}
	victim := "h7"
	t.Cleanup(func() {
		if err := l.Start(context.Background(), victim); err != nil {
			t.Errorf("restart %s: %v", victim, err)
		}
	})
	clients := make([]*remote.Client, len(hosts))
	for i, h := range hosts {
		clients[i] = dial(t, l, h)
	}
	done := make(chan struct{})
	var killedAt time.Time
	go func() {
		defer close(done)
		time.Sleep(700 * time.Millisecond)
		killedAt = time.Now()
		if err := l.Kill(context.Background(), victim); err != nil {
			t.Errorf("kill: %v", err)
		}
	}()
	res := remote.Each(t.Context(), len(hosts), remote.FanOut{}, func(ctx context.Context, i int) (time.Time, error) {
		out, err := clients[i].Output(ctx, "sleep 3; echo finished")
		if err == nil && string(out) != "finished\n" {
			err = fmt.Errorf("output %q", out)
		}
		return time.Now(), err
	})
	<-done
	for i, r := range res {
		if hosts[i] == victim {
			var lost *remote.ConnectionLostError
			if !errors.As(r.Err, &lost) || lost.Node != victim {
				t.Fatalf("%s: want *ConnectionLostError naming it, got %v", victim, r.Err)
			}
			after := r.Value.Sub(killedAt)
			t.Logf("%s: failed %s after the kill: %v", victim, after.Round(time.Millisecond), r.Err)
			if after > 3*time.Second {
				t.Errorf("%s: the failure took %s, beyond the keepalive bound", victim, after)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("%s: %v", hosts[i], r.Err)
		}
	}
}

func TestCutLinkFailsWithinKeepaliveBoundAndLeavesNothing(t *testing.T) {
	l := needLab(t)
	const host = "h10"
	c := dial(t, l, host)
	cmd, pattern := marker()
	done := make(chan error, 1)
	go func() { done <- c.Run(t.Context(), remote.Cmd{Command: cmd}) }()
	eventually(t, 5*time.Second, "sleep started", func() bool { return leftovers(t, l, host, pattern) != "" })
	if err := l.Cut(t.Context(), host); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = l.Restore(context.Background(), host)
		}
	})
	start := time.Now()
	err := <-done
	elapsed := time.Since(start)
	t.Logf("%s: call failed %s after the cut: %v", host, elapsed.Round(time.Millisecond), err)
	if !errors.Is(err, remote.ErrConnectionLost) || !strings.HasPrefix(err.Error(), host+": ") {
		t.Fatalf("want connection lost naming %s, got %v", host, err)
	}
	// interval 500ms × 3 misses = 1.5s; minutes would be TCP's own timeout.
	if elapsed > 4*time.Second {
		t.Errorf("detection took %s", elapsed)
	}
	// The node never saw the connection end; the guard's lease (3s) must
	// have stopped the command by the time the link is back.
	time.Sleep(4 * time.Second)
	if err := l.Restore(t.Context(), host); err != nil {
		t.Fatal(err)
	}
	restored = true
	if left := leftovers(t, l, host, pattern); left != "" {
		t.Fatalf("left running on %s after the cut:\n%s", host, left)
	}
	if ps, _ := l.Ps(t.Context(), host); strings.Contains(ps, "gpuaccept-guard") {
		t.Fatalf("guard left running on %s:\n%s", host, ps)
	}
}

func TestCancelLeavesNoProcessOnTheNode(t *testing.T) {
	l := needLab(t)
	const host = "h11"
	c := dial(t, l, host)
	cmd, pattern := marker()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	// A pipeline and a background child: the whole group must go.
	go func() {
		done <- c.Run(ctx, remote.Cmd{Command: cmd + " & " + cmd + " | cat; wait", Grace: 2 * time.Second})
	}()
	eventually(t, 5*time.Second, "sleep started", func() bool { return leftovers(t, l, host, pattern) != "" })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want cancelled, got %v", err)
	}
	if left := leftovers(t, l, host, pattern); left != "" {
		t.Fatalf("left running after cancel:\n%s", left)
	}
	ps, err := l.Ps(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ps, "600.") || strings.Contains(ps, "gpuaccept-guard") {
		t.Fatalf("processes of ours in %s:\n%s", host, ps)
	}
}

// TestCoordinatorDeath kills a coordinator process (this test binary run
// again as a child) while its command runs, as a laptop that dies would.
func TestCoordinatorDeath(t *testing.T) {
	l := needLab(t)
	const host = "h12"
	cmd, pattern := marker()
	cfg := config(t, l, host)
	child := exec.Command(os.Args[0], "-test.run=^TestHelperCoordinator$", "-test.v")
	child.Env = append(os.Environ(),
		"GPUACCEPT_HELPER_COORDINATOR=1",
		"HELPER_ADDR="+cfg.Host, "HELPER_KEY="+cfg.IdentityFiles[0],
		"HELPER_KNOWN_HOSTS="+l.KnownHosts, "HELPER_CMD="+cmd)
	out := &strings.Builder{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "child's command started", func() bool { return leftovers(t, l, host, pattern) != "" })
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	// The kernel closes the dead coordinator's socket; sshd ends the
	// session; the guard sees its control stream end.
	eventually(t, 5*time.Second, "command stopped after the coordinator died", func() bool {
		return leftovers(t, l, host, pattern) == ""
	})
	if ps, _ := l.Ps(t.Context(), host); strings.Contains(ps, "gpuaccept-guard") {
		t.Fatalf("guard left running:\n%s", ps)
	}
}

func TestHelperCoordinator(t *testing.T) {
	if os.Getenv("GPUACCEPT_HELPER_COORDINATOR") == "" {
		t.Skip("run by TestCoordinatorDeath")
	}
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{os.Getenv("HELPER_KNOWN_HOSTS")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.Dial(t.Context(), remote.SSHConfig{
		Name: "coordinator-child", Host: os.Getenv("HELPER_ADDR"), User: "root", SSHConfig: "none",
		IdentityFiles: []string{os.Getenv("HELPER_KEY")}, HostKeys: hk,
		// A lease far longer than the test: only the connection's end may
		// stop the command.
		GuardLease: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal(c.Run(t.Context(), remote.Cmd{Command: os.Getenv("HELPER_CMD")}))
}

func TestChangedHostKeyIsRefusedOnRealHost(t *testing.T) {
	l := needLab(t)
	const host = "h13"
	old := filepath.Join(t.TempDir(), "known_hosts.before")
	data, err := os.ReadFile(l.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Rekey(t.Context(), host); err != nil {
		t.Fatal(err)
	}
	for _, acceptNew := range []bool{false, true} {
		hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{old}, AcceptNew: acceptNew})
		if err != nil {
			t.Fatal(err)
		}
		cfg := config(t, l, host)
		cfg.HostKeys = hk
		_, err = remote.Dial(t.Context(), cfg)
		var changed *remote.HostKeyChangedError
		if !errors.As(err, &changed) || len(changed.Known) == 0 || changed.Known[0].File != old {
			t.Fatalf("accept-new=%v: want *HostKeyChangedError naming %s, got %v", acceptNew, old, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%s:%d", old, changed.Known[0].Line)) {
			t.Errorf("error does not name file and line: %v", err)
		}
	}
	// With the lab's rewritten known_hosts the host is fine again.
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{l.KnownHosts}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, l, host)
	cfg.HostKeys = hk
	c, err := remote.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestAcceptNewWritesWhatOpenSSHReads(t *testing.T) {
	l := needLab(t)
	file := filepath.Join(t.TempDir(), "known_hosts")
	strict, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, l, "h14")
	cfg.HostKeys = strict
	var unknown *remote.UnknownHostKeyError
	if _, err := remote.Dial(t.Context(), cfg); !errors.As(err, &unknown) {
		t.Fatalf("want unknown host, got %v", err)
	}
	tofu, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{file}, AcceptNew: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.HostKeys = tofu
	c, err := remote.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The real ssh client accepts the line we wrote, in strict mode.
	out, err := exec.CommandContext(t.Context(), "ssh", "-i", l.ClientKey, "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+file, "-o", "GlobalKnownHostsFile=/dev/null",
		"root@"+l.Host("h14").Addr, "hostname").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "h14" {
		t.Fatalf("OpenSSH with our known_hosts: %q %v", out, err)
	}
}
