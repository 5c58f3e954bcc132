package billing

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/ledger"
	"gpuaccept/orchestrator/record"
)

// margin is how far from a window a line may lie and still be the
// window's: a daily line (Azure) names the whole day, and a provider bills
// a node from its hand-over, before the window's first phase.
const margin = 24 * time.Hour

// Result is an export reconciled with the runs.
type Result struct {
	Format   Format
	Currency string
	// Rows are the nodes of the runs, in the runs' order, with what was
	// billed for each.
	Rows []Row
	// Unmatched are the lines in the windows' time that name no node.
	Unmatched []Line
	// Outside counts the lines that lie outside every window (another
	// day's usage in a month's export): not the windows' business.
	Outside int
	// Billed is what the lines of the windows' time cost; Ledger what the
	// runs' cost ledgers priced (HasLedger: any run has one).
	Billed, Ledger float64
	HasLedger      bool
	Verdicts       []record.Verdict
}

// Row is one node's reconciliation.
type Row struct {
	Run, Node string
	// Label is the node as verdicts name it: its name, with its run's ID
	// when several runs are reconciled.
	Label string
	Lines []int // the export's line numbers billing it
	// BilledSecs is the node time its lines bill; PresentSecs the
	// window's own (start to end, or to its release); ExpectedSecs that
	// rounded up to the quote's granularity.
	BilledSecs, PresentSecs, ExpectedSecs float64
	BilledCost, LedgerCost                float64
	HasLedger                             bool
	// NotTime: lines billing it in a unit that is not time (storage,
	// traffic): their cost counts, their quantity does not.
	NotTime int
}

// node is one node of one run, as the reconciliation sees it.
type node struct {
	run   *runView
	rec   record.Node
	row   *Row
	lines []Line
	gpus  int
}

type runView struct {
	run        *record.Run
	quote      inventory.Quote
	granule    time.Duration
	start, end time.Time
	nodes      []*node
}

// Reconcile holds ex against runs. It errors on what it cannot judge at
// all: no run, a run without a start, a quote it cannot read, an export
// in another currency than the quote's.
func Reconcile(runs []*record.Run, ex *Export) (*Result, error) {
	if len(runs) == 0 {
		return nil, errors.New("no run to reconcile the export with")
	}
	res := &Result{Format: ex.Format, Currency: ex.Currency}
	var views []*runView
	for _, r := range runs {
		v, err := view(r)
		if err != nil {
			return nil, err
		}
		if c := strings.ToUpper(strings.TrimSpace(v.quote.Currency)); c != "" && ex.Currency != "" && c != ex.Currency {
			// The export's code is checked on read; the run's quote is a
			// file too, and its code reaches the terminal here.
			return nil, fmt.Errorf("run %s: the export bills in %s, the quote prices in %s: convert the export first",
				clip(r.ID), ex.Currency, clip(c))
		}
		views = append(views, v)
	}
	for _, v := range views {
		for _, n := range v.nodes {
			n.row.Label = n.rec.Name
			if len(views) > 1 {
				n.row.Label = v.run.ID + ":" + n.rec.Name
			}
		}
	}
	idx := index(views)
	for _, l := range ex.Lines {
		n, inWindow := match(idx, views, l)
		switch {
		case n != nil:
			n.lines = append(n.lines, l)
		case inWindow:
			res.Unmatched = append(res.Unmatched, l)
		default:
			res.Outside++
		}
	}
	for _, v := range views {
		for _, n := range v.nodes {
			fill(n, ex.Format)
			res.Rows = append(res.Rows, *n.row)
		}
	}
	res.judge(views, ex)
	return res, nil
}

// Record is the reconciliation as run.json and the reports keep it.
func (res *Result) Record(export string) *record.Reconciliation {
	rc := &record.Reconciliation{Export: export, Format: string(res.Format), Currency: res.Currency,
		Nodes: []record.ReconciledNode{}, UnmatchedLines: len(res.Unmatched), OutsideLines: res.Outside, Billed: res.Billed}
	for _, l := range res.Unmatched {
		rc.UnmatchedCost += l.Cost
	}
	if res.HasLedger {
		l := res.Ledger
		rc.Ledger = &l
	}
	for _, r := range res.Rows {
		n := record.ReconciledNode{Node: r.Label, Lines: slices.Clone(r.Lines), BilledSecs: r.BilledSecs,
			WindowSecs: r.PresentSecs, ExpectedSecs: r.ExpectedSecs, BilledCost: r.BilledCost}
		if n.Lines == nil {
			n.Lines = []int{}
		}
		if r.HasLedger {
			c := r.LedgerCost
			n.LedgerCost = &c
		}
		rc.Nodes = append(rc.Nodes, n)
	}
	return rc
}

