package phases

import (
	"context"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Preflight collects each node's identity and GPU facts (nvidia-smi -L,
// --query-gpu, -q, topo -m, dcgmi discovery, ibstat / ibv_devinfo, kernel,
// OS, CPU, memory) in one pass, and checks them against the quote and
// against the other nodes. Gating: a node whose GPUs cannot be read takes
// no part in the multi-node tests.
var Preflight = orchestrator.Phase{
	Name:   "preflight",
	Gating: true,
	Enabled: func(inv *inventory.Inventory) bool {
		return inventory.On(inv.Phases.Preflight.Enabled)
	},
	Own: func(inv *inventory.Inventory) bool { return inv.Phases.Preflight.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return orDefault(inv.Phases.Preflight.Timeout, 3*time.Minute)
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		out, err := runOn(ctx, w, n, toolCmd(w.RunID(), n.Name, "preflight.sh"))
		if err != nil {
			return nil, err
		}
		facts := factsFrom(splitSections(string(out)))
		if err := facts.usable(); err != nil {
			// Keep the facts: the report shows what the node did say.
			return facts, err
		}
		return facts, nil
	},
	Judge: func(w *orchestrator.Window) []record.Verdict { return append(judgePreflight(w), judgeHealth(w)...) },
}
