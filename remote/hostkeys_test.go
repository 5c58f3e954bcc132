package remote

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"gpuaccept/remote/sshtest"
)

func TestUnknownHostIsRefusedWithFingerprintAndHowToAccept(t *testing.T) {
	f := newFleet(t, 1)
	empty := filepath.Join(f.dir, "empty_known_hosts")
	hk, err := NewHostKeys(HostKeyOptions{Files: []string{empty}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config(0)
	cfg.HostKeys = hk
	_, err = Dial(t.Context(), cfg)
	var unknown *UnknownHostKeyError
	if !errors.As(err, &unknown) {
		t.Fatalf("want *UnknownHostKeyError, got %T %v", err, err)
	}
	fp := ssh.FingerprintSHA256(f.servers[0].HostKey())
	for _, want := range []string{"node-a: ", fp, "ssh-keyscan -p " + fmt.Sprint(f.servers[0].Port()), empty, "accept-new"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Error("strict mode wrote a known_hosts file")
	}
}

func TestAcceptNewUnderConcurrencyRecordsEachHostOnce(t *testing.T) {
	const nodes, dialsPerNode = 12, 3
	f := newFleet(t, nodes)
	file := filepath.Join(f.dir, "tofu_known_hosts")
	// Two HostKeys on one file stand for two gpuaccept processes.
	var dbs []*HostKeys
	for i := 0; i < 2; i++ {
		hk, err := NewHostKeys(HostKeyOptions{Files: []string{file}, AcceptNew: true})
		if err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, hk)
	}
	var wg sync.WaitGroup
	errs := make(chan error, nodes*dialsPerNode)
	for i := 0; i < nodes; i++ {
		for j := 0; j < dialsPerNode; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := f.config(i)
				cfg.HostKeys = dbs[j%2]
				c, err := Dial(t.Context(), cfg)
				if err != nil {
					errs <- err
					return
				}
				c.Close()
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lines := readLines(t, file)
	if len(lines) != nodes {
		t.Fatalf("known_hosts has %d lines for %d nodes:\n%s", len(lines), nodes, strings.Join(lines, "\n"))
	}
	// What was recorded is what a strict reader accepts.
	strict, err := NewHostKeys(HostKeyOptions{Files: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < nodes; i++ {
		cfg := f.config(i)
		cfg.HostKeys = strict
		c, err := Dial(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

func TestChangedHostKeyIsRefusedEvenWithAcceptNew(t *testing.T) {
	f := newFleet(t, 2)
	newKey, err := sshtest.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	f.servers[1].SetHostKey(newKey)
	for _, acceptNew := range []bool{false, true} {
		hk, err := NewHostKeys(HostKeyOptions{Files: []string{f.knownHosts}, AcceptNew: acceptNew})
		if err != nil {
			t.Fatal(err)
		}
		cfg := f.config(1)
		cfg.HostKeys = hk
		_, err = Dial(t.Context(), cfg)
		var changed *HostKeyChangedError
		if !errors.As(err, &changed) {
			t.Fatalf("accept-new=%v: want *HostKeyChangedError, got %v", acceptNew, err)
		}
		// The second server's line is line 2 of the file.
		if len(changed.Known) != 1 || changed.Known[0].File != f.knownHosts || changed.Known[0].Line != 2 {
			t.Fatalf("known keys %+v", changed.Known)
		}
		for _, want := range []string{"node-b: ", "HOST KEY CHANGED", f.knownHosts + ":2", ssh.FingerprintSHA256(newKey.PublicKey()), "ssh-keygen -R"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
	if n := len(readLines(t, f.knownHosts)); n != 2 {
		t.Fatalf("known_hosts changed: %d lines", n)
	}
}

func TestHashedKnownHostsEntries(t *testing.T) {
	f := newFleet(t, 1)
	s := f.servers[0]
	hashed := filepath.Join(f.dir, "hashed_known_hosts")
	line := knownhosts.Line([]string{knownhosts.HashHostname(knownhosts.Normalize(s.Addr()))}, s.HostKey())
	if err := os.WriteFile(hashed, []byte("# comment\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "|1|") {
		t.Fatalf("not a hashed line: %s", line)
	}
	hk, err := NewHostKeys(HostKeyOptions{Files: []string{hashed}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config(0)
	cfg.HostKeys = hk
	c, err := Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestOnlyRecordedAlgorithmsAreOffered(t *testing.T) {
	f := newFleet(t, 1)
	got := f.hostKeys.Algorithms(f.servers[0].Addr())
	if len(got) != 1 || got[0] != ssh.KeyAlgoED25519 {
		t.Fatalf("algorithms for a host with one ed25519 key: %v", got)
	}
	if got := f.hostKeys.Algorithms("10.9.9.9:22"); len(got) != 0 {
		t.Fatalf("algorithms for an unknown host: %v", got)
	}
}

func TestBadKnownHostsFileIsNamed(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(bad, []byte("host ssh-ed25519 not-base64!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewHostKeys(HostKeyOptions{Files: []string{bad}})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("want an error naming %s, got %v", bad, err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var lines []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestCauseOfSaysWhoseSideAFailureIsOn: a window that cannot reach a node
// for the buyer's own reasons is incomplete, not a provider's failure.
func TestCauseOfSaysWhoseSideAFailureIsOn(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err   error
		kind  string
		buyer bool
	}{
		{withNode("n1", "", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "bastion.vendor-a", IsNotFound: true}}), "name resolution", true},
		{withNode("n1", "jump host bastion:22", refused), "jump host", true},
		{&UnknownHostKeyError{Node: "n1", Host: "h:22"}, "unknown host key", true},
		{&HostKeyChangedError{Node: "n1", Host: "h:22"}, "host key changed", true},
		{withNode("n1", "", &AuthError{Addr: "h:22", User: "root", Err: errors.New("ssh: unable to authenticate")}), "authentication", true},
		{withNode("n1", "", refused), "refused", false},
		{&TimeoutError{Node: "n1", Step: "handshake"}, "timeout", false},
	} {
		if c := CauseOf(tc.err); c.Kind != tc.kind || c.Buyer != tc.buyer {
			t.Errorf("CauseOf(%v) = %+v, want %s (buyer %v)", tc.err, c, tc.kind, tc.buyer)
		}
	}
}
