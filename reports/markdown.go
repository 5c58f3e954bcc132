package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

// BundleFacts are what the reports say of the bundle they are part of:
// the evidence with checksums and the digest of its manifest.
type BundleFacts struct {
	Evidence []EvidenceFile
	// Digest is the evidence digest (EvidenceDigest): the sha256 of
	// MANIFEST.sha256's lines but the reports', which the manifest lists
	// too but which cannot show the digest of what lists them.
	Digest string
	// Dir is the bundle's directory, whose raw/<node>/telemetry.txt.gz
	// report.html charts; "" for none.
	Dir string
}

// Markdown writes report.md outside a bundle (no digest to sign).
func Markdown(w io.Writer, run *record.Run) error { return MarkdownReport(w, run, nil) }

// MarkdownReport writes report.md: first what a buyer signs (the result,
// the window, the acceptance card, why, the quote against what was
// measured and its lint, the node × family matrix, the sign-off), then
// the evidence behind it: every requirement, every verdict, the cost,
// every phase result per node with a link to its raw log, the quote.
func MarkdownReport(w io.Writer, run *record.Run, bf *BundleFacts) error {
	if run == nil {
		return fmt.Errorf("markdown: nil run")
	}
	var b bytes.Buffer
	if run.Simulated {
		b.WriteString("> **SIMULATED** - this window ran against simulated nodes and GPU tools; " +
			"it is not evidence about real hardware.\n\n")
	}
	title := "# Acceptance report " + md(run.ID)
	if run.Simulated {
		title += " (SIMULATED)"
	}
	fmt.Fprintf(&b, "%s\n\n**Result: %s**\n\n", title, md(result(run)))
	facts := [][]string{
		{"Provider", run.Provider}, {"Region", run.Region}, {"Window", run.Window},
		{"Started", stamp(run.Started)}, {"Ended", stamp(run.Ended)},
	}
	if len(run.Resumed) > 0 {
		var ts []string
		for _, t := range run.Resumed {
			ts = append(ts, stamp(t))
		}
		facts = append(facts, []string{"Resumed", strings.Join(ts, ", ")})
	}
	if sel := selectionText(run); sel != "" {
		facts = append(facts, []string{"Narrowed to", sel})
	}
	facts = append(facts, []string{"Nodes", nodeCounts(run)}, []string{"Tool", run.Tool},
		[]string{"Inventory", run.Inventory.Path + " (sha256 " + run.Inventory.Digest + ")"})
	if err := mdTable(&b, []string{"Window", ""}, escapeAll(facts), ""); err != nil {
		return err
	}

	b.WriteString("\n## Acceptance card\n\n")
	var rows [][]string
	for _, r := range card(run) {
		var links []string
		for _, id := range r.IDs {
			links = append(links, fmt.Sprintf("[%s](#%s)", id, reqAnchor(id)))
		}
		rows = append(rows, []string{md(r.Test), md(r.Condition), "**" + md(r.Status) + "**", md(r.Figure), orNone(strings.Join(links, " "))})
	}
	if err := mdTable(&b, []string{"Test", "Pass condition", "Result", "Figure, against the quote", "Evidence"}, rows, ""); err != nil {
		return err
	}

	res := run.Result()
	reasonList := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s\n\n", title)
		for _, l := range lines {
			fmt.Fprintf(&b, "- %s\n", md(l))
		}
	}
	lines := func(gs []reasonGroup) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.line())
		}
		return out
	}
	reasonList("**Not accepted because:**", lines(reasons(run, record.Fail)))
	reasonList("**Incomplete because:**", res.Incomplete)
	reasonList("**Warnings:**", lines(reasons(run, record.Warn)))
	reasonList("**Passed on a retest:**", retestedLines(run))

	b.WriteString("\n## The quote against what was measured\n\n")
	if q := quoteRows(run); len(q) > 0 {
		if err := mdTable(&b, []string{"Quote", "Quoted", "Requirement", "Measured (worst)", "Result"}, escapeAll(q), ""); err != nil {
			return err
		}
	} else {
		b.WriteString("The quote states no figure a requirement holds the nodes to.\n")
	}
	b.WriteString("\n### Quote lint\n\n")
	switch {
	case !LintRecorded(run):
		b.WriteString("Not recorded (a run made before gpuaccept kept it; `gpuaccept check` the inventory).\n")
	case len(run.Lint) == 0:
		b.WriteString("No warnings.\n")
	default:
		for _, f := range run.Lint {
			fmt.Fprintf(&b, "- %s %s\n", md(f.ID), md(f.Message))
		}
	}

	m := nodeMatrix(run)
	if len(m.Rows) > 0 && len(m.Families) > 0 {
		b.WriteString("\n## Nodes by requirement family\n\n")
		var mrows [][]string
		var notes []string
		for _, r := range m.Rows {
			row := []string{md(r.Node)}
			var why []string
			for _, c := range r.Cells {
				row = append(row, md(c.Mark()))
				why = append(why, c.Reasons...)
			}
			mrows = append(mrows, row)
			if len(why) > 0 {
				notes = append(notes, r.Node+": "+strings.Join(why, "; "))
			}
		}
		if err := mdTable(&b, append([]string{"Node"}, m.Families...), mrows, ""); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(&b, "\n- %s", md(n))
		}
		if len(notes) > 0 {
			b.WriteString("\n")
		}
	}

	b.WriteString("\n## Sign-off\n\n")
	for _, l := range signoffLines(run, bf) {
		fmt.Fprintf(&b, "- %s\n", md(l))
	}
	b.WriteString("\n| | Name | Signature | Date |\n|---|---|---|---|\n| Prepared by | | | |\n| Approved by | | | |\n")

	b.WriteString("\n## Requirements\n\n")
	rows = nil
	for _, r := range requirements(run) {
		held := r.Worst.Rule()
		rows = append(rows, []string{fmt.Sprintf(`<a id="%s"></a>%s`, reqAnchor(r.ID), md(r.ID)), md(r.Title), md(r.Status),
			md(r.passedText()), md(held), md(r.worstText())})
	}
	if err := mdTable(&b, []string{"ID", "Requirement", "Status", "Passed", "Held to", "Worst"}, rows, "No verdicts."); err != nil {
		return err
	}

	if err := mdWorkload(&b, run); err != nil {
		return err
	}

	b.WriteString("\n## Nodes\n\n")
	nodeHead, nodes := nodeHeader(), nodeRows(run)
	if facts := slurmFacts(run); facts != nil {
		// The node as Slurm showed it, beside what the window found.
		nodeHead = append(nodeHead, "Slurm")
		for i, n := range run.Nodes {
			nodes[i] = append(nodes[i], facts[n.Name])
		}
	}
	if err := mdTable(&b, nodeHead, escapeAll(nodes), "No nodes."); err != nil {
		return err
	}

	b.WriteString("\n## Verdicts\n\n")
	rows = groupedVerdictRows(run)
	header := []string{"ID", "Node", "Status", "Measured", "Quoted", "Ratio", "Tolerance", "Detail"}
	if err := mdTable(&b, header, escapeAll(rows), "No verdicts."); err != nil {
		return err
	}

	if err := mdCost(&b, run.Ledger); err != nil {
		return err
	}
	if err := mdBilling(&b, run); err != nil {
		return err
	}

	b.WriteString("\n## Phases\n")
	groups := phaseGroups(run)
	if len(groups) == 0 {
		b.WriteString("\nNo phase results.\n")
	}
	for _, g := range groups {
		fmt.Fprintf(&b, "\n### %s\n\n", md(g.name))
		var rows [][]string
		for _, p := range g.phases {
			rows = append(rows, []string{md(p.Phase), md(string(p.Outcome)), duration(p), md(p.Error), logLink(p.Log)})
		}
		if err := mdTable(&b, []string{"Phase", "Outcome", "Duration", "Error", "Log"}, rows, ""); err != nil {
			return err
		}
	}

	// A phase that drew a text timeline (the failure test) shows it here;
	// the data stays in run.json for the HTML report.
	for _, p := range run.Phases {
		var d struct {
			Timeline string `json:"timeline"`
		}
		if len(p.Data) == 0 || json.Unmarshal(p.Data, &d) != nil || strings.TrimSpace(d.Timeline) == "" {
			continue
		}
		fmt.Fprintf(&b, "\n## Timeline: %s\n\n```\n%s\n```\n", md(p.Phase), strings.TrimRight(d.Timeline, "\n"))
	}

	b.WriteString("\n## Quote\n\n")
	if len(run.Quote) == 0 {
		b.WriteString("No quote recorded.\n")
	} else {
		var q bytes.Buffer
		if json.Indent(&q, run.Quote, "", "  ") != nil {
			q.Reset()
			q.Write(run.Quote) // keep what was given rather than drop it
		}
		fmt.Fprintf(&b, "```json\n%s\n```\n", bytes.TrimSpace(q.Bytes()))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// mdCost writes the Cost section: the nodes' billed time, the components,
// the cost per unit and the monthly TCO; nothing without a ledger.
func mdCost(b *bytes.Buffer, l *record.Ledger) error {
	if l == nil {
		return nil
	}
	fmt.Fprintf(b, "\n## Cost\n\n%s\n\n", md(costIntro(l)))
	if err := mdTable(b, costNodeHeader(l), escapeAll(costCells(costNodeRows(l))), "No nodes billed."); err != nil {
		return err
	}
	b.WriteString("\n")
	if err := mdTable(b, costComponentHeader(l), escapeAll(costCells(costComponentRows(l))), ""); err != nil {
		return err
	}
	fmt.Fprintf(b, "\n%s\n", md(costPerUnit(l)))
	if l.TCO != nil {
		b.WriteString("\n### Monthly TCO\n\n")
		if err := mdTable(b, costTCOHeader(l), escapeAll(costCells(costTCORows(l.TCO))), ""); err != nil {
			return err
		}
	}
	return nil
}

type phaseGroup struct {
	name   string
	phases []record.PhaseResult
}

// phaseGroups groups phase results by node, in the run's node order with
// cluster-wide results first (as for verdicts); within a node they keep the
// order they ran in.
func phaseGroups(run *record.Run) []phaseGroup {
	byNode := map[string][]record.PhaseResult{}
	var extra []string // nodes the run does not list: shown last, never dropped
	known := map[string]bool{"": true}
	for _, n := range run.Nodes {
		known[n.Name] = true
	}
	for _, p := range run.Phases {
		if !known[p.Node] && byNode[p.Node] == nil {
			extra = append(extra, p.Node)
		}
		byNode[p.Node] = append(byNode[p.Node], p)
	}
	names := []string{""}
	for _, n := range run.Nodes {
		names = append(names, n.Name)
	}
	var gs []phaseGroup
	for _, name := range append(names, extra...) {
		if ps := byNode[name]; len(ps) > 0 {
			gs = append(gs, phaseGroup{nodeLabel(name), ps})
			delete(byNode, name) // a node listed twice is shown once
		}
	}
	return gs
}

func duration(p record.PhaseResult) string {
	if p.Started.IsZero() || p.Ended.IsZero() {
		return none
	}
	return p.Ended.Sub(p.Started).Round(time.Millisecond).String()
}

// logLink links a phase's raw log by its file name: the section names the
// node, and the path twice on every row of a fleet was a tenth of the page.
func logLink(p string) string {
	if p == "" {
		return none
	}
	return fmt.Sprintf("[%s](%s)", md(path.Base(p)), (&url.URL{Path: p}).EscapedPath())
}

// mdEscaper neutralises what a node's text could do to the page: break a
// table row (|), hide text as HTML or make an autolink (<, >), make a link
// or an image that loads when the page is shown ([, ]: a node's
// "![x](http://...)"), or open a code span that swallows the rest (`).
// What only restyles text (*, _) is left readable.
var mdEscaper = strings.NewReplacer(`\`, `\\`, `|`, `\|`, `<`, `\<`, `>`, `\>`, `[`, `\[`, `]`, `\]`, "`", "\\`")

// md makes s safe for a Markdown line or table cell.
func md(s string) string { return mdEscaper.Replace(redact.Controls(orNone(oneLine(s)))) }

func escapeAll(rows [][]string) [][]string {
	return cells(rows, func(_ int, s string) string { return mdEscaper.Replace(redact.Controls(s)) })
}

// mdTable renders a GitHub-flavoured Markdown table; cells must already be
// escaped.
// verdictGroup is a row of the verdict tables: one verdict, or the nodes
// whose verdicts of one requirement read alike, as a host range (dshbak's
// way: a 1,000-node window's SKIPs are a few rows, not thousands). Nodes
// is the row's node label.
type verdictGroup struct {
	record.Verdict
	Nodes string
}

// groupedVerdicts is the run's verdicts in report order, grouped.
func groupedVerdicts(run *record.Run) []verdictGroup {
	var out []verdictGroup
	type group struct {
		v     record.Verdict
		nodes []string
	}
	var order []*group
	byKey := map[string]*group{}
	flush := func() {
		for _, g := range order {
			label := nodeLabel(g.v.Node)
			if len(g.nodes) > 0 {
				label = hostlist.Compress(g.nodes)
			}
			out = append(out, verdictGroup{g.v, label})
		}
		order, byKey = nil, map[string]*group{}
	}
	last := ""
	for _, v := range verdicts(run) {
		v.Detail = verdictDetail(v)
		if v.ID != last {
			flush()
			last = v.ID
		}
		key := strings.Join([]string{v.ID, v.Title, string(v.Status), v.Measured, v.Quoted,
			decimal(v.Ratio), decimal(v.Tolerance), v.Detail}, "\x00")
		single := v.Node != "" && !strings.Contains(v.Node, ",")
		if !single {
			key += "\x00" + v.Node // a cluster verdict, or several nodes': its own row
		}
		g := byKey[key]
		if g == nil {
			g = &group{v: v}
			byKey[key] = g
			order = append(order, g)
		}
		if single {
			g.nodes = append(g.nodes, v.Node)
		}
	}
	flush()
	return out
}

// groupedVerdictRows is the Verdicts table of report.md; a requirement's
// title is in the Requirements table above it.
func groupedVerdictRows(run *record.Run) [][]string {
	var rows [][]string
	for _, g := range groupedVerdicts(run) {
		rows = append(rows, []string{g.ID, g.Nodes, string(g.Status), g.Measured, g.Quoted,
			decimal(g.Ratio), decimal(g.Tolerance), g.Detail})
	}
	return rows
}

// mdCellMax bounds a table cell of report.md.
const mdCellMax = 160

func mdTable(b *bytes.Buffer, header []string, rows [][]string, empty string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(b, empty)
		return err
	}
	t := tablewriter.NewTable(b, tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header(header)
	// A column is as wide as its widest cell on every row: one long cell
	// made a 1,000-node report.md 3.8 GB. A cell says its first
	// mdCellMax characters; run.json and report.html hold the rest.
	clipped := make([][]string, len(rows))
	for i, r := range rows {
		clipped[i] = make([]string, len(r))
		for j, c := range r {
			if rs := []rune(c); len(rs) > mdCellMax {
				c = string(rs[:mdCellMax-1]) + "…"
			}
			clipped[i][j] = c
		}
	}
	if err := t.Bulk(clipped); err != nil {
		return err
	}
	return t.Render()
}
