package phases

import (
	"context"
	"slices"
	"sync"

	"gpuaccept/orchestrator"
)

// The burn-in's cluster rounds (phases.burnin.cluster_allreduce and
// phases.burnin.workload). Each node loops at its own pace, and the
// cluster-wide all-reduce and the workload's job need every node at once:
// so each iteration ends at a meeting. When every node still in the
// burn-in has arrived, one of them runs the round's loads over them all
// and they go on together. A node that leaves the burn-in (it failed, it
// was cut short, its time ran out first) leaves the rounds, so nobody
// waits for it; with one node left there is no round.

// The round's loads' names in the record (and their keys under
// phases.burnin).
const (
	loadClusterAllReduce = "cluster_allreduce"
	loadWorkload         = "workload"
)

// clusterRounds is the window's meeting place for the burn-in.
type clusterRounds struct {
	mu      sync.Mutex
	members map[string]bool
	cur     *clusterRound
	// run runs a round's loads over its nodes (a test's fake otherwise).
	run func(ctx context.Context, nodes []*orchestrator.Node) roundFigures
}

// roundFigures is what one round measured: the cluster all-reduce and
// the workload's job, as the inventory turns them on.
type roundFigures struct {
	Cluster  *BurninCollective
	Workload *BurninWorkload
}

// clusterRound is one meeting: who arrived, and once all had, the figures.
type clusterRound struct {
	arrived []*orchestrator.Node
	ready   chan struct{} // closed once every member arrived (or left)
	claimed bool          // one of them runs the loads
	done    chan struct{} // closed once res is in
	res     roundFigures
	// launcher is the node the figures are recorded on: the one that ran
	// the round (its wait cannot end before the figures are in).
	launcher string
}

func newClusterRounds(members []*orchestrator.Node, run func(context.Context, []*orchestrator.Node) roundFigures) *clusterRounds {
	c := &clusterRounds{members: map[string]bool{}, cur: newClusterRound(), run: run}
	for _, n := range members {
		c.members[n.Name] = true
	}
	return c
}

func newClusterRound() *clusterRound {
	return &clusterRound{ready: make(chan struct{}), done: make(chan struct{})}
}

