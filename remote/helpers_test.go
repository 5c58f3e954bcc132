package remote

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"gpuaccept/remote/sshtest"
	"gpuaccept/scripts/lab"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fleet is a set of in-process SSH servers and the configs to reach them.
type fleet struct {
	servers    []*sshtest.Server
	keyFile    string
	knownHosts string
	hostKeys   *HostKeys
	dir        string
}

// newFleet starts n servers that accept one client key, and records their
// host keys in a known_hosts file.
func newFleet(t *testing.T, n int, tweak ...func(*sshtest.Options)) *fleet {
	t.Helper()
	f := &fleet{dir: t.TempDir()}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	f.keyFile = filepath.Join(f.dir, "id_ed25519")
	if err := os.WriteFile(f.keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		o := sshtest.Options{AuthorizedKeys: []ssh.PublicKey{sshPub}, Dir: f.dir, Name: "node" + string(rune('a'+i))}
		for _, fn := range tweak {
			fn(&o)
		}
		s, err := sshtest.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		f.servers = append(f.servers, s)
	}
	t.Cleanup(func() {
		for _, s := range f.servers {
			s.Thaw()
			s.Close()
		}
	})
	f.knownHosts = filepath.Join(f.dir, "known_hosts")
	if err := sshtest.WriteKnownHosts(f.knownHosts, f.servers...); err != nil {
		t.Fatal(err)
	}
	f.hostKeys, err = NewHostKeys(HostKeyOptions{Files: []string{f.knownHosts}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// config reaches server i with short, test-sized bounds.
func (f *fleet) config(i int) SSHConfig {
	s := f.servers[i]
	return SSHConfig{
		Name:             "node-" + string(rune('a'+i)),
		Host:             s.Host(),
		Port:             s.Port(),
		User:             "tester",
		IdentityFiles:    []string{f.keyFile},
		SSHConfig:        "none",
		HostKeys:         f.hostKeys,
		ConnectTimeout:   2 * time.Second,
		HandshakeTimeout: 10 * time.Second,
		SessionTimeout:   2 * time.Second,
		// Relaxed enough for a loaded 2-core machine under -race; the
		// keepalive tests tighten it.
		KeepaliveInterval: 500 * time.Millisecond,
		KeepaliveMisses:   4,
		GuardLease:        2 * time.Second,
	}
}

func (f *fleet) dial(t *testing.T, i int, tweak ...func(*SSHConfig)) *Client {
	t.Helper()
	cfg := f.config(i)
	for _, fn := range tweak {
		fn(&cfg)
	}
	c, err := Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// running reports whether a process whose command line contains marker
// exists on this machine (the in-process "nodes" run commands locally).
func running(marker string) bool {
	out, _ := exec.Command("pgrep", "-f", marker).Output()
	return strings.TrimSpace(string(out)) != ""
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	lab.Eventually(t, within, what, cond)
}

// uniqueSleep returns a long sleep that pgrep can find unambiguously.
func uniqueSleep() (cmd, marker string) {
	marker = fmt.Sprintf("sleep 600.%06d", time.Now().UnixNano()%1000000)
	return marker, marker
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

func pemEncode(b *pem.Block) []byte { return pem.EncodeToMemory(b) }

// tightKeepalives makes a lost node show within 600ms.
func tightKeepalives(c *SSHConfig) {
	c.KeepaliveInterval, c.KeepaliveMisses = 200*time.Millisecond, 3
}
