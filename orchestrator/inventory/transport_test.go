package inventory

import (
	"testing"
	"time"

	"gpuaccept/remote"
)

// The transport key chooses how a node is reached; an inventory without
// one reaches its nodes as before it existed: ssh, and local for
// address: local.
func TestTransportChoosesTheNodesConfig(t *testing.T) {
	for _, c := range []struct {
		name, text string
		local      bool
		fanOut     int
		keys       bool
	}{
		{"no key: ssh", "nodes: [{name: a, address: 10.0.0.1}, {name: b, address: 10.0.0.2}]\n", false, 32, true},
		{"address local, as before", "nodes: [{name: here, address: local}]\n", true, 1, false},
		{"transport local, no address", "transport: local\nnodes: [{name: here}]\n", true, 1, false},
		{"the node's own", "nodes: [{name: here, transport: local}]\n", true, 1, false},
		{"ssh named", "transport: ssh\nnodes: [{name: a, address: 10.0.0.1, transport: ssh}]\n", false, 32, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv, err := parseText(t, rangesHead+c.text)
			if err != nil {
				t.Fatal(err)
			}
			n := inv.Nodes[0]
			cfg := inv.NodeConfig(n, nil)
			if got := cfg.Local != nil; got != c.local || (cfg.SSH != nil) == c.local || cfg.Name != n.Name {
				t.Fatalf("config %+v: want local %v", cfg, c.local)
			}
			if c.local && (n.Address != remote.LocalAddress || !n.Local() || inv.TransportOf(n) != TransportLocal) {
				t.Errorf("a node reached locally: address %q, transport %q", n.Address, inv.TransportOf(n))
			}
			if inv.FanOut() != c.fanOut || inv.NeedsHostKeys() != c.keys {
				t.Errorf("fan-out %d, host keys %v; want %d, %v", inv.FanOut(), inv.NeedsHostKeys(), c.fanOut, c.keys)
			}
			keys, err := inv.HostKeys()
			if err != nil || (keys != nil) != c.keys {
				t.Errorf("HostKeys = %v, %v: want them only over SSH", keys, err)
			}
		})
	}
}

// Connect's bound is the transport's: every SSH hop at its full connect
// and handshake time; the inventory's own only where an SSH node takes it.
func TestReachWithinIsTheTransports(t *testing.T) {
	inv, err := parseText(t, `provider: vendor-a
ssh: {user: ubuntu, known_hosts: [known_hosts], config: none, jump: [bastion], connect_timeout: 2s, handshake_timeout: 3s}
nodes: [{name: a, address: 10.0.0.1}]
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.ReachWithin(); got != 10*time.Second || !inv.ReachBoundGiven() {
		t.Errorf("two hops of 2s + 3s: %s (given %v)", got, inv.ReachBoundGiven())
	}
	local, err := parseText(t, "provider: me\nssh: {connect_timeout: 2s}\nnodes: [{name: here, address: local}]\n")
	if err != nil {
		t.Fatal(err)
	}
	if local.ReachWithin() != 0 || local.ReachBoundGiven() {
		t.Errorf("local: %s (given %v): nothing to reach, and ssh's timeouts are not its", local.ReachWithin(), local.ReachBoundGiven())
	}
}

// A window in its own allocation has as many nodes as it asks for: the
// phases that need two are judged against that, not the empty list.
func TestPlannedNodes(t *testing.T) {
	for _, c := range []struct {
		inv  Inventory
		want int
	}{
		{Inventory{Nodes: []Node{{Name: "a"}, {Name: "b"}}}, 2},
		{Inventory{Slurm: Slurm{Allocate: &SlurmAllocate{Nodes: 4}}}, 4},
		{Inventory{Slurm: Slurm{Allocate: &SlurmAllocate{NodeList: "gpu[01-03],gpu07"}}}, 4},
		{Inventory{}, 0},
	} {
		if got := c.inv.PlannedNodes(); got != c.want {
			t.Errorf("%+v: %d nodes, want %d", c.inv.Slurm.Allocate, got, c.want)
		}
	}
}

// Transport srun shares a job step among the nodes' commands unless
// slurm.steps says each: shared, the window works on every node at once
// (the more start together, the fewer steps); each, ssh.concurrency at a
// time, as every step is an SSH session on the login node.
func TestSrunStepsChooseTheFanOut(t *testing.T) {
	for _, c := range []struct {
		steps  string
		fanOut int
		each   bool
	}{{"", 0, false}, {"steps: shared", 0, false}, {"steps: EACH", 32, true}} {
		inv, err := parseText(t, "provider: fake\ntransport: srun\nssh: {user: root}\nslurm:\n  login: {address: login.example}\n"+
			"  partition: gpu\n  allocate: {nodes: 2}\n  "+c.steps+"\n")
		if err != nil {
			t.Fatalf("%q: %v", c.steps, err)
		}
		cfg := inv.NodeConfig(Node{Name: "gpu1", SlurmJob: "12"}, nil)
		if inv.FanOut() != c.fanOut || cfg.Srun == nil || cfg.Srun.StepEach != c.each {
			t.Errorf("%q: fan-out %d, config %+v; want %d, StepEach %v", c.steps, inv.FanOut(), cfg.Srun, c.fanOut, c.each)
		}
	}
}