// meet brings n to the current round and returns the round's figures once
// it ran, and the node they are recorded on: none when n was the only one
// left, or is no member (it was not in the burn-in when it began).
func (c *clusterRounds) meet(ctx context.Context, n *orchestrator.Node) (roundFigures, string, error) {
	c.mu.Lock()
	if !c.members[n.Name] {
		c.mu.Unlock()
		return roundFigures{}, "", nil
	}
	r := c.cur
	r.arrived = append(r.arrived, n)
	c.readyLocked()
	c.mu.Unlock()
	select {
	case <-r.ready:
	case <-ctx.Done():
		// Its loop ends on ctx's error, and its leave takes it out of
		// the round it had joined.
		return roundFigures{}, "", ctx.Err()
	}
	c.mu.Lock()
	launch := !r.claimed
	r.claimed = true
	c.mu.Unlock()
	if launch {
		nodes := slices.Clone(r.arrived)
		slices.SortFunc(nodes, func(a, b *orchestrator.Node) int { return a.Index - b.Index })
		if len(nodes) >= 2 {
			r.res, r.launcher = c.run(ctx, nodes), n.Name
		}
		close(r.done)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	// A round cut short (Ctrl-C, the phase's deadline) measured nothing:
	// its "context canceled" is no failure of the cluster's.
	if err := ctx.Err(); err != nil {
		return roundFigures{}, "", err
	}
	return r.res, r.launcher, nil
}

// leave takes n out of the rounds: the one it waits in, and every later
// one. A round that waited only for n goes ahead.
func (c *clusterRounds) leave(n *orchestrator.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.members[n.Name] {
		return
	}
	delete(c.members, n.Name)
	r := c.cur
	r.arrived = slices.DeleteFunc(r.arrived, func(m *orchestrator.Node) bool { return m == n })
	c.readyLocked()
}

// readyLocked starts the current round once every member is in it, and
// opens the next. Called with mu held.
func (c *clusterRounds) readyLocked() {
	r := c.cur
	if len(r.arrived) == 0 || len(r.arrived) < len(c.members) {
		return
	}
	close(r.ready)
	c.cur = newClusterRound()
}

// burninCluster is what the first node to ask found: the rounds, and
// why a load of them cannot run (one node in the burn-in; the launch
// tools missing).
type burninCluster struct {
	rounds *clusterRounds
	none   []LoadUnmeasured
}

// burninRoundsFor is the window's rounds, made once by the first node to
// ask: the nodes the burn-in runs on are the members, and they are asked
// for the launch tools once, together.
func burninRoundsFor(ctx context.Context, w *orchestrator.Window) (burninCluster, error) {
	v, err := w.Shared("burnin.rounds", func() (any, error) {
		b := w.Inv.Phases.Burnin
		nodes := w.Active()
		var bc burninCluster
		if len(nodes) < 2 {
			for _, load := range roundLoads(w) {
				bc.none = append(bc.none, LoadUnmeasured{Load: load, Reason: "one node in the burn-in: no cluster round to loop"})
			}
			return bc, nil
		}
		a := w.Inv.Phases.AllReduce
		cluster := b.ClusterAllReduce
		if cluster {
			err := collectiveUnmeasured(ctx, w, nodes, "cluster all-reduce under burn-in", benchTools(w)...)
			if _, nm := orchestrator.IsNotMeasured(err); nm {
				bc.none, cluster = append(bc.none, LoadUnmeasured{Load: loadClusterAllReduce, Asked: true, Reason: clip(err.Error(), 300)}), false
			} else if err != nil {
				return nil, err
			}
		}
		training, err := burninTraining(ctx, w, nodes)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			// Missing tools, or the job's own settings (its step pattern):
			// the job is not looped, and every node's burn-in goes on.
			bc.none = append(bc.none, LoadUnmeasured{Load: loadWorkload, Asked: true, Reason: clip(err.Error(), 300)})
			training = nil
		}
		if !cluster && training == nil {
			return bc, nil
		}
		bc.rounds = newClusterRounds(nodes, func(ctx context.Context, nodes []*orchestrator.Node) roundFigures {
			var f roundFigures
			if cluster {
				f.Cluster = burnCollective(ctx, w, job{nodes: nodes, ranksPerNode: a.RanksPerNode, bench: allReduceBench(a), log: "burnin-cluster"})
				f.Cluster.Nodes = len(nodes)
			}
			if training != nil && ctx.Err() == nil {
				f.Workload = training.round(ctx, nodes)
			}
			return f
		})
		return bc, nil
	})
	if err != nil {
		return burninCluster{}, err
	}
	return v.(burninCluster), nil
}

// roundLoads names the round's loads the inventory turns on.
func roundLoads(w *orchestrator.Window) []string {
	var out []string
	if w.Inv.Phases.Burnin.ClusterAllReduce {
		out = append(out, loadClusterAllReduce)
	}
	if w.Inv.Phases.Burnin.Workload {
		out = append(out, loadWorkload)
	}
	return out
}

// meetRound ends n's iteration r at the rounds' meeting; the node that
// launched the round keeps its figures.
func meetRound(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, rounds *clusterRounds, r *BurninRun) error {
	f, launcher, err := rounds.meet(ctx, n)
	if err != nil || launcher != n.Name {
		return err
	}
	r.Cluster, r.Workload = f.Cluster, f.Workload
	if c := f.Cluster; c != nil && c.Error == "" {
		w.Progress.Node(n.Name, "burn-in: cluster all-reduce over %d node(s) %.4g GB/s", c.Nodes, c.BusBW)
	} else if c != nil {
		w.Progress.Node(n.Name, "burn-in: cluster all-reduce over %d node(s): %s", c.Nodes, clip(c.Error, 100))
	}
	if j := f.Workload; j != nil && j.Error == "" {
		w.Progress.Node(n.Name, "burn-in: the workload's job over %d node(s), median step %.3g s", j.Nodes, j.MedianStepSecs)
	} else if j != nil {
		w.Progress.Node(n.Name, "burn-in: the workload's job over %d node(s): %s", j.Nodes, clip(j.Error, 100))
	}
	return nil
}
