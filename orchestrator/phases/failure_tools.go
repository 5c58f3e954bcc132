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

// failureUnmeasured is torchUnmeasured for the failure test's job.
func failureUnmeasured(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node) error {
	f := w.Inv.Phases.Failure
	inImage := inventory.On(f.InImage) && w.Inv.Image.Reference != ""
	return torchUnmeasured(ctx, w, nodes, torchNeeds{what: "node-kill failure test", python: f.Python, module: "torch", inImage: inImage})
}

// torchNeeds is what a torchrun job needs of its nodes: python importing
// module, or, for hosts when the job runs in the pinned image (inImage),
// only the image's runtime.
type torchNeeds struct {
	what, python, module string
	// label names module in the reason ("torch.distributed.run
	// (torchrun)"); module itself when "".
	label   string
	inImage bool
}

// torchUnmeasured asks every node at once, before a torchrun job starts
// (the failure test's, the training load test's), whether it has what the
// launch needs. A host that runs torchrun in the pinned image needs only
// the runtime (IMG-002 says whether the image starts); a host that runs it
// itself, and a pod, whose container is the pinned image already and which
// starts no container of its own, need the Python and its module. A node
// without them would fail the job's start, which reads as a failed
// recovery or workload: it is a *orchestrator.NotMeasured naming the
// nodes, or nil. A node that does not answer is not asked again: the
// job's start says what is wrong there.
func torchUnmeasured(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, need torchNeeds) error {
	var hosts, bare []*orchestrator.Node
	for _, n := range nodes {
		if need.inImage && podImager(n) == nil {
			hosts = append(hosts, n)
		} else {
			bare = append(bare, n)
		}
	}
	var parts, tools []string
	if len(hosts) > 0 {
		parts, tools = lackingTools(ctx, w, hosts, w.Inv.Image.Runtime)
	}
	py := remote.Quote(need.python)
	probe := "command -v -- " + py + " >/dev/null 2>&1 || { echo no-python; exit 0; }; " +
		py + " -c " + remote.Quote("import "+need.module) + " >/dev/null 2>&1 || echo no-module; true"
	res := remote.Each(ctx, len(bare), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		pctx, cancel := context.WithTimeout(ctx, torchProbeWithin)
		defer cancel()
		return runOn(pctx, w, bare[i], probe)
	})
	var noPython, noModule []string
	for i, r := range res {
		out, _ := r.Value.([]byte)
		if r.Err != nil {
			continue
		}
		switch strings.TrimSpace(string(out)) {
		case "no-python":
			noPython = append(noPython, bare[i].Name)
		case "no-module":
			noModule = append(noModule, bare[i].Name)
		}
	}
	if len(noPython) > 0 {
		parts = append(parts, fmt.Sprintf("%s not installed on %s", need.python, hostlist.Compress(noPython)))
	}
	if len(noModule) > 0 {
		label := need.label
		if label == "" {
			label = need.module
		}
		parts = append(parts, fmt.Sprintf("%s cannot import %s on %s", need.python, label, hostlist.Compress(noModule)))
	}
	if len(noPython)+len(noModule) > 0 {
		tools = append(tools, need.python)
	}
	if len(parts) == 0 {
		return nil
	}
	return orchestrator.Unmeasured(strings.Join(tools, ","), "%s: %s not measured", strings.Join(parts, "; "), need.what)
}
