package phases

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// benchTools are what a collective over several nodes needs on each:
// the benchmark binary, and Open MPI's mpirun where it launches the job
// (its daemons start on every node); srun needs only the binary there,
// and nothing where it runs the benchmark in the pinned image through
// Pyxis (the binary is the image's: a step without it fails with srun's
// words).
func benchTools(w *orchestrator.Window) []string {
	a := w.Inv.Phases.AllReduce
	if a.Launcher == "srun" {
		if len(containerImageArgs(w)) > 0 {
			return nil
		}
		return []string{a.Binary}
	}
	return []string{"mpirun", a.Binary}
}

// collectiveUnmeasured asks every node at once (remote.Each, the
// transport's concurrency) whether it has tools, before a collective is
// launched: a node without them would fail the whole job with an
// mpirun or execvp error that reads as a broken fabric. It is a
// *orchestrator.NotMeasured naming the nodes and what they lack, what
// the phase would have measured said last; nil when every node has all.
func collectiveUnmeasured(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, what string, tools ...string) error {
	res := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return nodeHas(ctx, w, nodes[i], tools...)
	})
	lacking := map[string][]string{}
	for i, r := range res {
		has, _ := r.Value.(map[string]bool)
		if r.Err != nil {
			// Not asked: the launch itself says what is wrong there.
			continue
		}
		for _, t := range tools {
			if !has[t] {
				lacking[t] = append(lacking[t], nodes[i].Name)
			}
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	var parts, missing []string
	for _, t := range tools {
		if names := lacking[t]; len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s not installed on %s", t, hostlist.Compress(names)))
			missing = append(missing, t)
		}
	}
	return orchestrator.Unmeasured(strings.Join(missing, ","), "%s: %s not measured", strings.Join(parts, "; "), what)
}

// unmeasuredVerdicts are the requirements ids of node (or the cluster)
// as not measured for r's reason, when r is a record.NotMeasured result.
func unmeasuredVerdicts(r record.PhaseResult, node string, ids ...string) ([]record.Verdict, bool) {
	if r.Outcome != record.NotMeasured {
		return nil, false
	}
	var out []record.Verdict
	for _, id := range ids {
		v := record.NewVerdict(id, node)
		notMeasured(&v, r.Error)
		out = append(out, v)
	}
	return out, true
}
