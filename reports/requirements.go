package reports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
)

// StatusIncomplete is how a requirement reads when some verdict of it
// could not be judged for a reason on the buyer's side.
const StatusIncomplete = "INCOMPLETE"

// requirement is one requirement ID of a run, its verdicts taken
// together: what the summary's line and the card's row say.
type requirement struct {
	ID, Title string
	Status    string // FAIL, INCOMPLETE, WARN, PASS or SKIP: the worst of its verdicts
	// Passed of Total verdicts passed (a WARN is a pass with a caveat):
	// the nodes' when it has any, so a requirement judged per node and
	// for the cluster too counts nodes (0/1001 read as a node too many).
	// NotJudged of the Total were skipped or could not be judged: they
	// are neither passed nor failed, and a line says so rather than
	// counting them with either.
	Passed, Total, NotJudged int
	Cluster                  bool // its only verdict is the cluster's
	// Worst is the verdict that decided Status: the lowest figure among
	// the failures (or passes), else the first in node order.
	Worst record.Verdict
	// Alike are the nodes whose verdict says what Worst's does.
	Alike []string
	All   []record.Verdict
}

// rank orders statuses worst first.
func rank(v record.Verdict) int {
	switch {
	case v.Status == record.Fail:
		return 0
	case v.Incomplete != "":
		return 1
	case v.Status == record.Warn:
		return 2
	case v.Status == record.Pass:
		return 3
	}
	return 4
}

// worse says whether a is a worse figure than b of the same requirement.
func worseVerdict(a, b record.Verdict) bool {
	if a.Ratio != nil && b.Ratio != nil {
		return *a.Ratio < *b.Ratio
	}
	if a.Value != nil && b.Value != nil {
		if lowerIsBetter(a.ID, a.Unit) {
			return *a.Value > *b.Value
		}
		return *a.Value < *b.Value
	}
	return false
}

// lowerIsBetter is record.LowerIsBetter for a requirement's figure (id
// kept for the callers: every unit now says its own direction, WORK-009's
// "× median" too).
func lowerIsBetter(_, unit string) bool {
	return record.LowerIsBetter(unit)
}

