package phases

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Bisected is what the pairwise search found.
type Bisected struct {
	fabric.Bisection
	RoundSecs []float64         `json:"round_seconds"`
	Runs      []Sweep           `json:"runs"`
	Lost      map[string]string `json:"lost,omitempty"`
}

// Quarantine implements orchestrator.Quarantiner.
func (b Bisected) Quarantine() map[string]string { return b.Lost }

// Bisection finds the slow node or link: disjoint pairs of nodes run the
// all-reduce at the same time (round robin), each node is scored by its
// pairs, and suspects are retested against nodes already proven good, for
// a bounded number of rounds.
var Bisection = orchestrator.Phase{
	Name:    "bisect",
	Loads:   true,
	Enabled: bisectionEnabled,
	Own:     func(inv *inventory.Inventory) bool { return inv.Phases.AllReduce.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return time.Duration(inv.Phases.AllReduce.Bisection.MaxRounds)*(sweepTimeout(inv)+30*time.Second) + time.Minute
	},
	Cluster: func(ctx context.Context, w *orchestrator.Window) (any, error) {
		if few, short := needNodes(w, "the pairwise bisection", 3); short {
			return few, nil
		}
		a := w.Inv.Phases.AllReduce
		bis, byName, labels, err := bisector(w, w.Active())
		if err != nil {
			return nil, err
		}
		if err := collectiveUnmeasured(ctx, w, w.Active(), "pairwise bisection", benchTools(w)...); err != nil {
			return nil, err
		}
		res := pairRounds(ctx, w, bis, byName, pairBench(a), sweepTimeout(w.Inv), "bisect", "a pairwise test")
		for _, s := range res.Runs {
			if s.NotMeasured != "" {
				return res, orchestrator.Unmeasured(a.Binary, "%s", s.NotMeasured)
			}
		}
		res.Groups = fabric.Groups(res.Bisection, labels)
		w.Progress.Line("bisect: %s", res.Summary())
		return res, nil
	},
	Judge: judgeBisection,
}

// bisector is a Bisector over nodes, grouped by their labels where they
// all carry one of groupKeys; byName finds a node by its name.
func bisector(w *orchestrator.Window, nodes []*orchestrator.Node) (bis *fabric.Bisector,
	byName map[string]*orchestrator.Node, labels map[string]map[string]string, err error) {
	a := w.Inv.Phases.AllReduce
	byName = map[string]*orchestrator.Node{}
	var names []string
	for _, n := range nodes {
		byName[n.Name] = n
		names = append(names, n.Name)
	}
	bis, err = fabric.NewBisector(names, a.Bisection.SlowRatio, a.Bisection.MaxRounds)
	if err != nil {
		return nil, nil, nil, err
	}
	labels = map[string]map[string]string{}
	for _, n := range nodes {
		if ls := w.Inv.Nodes[n.Index].Labels; len(ls) > 0 {
			labels[n.Name] = ls
		}
	}
	bis.Group = groupOf(labels, names)
	return bis, byName, labels, nil
}

// pairRounds runs the bisector's rounds until it is done or ctx ends:
// each round's disjoint pairs at once, each pair a two-node job bounded by
// timeout, its raw log named by the log prefix, round and pair. A node
// that stops answering is lost (what: during which test).
func pairRounds(ctx context.Context, w *orchestrator.Window, bis *fabric.Bisector, byName map[string]*orchestrator.Node,
	b bench, timeout time.Duration, log, what string) Bisected {
	a := w.Inv.Phases.AllReduce
	res := Bisected{}
	for round := 1; ctx.Err() == nil; round++ {
		pairs := bis.Next()
		if pairs == nil {
			break
		}
		w.Progress.Line("%s round %d: %s", log, round, pairList(pairs))
		start := time.Now()
		runs := make([]Sweep, len(pairs))
		var wg sync.WaitGroup
		for i, p := range pairs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j := job{nodes: []*orchestrator.Node{byName[p[0]], byName[p[1]]}, ranksPerNode: a.RanksPerNode, bench: b,
					log: fmt.Sprintf("%s-r%d-%s-%s", log, round, p[0], p[1])}
				runs[i] = j.run(ctx, w, timeout)
			}()
		}
		wg.Wait()
		res.RoundSecs = append(res.RoundSecs, time.Since(start).Seconds())
		missing := false
		for i, p := range pairs {
			s := runs[i]
			r := fabric.PairResult{A: p[0], B: p[1], Err: s.Error}
			if s.Judgement != nil && s.Error == "" {
				r.BusBW = s.Judgement.BusBW.Median
			}
			bis.Add(r)
			res.Runs = append(res.Runs, s)
			missing = missing || s.NotMeasured != ""
			for _, n := range s.Silent {
				if res.Lost == nil {
					res.Lost = map[string]string{}
				}
				res.Lost[n] = "stopped answering during " + what
			}
		}
		if missing {
			// The image lacks the benchmark: no later round runs it.
			break
		}
	}
	res.Bisection = bis.Result()
	return res
}

