package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

// Markdown writes report.md: what Summary shows, plus where the window's
// input came from, every phase result per node with a link to its raw log,
// and the provider's quote.
func Markdown(w io.Writer, run *record.Run) error {
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
	fmt.Fprintf(&b, "%s\n\n", title)
	fmt.Fprintf(&b, "- Provider: %s\n- Region: %s\n- Window: %s\n", md(run.Provider), md(run.Region), md(run.Window))
	fmt.Fprintf(&b, "- Started: %s\n- Ended: %s\n", stamp(run.Started), stamp(run.Ended))
	if len(run.Resumed) > 0 {
		var ts []string
		for _, t := range run.Resumed {
			ts = append(ts, stamp(t))
		}
		fmt.Fprintf(&b, "- Resumed: %s\n", strings.Join(ts, ", "))
	}
	fmt.Fprintf(&b, "- Tool: %s\n- Inventory: %s (sha256 %s)\n\n", md(run.Tool), md(run.Inventory.Path), md(run.Inventory.Digest))
	fmt.Fprintf(&b, "**Result: %s**\n\n", md(result(run)))

	b.WriteString("## Nodes\n\n")
	if err := mdTable(&b, nodeHeader(), escapeAll(nodeRows(run)), "No nodes."); err != nil {
		return err
	}

	// Markdown has room for the requirement's title, which the terminal
	// table leaves out.
	b.WriteString("\n## Verdicts\n\n")
	var rows [][]string
	for _, v := range verdicts(run) {
		rows = append(rows, []string{v.ID, v.Title, nodeLabel(v.Node), string(v.Status), v.Measured, v.Quoted,
			decimal(v.Ratio), decimal(v.Tolerance), v.Detail})
	}
	header := []string{"ID", "Title", "Node", "Status", "Measured", "Quoted", "Ratio", "Tolerance", "Detail"}
	if err := mdTable(&b, header, escapeAll(rows), "No verdicts."); err != nil {
		return err
	}

	if err := mdCost(&b, run.Ledger); err != nil {
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

func logLink(path string) string {
	if path == "" {
		return none
	}
	return fmt.Sprintf("[%s](%s)", md(path), (&url.URL{Path: path}).EscapedPath())
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
func mdTable(b *bytes.Buffer, header []string, rows [][]string, empty string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(b, empty)
		return err
	}
	t := tablewriter.NewTable(b, tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}
