package orchestrator

import (
	"cmp"
	"strings"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
)

// featureVerdict is SLURM-005 for node n: its active features (Slurm's
// ActiveFeatures, as scontrol showed them at the grant) hold every
// feature the allocation asked for (slurm.allocate.constraint). Slurm
// grants only nodes that match, so a node that lacks one is a node
// Slurm's own records no longer agree with, or a constraint the site
// does not enforce; either way not the node asked for. Every node's
// features are shown, judged or not: they are what the provider says the
// node is.
func featureVerdict(n record.SlurmNode, constraint string) record.Verdict {
	v := record.NewVerdict("SLURM-005", n.Name)
	v.Measured = clipText(cmp.Or(n.Features, "no features"), 200)
	if constraint == "" {
		v.Status, v.Detail = record.Skip, "not stated (slurm.allocate.constraint)"
		return v
	}
	v.Quoted = clipText(constraint, 100)
	w, ok := slurm.ParseConstraint(constraint)
	if !ok {
		v.Status, v.Detail = record.Skip, "not judged per node: the constraint's meaning spans nodes "+
			"(brackets, counts, parentheses, or & and | together): Slurm's to hold"
		return v
	}
	lacks := w.Lacks(n.Features)
	switch {
	case len(lacks) == 0:
		v.Status, v.Detail = record.Pass, "has the features asked for"
	case w.Any:
		v.Status, v.Detail = record.Fail, clipText("has none of "+strings.Join(lacks, ", ")+" (slurm.allocate.constraint "+constraint+")", 300)
	default:
		v.Status, v.Detail = record.Fail, clipText("lacks "+strings.Join(lacks, ", ")+" (slurm.allocate.constraint "+constraint+")", 300)
	}
	return v
}