// groupKeys are the labels the bisection pairs nodes by, the first that
// every node carries: a leaf switch, then a rack.
var groupKeys = []string{"leaf", "switch", "rack", "pod"}

// groupOf is each node's group by the first of groupKeys they all carry;
// nil when none.
func groupOf(labels map[string]map[string]string, names []string) map[string]string {
	for _, k := range groupKeys {
		g := map[string]string{}
		for _, n := range names {
			if v, ok := labels[n][k]; ok {
				g[n] = v
			}
		}
		if len(g) == len(names) {
			return g
		}
	}
	return nil
}

// pairList is a round's pairs for a progress line: the first few, then how
// many more (a 1,000-node round is 500 pairs).
func pairList(pairs [][2]string) string {
	const shown = 6
	var s []string
	for _, p := range pairs[:min(shown, len(pairs))] {
		s = append(s, p[0]+"+"+p[1])
	}
	if len(pairs) > shown {
		s = append(s, fmt.Sprintf("and %d more", len(pairs)-shown))
	}
	return strings.Join(s, " ")
}

func judgeBisection(w *orchestrator.Window) []record.Verdict {
	if !bisectionEnabled(w.Inv) {
		return nil
	}
	var b Bisected
	r, ok := w.Result("bisect", -1, &b)
	if !ok {
		return nil
	}
	if vs, ok := unmeasuredVerdicts(r, "", "NCCL-004"); ok {
		return vs
	}
	if vs, few := tooFewVerdicts(w, "bisect", "NCCL-004"); few {
		return vs
	}
	v := record.NewVerdict("NCCL-004", "")
	switch {
	case r.Outcome == record.Failed && len(b.Pairs) == 0:
		v.Status, v.Detail = record.Skip, r.Error
		// Since the too_few record (fewnodes.go) a window with under 3
		// nodes never reaches fabric.Bisect; its words are still matched
		// for windows journaled by an earlier build and resumed by this one.
		if !strings.Contains(r.Error, "at least 3 nodes") {
			v.Status = record.Fail
		}
		return []record.Verdict{v}
	case len(b.SlowNodes) > 0 || len(b.SlowLinks) > 0:
		v.Status = record.Fail
		v.Node = strings.Join(b.SlowNodes, ",")
	case len(b.Unresolved) > 0 || len(b.UnconfirmedLinks) > 0 || b.Note != "":
		v.Status = record.Warn
	default:
		v.Status = record.Pass
	}
	slowAll := allPairsSlow(b.Bisection, w.Inv.Quote.InterBusBWGBs, w.Inv.Acceptance.ToleranceFor("NCCL-002"))
	switch {
	case slowAll != "" && v.Status == record.Pass:
		// Nothing stood out, but nothing could: the search was blind.
		v.Status = record.Warn
	case slowAll != "" && v.Status == record.Fail:
		slowAll += "; before blaming a named part, run the bisection again over it and a few good nodes (run --only bisect --nodes ...)"
	}
	v.Measured = b.Summary()
	if len(b.Scores) > 0 {
		// The slowest node's score (the named one's, when one is named):
		// what a later run is compared by.
		lowest := math.Inf(1)
		for _, s := range b.Scores {
			lowest = min(lowest, s)
		}
		v.Measure(lowest, record.UnitScore)
	}
	var secs float64
	for _, s := range b.RoundSecs {
		secs += s
	}
	v.Detail = join(join(fmt.Sprintf("%d pair run(s) in %.1f s", len(b.Pairs), secs), b.Note), slowAll)
	return []record.Verdict{v}
}

// allPairsSlow says so when the typical pair itself fell short of the
// quote (tol × quoted): every pair was then held back by something they all
// shared (a spine too thin for every pair at once, the lab's two cores for
// 64 pairs), and a pair's score compares that as much as its own link: at
// 128 lab hosts, pairs at 70% of the link named a node and a link nothing
// had slowed. "" when the typical pair met the quote or the quote says
// nothing.
func allPairsSlow(b fabric.Bisection, quoted, tol float64) string {
	if quoted <= 0 || b.Reference <= 0 || b.Reference >= tol*quoted {
		return ""
	}
	return fmt.Sprintf("the typical pair ran at %.0f%% of the quoted %.4g GB/s: every pair was held back by what they shared "+
		"(the fabric's core, or the nodes' CPUs), so the scores may not tell a slow part from noise",
		100*b.Reference/quoted, quoted)
}

func bisectionEnabled(inv *inventory.Inventory) bool {
	return inv.Phases.AllReduce.Enabled && inventory.On(inv.Phases.AllReduce.Bisection.Enabled)
}
