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
// nodes over SSH, which reaches a pod only through the window's own
// server in it (windowkey, podsshd.sh): a pod without one (no sshd in its
// image, a server that did not start, the window key phase not run there)
// is NOT MEASURED, not launched to fail, which would read as a broken
// fabric (on the host network its ssh would reach the node's own sshd).
// One pod alone needs no SSH, nor does srun.
func podsUnreached(w *orchestrator.Window, nodes []*orchestrator.Node, what string) error {
	if len(nodes) < 2 || w.Inv.Phases.AllReduce.Launcher != "mpirun" {
		return nil
	}
	why := map[string][]string{}
	var order []string
	for _, n := range nodes {
		if podImager(n) == nil {
			continue
		}
		var ki KeyInstalled
		r, ok := w.Result(WindowKey.Name, n.Index, &ki)
		reason := ""
		switch {
		case !ok || r.Outcome != record.OK:
			reason = "the window's key and SSH server are not in the pods"
		case ki.SSHD == nil:
			reason = "no SSH server of the window's in the pods"
		case ki.SSHD.Unmeasured != "":
			reason = ki.SSHD.Unmeasured
		default:
			continue
		}
		if _, seen := why[reason]; !seen {
			order = append(order, reason)
		}
		why[reason] = append(why[reason], n.Name)
	}
	if len(order) == 0 {
		return nil
	}
	// Node words differ from pod to pod (a log line with its port): the
	// first few say enough, and 1,000 of them would fill the verdict.
	const said = 5
	var parts []string
	for i, r := range order {
		if i == said {
			var more []string
			for _, r := range order[said:] {
				more = append(more, why[r]...)
			}
			parts = append(parts, fmt.Sprintf("and more on %s", hostlist.Compress(more)))
			break
		}
		parts = append(parts, fmt.Sprintf("%s on %s", r, hostlist.Compress(why[r])))
	}
	return orchestrator.Unmeasured("sshd", "mpirun starts its daemons over SSH: %s: %s not measured", strings.Join(parts, "; "), what)
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
