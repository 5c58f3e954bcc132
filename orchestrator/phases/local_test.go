package phases

import (
	"testing"

	"gpuaccept/orchestrator/inventory"
)

// The window key is for nodes that log in to each other: the machine
// gpuaccept runs on, alone in its window, gets none (its authorized_keys
// is the buyer's own); with SSH nodes, or a local node among others, it
// is installed as before.
func TestWindowKeyNotForALoneLocalNode(t *testing.T) {
	inv := &inventory.Inventory{Nodes: []inventory.Node{{Name: "here", Address: "local"}}}
	inv.Phases.AllReduce.Enabled, inv.Phases.AllReduce.Launcher = true, "mpirun"
	if WindowKey.Enabled(inv) {
		t.Error("windowkey enabled for one local node")
	}
	inv.Nodes[0].Address = "10.0.0.1"
	if !WindowKey.Enabled(inv) {
		t.Error("windowkey disabled for one SSH node with mpirun")
	}
	inv.Nodes = []inventory.Node{{Name: "here", Address: "local", FabricAddress: "10.0.0.1"}, {Name: "gpu-02", Address: "10.0.0.2"}}
	if !WindowKey.Enabled(inv) {
		t.Error("windowkey disabled for a local node among SSH nodes")
	}
}
