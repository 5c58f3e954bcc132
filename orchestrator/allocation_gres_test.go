package orchestrator

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/slurm"
)

// Steps ask for the nodes' GPUs when every node lists the same count,
// for none where the counts differ (with why), and leave the buyer's own
// request alone.
func TestStepGRES(t *testing.T) {
	same := []slurm.Node{{Name: "g1", GRES: "gpu:h100:8(S:0-1)"}, {Name: "g2", GRES: "gpu:h100:8(S:0-1)"}}
	if args, why := stepGRES(nil, same); strings.Join(args, " ") != "--gres=gpu:8" || why != "" {
		t.Errorf("same: %v %q", args, why)
	}
	odd := append(same, slurm.Node{Name: "g3", GRES: "gpu:h100:4"})
	if args, why := stepGRES([]string{"--mem=0"}, odd); strings.Join(args, " ") != "--mem=0" ||
		!strings.Contains(why, "g[1-2] gpu:8") || !strings.Contains(why, "g3 gpu:4") {
		t.Errorf("odd: %v %q", args, why)
	}
	if args, why := stepGRES([]string{"--gpus-per-node=4"}, odd); strings.Join(args, " ") != "--gpus-per-node=4" || why != "" {
		t.Errorf("given: %v %q", args, why)
	}
	none := []slurm.Node{{Name: "g1"}, {Name: "g2"}}
	if args, why := stepGRES(nil, none); len(args) != 0 || why != "" {
		t.Errorf("no GRES: %v %q", args, why)
	}
}
