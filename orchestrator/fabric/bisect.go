package fabric

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Bisector finds the slow node(s) or link(s) of a fabric from pairwise
// tests: disjoint pairs run at once, round robin first; a pair below
// SlowRatio × the typical pair makes both its nodes suspects; suspects are
// then paired with nodes already proven good, which tells a slow node
// (slow with a good partner) from a slow link (two good nodes, slow
// together). At most MaxRounds rounds. It is pure logic: the caller runs
// the pairs and feeds results back with Add.
type Bisector struct {
	Nodes     []string
	SlowRatio float64
	MaxRounds int

	// Group is each node's group (its leaf or rack, from the inventory's
	// labels), when known: the first round pairs nodes inside their
	// groups, the second across them, so that a slow group's switch and
	// a slow uplink each show (round robin alone can pair only across,
	// and a path slow for every pair then looks like the whole fabric).
	Group map[string]string

	results []PairResult
	rounds  int
}

// PairResult is one pair's measurement; Err is set when the pair's run
// failed (it counts as slow, at 0).
type PairResult struct {
	Round int     `json:"round"`
	A     string  `json:"a"`
	B     string  `json:"b"`
	BusBW float64 `json:"busbw_gbs"`
	Err   string  `json:"error,omitempty"`
}

// Bisection is the outcome.
type Bisection struct {
	Rounds    int                `json:"rounds"`
	Pairs     []PairResult       `json:"pairs"`
	Reference float64            `json:"reference_gbs"` // the typical pair: median of the faster half
	Scores    map[string]float64 `json:"scores"`        // node → median of its pairs / reference
	Good      []string           `json:"good"`
	SlowNodes []string           `json:"slow_nodes"`
	SlowLinks [][2]string        `json:"slow_links"`
	// Unresolved: suspects the rounds did not settle (no good partner left);
	// UnconfirmedLinks: pairs of good nodes slow once, not run again.
	Unresolved       []string    `json:"unresolved"`
	UnconfirmedLinks [][2]string `json:"unconfirmed_links,omitempty"`
	// NamedIn: the round whose result named each slow node ("h3") or link
	// ("h2–h5"); later rounds may have gone on checking something else.
	NamedIn map[string]int `json:"named_in_round,omitempty"`
	Note    string         `json:"note,omitempty"`
	// SlowRatio is the share of the typical pair below which a pair was
	// slow; Groups the slow parts named by the inventory's labels (set by
	// the caller, who has the labels: Groups).
	SlowRatio float64     `json:"slow_ratio,omitempty"`
	Groups    []SlowGroup `json:"slow_groups,omitempty"`
}

// NewBisector checks its inputs.
func NewBisector(nodes []string, slowRatio float64, maxRounds int) (*Bisector, error) {
	switch {
	case len(nodes) < 3:
		return nil, fmt.Errorf("bisection needs at least 3 nodes, got %d", len(nodes))
	case !(slowRatio > 0 && slowRatio < 1):
		return nil, fmt.Errorf("bisection: slow ratio %v is not between 0 and 1", slowRatio)
	case maxRounds < 1:
		return nil, fmt.Errorf("bisection: max rounds %d < 1", maxRounds)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n] {
			return nil, fmt.Errorf("bisection: node %s listed twice", n)
		}
		seen[n] = true
	}
	return &Bisector{Nodes: slices.Clone(nodes), SlowRatio: slowRatio, MaxRounds: maxRounds}, nil
}

