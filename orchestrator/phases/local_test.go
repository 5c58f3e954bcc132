package phases

import (
	"testing"

	"gpuaccept/orchestrator/inventory"
)

// The window key is for nodes that log in to each other: the machine
// gpuaccept runs on, alone in its window, gets none (its authorized_keys
// is the buyer's own); with SSH nodes it is installed as before (a local
// node among others is refused when the inventory loads).
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
}
