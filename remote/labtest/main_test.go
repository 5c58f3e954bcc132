package labtest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
)

// The lab is shared by every test of the package. Its name and subnet are
// this package's own so other packages' labs can run at the same time.
const (
	labName   = "rt"
	labSubnet = "10.233.0"
	labHosts  = 16
)

var (
	theLab  *lab.Lab
	skipWhy string
)

func TestMain(m *testing.M) {
	if os.Getenv("GPUACCEPT_HELPER_COORDINATOR") != "" {
		os.Exit(m.Run()) // a child coordinator, see TestCoordinatorDeath
	}
	os.Exit(lab.RunTests(m, lab.Options{Name: labName, Hosts: labHosts, Subnet: labSubnet}, nil,
		func(l *lab.Lab, why string) { theLab, skipWhy = l, why }))
}

// needLab skips when the lab cannot run here, with the reason.
func needLab(t *testing.T) *lab.Lab {
	t.Helper()
	if theLab == nil {
		t.Skipf("lab tests need root on Linux: %s", skipWhy)
	}
	return theLab
}

var sharedKeys *remote.HostKeys

// config reaches a lab host with test-sized bounds.
func config(t *testing.T, l *lab.Lab, host string) remote.SSHConfig {
	t.Helper()
	if sharedKeys == nil {
		hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: []string{l.KnownHosts}})
		if err != nil {
			t.Fatal(err)
		}
		sharedKeys = hk
	}
	h := l.Host(host)
	return remote.SSHConfig{
		Name:              h.Name,
		Host:              h.Addr,
		User:              "root",
		IdentityFiles:     []string{l.ClientKey},
		SSHConfig:         "none",
		HostKeys:          sharedKeys,
		ConnectTimeout:    3 * time.Second,
		HandshakeTimeout:  5 * time.Second,
		SessionTimeout:    5 * time.Second,
		KeepaliveInterval: 500 * time.Millisecond,
		KeepaliveMisses:   3,
		GuardLease:        3 * time.Second,
	}
}

func dial(t *testing.T, l *lab.Lab, host string) *remote.Client {
	t.Helper()
	c, err := remote.Dial(t.Context(), config(t, l, host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// marker is a sleep that only this test runs, found by pgrep without
// matching the pgrep command line itself.
func marker() (cmd, pattern string) {
	n := time.Now().UnixNano() % 1000000
	return fmt.Sprintf("sleep 600.%06d", n), fmt.Sprintf("[s]leep 600.%06d", n)
}

// leftovers lists processes matching pattern on the host, asked over a
// fresh connection (the hosts share the machine's PID namespace, so the
// pattern must be unique to the test).
func leftovers(t *testing.T, l *lab.Lab, host, pattern string) string {
	t.Helper()
	c := dial(t, l, host)
	out, err := c.Output(t.Context(), "pgrep -af '"+pattern+"' || true")
	if err != nil {
		t.Fatalf("%s: pgrep: %v", host, err)
	}
	defer c.Close()
	return string(out)
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	lab.Eventually(t, within, what, cond)
}