// Next plans the next round: disjoint pairs, or nil when done.
func (b *Bisector) Next() [][2]string {
	if b.rounds >= b.MaxRounds {
		return nil
	}
	var pairs [][2]string
	switch {
	case b.rounds == 0 && b.grouped():
		pairs = b.groupPairs(true)
	case b.rounds == 1 && b.grouped():
		pairs = b.groupPairs(false)
	case b.rounds == 0:
		pairs = roundRobin(b.Nodes, 0)
	default:
		st := b.state()
		open := append(slices.Clone(st.suspects), st.untested...)
		anySlow := false
		for _, r := range b.results {
			anySlow = anySlow || st.slow(r)
		}
		fewPairs := !anySlow && len(b.results) < 3 && len(b.freshPairs()) > 0
		if len(open) == 0 && len(st.linkSuspects) == 0 && !fewPairs {
			return nil
		}
		good := slices.Clone(st.good)
		used := map[string]bool{}
		// A slow pair of two good nodes runs once more before its link is
		// named: one slow run is as likely a busy moment.
		for _, l := range st.linkSuspects {
			if !used[l[0]] && !used[l[1]] {
				pairs = append(pairs, l)
				used[l[0]], used[l[1]] = true, true
			}
		}
		for _, s := range open {
			if used[s] {
				continue
			}
			// A partner it has not been tested with yet, proven good.
			for _, g := range good {
				if !used[g] && !b.tested(s, g) {
					pairs = append(pairs, [2]string{g, s})
					used[g], used[s] = true, true
					break
				}
			}
		}
		// Open nodes left without a good partner meet each other (never
		// twice): a fast pair clears both this round instead of waiting
		// for a good node to come free.
		for i, s := range open {
			for _, u := range open[i+1:] {
				if !used[s] && !used[u] && !b.tested(s, u) {
					pairs = append(pairs, [2]string{s, u})
					used[s], used[u] = true, true
				}
			}
		}
		// Too few pairs, all alike, to trust the typical one (three
		// nodes run one pair a round, and it may hold the slow node):
		// pairs not run yet join the round while nodes are free.
		if fewPairs {
			for _, p := range b.freshPairs() {
				if !used[p[0]] && !used[p[1]] {
					pairs = append(pairs, p)
					used[p[0]], used[p[1]] = true, true
				}
			}
		}
		if len(pairs) == 0 && len(open) > 0 {
			// Nobody to compare with (every pair so far was slow): more
			// round robin, in case the fabric is uniformly slow or the
			// slow nodes can be separated by other pairings.
			pairs = b.freshPairs()
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	b.rounds++
	return pairs
}

// grouped: every node has a group, and there are at least two.
func (b *Bisector) grouped() bool {
	seen := map[string]bool{}
	for _, n := range b.Nodes {
		g, ok := b.Group[n]
		if !ok {
			return false
		}
		seen[g] = true
	}
	return len(seen) > 1
}

// groupPairs is a round of disjoint pairs inside the nodes' groups
// (inside) or across them, each node with the first free one of its own
// (another) group it has not met; a node left over meets any free one.
func (b *Bisector) groupPairs(inside bool) [][2]string {
	used := map[string]bool{}
	var pairs [][2]string
	pick := func(want func(a, c string) bool) {
		for i, a := range b.Nodes {
			if used[a] {
				continue
			}
			for _, c := range b.Nodes[i+1:] {
				if !used[c] && !b.tested(a, c) && want(a, c) {
					pairs = append(pairs, [2]string{a, c})
					used[a], used[c] = true, true
					break
				}
			}
		}
	}
	same := func(a, c string) bool { return (b.Group[a] == b.Group[c]) == inside }
	if !inside {
		// Across: a group's nodes each with a node of another group in
		// turn (its first with the next group, its second with the one
		// after, ...), so that every group meets several others and a
		// slow uplink is told from the group it happened to meet.
		order := groupOrder(b.Nodes, b.Group)
		at := map[string]int{}
		for i, g := range order {
			at[g] = i
		}
		pos, seen := map[string]int{}, map[string]int{}
		for _, n := range b.Nodes {
			pos[n] = seen[b.Group[n]]
			seen[b.Group[n]]++
		}
		k := len(order)
		target := func(a string) string {
			return order[(at[b.Group[a]]+1+pos[a]%(k-1))%k]
		}
		pick(func(a, c string) bool { return b.Group[c] == target(a) || b.Group[a] == target(c) })
	}
	pick(same)
	pick(func(string, string) bool { return true })
	return pairs
}

// groupOrder is the groups in the order their first nodes come.
func groupOrder(nodes []string, group map[string]string) []string {
	var out []string
	for _, n := range nodes {
		if !slices.Contains(out, group[n]) {
			out = append(out, group[n])
		}
	}
	return out
}

// freshPairs is the first round-robin round whose pairs were not all run.
func (b *Bisector) freshPairs() [][2]string {
	for r := 1; r < len(b.Nodes); r++ {
		var out [][2]string
		for _, p := range roundRobin(b.Nodes, r) {
			if !b.tested(p[0], p[1]) {
				out = append(out, p)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func (b *Bisector) tested(x, y string) bool {
	for _, r := range b.results {
		if (r.A == x && r.B == y) || (r.A == y && r.B == x) {
			return true
		}
	}
	return false
}

// Add records a pair's result for the current round.
func (b *Bisector) Add(r PairResult) {
	r.Round = b.rounds
	if r.Err != "" || math.IsNaN(r.BusBW) || r.BusBW < 0 {
		r.BusBW = 0
	}
	b.results = append(b.results, r)
}

type bisectState struct {
	ref                      float64
	good, suspects, untested []string
	slowNodes                []string
	slowLinks, linkSuspects  [][2]string
	namedIn                  map[string]int
	slow                     func(PairResult) bool
	pairsOf                  map[string][]PairResult
}

func (b *Bisector) state() bisectState {
	st := bisectState{pairsOf: map[string][]PairResult{}, namedIn: map[string]int{}}
	var bws []float64
	for _, r := range b.results {
		if r.Err == "" && r.BusBW > 0 {
			bws = append(bws, r.BusBW)
		}
		st.pairsOf[r.A] = append(st.pairsOf[r.A], r)
		st.pairsOf[r.B] = append(st.pairsOf[r.B], r)
	}
	st.ref = typical(bws)
	st.slow = func(r PairResult) bool { return r.Err != "" || r.BusBW < b.SlowRatio*st.ref }
	isGood := map[string]bool{}
	provenAt := map[string]int{} // the round of a node's first fast pair
	for _, r := range b.results {
		if !st.slow(r) {
			isGood[r.A], isGood[r.B] = true, true
			for _, x := range []string{r.A, r.B} {
				if provenAt[x] == 0 || r.Round < provenAt[x] {
					provenAt[x] = r.Round
				}
			}
		}
	}
	for _, n := range b.Nodes {
		switch {
		case isGood[n]:
			st.good = append(st.good, n)
		case len(st.pairsOf[n]) == 0:
			st.untested = append(st.untested, n)
		default:
			// Slow in every pair so far: named once slow with two different
			// partners proven good, two measurements that agree, known once
			// both partners were proven good. One slow retest is not
			// enough: on a shared fabric a busy moment makes a good node's
			// retest as slow as the slow node's (CI saw it name both of a
			// slow round-1 pair), and a second good partner tells them apart.
			named := false
			name := func(round int) {
				if !named || round < st.namedIn[n] {
					st.namedIn[n] = round
				}
				named = true
			}
			partnerRound := map[string]int{}
			for _, r := range st.pairsOf[n] {
				p := other(r, n)
				if !isGood[p] {
					continue
				}
				if c := max(r.Round, provenAt[p]); partnerRound[p] == 0 || c < partnerRound[p] {
					partnerRound[p] = c
				}
			}
			if len(partnerRound) >= 2 {
				var rs []int
				for _, c := range partnerRound {
					rs = append(rs, c)
				}
				sort.Ints(rs)
				name(rs[1])
			}
			if named {
				st.slowNodes = append(st.slowNodes, n)
			} else {
				st.suspects = append(st.suspects, n)
			}
		}
	}
	// Two good nodes slow together: the path between them, once a second
	// run of the pair is slow too (the first makes it a suspect).
	runs := map[[2]string][]PairResult{}
	var order [][2]string
	for _, r := range b.results {
		k := [2]string{min(r.A, r.B), max(r.A, r.B)}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	for _, k := range order {
		rs := runs[k]
		if !isGood[k[0]] || !isGood[k[1]] {
			continue
		}
		slow := 0
		for _, r := range rs {
			if st.slow(r) {
				slow++
				if slow == 2 {
					st.namedIn[rs[0].A+"–"+rs[0].B] = r.Round
				}
			}
		}
		switch {
		case slow >= 2:
			st.slowLinks = append(st.slowLinks, [2]string{rs[0].A, rs[0].B})
		case slow == 1 && len(rs) == 1:
			st.linkSuspects = append(st.linkSuspects, [2]string{rs[0].A, rs[0].B})
		}
	}
	return st
}

// Result summarises what the rounds so far found.
func (b *Bisector) Result() Bisection {
	st := b.state()
	out := Bisection{Rounds: b.rounds, Pairs: slices.Clone(b.results), Reference: st.ref, SlowRatio: b.SlowRatio,
		Scores: map[string]float64{}, Good: st.good, SlowNodes: st.slowNodes, SlowLinks: st.slowLinks}
	out.Unresolved = append(slices.Clone(st.suspects), st.untested...)
	out.UnconfirmedLinks = st.linkSuspects
	if len(st.namedIn) > 0 {
		out.NamedIn = st.namedIn
	}
	for n, rs := range st.pairsOf {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, r.BusBW)
		}
		if st.ref > 0 {
			out.Scores[n] = SpreadOf(xs).Median / st.ref
		}
	}
	if len(st.good) == 0 && len(b.results) > 0 {
		out.Note = "no pair reached the others' speed: the whole fabric is slow alike, or too many nodes are slow to tell apart"
	}
	return out
}

// Explained: one of the slow groups explains node a (b "") or the link a–b.
func (s Bisection) Explained(a, b string) bool {
	for _, g := range s.Groups {
		if g.Explains(a, b) {
			return true
		}
	}
	return false
}

// Summary is one line for a verdict.
func (s Bisection) Summary() string {
	var parts []string
	// A group first, and what it explains not again node by node.
	explained := s.Explained
	for _, g := range s.Groups {
		parts = append(parts, g.String())
	}
	for _, n := range s.SlowNodes {
		if !explained(n, "") {
			parts = append(parts, fmt.Sprintf("node %s (score %.2f, named in round %d)", n, s.Scores[n], s.NamedIn[n]))
		}
	}
	for _, l := range s.SlowLinks {
		if explained(l[0], l[1]) {
			continue
		}
		parts = append(parts, fmt.Sprintf("link %s–%s (named in round %d)", l[0], l[1], s.NamedIn[l[0]+"–"+l[1]]))
	}
	var unresolved []string
	for _, n := range s.Unresolved {
		if !explained(n, "") {
			unresolved = append(unresolved, n)
		}
	}
	if len(unresolved) > 0 {
		parts = append(parts, "unresolved: "+strings.Join(unresolved, ", "))
	}
	for _, l := range s.UnconfirmedLinks {
		if !explained(l[0], l[1]) {
			parts = append(parts, fmt.Sprintf("link %s–%s slow once, not confirmed", l[0], l[1]))
		}
	}
	// A link is seen only when its two ends are paired, and the rounds
	// pair each node with a few others, not all: say how many were.
	ran, of := s.coverage()
	if len(parts) == 0 {
		return fmt.Sprintf("no slow node in %d round(s) of pairs, no slow link among the %d pairs run (of %d) (typical pair %.4g GB/s)",
			s.Rounds, ran, of, s.Reference)
	}
	return fmt.Sprintf("slow: %s, in %d round(s) of pairs, %d of %d pairs run (typical pair %.4g GB/s)",
		strings.Join(parts, "; "), s.Rounds, ran, of, s.Reference)
}

// coverage is how many distinct pairs ran, and how many the nodes in them
// make.
func (s Bisection) coverage() (ran, of int) {
	nodes, pairs := map[string]bool{}, map[[2]string]bool{}
	for _, r := range s.Pairs {
		nodes[r.A], nodes[r.B] = true, true
		p := [2]string{r.A, r.B}
		if p[1] < p[0] {
			p[0], p[1] = p[1], p[0]
		}
		pairs[p] = true
	}
	n := len(nodes)
	return len(pairs), n * (n - 1) / 2
}

func other(r PairResult, n string) string {
	if r.A == n {
		return r.B
	}
	return r.A
}

// typical is the median of the faster half of xs; 0 when empty. Half the
// pairs may hold a slow node, so the plain median would drag the reference
// down with them; one lucky pair must not set it either (the maximum).
func typical(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	// An odd count's middle value belongs to neither half.
	half := (len(s) + 1) / 2
	if len(s) == 1 {
		half = 0
	}
	return SpreadOf(s[half:]).Median
}

// roundRobin is round r of the circle method: every node meets every
// other once over n−1 rounds (n rounded up to even; the extra slot is a
// bye).
func roundRobin(nodes []string, r int) [][2]string {
	ring := slices.Clone(nodes)
	if len(ring)%2 == 1 {
		ring = append(ring, "")
	}
	n := len(ring)
	r %= n - 1
	// Rotate every position but the first by r.
	rest := slices.Clone(ring[1:])
	rot := append(slices.Clone(rest[len(rest)-r:]), rest[:len(rest)-r]...)
	ring = append([]string{ring[0]}, rot...)
	var out [][2]string
	for i := 0; i < n/2; i++ {
		a, b := ring[i], ring[n-1-i]
		if a != "" && b != "" {
			out = append(out, [2]string{a, b})
		}
	}
	return out
}
