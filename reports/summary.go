package reports

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[1;31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// DefaultWidth is the summary's width when the terminal's is not known.
const DefaultWidth = 100

// maxReasonLines bounds each list under the table: at 1,000 nodes the
// failures could otherwise outnumber everything else.
const maxReasonLines = 15

// SummaryOptions says how the summary is printed.
type SummaryOptions struct {
	// Color adds ANSI colours (the CLI asks on a terminal, so piped
	// output stays plain).
	Color bool
	// Width is the columns to fit (DefaultWidth when 0): the last column
	// and the reasons wrap, nothing spills.
	Width int
	// Detail adds the per-node tables (gpuaccept run --detail, -o table).
	Detail bool
}

// Summary prints the terminal summary a buyer reads first: a banner, the
// nodes, one line per requirement (its status, how many nodes passed, what
// it was held to and the worst that was measured), why the window is not
// accepted (or incomplete), grouped by reason with host ranges, and the
// outcome.
func Summary(w io.Writer, run *record.Run, o SummaryOptions) error {
	if run == nil {
		return fmt.Errorf("summary: nil run")
	}
	width := o.Width
	if width <= 0 {
		width = DefaultWidth
	}
	width = max(width, 40)
	paint := func(code, s string) string {
		if !o.Color {
			return s
		}
		return code + s + ansiReset
	}
	statusPaint := func(s string) string {
		switch s {
		case string(record.Pass):
			return paint(ansiGreen, s)
		case string(record.Fail):
			return paint(ansiRed, s)
		case string(record.Warn), StatusIncomplete:
			return paint(ansiYellow, s)
		case string(record.Skip):
			return paint(ansiCyan, s)
		}
		return s
	}
	// Render into a buffer first so that a failing writer yields one
	// error instead of half a summary.
	var b bytes.Buffer
	text := func(s, indent string) {
		for _, l := range wrap(asciiRule.Replace(redact.Controls(s)), width, indent) {
			b.WriteString(l + "\n")
		}
	}
	for i, l := range wrap(redact.Controls(banner(run)), width, "  ") {
		if i == 0 && run.Simulated {
			l = paint(ansiYellow+ansiBold, l)
		} else if i == 0 {
			l = paint(ansiBold, l)
		}
		b.WriteString(l + "\n")
	}
	head := nodeCounts(run)
	if line := costBrief(run.Ledger); line != "" {
		head += "; " + line
	}
	text(head, "  ")
	if sel := selectionText(run); sel != "" {
		text("narrowed to "+sel, "  ")
	}
	b.WriteString("\n")

	reqs := requirements(run)
	if len(reqs) == 0 {
		b.WriteString("No verdicts.\n")
	} else if err := requirementTable(&b, reqs, width, statusPaint); err != nil {
		return err
	}

	res := run.Result()
	section := func(title string, groups []reasonGroup) {
		if len(groups) == 0 {
			return
		}
		b.WriteString("\n" + title + "\n")
		for i, g := range groups {
			if i == maxReasonLines && len(groups) > maxReasonLines+1 {
				text(fmt.Sprintf("... and %d more (report.md lists every one)", len(groups)-i), "    ")
				break
			}
			text("  "+g.line(), "      ")
		}
	}
	section("Not accepted because:", reasons(run, record.Fail))
	var missing []reasonGroup
	for _, why := range res.Incomplete {
		missing = append(missing, reasonGroup{Text: why})
	}
	if len(missing) > 0 {
		b.WriteString("\nIncomplete because:\n")
		for i, g := range missing {
			if i == maxReasonLines && len(missing) > maxReasonLines+1 {
				text(fmt.Sprintf("... and %d more (report.md lists every one)", len(missing)-i), "    ")
				break
			}
			text("  "+g.Text, "      ")
		}
	}
	section("Warnings:", reasons(run, record.Warn))
	var again []reasonGroup
	for _, l := range retestedLines(run) {
		again = append(again, reasonGroup{Text: l})
	}
	if len(again) > 0 {
		b.WriteString("\nPassed on a retest:\n")
		for i, g := range again {
			if i == maxReasonLines && len(again) > maxReasonLines+1 {
				text(fmt.Sprintf("... and %d more (report.md lists every one)", len(again)-i), "    ")
				break
			}
			text("  "+g.Text, "      ")
		}
	}

	if o.Detail {
		b.WriteString("\n")
		if err := detailTables(&b, run, paint); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	verdict := result(run)
	if strings.HasPrefix(verdict, record.OutcomeAccepted) {
		verdict = paint(ansiGreen+ansiBold, verdict)
	} else {
		verdict = paint(ansiRed, verdict)
	}
	for _, l := range wrap(verdict, width, "  ") {
		b.WriteString(l + "\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// nodesIn names nodes as a host range, or by their count where the range
// would take more than width columns (the lines below the table name
// every one).
func nodesIn(nodes []string, width int) string {
	s := hostlist.Compress(nodes)
	if len(nodes) > 1 && twwidth.Width(s) > width {
		return fmt.Sprintf("%d nodes", len(nodes))
	}
	return s
}

// plainPasses is how many requirements from reqs[0] on are of one family,
// passed by every node they judged (the same nodes, saying the same), and
// hold no figure: what can share a line.
func plainPasses(reqs []requirement) int {
	plain := func(r requirement) bool {
		return r.Status == string(record.Pass) && r.Passed == r.Total && r.Worst.Value == nil && len(r.Alike) == len(r.All)
	}
	if len(reqs) == 0 || !plain(reqs[0]) {
		return 0
	}
	first, fam := reqs[0], record.FamilyOf(reqs[0].ID)
	k := 1
	for k < len(reqs) && plain(reqs[k]) && record.FamilyOf(reqs[k].ID) == fam &&
		reqs[k].Cluster == first.Cluster && slices.Equal(reqs[k].Alike, first.Alike) {
		k++
	}
	return k
}

// asciiRule is a rule as the terminal shows it: ASCII, whose width no
// locale changes (µs as us: a µ made the latency rows a byte past 100).
var asciiRule = strings.NewReplacer("≥", ">=", "≤", "<=", "×", "x", "µ", "u")

// requirementTable is one line per requirement, the last column wrapped
// to what the others leave of width.
func requirementTable(b *bytes.Buffer, reqs []requirement, width int, paint func(string) string) error {
	header := []string{"REQUIREMENT", "STATUS", "PASSED", "HELD TO", "WORST"}
	rows := make([][]string, 0, len(reqs))
	// short is each row's PASSED as a narrow terminal gets it.
	var short []string
	for i := 0; i < len(reqs); i++ {
		r := reqs[i]
		short = append(short, r.passedShort())
		if k := plainPasses(reqs[i:]); k > 1 {
			// Checks of one family every node passed, with no figure to
			// show a margin: one line for them all (a 1,000-node window
			// that passed reads in a screen).
			ids := make([]string, k)
			held := none
			for j, q := range reqs[i : i+k] {
				ids[j] = q.ID
				if q.Worst.Rule() != "" {
					held = "as quoted"
				}
			}
			who := "cluster"
			if !r.Cluster {
				who = nodesIn(r.Alike, 24)
			}
			rows = append(rows, []string{hostlist.Compress(ids), r.Status, r.passedText(), held,
				allPassed(who, k)})
			i += k - 1
			continue
		}
		held := asciiRule.Replace(r.Worst.ShortRule())
		if held == "" {
			held = none
		}
		worst := briefly(r.Worst)
		if !r.Cluster {
			worst = nodesIn(r.Alike, 24) + ": " + worst
		}
		rows = append(rows, []string{r.ID, r.Status, r.passedText(), clip(held, 24), asciiRule.Replace(worst)})
	}
	rows = shown(rows)
	// The columns before the last take what they need; the last wraps in
	// what is left.
	const gap = 2
	widthOf := func() int {
		used := 0
		for c := 0; c < len(header)-1; c++ {
			w := twwidth.Width(header[c])
			for _, r := range rows {
				w = max(w, twwidth.Width(r[c]))
			}
			used += w + gap
		}
		return used
	}
	used := widthOf()
	if width-used < 30 {
		// A narrow terminal: the rule goes (the lines under the table say
		// it) before the worst figure is squeezed.
		header = slices.Delete(header, 3, 4)
		for i := range rows {
			rows[i] = slices.Delete(rows[i], 3, 4)
		}
		used = widthOf()
	}
	legend := ""
	if width-used < 16 {
		// Still too narrow: "2/2, 2 not judged" becomes "2/2 +2", said
		// under the table.
		for i := range rows {
			if rows[i][2] != short[i] {
				rows[i][2], legend = short[i], "PASSED +N: N more verdicts not judged (skipped or not measured)"
			}
		}
		used = widthOf()
	}
	lastCol := len(header) - 1
	last := max(width-used, 16)
	for i, r := range rows {
		// A line per requirement: what passed or was skipped gets one,
		// what failed or warned two (its whole reason follows the table).
		lines := 1
		if r[1] != string(record.Pass) && r[1] != string(record.Skip) {
			lines = 2
		}
		rows[i][lastCol] = strings.Join(clipLines(r[lastCol], last, lines), " ")
		rows[i][1] = paint(r[1])
	}
	pad := tw.Padding{Right: strings.Repeat(" ", gap)}
	pads := make([]tw.Padding, len(header))
	for i := range pads {
		pads[i] = pad
	}
	pads[lastCol] = tw.Padding{Overwrite: true}
	cfg := tablewriter.Config{
		Header: tw.CellConfig{
			Formatting: tw.CellFormatting{AutoFormat: tw.Off},
			Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
			Padding:    tw.CellPadding{Global: pad, PerColumn: pads},
		},
		Row: tw.CellConfig{
			Formatting:   tw.CellFormatting{AutoWrap: tw.WrapNormal},
			Alignment:    tw.CellAlignment{Global: tw.AlignLeft},
			Padding:      tw.CellPadding{Global: pad, PerColumn: pads},
			ColMaxWidths: tw.CellWidth{PerColumn: tw.NewMapper[int, int]().Set(lastCol, last)},
		},
	}
	var out bytes.Buffer
	t := tablewriter.NewTable(&out, tablewriter.WithConfig(cfg), tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
		Borders: tw.BorderNone,
		Symbols: tw.NewSymbols(tw.StyleASCII),
		Settings: tw.Settings{
			Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
			Lines:      tw.Lines{ShowHeaderLine: tw.Off},
		},
	})))
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		b.WriteString(strings.TrimRight(l, " ") + "\n")
	}
	for _, l := range wrap(legend, width, "  ") {
		if legend != "" {
			b.WriteString(l + "\n")
		}
	}
	return nil
}

// detailTables are the per-node tables: every node, every verdict.
func detailTables(b *bytes.Buffer, run *record.Run, paint func(code, s string) string) error {
	nodes := cells(shown(nodeRows(run)), func(col int, s string) string {
		if col == 2 && s == "yes" {
			return paint(ansiRed, s)
		}
		return s
	})
	if err := textTable(b, nodeHeader(), nodes, "No nodes."); err != nil {
		return err
	}
	b.WriteString("\n")
	rows := cells(shown(verdictRows(run)), func(col int, s string) string {
		if col != statusCol {
			return s
		}
		switch record.Status(s) {
		case record.Pass:
			return paint(ansiGreen, s)
		case record.Fail:
			return paint(ansiRed, s)
		case record.Warn:
			return paint(ansiYellow, s)
		case record.Skip:
			return paint(ansiCyan, s)
		}
		return s
	})
	return textTable(b, verdictHeader(), rows, "No verdicts.")
}

// clipLines is s wrapped to width, at most n lines of it, the last cut
// short with "..." when more was left.
func clipLines(s string, width, n int) []string {
	lines := wrap(s, width, "")
	if len(lines) <= n {
		return lines
	}
	lines = lines[:n]
	lines[n-1] = twwidth.Truncate(lines[n-1], width-3, "") + "..."
	return lines
}

// clip shortens s to n columns, saying it did.
func clip(s string, n int) string {
	if twwidth.Width(s) <= n {
		return s
	}
	return twwidth.Truncate(s, n-3, "...")
}

// wrap breaks s into lines of at most width columns at spaces (a word
// longer than a line is cut), the lines after the first indented.
func wrap(s string, width int, indent string) []string {
	var lines []string
	line := ""
	// A leading indent of s itself (a list item) stays on its first line.
	lead := s[:len(s)-len(strings.TrimLeft(s, " "))]
	for _, word := range strings.Fields(s) {
		for twwidth.Width(lead+word) > width {
			// A word that fits no line: cut it where the line ends.
			if line != "" {
				lines = append(lines, line)
				line, lead = "", indent
				continue
			}
			room := width - twwidth.Width(lead)
			cut := cutAt(word, room)
			lines = append(lines, lead+word[:cut])
			word, lead = word[cut:], indent
		}
		switch {
		case line == "":
			line = lead + word
		case twwidth.Width(line+" "+word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = indent + word
		}
		lead = indent
	}
	if line != "" {
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		lines = []string{""}
	}
	return lines
}

// cutAt is the byte offset of the longest prefix of word at most room
// columns wide (at least one rune, so that wrapping always advances).
func cutAt(word string, room int) int {
	w := 0
	for i, r := range word {
		rw := twwidth.Width(string(r))
		if w+rw > room && i > 0 {
			return i
		}
		w += rw
	}
	return len(word)
}

// textTable renders an ASCII table. ASCII rather than box drawing: the
// summary gets pasted into tickets and mails, and box characters change
// width under East Asian locales, which would also unsettle the goldens.
// shown escapes the control characters in what nodes said (redact.Controls)
// before the summary adds colours of its own.
func shown(rows [][]string) [][]string {
	return cells(rows, func(_ int, s string) string { return redact.Controls(s) })
}

func textTable(b *bytes.Buffer, header []string, rows [][]string, empty string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(b, empty)
		return err
	}
	t := tablewriter.NewTable(b, tablewriter.WithRenderer(renderer.NewBlueprint(
		tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})))
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

func allPassed(who string, k int) string {
	if k == 2 {
		return who + ": both passed"
	}
	return fmt.Sprintf("%s: all %d passed", who, k)
}
