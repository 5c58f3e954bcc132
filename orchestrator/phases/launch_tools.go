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
	if err := podsUnreached(w, nodes, what); err != nil {
		return err
	}
	parts, missing := lackingTools(ctx, w, nodes, tools...)
	if len(parts) == 0 {
		return nil
	}
	return orchestrator.Unmeasured(strings.Join(missing, ","), "%s: %s not measured", strings.Join(parts, "; "), what)
}

// podsUnreached is why mpirun cannot launch a collective over nodes
// that are pods, nil where it can. mpirun starts its daemons on the other
// nodes over SSH, and a pod has no SSH server: on their host network its
// ssh would reach the node's own sshd (which does not hold the window's
// key) and fail, which reads as a broken fabric. One pod alone needs no
// SSH, nor does srun.
func podsUnreached(w *orchestrator.Window, nodes []*orchestrator.Node, what string) error {
	if len(nodes) < 2 || w.Inv.Phases.AllReduce.Launcher != "mpirun" {
		return nil
	}
	var pods []string
	for _, n := range nodes {
		if podImager(n) != nil {
			pods = append(pods, n.Name)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	return orchestrator.Unmeasured("kubernetes", "mpirun cannot reach the pods on %s: it starts its daemons over SSH, and gpuaccept starts no SSH server in a pod yet: %s not measured",
		hostlist.Compress(pods), what)
}

// lackingTools asks every node at once which of tools it lacks: one
// "TOOL not installed on HOSTS" part per tool that some node lacks, and
// those tools, in tools' order. A node that does not answer is not
// counted: what runs there next says what is wrong.
func lackingTools(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, tools ...string) (parts, missing []string) {
	res := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return nodeHas(ctx, w, nodes[i], tools...)
	})
	lacking := map[string][]string{}
	for i, r := range res {
		has, _ := r.Value.(map[string]bool)
		if r.Err != nil {
			continue
		}
		for _, t := range tools {
			if !has[t] {
				lacking[t] = append(lacking[t], nodes[i].Name)
			}
		}
	}
	for _, t := range tools {
		if names := lacking[t]; len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s not installed on %s", t, hostlist.Compress(names)))
			missing = append(missing, t)
		}
	}
	return parts, missing
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