// requirements are the run's verdicts by requirement, in catalog order
// (IDs of another version's catalog after, by ID).
func requirements(run *record.Run) []requirement {
	order := map[string]int{}
	for i, r := range record.Catalog() {
		order[r.ID] = i
	}
	addr := addresses(run)
	byID := map[string]*requirement{}
	var ids []string
	for _, v := range verdicts(run) {
		r := byID[v.ID]
		if r == nil {
			r = &requirement{ID: v.ID, Title: record.TitleOf(v.ID, v.Title), Cluster: true}
			byID[v.ID] = r
			ids = append(ids, v.ID)
		}
		r.All = append(r.All, v)
		if v.Node != "" {
			r.Cluster = false
		}
		// Of a node's and the cluster's verdict alike (a cluster line that
		// names the worst node), the node's: it says where.
		named := v.Node != "" && r.Worst.Node == "" && v.Value != nil && r.Worst.Value != nil && !worseVerdict(r.Worst, v)
		if len(r.All) == 1 || rank(v) < rank(r.Worst) || rank(v) == rank(r.Worst) && (worseVerdict(v, r.Worst) || named) {
			r.Worst = v
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		oa, ka := order[a]
		ob, kb := order[b]
		if ka != kb {
			if ka {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(oa, ob), cmp.Compare(a, b))
	})
	out := make([]requirement, 0, len(ids))
	for _, id := range ids {
		r := byID[id]
		r.Cluster = r.Cluster && len(r.All) == 1
		perNode := hasNodeVerdict(r.All)
		for _, v := range r.All {
			if perNode && v.Node == "" {
				continue
			}
			r.Total++
			switch {
			case !judged(v):
				r.NotJudged++
			case v.Status == record.Pass || v.Status == record.Warn:
				r.Passed++
			}
		}
		r.Status = string(r.Worst.Status)
		if r.Worst.Incomplete != "" {
			r.Status = StatusIncomplete
		}
		said := saying(impersonal(r.Worst, addr))
		for _, v := range r.All {
			if v.Status == r.Worst.Status && saying(impersonal(v, addr)) == said {
				r.Alike = append(r.Alike, nodeLabel(v.Node))
			}
		}
		if len(r.Alike) > 1 {
			r.Worst = impersonal(r.Worst, addr)
		}
		out = append(out, *r)
	}
	return out
}

// nodeFacts are what reports need of a run's nodes by name to group
// their verdicts.
type nodeFacts map[string]record.Node

func addresses(run *record.Run) nodeFacts {
	m := make(nodeFacts, len(run.Nodes))
	for _, n := range run.Nodes {
		m[n.Name] = n
	}
	return m
}

// impersonal is v as it reads for any node: its texts without its node's
// name and address (record.Impersonal), so alike verdicts group; a
// requirement skipped because its node was quarantined says so, the
// reason being the node's (WIN-001's).
func impersonal(v record.Verdict, nodes nodeFacts) record.Verdict {
	if v.Node == "" {
		return v
	}
	n := nodes[v.Node]
	if v.Status == record.Skip && v.ID != "WIN-001" && n.Quarantined && v.Detail == n.Reason && v.Measured == "" {
		v.Detail = "not run: the node was quarantined"
		return v
	}
	a := n.Address
	v.Measured = record.Impersonal(v.Measured, v.Node, a)
	v.Detail = record.Impersonal(v.Detail, v.Node, a)
	v.Incomplete = record.Impersonal(v.Incomplete, v.Node, a)
	return v
}

// saying is what a verdict says, its node aside: alike verdicts are
// grouped by it.
func saying(v record.Verdict) string {
	return string(v.Status) + "\x00" + v.Measured + "\x00" + v.Detail + "\x00" + v.Incomplete
}

// judged says whether v judged its requirement: a skipped verdict, or one
// that could not be measured, judged nothing and counts as neither a
// pass nor a failure.
func judged(v record.Verdict) bool {
	return v.Status != record.Skip && v.Incomplete == ""
}

// unjudged says whether nothing of r was judged, the cluster's verdict
// of a requirement counted by nodes included.
func (r requirement) unjudged() bool { return !slices.ContainsFunc(r.All, judged) }

// passedText is "31/32" of the verdicts judged, with how many were not
// ("3/3, 1 not judged"; "4 not judged"), or "cluster" for a requirement
// judged once for the whole cluster.
func (r requirement) passedText() string {
	switch {
	case r.Cluster:
		return "cluster"
	case r.NotJudged == 0:
		return fmt.Sprintf("%d/%d", r.Passed, r.Total)
	case r.NotJudged == r.Total && !r.unjudged():
		// Judged for the cluster only, on no node.
		return fmt.Sprintf("cluster, %d not judged", r.NotJudged)
	case r.NotJudged == r.Total:
		return fmt.Sprintf("%d not judged", r.NotJudged)
	}
	return fmt.Sprintf("%d/%d, %d not judged", r.Passed, r.Total-r.NotJudged, r.NotJudged)
}

// passedShort is passedText for a narrow terminal: "3/3 +1", the
// verdicts not judged after the plus.
func (r requirement) passedShort() string {
	if r.Cluster || r.NotJudged == 0 {
		return r.passedText()
	}
	return fmt.Sprintf("%d/%d +%d", r.Passed, r.Total-r.NotJudged, r.NotJudged)
}

// briefly is a verdict's measurement in few words: its Value when it was
// held to a tolerance of the quote ("184 GB/s, 0.5 × quote"), else what it
// measured, with why when it did not pass.
func briefly(v record.Verdict) string {
	switch {
	case v.Incomplete != "":
		return v.Incomplete
	case v.Status == record.Skip:
		// Why it was skipped; what else it says is in the detail.
		why, _, _ := strings.Cut(firstOf(v.Detail, v.Measured, "not judged"), "; ")
		return why
	case v.Value != nil && v.Ratio != nil && v.Tolerance != nil:
		return fmt.Sprintf("%s, %.2f of the quote", record.Figure(*v.Value, v.Unit), *v.Ratio)
	}
	if v.Status == record.Pass {
		return firstOf(v.Measured, v.Detail, "passed")
	}
	return joinNonEmpty(": ", v.Measured, v.Detail)
}

// reason is why a verdict failed or warned, for the lines under the
// table: its figure and the rule it missed.
func reason(v record.Verdict) string {
	// The retest history comes last: first the figure and what it missed.
	note := v.Retest.Note()
	if v.Value != nil && v.Ratio != nil && v.Tolerance != nil {
		s := record.Figure(*v.Value, v.Unit)
		if rule := v.Rule(); rule != "" {
			s += ", needs " + rule
		}
		return joinNonEmpty("; ", joinNonEmpty(": ", s, v.Detail), note)
	}
	s := joinNonEmpty(": ", v.Measured, v.Detail, v.Incomplete)
	if rule := v.Rule(); rule != "" && v.Status == record.Fail {
		if q, exact := strings.CutPrefix(rule, "= "); exact {
			s = joinNonEmpty(", ", s, "quoted "+q)
		} else {
			s = joinNonEmpty(", ", s, "needs "+rule)
		}
	}
	return firstOf(joinNonEmpty("; ", s, note), strings.ToLower(string(v.Status)))
}

// reasonGroup is one line under the summary's table: the nodes that
// failed (or warned) a requirement alike.
type reasonGroup struct {
	ID    string
	Nodes []string
	Text  string
	at    int    // the first node's position, for the order
	alone string // Text as its only node would say it
}

func (g reasonGroup) line() string {
	who := hostlist.Compress(g.Nodes)
	if len(g.Nodes) > 1 {
		who = fmt.Sprintf("%d nodes %s", len(g.Nodes), who)
	}
	return fmt.Sprintf("%s: %s %s", who, g.ID, g.Text)
}

// reasons groups the verdicts of status s by requirement and what they
// say, as dshbak groups output: identical reasons on many nodes are one
// line. Figures missed by different amounts are one line per requirement,
// their range said. A quarantined node's WIN-001 is left out where
// another failure of the node says why.
func reasons(run *record.Run, s record.Status) []reasonGroup {
	pos := map[string]int{"": -1}
	for i, n := range run.Nodes {
		pos[n.Name] = i
	}
	addr := addresses(run)
	failedElse := map[string]bool{}
	for _, v := range run.Verdicts {
		if v.Status == record.Fail && v.ID != "WIN-001" {
			failedElse[v.Node] = true
		}
	}
	type figures struct {
		lo, hi record.Verdict
		rule   string
		detail string
	}
	groups := map[string]*reasonGroup{}
	ranges := map[string]*figures{}
	var keys []string
	for _, v := range verdicts(run) {
		if v.Status != s || v.ID == "WIN-001" && failedElse[v.Node] {
			continue
		}
		text, key := reason(impersonal(v, addr)), ""
		ranged := v.Value != nil && v.Ratio != nil && v.Tolerance != nil && v.Node != ""
		if ranged {
			key = v.ID + "\x00range"
		} else {
			key = v.ID + "\x00" + text
		}
		g := groups[key]
		if g == nil {
			g = &reasonGroup{ID: v.ID, Text: text, at: pos[v.Node]}
			groups[key] = g
			keys = append(keys, key)
		}
		g.Nodes = append(g.Nodes, nodeLabel(v.Node))
		g.alone = reason(v)
		if ranged {
			f := ranges[key]
			if f == nil {
				f = &figures{lo: v, hi: v, rule: v.Rule(), detail: v.Detail}
				ranges[key] = f
			}
			if worseVerdict(v, f.lo) {
				f.lo = v
			}
			if worseVerdict(f.hi, v) {
				f.hi = v
			}
		}
	}
	out := make([]reasonGroup, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		if len(g.Nodes) == 1 {
			g.Text = g.alone // one node: its own name and address are no noise
		}
		if f := ranges[k]; f != nil && len(g.Nodes) > 1 {
			lo, hi := record.Figure(*f.lo.Value, f.lo.Unit), record.Figure(*f.hi.Value, f.hi.Unit)
			g.Text = fmt.Sprintf("%s..%s (worst %s), needs %s", lo, hi, f.lo.Node, f.rule)
			if lowerIsBetter(f.lo.ID, f.lo.Unit) {
				g.Text = fmt.Sprintf("%s..%s (worst %s), needs %s", hi, lo, f.lo.Node, f.rule)
			}
		}
		out = append(out, *g)
	}
	// verdicts() already orders by ID, then node: keep that.
	return out
}

func firstOf(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}

func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// nodeCounts says how many nodes the window accepted and why the rest
// were not: a node is accepted when it stayed in the window to its end
// and failed nothing (the idle guard's release ends its acceptance as the
// ledger's does).
func nodeCounts(run *record.Run) string {
	failed := map[string]bool{}
	for _, v := range run.Verdicts {
		if v.Status == record.Fail && v.Node != "" {
			failed[v.Node] = true
		}
	}
	var accepted, quarantined, failing, released []string
	for _, n := range run.Nodes {
		switch {
		case n.Quarantined:
			quarantined = append(quarantined, n.Name)
		case failed[n.Name]:
			failing = append(failing, n.Name)
		case !n.ReleasedAt.IsZero():
			released = append(released, n.Name)
		default:
			accepted = append(accepted, n.Name)
		}
	}
	noun := "nodes"
	if len(run.Nodes) == 1 {
		noun = "node"
	}
	s := fmt.Sprintf("%d %s: %d accepted", len(run.Nodes), noun, len(accepted))
	// The nodes are named where that is short; the lines below the table
	// name every one.
	named := func(nodes []string) string {
		if l := hostlist.Compress(nodes); len(l) <= 40 {
			return " (" + l + ")"
		}
		return ""
	}
	if len(failing) > 0 {
		s += fmt.Sprintf(", %d failed a requirement%s", len(failing), named(failing))
	}
	if len(quarantined) > 0 {
		s += fmt.Sprintf(", %d quarantined%s", len(quarantined), named(quarantined))
	}
	if len(released) > 0 {
		s += fmt.Sprintf(", %d released idle%s", len(released), named(released))
	}
	return s
}

// hasNodeVerdict says whether any of vs judges a node.
func hasNodeVerdict(vs []record.Verdict) bool {
	return slices.ContainsFunc(vs, func(v record.Verdict) bool { return v.Node != "" })
}

// retestedLines name the figures that passed, warned or were skipped only
// after a retest, or ran unstable, with their history: a pass that rests
// on a second run is one the buyer should know of (a failure says its
// history in its reason already). Bounded by the caller.
func retestedLines(run *record.Run) []string {
	var out []string
	for _, v := range verdicts(run) {
		if v.Retest == nil || v.Status == record.Fail {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s %s", nodeLabel(v.Node), v.ID, v.Retest.Note()))
	}
	return out
}