func view(r *record.Run) (*runView, error) {
	if r.Started.IsZero() {
		return nil, fmt.Errorf("run %s: no start time", r.ID)
	}
	v := &runView{run: r, start: r.Started, end: ledger.WindowEnd(r)}
	if len(r.Quote) > 0 {
		if err := json.Unmarshal(r.Quote, &v.quote); err != nil {
			return nil, fmt.Errorf("run %s: its quote: %w", r.ID, err)
		}
	}
	g, err := ledger.Granularity(v.quote.Billing)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	v.granule = g
	for _, rn := range r.Nodes {
		n := &node{run: v, rec: rn, row: &Row{Run: r.ID, Node: rn.Name}, gpus: v.quote.GPUsPerNode}
		end := v.end
		if rel := rn.ReleasedAt; !rel.IsZero() && rel.After(v.start) && rel.Before(end) {
			end = rel
		}
		n.row.PresentSecs = end.Sub(v.start).Seconds()
		n.row.ExpectedSecs = ledger.RoundUp(end.Sub(v.start), g).Seconds()
		if r.Ledger != nil {
			for _, ln := range r.Ledger.Nodes {
				if ln.Name == rn.Name {
					n.row.LedgerCost, n.row.HasLedger = ln.Cost, true
					if n.gpus == 0 {
						n.gpus = ln.GPUs
					}
				}
			}
		}
		if n.gpus == 0 {
			n.gpus = 1
		}
		v.nodes = append(v.nodes, n)
	}
	return v, nil
}

// key kinds, the surest first: a node's billing_id names it alone; its
// name is the inventory's; an address may be shared (a jump host, one
// machine for all, as in the demo) and then names no node.
const (
	byBillingID = iota
	byName
	byAddress
)

type ref struct {
	n    *node
	kind int
}

func index(views []*runView) map[string][]ref {
	idx := map[string][]ref{}
	add := func(k string, r ref) {
		k = strings.ToLower(strings.TrimSpace(k))
		if k != "" {
			idx[k] = append(idx[k], r)
		}
	}
	addrs := map[string]map[string]bool{}
	for _, v := range views {
		for _, n := range v.nodes {
			add(n.rec.BillingID, ref{n, byBillingID})
			add(n.rec.Name, ref{n, byName})
			a := strings.ToLower(strings.TrimSpace(n.rec.Address))
			if addrs[a] == nil {
				addrs[a] = map[string]bool{}
			}
			addrs[a][n.rec.Name] = true
		}
	}
	for _, v := range views {
		for _, n := range v.nodes {
			if a := strings.ToLower(strings.TrimSpace(n.rec.Address)); len(addrs[a]) == 1 {
				add(a, ref{n, byAddress})
			}
		}
	}
	return idx
}

