package main

import (
	"io"
	"math"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// connectJSON is check --connect -o json: the quote lint's warnings and
// what the nodes answered, for machines. Its keys are stable; lists are
// in a fixed order (nodes as the inventory has them, groups the most
// nodes first).
type connectJSON struct {
	Warnings []inventory.Warning
	// Allocation: what the login node's Slurm said of the window's own
	// allocation (its nodes are unknown until granted).
	Allocation *allocationJSON
	// KubeAccess: what the credential may do of what a window asks of a
	// Kubernetes API (remote.KubeNeeds), when some node is a pod;
	// KubeAccessError why it could not be asked.
	KubeAccess      []kubeAccessJSON
	KubeAccessError string
}

// allocationJSON is check --connect's answer for a window in its own
// Slurm allocation.
type allocationJSON struct {
	Login string `json:"login"`
	// Slurm: sbatch --test-only's line, when Slurm would grant it.
	Slurm string `json:"slurm,omitempty"`
	// Error: why the login node was not reached, or Slurm's refusal.
	Error string `json:"error,omitempty"`
	// Pyxis: under image.runtime pyxis, whether the login node's srun has
	// Pyxis (what the image phase will do).
	Pyxis string `json:"pyxis,omitempty"`
	// Partition: its limits, what the window asks of it and what they
	// would cut (run.json's slurm.partition); absent when the login node
	// was not reached.
	Partition *record.SlurmPartition `json:"partition,omitempty"`
}

type connectNode struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Reached bool   `json:"reached"`
	// Reason: why the node was not reached or did not answer.
	Reason string `json:"reason,omitempty"`
	// Tools: each tool's answer in a few words ("missing" when the node
	// lacks it), as the text lists them.
	Tools       map[string]string `json:"tools,omitempty"`
	NotMeasured []string          `json:"not_measured,omitempty"`
}

type connectBound struct {
	Seconds  float64  `json:"seconds"`
	Phases   int      `json:"phases"`
	Waves    int      `json:"waves"`
	Longest  []string `json:"longest,omitempty"`
	Cost     *float64 `json:"cost,omitempty"`
	Currency string   `json:"currency,omitempty"`
	Priced   string   `json:"priced,omitempty"` // how the cost was made
}

func (c *connectJSON) print(w io.Writer, inv *inventory.Inventory, ps []orchestrator.Phase, res []orchestrator.Probed,
	groups []reasonGroup, took time.Duration) error {
	why, reached := unreachedBy(inv, res)
	var unreached []reasonGroup
	for _, reason := range sortedByCount(why) {
		unreached = append(unreached, reasonGroup{Nodes: hostlist.Compress(why[reason]), Count: len(why[reason]), Reason: reason})
	}
	nodes := make([]connectNode, 0, len(res))
	byTool := map[string]map[string][]string{}
	for i, r := range res {
		n := connectNode{Name: r.Node, Address: inv.Nodes[i].Address, Reached: r.Err == nil}
		if r.Err != nil {
			n.Reason = oneLine(r.Err.Error())
		}
		if r.Dialled {
			n.Tools = toolAnswers(r.Out)
			for tool, a := range n.Tools {
				if byTool[tool] == nil {
					byTool[tool] = map[string][]string{}
				}
				byTool[tool][a] = append(byTool[tool][a], r.Node)
			}
		}
		if r.Err == nil {
			n.NotMeasured = willNotMeasure(inv, ps, n.Tools, haveTools(r.Out), isPod(inv, r.Node))
		}
		nodes = append(nodes, n)
	}
	b := orchestrator.Bound(inv, ps)
	bound := connectBound{Seconds: b.Total.Seconds(), Phases: b.Phases, Waves: b.Waves, Longest: b.Longest}
	if cost, what, ok := boundCost(inv, b); ok {
		cost = math.Round(cost*100) / 100
		bound.Cost, bound.Currency, bound.Priced = &cost, inv.Quote.Currency, what
	}
	return writeJSON(w, struct {
		lintJSON
		Reached     int              `json:"reached"`
		Seconds     float64          `json:"seconds"`
		Nodes       []connectNode    `json:"nodes"`
		Tools       []toolGroup      `json:"tools"`
		NotReached  []reasonGroup    `json:"not_reached"`
		NotMeasured []reasonGroup    `json:"not_measured"`
		Bound       connectBound     `json:"bound"`
		Allocation  *allocationJSON  `json:"allocation,omitempty"`
		KubeAccess  []kubeAccessJSON `json:"kubernetes_access,omitempty"`
		KubeError   string           `json:"kubernetes_access_error,omitempty"`
	}{lintOf(inv, c.Warnings), reached, math.Round(took.Seconds()*10) / 10, nodes, nonNil(toolGroups(byTool)), nonNil(unreached), nonNil(groups), bound, c.Allocation,
		c.KubeAccess, c.KubeAccessError})
}

// nonNil is s, or an empty list: JSON says [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
