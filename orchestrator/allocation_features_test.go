package orchestrator

import (
	"testing"

	"gpuaccept/orchestrator/record"
)

// SLURM-005 names a node lacking a feature asked for, shows every node's
// features, and is SKIP where nothing is stated or the constraint spans
// nodes.
func TestFeatureVerdict(t *testing.T) {
	for _, c := range []struct {
		name, features, constraint string
		status                     record.Status
		measured, detail           string
	}{
		{"not stated", "h100,ib", "", record.Skip, "h100,ib", "not stated (slurm.allocate.constraint)"},
		{"none shown, not stated", "", "", record.Skip, "no features", "not stated (slurm.allocate.constraint)"},
		{"has them", "h100,ib,nvlink", "h100&ib", record.Pass, "h100,ib,nvlink", "has the features asked for"},
		{"lacks one", "h100", "h100&ib", record.Fail, "h100", "lacks ib (slurm.allocate.constraint h100&ib)"},
		{"lacks all", "", "h100&ib", record.Fail, "no features", "lacks h100, ib (slurm.allocate.constraint h100&ib)"},
		{"any one", "h200", "h100|h200", record.Pass, "h200", "has the features asked for"},
		{"none of any", "a100", "h100|h200", record.Fail, "a100", "has none of h100, h200 (slurm.allocate.constraint h100|h200)"},
		{"spans nodes", "rack1", "[rack1|rack2]", record.Skip, "rack1", "not judged per node: the constraint's meaning spans nodes " +
			"(brackets, counts, parentheses, or & and | together): Slurm's to hold"},
	} {
		v := featureVerdict(record.SlurmNode{Name: "g1", Features: c.features}, c.constraint)
		if v.Status != c.status || v.Measured != c.measured || v.Detail != c.detail || v.Node != "g1" || v.ID != "SLURM-005" {
			t.Errorf("%s: %s %q %q", c.name, v.Status, v.Measured, v.Detail)
		}
	}
}
