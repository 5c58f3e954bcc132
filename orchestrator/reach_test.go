package orchestrator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
	"gpuaccept/remote/fake"
)

// Host keys are read only for a transport that has them: a window on the
// machine gpuaccept runs on does not fail on a known_hosts it never uses,
// and one over SSH says before any dial that its known_hosts is unreadable.
func TestReachReadsHostKeysOnlyForSSH(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(bad, []byte("this is no known_hosts line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	over := &inventory.Inventory{SSH: inventory.SSH{KnownHosts: []string{bad}}, Nodes: []inventory.Node{{Name: "a", Address: "10.0.0.1"}}}
	if _, err := NewReach(over, nil); err == nil {
		t.Error("an unreadable known_hosts did not stop a window over SSH")
	}
	here := &inventory.Inventory{SSH: inventory.SSH{KnownHosts: []string{bad}}, Nodes: []inventory.Node{{Name: "here", Address: "local"}}}
	f := fake.NewFleet("here")
	r, err := NewReach(here, f.Dial)
	if err != nil {
		t.Fatalf("a local window read known_hosts: %v", err)
	}
	cfg := r.Config(here.Nodes[0])
	if cfg.Local == nil || cfg.SSH != nil {
		t.Fatalf("config %+v: want the local transport", cfg)
	}
	e, err := r.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if f.Dials("here") != 1 || r.FanOut() != 1 {
		t.Errorf("dials %d, fan-out %d: the given Dialer reaches the node, one machine at a time", f.Dials("here"), r.FanOut())
	}
}

// A node of a managed cluster: its pod carries the run's label (cut to a
// label's 63 characters, two runs still two values), and a binary without
// the Kubernetes transport (this test's) says so when the run's pods are
// to be released, rather than saying nothing was left.
func TestReachMarksTheRunsPods(t *testing.T) {
	inv := &inventory.Inventory{Transport: inventory.TransportKubernetes, Nodes: []inventory.Node{{Name: "gpu-01", Address: "gpu-01.pool"}}}
	r, err := NewReach(inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReleasePods(t.Context()); err == nil {
		t.Error("released the pods of no run")
	}
	r.ForRun("20261206T163500Z-vendor-k-3f2c")
	cfg := r.Config(inv.Nodes[0])
	if cfg.Kube == nil || cfg.Kube.Node != "gpu-01.pool" || cfg.Kube.Labels[KubeRunLabel] != "20261206T163500Z-vendor-k-3f2c" {
		t.Fatalf("config %+v", cfg.Kube)
	}
	if _, err := r.ReleasePods(t.Context()); !errors.Is(err, remote.ErrNoKube) {
		t.Errorf("ReleasePods = %v; want ErrNoKube", err)
	}
	long := "20261206T163500Z-" + strings.Repeat("w", 40) + "-3f2c-17"
	a, b := labelValue(long), labelValue(long[:len(long)-1]+"8")
	if len(a) > 63 || a == b || !strings.HasPrefix(a, "20261206T163500Z-www") {
		t.Errorf("labelValue: %q, %q", a, b)
	}
	here, err := NewReach(&inventory.Inventory{Nodes: []inventory.Node{{Name: "here", Address: "local"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	here.ForRun("r1")
	if names, err := here.ReleasePods(t.Context()); names != nil || err != nil {
		t.Errorf("a window without a Kubernetes node released pods: %v, %v", names, err)
	}
}
