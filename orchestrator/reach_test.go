package orchestrator

import (
	"os"
	"path/filepath"
	"testing"

	"gpuaccept/orchestrator/inventory"
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
