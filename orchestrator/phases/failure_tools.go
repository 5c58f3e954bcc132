package phases

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// failureUnmeasured asks every node at once, before the job starts,
// whether it has the Python that runs torchrun (phases.failure.python)
// and whether that Python imports torch: a node without them would fail
// the job's start, which reads as a failed recovery. When torchrun runs
// in the pinned image, the image is the job's environment: only the
// runtime is asked for (IMG-002 says whether the image starts). It is a
// *orchestrator.NotMeasured naming the nodes, or nil.
func failureUnmeasured(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node) error {
	f := w.Inv.Phases.Failure
	if inventory.On(f.InImage) && w.Inv.Image.Reference != "" {
		return collectiveUnmeasured(ctx, w, nodes, "node-kill failure test", w.Inv.Image.Runtime)
	}
	py := remote.Quote(f.Python)
	probe := "command -v -- " + py + " >/dev/null 2>&1 || { echo no-python; exit 0; }; " +
		py + " -c 'import torch' >/dev/null 2>&1 || echo no-torch; true"
	res := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return runOn(ctx, w, nodes[i], probe)
	})
	var noPython, noTorch []string
	for i, r := range res {
		out, _ := r.Value.([]byte)
		if r.Err != nil {
			continue // not asked: the job's start says what is wrong there
		}
		switch strings.TrimSpace(string(out)) {
		case "no-python":
			noPython = append(noPython, nodes[i].Name)
		case "no-torch":
			noTorch = append(noTorch, nodes[i].Name)
		}
	}
	var parts []string
	if len(noPython) > 0 {
		parts = append(parts, fmt.Sprintf("%s not installed on %s", f.Python, hostlist.Compress(noPython)))
	}
	if len(noTorch) > 0 {
		parts = append(parts, fmt.Sprintf("%s cannot import torch on %s", f.Python, hostlist.Compress(noTorch)))
	}
	if len(parts) == 0 {
		return nil
	}
	return orchestrator.Unmeasured(f.Python, "%s: node-kill failure test not measured", strings.Join(parts, "; "))
}
