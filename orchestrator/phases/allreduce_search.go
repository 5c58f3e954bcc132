package phases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
)

// When the cluster-wide collective fails or hangs and neither Open MPI nor
// NCCL named a node or a link (a hang says nothing; "mpirun exited 1" says
// nothing), pairs of nodes find where: the bisection's rounds over the same
// nodes with the bisection's small sweep, a pair that fails counting as a
// slow one. A node that fails with two partners proven good is named, a
// pair of good nodes that fails twice names its link, a leaf whose every
// node fails is named as the leaf. Every pair running clean says as much:
// the fault needs the whole set, not one node or link.

// pairSearchTimeout bounds one pair's run: two nodes over the bisection's
// sizes start and finish in seconds, and a pair that hangs as the whole
// set did must not cost the sweep's full timeout per round.
const pairSearchTimeout = 2 * time.Minute

func pairTimeout(inv *inventory.Inventory) time.Duration {
	return min(sweepTimeout(inv), pairSearchTimeout)
}

// pairSearchBound is the most the search may add to the phase.
func pairSearchBound(inv *inventory.Inventory) time.Duration {
	return time.Duration(inv.Phases.AllReduce.Bisection.MaxRounds) * (pairTimeout(inv) + 30*time.Second)
}

// pairBench is the bisection's sweep: the all-reduce with the pair sizes.
func pairBench(a inventory.AllReduce) bench {
	b := allReduceBench(a)
	b.min, b.max, b.iters = a.Bisection.MinBytes, a.Bisection.MaxBytes, a.Bisection.Iters
	return b
}

// unnamedFailure: a sweep failed and no failed sweep's output named a node
// of the window, nor was one lost.
func unnamedFailure(res Sweeps) bool {
	if len(res.Lost) > 0 {
		return false
	}
	sweeps := append([]Sweep(nil), res.Repeats...)
	for _, s := range res.Collectives {
		sweeps = append(sweeps, s)
	}
	failed := false
	for _, s := range sweeps {
		// A benchmark the image lacks is no failure of the fabric: no
		// pair would find where.
		if s.Error == "" || s.NotMeasured != "" {
			continue
		}
		failed = true
		for _, f := range s.Faults {
			// A connect Open MPI waited on names where, not what: the
			// pairs still run.
			if (f.From != "" || f.To != "") && !f.Waited {
				return false
			}
		}
	}
	return failed
}

// searchPairs runs the pairs over nodes; nil with fewer than three (two
// nodes' one pair is the failed run itself).
func searchPairs(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node) *Bisected {
	if len(nodes) < 3 {
		return nil
	}
	bis, byName, labels, err := bisector(w, nodes)
	if err != nil {
		return nil
	}
	w.Progress.Node(nodes[0].Name, "all-reduce failed and its output named no node: pairs of nodes find where")
	res := pairRounds(ctx, w, bis, byName, pairBench(w.Inv.Phases.AllReduce), pairTimeout(w.Inv),
		"allreduce-pairs", "the pairs run after the collective failed")
	res.Groups = fabric.Groups(res.Bisection, labels)
	w.Progress.Node(nodes[0].Name, "all-reduce pairs: %s", searchText(res, len(nodes)))
	return &res
}

// searchText is what the pairs found, for the verdict: "pairs name node
// h4 (failed with h1, h3; 0.0117 GB/s with h2) (6 pair runs in 3 rounds,
// 3 failed)".
func searchText(b Bisected, nodes int) string {
	failed := 0
	for _, p := range b.Pairs {
		if p.Err != "" {
			failed++
		}
	}
	head := fmt.Sprintf("%d pair run(s) in %d round(s), %d failed", len(b.Pairs), b.Rounds, failed)
	explained := b.Explained
	var named []string
	for _, g := range b.Groups {
		named = append(named, g.String())
	}
	for _, n := range b.SlowNodes {
		if !explained(n, "") {
			named = append(named, fmt.Sprintf("node %s (%s)", n, pairsWith(b, n)))
		}
	}
	for _, l := range b.SlowLinks {
		if !explained(l[0], l[1]) {
			named = append(named, fmt.Sprintf("link %s–%s (%s)", l[0], l[1], pairsWith(b, l[0], l[1])))
		}
	}
	switch {
	case len(named) > 0:
		return fmt.Sprintf("pairs name %s (%s)", strings.Join(named, "; "), head)
	case failed == 0:
		return fmt.Sprintf("every pair ran (%s): the collective fails only over the whole set of %d nodes, on no one node or link", head, nodes)
	case len(b.Unresolved) > 0:
		return fmt.Sprintf("the pairs did not settle it (%s); unresolved: %s", head, strings.Join(b.Unresolved, ", "))
	}
	return head
}

// pairsWith says how n's pairs went (with only the partner given, that
// pair's runs): "failed with h1, h3; 0.0117 GB/s with h2".
func pairsWith(b Bisected, n string, only ...string) string {
	var failedWith, ran []string
	for _, p := range b.Pairs {
		if p.A != n && p.B != n {
			continue
		}
		partner := p.A
		if partner == n {
			partner = p.B
		}
		if len(only) > 0 && partner != only[0] {
			continue
		}
		if p.Err != "" {
			failedWith = append(failedWith, partner)
		} else {
			ran = append(ran, fmt.Sprintf("%.4g GB/s with %s", p.BusBW, partner))
		}
	}
	var parts []string
	if len(failedWith) > 0 {
		parts = append(parts, "failed with "+strings.Join(failedWith, ", "))
	}
	return strings.Join(append(parts, ran...), "; ")
}
