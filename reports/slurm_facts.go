package reports

import (
	"cmp"
	"strings"

	"gpuaccept/orchestrator/record"
)

// slurmFacts are each node of the window's own Slurm allocation as Slurm
// showed it when granted (or each node the inventory named, as Slurm
// listed it at the window's start), by name: its state (and the one read
// at the window's end, where it changed), GRES and active features,
// shown beside what preflight found on the node. nil without either.
func slurmFacts(run *record.Run) map[string]string {
	if run.Slurm == nil || len(run.Slurm.Nodes) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, n := range run.Slurm.Nodes {
		state := n.State
		if n.StateAtEnd != "" && n.StateAtEnd != n.State {
			state += " → " + n.StateAtEnd
		}
		facts := []string{state, "GRES " + cmp.Or(n.GRES, "none"), "features " + cmp.Or(n.Features, "none")}
		if n.SlurmName != "" {
			facts = append([]string{"Slurm's " + n.SlurmName}, facts...)
		}
		out[n.Name] = strings.Join(facts, "; ")
	}
	return out
}