// match is the node a line bills, and whether it lies in a window's time
// (±margin) at all.
func match(idx map[string][]ref, views []*runView, l Line) (*node, bool) {
	var cands []ref
	for _, s := range []string{l.Resource, l.Name} {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		cands = append(cands, idx[s]...)
		// Azure's and Google's resource IDs end in the instance's name
		// (.../virtualMachines/gpu-01, .../instances/gpu-01).
		if base := path.Base(s); base != s && base != "." && base != "/" {
			cands = append(cands, idx[base]...)
		}
	}
	inWindow := false
	for _, v := range views {
		if overlaps(l, v) {
			inWindow = true
		}
	}
	best := -1
	var found []*node
	for _, c := range cands {
		if !overlaps(l, c.n.run) {
			continue
		}
		switch {
		case best < 0 || c.kind < best:
			best, found = c.kind, []*node{c.n}
		case c.kind == best && !slices.Contains(found, c.n):
			found = append(found, c.n)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	// Several nodes (a name in two runs whose windows both reach the
	// line): the run whose window starts nearest the line's.
	if len(found) > 1 {
		sort.SliceStable(found, func(i, j int) bool {
			return absDur(found[i].run.start.Sub(l.Start)) < absDur(found[j].run.start.Sub(l.Start))
		})
		if found[0].run != found[1].run {
			return found[0], true
		}
	}
	return nil, inWindow
}

func overlaps(l Line, v *runView) bool {
	return l.Start.Before(v.end.Add(margin)) && l.End.After(v.start.Add(-margin))
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func fill(n *node, f Format) {
	sort.SliceStable(n.lines, func(i, j int) bool { return n.lines[i].Row < n.lines[j].Row })
	for _, l := range n.lines {
		n.row.Lines = append(n.row.Lines, l.Row)
		n.row.BilledCost += l.Cost
		if s, ok := l.NodeSeconds(f, n.gpus); ok {
			n.row.BilledSecs += s
		} else {
			n.row.NotTime++
		}
	}
}

// nodeRate is what one node-hour costs at the quote: its GPUs at the
// GPU-hour price, and its host where that is billed apart.
func nodeRate(n *node) float64 {
	r := float64(n.gpus) * n.run.quote.PricePerGPUHr
	if h := n.run.quote.PriceHostPerNodeHour; h != nil {
		r += *h
	}
	return r
}

// slack absorbs float rounding in billed quantities (0.333333 h), and
// nothing else. The one rule of BILL-002, 003, 007 and 008: billed time
// may exceed the window's own, rounded up to the quote's granularity, by
// nothing; it is already a whole granule, as the invoice rounds it. (A
// granule more, once per verdict, let an hour's duplicate through at 1 h
// granularity, and 1,000 node-hours over a rounded ledger at 1,000
// nodes.)
const slack = 1.0

// centSlack is what a bill's rounding of each line to the cent may leave
// between its cost and the ledger's.
const centSlack = 0.005

func (res *Result) judge(views []*runView, ex *Export) {
	res.judgeExport(ex)
	for _, v := range views {
		for _, n := range v.nodes {
			res.judgeTime(n)
		}
	}
	for _, v := range views {
		for _, n := range v.nodes {
			res.judgeFailed(n)
		}
	}
	res.judgeTwice(views)
	res.judgeRate(views)
	res.judgeAttribution(views)
	res.judgeTotal(views)
	for _, v := range views {
		res.judgeVictim(v)
	}
}

func (res *Result) add(v record.Verdict) { res.Verdicts = append(res.Verdicts, v) }

func (res *Result) judgeExport(ex *Export) {
	v := record.NewVerdict("BILL-001", "")
	v.Status = record.Pass
	v.Measured = fmt.Sprintf("%d line(s) read (%s), %s", len(ex.Lines), ex.Format, orNone(ex.Currency))
	var notes []string
	for _, w := range ex.Warnings {
		notes = append(notes, w.Code+": "+w.Text)
	}
	if res.Outside > 0 {
		notes = append(notes, fmt.Sprintf("%d line(s) lie outside the windows' days: not held against them", res.Outside))
	}
	if ex.Currency == "" && len(ex.Lines) > 0 {
		notes = append(notes, "no currency on any line: read as the quote's")
	}
	if len(ex.Warnings) > 0 || (ex.Currency == "" && len(ex.Lines) > 0) {
		v.Status = record.Warn
	}
	v.Detail = strings.Join(notes, "; ")
	res.add(v)
}

func (res *Result) judgeTime(n *node) {
	r := n.row
	v := record.NewVerdict("BILL-002", r.Label)
	g := n.run.granule
	if len(r.Lines) == 0 {
		v.Status = record.Warn
		v.Measured = "no billed line names it"
		v.Detail = "by billing_id, name or address, in the window's days"
		res.add(v)
		return
	}
	v.Quoted = fmt.Sprintf("at most %s (the window's %s rounded up to the %s granule)", dur(r.ExpectedSecs),
		dur(r.PresentSecs), dur(g.Seconds()))
	v.Measured = fmt.Sprintf("billed %s on line(s) %s", dur(r.BilledSecs), rows(r.Lines))
	over := r.BilledSecs - r.ExpectedSecs
	v.Measure(math.Max(over, 0), record.UnitSeconds)
	switch {
	case over > slack:
		v.Status = record.Fail
		v.Detail = fmt.Sprintf("%s beyond the window's time: %s overbilled", dur(over), money(over/3600*nodeRate(n), n.run.quote.Currency))
	case r.BilledSecs == 0 && r.NotTime > 0:
		v.Status = record.Warn
		v.Detail = "its lines bill no time (their unit is not one of time)"
	default:
		v.Status = record.Pass
	}
	res.add(v)
}

// Terms of quote.terms.failed_node the reconciliation can hold a bill to.
const (
	termsNone        = ""
	termsCredited    = "credited"
	termsGranule     = "billed as a whole granule"
	termsUntil       = "billed until replaced"
	termsNotCredited = "not credited"
	termsUnreadable  = "unreadable"
)

// termsKnown is what failedTerms reads, for a WARN on what it cannot.
const termsKnown = "the terms say neither credited, not credited, billed as a whole granule nor billed until replaced"

// failedTerms reads quote.terms.failed_node, the provider's own words,
// for what a failed node costs. Words are read within their clause (; , .
// end one) and with their negation: "no credit", "not credited" and
// "credit is not given" say the time is billed, "not billed" and "no
// charge" that it is credited. Terms that say both are unreadable, as are
// terms that say none of them.
func failedTerms(s string) string {
	t := strings.ToLower(s)
	if strings.TrimSpace(t) == "" {
		return termsNone
	}
	t = strings.ReplaceAll(t, "’", "'")
	t = strings.NewReplacer("won't", "will not", "can't", "can not", "n't", " not").Replace(t)
	var credit, noCredit, granule, until bool
	clauses := strings.FieldsFunc(t, func(r rune) bool { return strings.ContainsRune(";,.:()", r) })
	for _, c := range clauses {
		words := strings.FieldsFunc(c, func(r rune) bool { return !unicode.IsLetter(r) })
		for i, w := range words {
			neg := negated(words, i)
			switch {
			case strings.HasPrefix(w, "credit") || strings.HasPrefix(w, "refund"):
				if neg {
					noCredit = true
				} else {
					credit = true
				}
			case w == "billed" || w == "charged" || w == "charge" || w == "charges" || w == "invoiced":
				if neg {
					credit = true // not billed, no charge
				}
			case w == "free":
				if neg {
					noCredit = true
				} else {
					credit = true // free of charge
				}
			case w == "whole" || strings.HasPrefix(w, "granule") || w == "rounded":
				granule = true
			case w == "until" || strings.HasPrefix(w, "replace"):
				until = true
			}
		}
	}
	switch {
	case credit && noCredit:
		return termsUnreadable
	case credit:
		return termsCredited
	case granule:
		return termsGranule
	case until:
		return termsUntil
	case noCredit:
		return termsNotCredited
	}
	return termsUnreadable
}

var negations = map[string]bool{"no": true, "not": true, "non": true, "never": true, "without": true, "nor": true,
	"none": true, "neither": true}

// auxiliaries may stand between a word and the negation after it
// ("credit is not given", "credits will never be issued").
var auxiliaries = map[string]bool{"is": true, "are": true, "was": true, "were": true, "will": true, "be": true,
	"shall": true, "does": true, "do": true, "gets": true, "get": true, "can": true}

// negated: one of the three words before words[i] negates it, or an
// auxiliary after it is negated.
func negated(words []string, i int) bool {
	for _, w := range words[max(0, i-3):i] {
		if negations[w] {
			return true
		}
	}
	for _, w := range words[i+1:] {
		if negations[w] {
			return true
		}
		if !auxiliaries[w] {
			break
		}
	}
	return false
}

// answered: the node answered the window at least once.
func answered(run *record.Run, name string) bool {
	for _, p := range run.Phases {
		if p.Node == name && p.Outcome == record.OK {
			return true
		}
	}
	return false
}

// timeLines counts n's lines that bill time.
func timeLines(n *node, f Format) int {
	c := 0
	for _, l := range n.lines {
		if _, ok := l.NodeSeconds(f, n.gpus); ok {
			c++
		}
	}
	return c
}

// billedAfter is the node time n's lines bill after cutoff: a line that
// straddles it counts for its share after it.
func billedAfter(n *node, f Format, cutoff time.Time) float64 {
	var total float64
	for _, l := range n.lines {
		secs, ok := l.NodeSeconds(f, n.gpus)
		if !ok || secs <= 0 {
			continue
		}
		span := l.End.Sub(l.Start)
		switch {
		case !l.End.After(cutoff):
		case !l.Start.Before(cutoff) || span <= 0:
			total += secs
		default:
			total += secs * float64(l.End.Sub(cutoff)) / float64(span)
		}
	}
	return total
}

func (res *Result) judgeFailed(n *node) {
	never := !answered(n.run.run, n.rec.Name)
	if !never && !n.rec.Quarantined {
		return
	}
	r := n.row
	v := record.NewVerdict("BILL-003", r.Label)
	at := n.run.start
	what := "never answered"
	if !never {
		at = ledger.QuarantinedAt(n.run.run, n.rec)
		what = "quarantined at " + at.UTC().Format("15:04:05Z")
	}
	words := n.run.quote.Terms.FailedNode
	terms := failedTerms(words)
	// The terms' cutoff, on the rule of BILL-002 (the window's time
	// rounded up to the granule, nothing more): credited, nothing after
	// the failure rounded up to the granule; billed as a whole granule,
	// nothing after the end of the granule it fell in (one that fell on a
	// granule's start, as a node that never answered, begins it).
	g := n.run.granule
	since := at.Sub(n.run.start)
	cutoff := n.run.start.Add(ledger.RoundUp(since, g))
	if terms == termsGranule {
		cutoff = n.run.start.Add(max(since, 0)/g*g + g)
	}
	after := billedAfter(n, res.Format, cutoff)
	v.Measured = fmt.Sprintf("%s; billed %s, %s of it after %s", what, dur(r.BilledSecs), dur(after), cutoff.UTC().Format("15:04:05Z"))
	cur := n.run.quote.Currency
	switch terms {
	case termsNone:
		v.Status = record.Warn
		v.Detail = "quote.terms.failed_node states nothing to hold its bill to"
	case termsUnreadable:
		v.Status = record.Warn
		v.Quoted = fmt.Sprintf("%q", clip(words))
		v.Detail = termsKnown
	case termsUntil, termsNotCredited:
		v.Status = record.Pass
		v.Quoted = terms
		v.Detail = "held to the window's own time (BILL-002): the window does not see a replacement"
		if terms == termsNotCredited {
			v.Detail = "billed as any other time: held to the window's own (BILL-002)"
		}
	default:
		v.Quoted = fmt.Sprintf("nothing after %s (%s, to the %s granule)", cutoff.UTC().Format("15:04:05Z"), terms,
			dur(g.Seconds()))
		if len(r.Lines) > 0 && timeLines(n, res.Format) == 0 {
			// "0s after" of lines that bill no time is nothing measured.
			v.Status = record.Skip
			v.Measured = fmt.Sprintf("%s; not measured: its %d line(s) bill no time (their unit is not one of time)",
				what, len(r.Lines))
			break
		}
		if after > slack {
			v.Status = record.Fail
			v.Detail = fmt.Sprintf("billed %s past the terms: %s to be credited", dur(after),
				money(after/3600*nodeRate(n), cur))
		} else {
			v.Status = record.Pass
		}
	}
	if len(r.Lines) == 0 {
		v.Measured = what + "; no billed line names it"
		if terms != termsNone && terms != termsUnreadable {
			v.Status = record.Pass
			v.Detail = ""
		}
	}
	res.add(v)
}

// judgeTwice finds what is billed twice. Lines are compared by the node
// they matched, not by their text: a copy of a line that names its node
// another way (GPU-02, its billing_id, Azure's full ResourceId) or under
// another item label is a repeat all the same. Two lines that bill one
// node's time over the same span (beyond slack) overlap whatever their
// items say: the node's time is billed once (BILL-002 adds them up).
// Lines of a unit that is not time (storage, traffic) overlap only with
// their own item: a node's traffic and its disk are billed side by side.
func (res *Result) judgeTwice(views []*runView) {
	type group struct {
		who   string
		gpus  int
		lines []Line
	}
	var groups []*group
	for _, v := range views {
		for _, n := range v.nodes {
			groups = append(groups, &group{who: n.row.Label, gpus: n.gpus, lines: slices.Clone(n.lines)})
		}
	}
	// Lines of no node: by their resource, as the export names it.
	byRsc := map[string]*group{}
	for _, l := range res.Unmatched {
		k := strings.ToLower(strings.TrimSpace(l.Resource))
		if byRsc[k] == nil {
			byRsc[k] = &group{who: "resource " + orNone(clip(l.Resource)), gpus: 1}
			groups = append(groups, byRsc[k])
		}
		byRsc[k].lines = append(byRsc[k].lines, l)
	}
	found := map[string][]string{}
	twice := map[string]float64{}
	for _, g := range groups {
		ls := g.lines
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].Start.Before(ls[j].Start) })
		for i := 1; i < len(ls); i++ {
			for j := 0; j < i; j++ {
				a, b := ls[j], ls[i]
				// A line of a time unit and no quantity bills no time.
				as, aTime := a.NodeSeconds(res.Format, g.gpus)
				bs, bTime := b.NodeSeconds(res.Format, g.gpus)
				bothTime := aTime && bTime && as > 0 && bs > 0
				same := a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.Quantity == b.Quantity && a.Cost == b.Cost &&
					strings.EqualFold(strings.TrimSpace(a.Unit), strings.TrimSpace(b.Unit)) && (bothTime || a.Item == b.Item)
				overlap := minTime(a.End, b.End).Sub(b.Start)
				over := !a.Daily && !b.Daily && overlap.Seconds() > slack && (bothTime || a.Item == b.Item)
				switch {
				case same:
					found[g.who] = append(found[g.who], fmt.Sprintf("line %d repeats line %d", b.Row, a.Row))
					twice[g.who] += b.Cost
				case over:
					found[g.who] = append(found[g.who], fmt.Sprintf("lines %d and %d overlap %s", a.Row, b.Row,
						dur(overlap.Seconds())))
				default:
					continue
				}
				break
			}
		}
	}
	if len(found) == 0 {
		v := record.NewVerdict("BILL-004", "")
		v.Status = record.Pass
		n := len(res.Unmatched)
		for _, r := range res.Rows {
			n += len(r.Lines)
		}
		v.Measured = fmt.Sprintf("%d line(s) of the windows, none twice", n)
		res.add(v)
		return
	}
	whos := make([]string, 0, len(found))
	for w := range found {
		whos = append(whos, w)
	}
	sort.Strings(whos)
	for _, w := range whos {
		node := w
		if strings.HasPrefix(w, "resource ") {
			node = ""
		}
		v := record.NewVerdict("BILL-004", node)
		v.Status = record.Fail
		v.Measured = strings.Join(first(found[w], 4), "; ")
		if node == "" {
			v.Measured = w + ": " + v.Measured
		}
		if c := twice[w]; c != 0 {
			v.Detail = money(c, res.Currency) + " billed twice"
		}
		res.add(v)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (res *Result) judgeRate(views []*runView) {
	checked, priced, lines := 0, false, 0
	for _, vw := range views {
		for _, n := range vw.nodes {
			want := nodeRate(n)
			if want <= 0 {
				continue
			}
			priced = true
			lines += len(n.lines)
			var off []string
			for _, l := range n.lines {
				secs, ok := l.NodeSeconds(res.Format, n.gpus)
				if !ok || secs <= 0 {
					continue
				}
				checked++
				got := l.Cost / (secs / 3600)
				if math.Abs(got-want) > 0.01*want {
					off = append(off, fmt.Sprintf("%.2f on line %d", got, l.Row))
				}
			}
			if len(off) == 0 {
				continue
			}
			v := record.NewVerdict("BILL-005", n.row.Label)
			v.Status = record.Fail
			v.Measured = fmt.Sprintf("billed per node-hour: %s", strings.Join(first(off, 4), ", "))
			v.Quoted = fmt.Sprintf("%.2f%s per node-hour (%d GPUs at %.2f)", want, withCur(n.run.quote.Currency), n.gpus,
				n.run.quote.PricePerGPUHr)
			res.add(v)
		}
	}
	for _, v := range res.Verdicts {
		if v.ID == "BILL-005" {
			return
		}
	}
	v := record.NewVerdict("BILL-005", "")
	switch {
	case !priced:
		v.Status = record.Skip
		v.Measured = "the quote states no price_per_gpu_hour"
	case checked == 0:
		// No rate was held to the quote: no PASS on nothing.
		v.Status = record.Skip
		v.Measured = "not measured: no line of a node bills time"
		if lines > 0 {
			v.Measured = fmt.Sprintf("not measured: none of the %d line(s) of the nodes bills time (their unit is not one of time, or their quantity is 0)", lines)
		}
	default:
		v.Status = record.Pass
		v.Measured = fmt.Sprintf("%d line(s) billing time, each at the quoted price (±1 %%)", checked)
	}
	res.add(v)
}

func (res *Result) judgeAttribution(views []*runView) {
	var required []string
	for _, v := range views {
		if b := v.run.Billing; b != nil {
			for _, t := range b.RequiredTags {
				if !slices.Contains(required, t) {
					required = append(required, t)
				}
			}
		}
	}
	missing := func(l Line) []string {
		var m []string
		for _, t := range required {
			if strings.TrimSpace(l.Tags[tagKey(t)]) == "" {
				m = append(m, t)
			}
		}
		return m
	}
	any := false
	for _, vw := range views {
		for _, n := range vw.nodes {
			var bad []string
			for _, l := range n.lines {
				if m := missing(l); len(m) > 0 {
					bad = append(bad, fmt.Sprintf("line %d lacks %s", l.Row, strings.Join(m, ", ")))
				}
			}
			if len(bad) > 0 {
				v := record.NewVerdict("BILL-006", n.row.Label)
				v.Status = record.Fail
				v.Measured = strings.Join(first(bad, 4), "; ")
				v.Quoted = "billing.required_tags: " + strings.Join(required, ", ")
				res.add(v)
				any = true
			}
		}
	}
	if len(res.Unmatched) > 0 {
		v := record.NewVerdict("BILL-006", "")
		v.Status = record.Warn
		var cost float64
		var ls []string
		untagged := 0
		for _, l := range res.Unmatched {
			cost += l.Cost
			ls = append(ls, fmt.Sprintf("%d (%s)", l.Row, orNone(clip(l.Resource))))
			if len(missing(l)) > 0 {
				untagged++
			}
		}
		if untagged > 0 {
			v.Status = record.Fail
		}
		v.Measured = fmt.Sprintf("%d line(s), %s, name no node of the window: %s", len(res.Unmatched),
			money(cost, res.Currency), strings.Join(first(ls, 3), ", "))
		if untagged > 0 {
			v.Detail = fmt.Sprintf("%d of them lack billing.required_tags (%s): nobody can be charged for them",
				untagged, strings.Join(required, ", "))
		}
		res.add(v)
		any = true
	}
	if !any {
		v := record.NewVerdict("BILL-006", "")
		v.Status = record.Pass
		v.Measured = "every line of the windows names a node"
		if len(required) > 0 {
			v.Measured += " and carries " + strings.Join(required, ", ")
		} else {
			v.Detail = "billing.required_tags is not set: tags not checked"
		}
		res.add(v)
	}
}

func (res *Result) judgeTotal(views []*runView) {
	// unexplained is what was billed beyond the ledger: the ledger is
	// already rounded up to the granule (the rule of BILL-002), so a node
	// billed more than its ledger cost, past a cent's rounding a line and
	// slack's seconds, and a line of no node.
	var unexplained float64
	var diffs []string
	for _, vw := range views {
		if vw.run.Ledger != nil {
			res.HasLedger = true
			res.Ledger += vw.run.Ledger.TotalCost
			for _, k := range sortedKeys(vw.run.Ledger.Extras) {
				diffs = append(diffs, fmt.Sprintf("ledger's %s %+.2f not billed as its own line", k, -vw.run.Ledger.Extras[k]))
			}
		}
		for _, n := range vw.nodes {
			res.Billed += n.row.BilledCost
			d := n.row.BilledCost - n.row.LedgerCost
			if math.Abs(d) >= 0.005 {
				diffs = append(diffs, fmt.Sprintf("%s %+.2f", n.row.Label, d))
			}
			if d > centSlack*float64(len(n.lines))+slack/3600*nodeRate(n) {
				unexplained += d
			}
		}
	}
	for _, l := range res.Unmatched {
		res.Billed += l.Cost
		unexplained += math.Max(0, l.Cost)
		diffs = append(diffs, fmt.Sprintf("line %d (no node) %+.2f", l.Row, l.Cost))
	}
	v := record.NewVerdict("BILL-007", "")
	if !res.HasLedger {
		v.Status = record.Skip
		v.Measured = fmt.Sprintf("billed %s; no cost ledger to hold it to (the quote states no price)", money(res.Billed, res.Currency))
		res.add(v)
		return
	}
	d := res.Billed - res.Ledger
	v.Measured = fmt.Sprintf("billed %s", money(res.Billed, res.Currency))
	v.Quoted = fmt.Sprintf("ledger %s", money(res.Ledger, res.Currency))
	v.Detail = fmt.Sprintf("difference %+.2f", d)
	if len(diffs) > 0 {
		v.Detail += ": " + strings.Join(first(diffs, 6), "; ")
	}
	if unexplained > 0.01 {
		v.Status = record.Fail
		v.Detail += fmt.Sprintf(" (%s beyond the ledger, which is rounded up to the billing step)", money(unexplained, res.Currency))
	} else {
		v.Status = record.Pass
	}
	res.add(v)
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// victim is what the failure test recorded of its victim.
type victim struct {
	Victim       string   `json:"victim"`
	InjectedAt   float64  `json:"injected_at"`
	VictimBackAt *float64 `json:"victim_back_at"`
	EndedAt      float64  `json:"ended_at"`
}

func (res *Result) judgeVictim(vw *runView) {
	var p *record.PhaseResult
	for i := range vw.run.Phases {
		if q := &vw.run.Phases[i]; q.Phase == "failure" && q.Outcome == record.OK && len(q.Data) > 0 {
			p = q
		}
	}
	if p == nil {
		return
	}
	var f victim
	if json.Unmarshal(p.Data, &f) != nil || f.Victim == "" || f.InjectedAt <= 0 {
		return
	}
	var n *node
	for _, c := range vw.nodes {
		if c.rec.Name == f.Victim {
			n = c
		}
	}
	if n == nil {
		return
	}
	back := f.EndedAt
	if f.VictimBackAt != nil {
		back = *f.VictimBackAt
	}
	outage := math.Max(back-f.InjectedAt, 0)
	kill := p.Started.Add(time.Duration(f.InjectedAt * float64(time.Second)))
	r := n.row
	v := record.NewVerdict("BILL-008", r.Label)
	v.Measured = fmt.Sprintf("killed at %s, out of the job %s; billed %s", kill.UTC().Format("15:04:05Z"), dur(outage), dur(r.BilledSecs))
	words := n.run.quote.Terms.FailedNode
	terms := failedTerms(words)
	allowed := r.ExpectedSecs
	if terms == termsCredited {
		allowed = ledger.RoundUp(time.Duration((r.PresentSecs-outage)*float64(time.Second)), vw.granule).Seconds()
	}
	switch {
	case len(r.Lines) == 0:
		v.Status = record.Warn
		v.Detail = "no billed line names it"
	case timeLines(n, res.Format) == 0:
		v.Status = record.Skip
		v.Detail = fmt.Sprintf("not measured: its %d line(s) bill no time (their unit is not one of time)", len(r.Lines))
	case terms == termsNone:
		v.Status = record.Warn
		v.Detail = "quote.terms.failed_node states nothing: its time out of the job billed as any other"
	case terms == termsUnreadable:
		v.Status = record.Warn
		v.Quoted = fmt.Sprintf("%q", clip(words))
		v.Detail = termsKnown
	default:
		v.Quoted = fmt.Sprintf("at most %s by the terms (%s, rounded up to the %s granule)", dur(allowed), terms,
			dur(vw.granule.Seconds()))
		if over := r.BilledSecs - allowed; over > slack {
			v.Status = record.Fail
			v.Detail = fmt.Sprintf("%s beyond the terms: %s", dur(over), money(over/3600*nodeRate(n), n.run.quote.Currency))
		} else {
			v.Status = record.Pass
		}
	}
	res.add(v)
}

func first(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("%d more", len(s)-n))
}

// rows lists line numbers, a run of them as a range.
func rows(ns []int) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		} else {
			parts = append(parts, fmt.Sprint(ns[i]))
		}
		i = j + 1
	}
	return strings.Join(first(parts, 4), ",")
}

// dur is seconds as a person reads a bill: 2h00m, 14m05s, 41s.
func dur(secs float64) string {
	neg := secs < 0
	s := int64(math.Round(math.Abs(secs)))
	var out string
	switch {
	case s >= 3600:
		out = fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
		if s%60 != 0 {
			out += fmt.Sprintf("%02ds", s%60)
		}
	case s >= 60:
		out = fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		out = fmt.Sprintf("%ds", s)
	}
	if neg {
		return "-" + out
	}
	return out
}

func money(x float64, cur string) string { return fmt.Sprintf("%.2f%s", x, withCur(cur)) }

func withCur(cur string) string {
	if cur == "" {
		return ""
	}
	return " " + cur
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
