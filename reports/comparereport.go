package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

// The renderings of a Comparison: CompareText for the terminal,
// CompareMarkdown for a ticket or a document, CompareHTML for a page of
// its own, CompareJSON for programs (schema CompareSchema). All show the
// same rows, one column per run.

// dash fills a cell the run has nothing for: no such verdict, no failure
// test, no ledger, no quote.
const dash = "—"

// compareSection is a group of rows.
type compareSection struct {
	Name   string // heading (Markdown, HTML)
	prefix string // prepended to the label in the terminal table
	Rows   []compareRow
}

// compareRow is one line of the comparison: a label and a cell per run.
type compareRow struct {
	Label string
	Title string // a criterion's title (Markdown, HTML)
	Cells []compareCell
}

type compareCell struct {
	Text   string
	Status record.Status // for colour: criteria and the verdict; "" none
}

// Class is the cell's CSS class in the HTML page.
func (c compareCell) Class() string { return strings.ToLower(string(c.Status)) }

// compareSections builds every row of c.
func compareSections(c *Comparison) []compareSection {
	row := func(label string, f func(r *ComparedRun) string) compareRow {
		cells := make([]compareCell, len(c.Runs))
		for i := range c.Runs {
			cells[i] = compareCell{Text: orWord(oneLine(f(&c.Runs[i])), dash)}
		}
		return compareRow{Label: label, Cells: cells}
	}
	quote := func(label string, f func(q *ComparedQuote) string) compareRow {
		return row(label, func(r *ComparedRun) string {
			if r.Quote == nil {
				return ""
			}
			return orWord(f(r.Quote), "not stated")
		})
	}
	failure := func(label string, f func(f *ComparedFailure) string) compareRow {
		return row(label, func(r *ComparedRun) string {
			if r.Failure == nil {
				if label == "test" {
					return r.FailureWhyNot
				}
				return ""
			}
			return f(r.Failure)
		})
	}

	run := compareSection{Name: "Run", Rows: []compareRow{
		row("provider", func(r *ComparedRun) string { return r.Provider }),
		row("region", func(r *ComparedRun) string { return r.Region }),
		row("window", func(r *ComparedRun) string { return r.Window }),
		row("run ID", func(r *ComparedRun) string { return r.ID }),
		row("started", func(r *ComparedRun) string { return stamp(r.Started) }),
		row("simulated", func(r *ComparedRun) string {
			if r.Simulated {
				return "SIMULATED"
			}
			return "no"
		}),
	}}
	quoted := compareSection{Name: "Quote", prefix: "quote: ", Rows: []compareRow{
		quote("GPU model", func(q *ComparedQuote) string { return q.GPUModel }),
		quote("GPUs per node", func(q *ComparedQuote) string { return count0(q.GPUsPerNode) }),
		quote("GPU memory", func(q *ComparedQuote) string { return withUnit(q.GPUMemoryGiB, "GiB") }),
		quote("form factor", func(q *ComparedQuote) string { return q.FormFactor }),
		quote("fabric", func(q *ComparedQuote) string { return q.Fabric }),
		quote("NICs per node", func(q *ComparedQuote) string {
			switch {
			case q.NICsPerNode > 0 && q.NICGbps > 0:
				return fmt.Sprintf("%d × %s", q.NICsPerNode, withUnit(q.NICGbps, "Gb/s"))
			case q.NICsPerNode > 0:
				return count0(q.NICsPerNode)
			case q.NICGbps > 0:
				return withUnit(q.NICGbps, "Gb/s") + " each"
			}
			return ""
		}),
		row("lint", func(r *ComparedRun) string {
			switch {
			case !r.LintRecorded:
				return "not recorded (a run made before gpuaccept kept it)"
			case len(r.Lint) == 0:
				return "no warnings"
			}
			var ids []string
			for _, f := range r.Lint {
				ids = append(ids, f.ID)
			}
			return fmt.Sprintf("%d warning(s): %s", len(ids), strings.Join(ids, ", "))
		}),
		quote("price per GPU-hour", func(q *ComparedQuote) string {
			if q.PricePerGPUHour == 0 {
				return ""
			}
			return price(q.PricePerGPUHour, q.Currency)
		}),
	}}
	nodes := compareSection{Name: "Nodes", Rows: []compareRow{
		row("nodes tested", func(r *ComparedRun) string { return strconv.Itoa(r.NodesTested) }),
		row("nodes accepted", func(r *ComparedRun) string {
			s := fmt.Sprintf("%d of %d", len(r.NodesAccepted), r.NodesTested)
			if len(r.NodesNotAccepted) == 0 {
				return s
			}
			var names []string
			for i, n := range r.NodesNotAccepted {
				if i == 4 {
					names = append(names, fmt.Sprintf("%d more", len(r.NodesNotAccepted)-i))
					break
				}
				names = append(names, n.Node)
			}
			return s + " (not: " + strings.Join(names, ", ") + ")"
		}),
	}}
	criteria := compareSection{Name: "Acceptance criteria"}
	for _, cr := range c.Criteria {
		r := compareRow{Label: cr.ID, Title: cr.Title}
		for _, x := range cr.Runs {
			cell := compareCell{Text: criterionText(x)}
			if x != nil {
				cell.Status = x.Status
			}
			r.Cells = append(r.Cells, cell)
		}
		criteria.Rows = append(criteria.Rows, r)
	}
	recovery := compareSection{Name: "Failure recovery", prefix: "failure: ", Rows: []compareRow{
		failure("test", func(f *ComparedFailure) string {
			s := orWord(f.Inject, "injection not recorded")
			if f.Victim != "" {
				s += " on " + f.Victim
			}
			if f.Recovery != "" {
				s += ", " + f.Recovery + " recovery"
			}
			if f.Outcome != string(record.OK) {
				s += " (phase " + f.Outcome + ")"
			}
			return s
		}),
		failure("time to detection", func(f *ComparedFailure) string { return measuredSecs(f.DetectionSecs) }),
		failure("time to resumed progress", func(f *ComparedFailure) string { return measuredSecs(f.ResumeSecs) }),
		failure("steps lost", func(f *ComparedFailure) string {
			if f.StepsLost == nil {
				return "not measured"
			}
			return strconv.Itoa(*f.StepsLost)
		}),
		failure("victim back", func(f *ComparedFailure) string {
			if f.VictimBackAt == nil {
				return "never"
			}
			return figure(*f.VictimBackAt-f.InjectedAt, record.UnitSeconds) + " after the failure"
		}),
		failure("stall billed", func(f *ComparedFailure) string { return figure(f.BilledNodeSecs, "node-s") }),
	}}
	cost := compareSection{Name: "Cost", Rows: []compareRow{
		row("cost of the window", func(r *ComparedRun) string {
			if r.Cost == nil {
				return r.CostWhyNot
			}
			return money(r.Cost.TotalCost, r.Cost.Currency)
		}),
		row("billed by the provider", func(r *ComparedRun) string {
			l := r.Cost
			switch {
			case l == nil:
				return ""
			case l.Invoiced == nil:
				return "no usage export judged"
			}
			return fmt.Sprintf("%s (%+.2f against the ledger)", money(*l.Invoiced, l.Currency), *l.Invoiced-l.TotalCost)
		}),
		row("cost per accepted unit", func(r *ComparedRun) string {
			l := r.Cost
			switch {
			case l == nil:
				return ""
			case l.CostPerUnit == nil:
				return "nothing accepted"
			case l.InvoicePerUnit != nil:
				return fmt.Sprintf("%s per %s from the invoice (ledger %s, %s accepted)", money(*l.InvoicePerUnit, l.Currency),
					orWord(l.Unit, "accepted unit"), money(*l.CostPerUnit, l.Currency), strconv.FormatFloat(l.AcceptedUnits, 'f', -1, 64))
			}
			return fmt.Sprintf("%s per %s from the ledger (%s accepted)", money(*l.CostPerUnit, l.Currency), orWord(l.Unit, "accepted unit"),
				strconv.FormatFloat(l.AcceptedUnits, 'f', -1, 64))
		}),
	}}
	verdict := compareSection{Name: "Verdict", Rows: []compareRow{{Label: "verdict"}}}
	for _, r := range c.Runs {
		cell := compareCell{Text: verdictText(r), Status: record.Fail}
		if r.Accepted {
			cell.Status = record.Pass
		}
		verdict.Rows[0].Cells = append(verdict.Rows[0].Cells, cell)
	}
	return []compareSection{run, quoted, nodes, criteria, recovery, cost, verdict}
}

func count0(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// withUnit writes a quoted figure as given (no rounding); 0 is "not
// stated".
func withUnit(x float64, unit string) string {
	if x == 0 {
		return ""
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}

// price writes a quoted price as given, with cents at least: 3.1 is
// 3.10, 2.495 stays.
func price(x float64, currency string) string {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if _, frac, _ := strings.Cut(s, "."); len(frac) < 2 {
		s = strconv.FormatFloat(x, 'f', 2, 64)
	}
	if currency != "" {
		s += " " + currency
	}
	return s
}

// money writes a computed amount, to the cent.
func money(x float64, currency string) string {
	s := strconv.FormatFloat(x, 'f', 2, 64)
	if currency != "" {
		s += " " + currency
	}
	return s
}

func measuredSecs(x *float64) string {
	if x == nil {
		return "not measured"
	}
	return figure(*x, record.UnitSeconds)
}

func verdictText(r ComparedRun) string {
	switch {
	case r.Accepted:
		return "ACCEPTED"
	case strings.HasPrefix(r.Result, "NOT ACCEPTED"), strings.HasPrefix(r.Result, "INCOMPLETE"):
		return r.Result
	}
	return "NOT ACCEPTED: " + r.Result
}

// criterionText is a criterion's cell: its status (with how many of its
// verdicts had it, when not all), what was measured against what was
// quoted and their ratio where the verdict has them, and the node when
// one was singled out.
func criterionText(c *CriterionCell) string {
	if c == nil {
		return dash
	}
	s := string(c.Status)
	// Only what was judged is counted: "PASS (1 not judged)", "FAIL (1 of
	// 3, 1 not judged)": one of the three judged failed, one was not judged.
	judged := c.Verdicts - c.NotJudged
	n := min(c.Counts[c.Status], judged)
	var counts []string
	if n < judged {
		counts = append(counts, fmt.Sprintf("%d of %d", n, judged))
	}
	if c.NotJudged > 0 && judged > 0 {
		counts = append(counts, fmt.Sprintf("%d not judged", c.NotJudged))
	}
	if len(counts) > 0 {
		s += " (" + strings.Join(counts, ", ") + ")"
	}
	if f := cellFigure(c); f != "" {
		s += " " + f
	}
	if c.Node != "" && (n < judged || (c.Value != nil && n > 1)) {
		s += " on " + c.Node
	}
	return s
}

func cellFigure(c *CriterionCell) string {
	var s string
	switch {
	case c.Value != nil && (c.Ratio != nil || c.Measured == ""):
		s = figure(*c.Value, c.Unit)
	case c.Measured != "":
		s = shorten(c.Measured)
	}
	if c.Quoted != "" {
		s = orWord(s, "not measured") + " vs " + shorten(c.Quoted)
	}
	if c.Ratio != nil {
		s += " (" + decimal(c.Ratio) + ")"
	}
	if s == "" {
		s = shorten(c.Detail)
	}
	return s
}

// shorten keeps a cell readable: the first clause of a verdict's words,
// at most 60 characters.
func shorten(s string) string {
	s, _, _ = strings.Cut(oneLine(s), "; ")
	if r := []rune(s); len(r) > 60 {
		s = strings.TrimSpace(string(r[:57])) + "..."
	}
	return s
}

func compareHeader(c *Comparison) []string {
	h := []string{""}
	for _, r := range c.Runs {
		h = append(h, r.Label)
	}
	return h
}

// compareResult is the last line: which runs were accepted.
func compareResult(c *Comparison) string {
	var yes, no []string
	for _, r := range c.Runs {
		if r.Accepted {
			yes = append(yes, r.Label)
		} else {
			no = append(no, r.Label)
		}
	}
	s := fmt.Sprintf("%d runs compared: ACCEPTED %s; NOT ACCEPTED %s", len(c.Runs),
		orWord(strings.Join(yes, ", "), "none"), orWord(strings.Join(no, ", "), "none"))
	if anySimulated(c) {
		s += " (SIMULATED)"
	}
	return s
}

func anySimulated(c *Comparison) bool {
	for _, r := range c.Runs {
		if r.Simulated {
			return true
		}
	}
	return false
}

// CompareJSON writes the comparison as indented JSON.
func CompareJSON(w io.Writer, c *Comparison) error {
	if c == nil {
		return fmt.Errorf("compare: nil comparison")
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// minCompareColumn is the narrowest a run's column gets side by side:
// below it a figure and its quote no longer read as one.
const minCompareColumn = 24

// CompareText writes the comparison for a terminal: the runs, the notes,
// one table with a column per run, and the outcome on the last line.
// Colour only when asked for.
//
// The table fits width columns (DefaultWidth when 0): side by side,
// each run's cells wrapped when they have to be; where the runs are too
// many for that, each row is a block of its own, one run a line, and a
// line says so.
func CompareText(w io.Writer, c *Comparison, color bool, width int) error {
	if width <= 0 {
		width = DefaultWidth
	}
	if c == nil {
		return fmt.Errorf("compare: nil comparison")
	}
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	var b bytes.Buffer
	var ids []string
	for _, r := range c.Runs {
		ids = append(ids, orNone(r.ID))
	}
	head := oneLine(fmt.Sprintf("gpuaccept compare | %d runs | %s", len(c.Runs), strings.Join(ids, " | ")))
	if anySimulated(c) {
		head = "SIMULATED | " + head
	}
	for i, l := range wrap(head, width, "  ") {
		if i == 0 && anySimulated(c) {
			l = paint(ansiYellow+ansiBold, l)
		} else if i == 0 {
			l = paint(ansiBold, l)
		}
		b.WriteString(l + "\n")
	}
	for _, n := range c.Notes {
		for _, l := range wrap("note: "+n, width, "      ") {
			b.WriteString(paint(ansiYellow, l) + "\n")
		}
	}
	b.WriteString("\n")

	sections := compareSections(c)
	var rows, plain [][]string
	for _, sec := range sections {
		for _, r := range sec.Rows {
			line := []string{sec.prefix + r.Label}
			bare := []string{sec.prefix + r.Label}
			for _, x := range r.Cells {
				line = append(line, paintStatus(paint, x))
				bare = append(bare, x.Text)
			}
			rows, plain = append(rows, line), append(plain, bare)
		}
	}
	// table renders the rows side by side, the runs' cells wrapped at
	// wrapAt columns (0: not wrapped).
	table := func(out *bytes.Buffer, header []string, rows [][]string, wrapAt int) error {
		opts := []tablewriter.Option{tablewriter.WithRenderer(renderer.NewBlueprint(
			tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})),
			// The header is the runs' labels as they are written (a
			// provider's name may hold dots or underscores).
			tablewriter.WithHeaderAutoFormat(tw.Off)}
		if wrapAt > 0 {
			cols := tw.NewMapper[int, int]()
			for i := range c.Runs {
				cols.Set(i+1, wrapAt)
			}
			opts = append(opts, tablewriter.WithConfig(tablewriter.Config{
				Header: tw.CellConfig{Formatting: tw.CellFormatting{AutoFormat: tw.Off, AutoWrap: tw.WrapNormal},
					ColMaxWidths: tw.CellWidth{PerColumn: cols}},
				Row: tw.CellConfig{Formatting: tw.CellFormatting{AutoWrap: tw.WrapNormal}, ColMaxWidths: tw.CellWidth{PerColumn: cols}},
			}))
		}
		t := tablewriter.NewTable(out, opts...)
		t.Header(header)
		if err := t.Bulk(rows); err != nil {
			return err
		}
		return t.Render()
	}
	fits := func(s string) bool {
		for _, l := range strings.Split(s, "\n") {
			if twwidth.Width(l) > width {
				return false
			}
		}
		return true
	}
	var wide bytes.Buffer
	if err := table(&wide, compareHeader(c), plain, 0); err != nil {
		return err
	}
	wrapAt := 0
	if !fits(wide.String()) {
		// Side by side still, each run's cells wrapped, where every run
		// gets a column a figure can be read in.
		label := 0
		for _, row := range plain {
			label = max(label, twwidth.Width(row[0]))
		}
		wrapAt = (width-label-4)/len(c.Runs) - 3
		wide.Reset()
		if wrapAt < minCompareColumn {
			wrapAt = -1
		} else if err := table(&wide, compareHeader(c), plain, wrapAt); err != nil {
			return err
		} else if !fits(wide.String()) {
			wrapAt = -1
		}
	}
	if wrapAt >= 0 {
		if err := table(&b, compareHeader(c), rows, wrapAt); err != nil {
			return err
		}
	} else {
		// Too many runs for the width: a block per row, the runs one
		// under the other (plain: the status words say what colour
		// would), wrapped to the width.
		for _, l := range wrap(fmt.Sprintf("%d runs do not fit side by side in %d columns (COLUMNS): each row "+
			"below lists them one under the other; -o html or -o markdown is one table", len(c.Runs), width), width, "  ") {
			b.WriteString(l + "\n")
		}
		nameWidth := len(fmt.Sprintf("all %d", len(c.Runs)))
		for _, r := range c.Runs {
			nameWidth = max(nameWidth, twwidth.Width(redact.Controls(r.Label)))
		}
		all := fmt.Sprintf("all %d", len(c.Runs))
		for _, row := range plain {
			fmt.Fprintf(&b, "\n%s\n", paint(ansiBold, row[0]))
			runs := c.Runs
			if slices.Equal(row[2:], row[1:len(row)-1]) {
				// Every run says the same: one line for them all.
				runs = []ComparedRun{{Label: all}}
			}
			for i, r := range runs {
				name := redact.Controls(r.Label)
				for j, l := range wrap(redact.Controls(row[i+1]), max(width-nameWidth-4, 20), "") {
					if j > 0 {
						name = ""
					}
					fmt.Fprintf(&b, "  %s%s  %s\n", name, strings.Repeat(" ", nameWidth-twwidth.Width(name)), l)
				}
			}
		}
	}
	b.WriteString("\n")
	for i, l := range wrap(compareResult(c), width, "  ") {
		if i == 0 {
			l = paint(ansiBold, l)
		}
		b.WriteString(l + "\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// paintStatus colours the status a cell starts with (the whole verdict).
func paintStatus(paint func(code, s string) string, x compareCell) string {
	code := ""
	switch x.Status {
	case record.Pass:
		code = ansiGreen
	case record.Fail:
		code = ansiRed
	case record.Warn:
		code = ansiYellow
	case record.Skip:
		code = ansiCyan
	default:
		return x.Text
	}
	word := string(x.Status)
	switch {
	case x.Text == "ACCEPTED" || strings.HasPrefix(x.Text, "NOT ACCEPTED"):
		return paint(code, x.Text)
	case !strings.HasPrefix(x.Text, word):
		return x.Text
	}
	return paint(code, word) + x.Text[len(word):]
}

// CompareMarkdown writes the comparison for a ticket or a document: the
// runs, the notes, and a table per section with a column per run.
func CompareMarkdown(w io.Writer, c *Comparison) error {
	if c == nil {
		return fmt.Errorf("compare: nil comparison")
	}
	var b bytes.Buffer
	if anySimulated(c) {
		b.WriteString("> **SIMULATED** - at least one of these runs ran against simulated nodes and GPU tools; " +
			"it is not evidence about real hardware.\n\n")
	}
	fmt.Fprintf(&b, "# Comparison of %d runs\n\n", len(c.Runs))
	for _, r := range c.Runs {
		fmt.Fprintf(&b, "- %s: %s, started %s, %s (%s)", md(r.Label), md(r.ID), stamp(r.Started), md(r.Result), md(r.Tool))
		if r.Path != "" {
			fmt.Fprintf(&b, ", `%s`", strings.ReplaceAll(r.Path, "`", "'"))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n**Result: %s**\n", md(compareResult(c)))
	if len(c.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range c.Notes {
			fmt.Fprintf(&b, "- %s\n", md(n))
		}
	}
	for _, sec := range compareSections(c) {
		fmt.Fprintf(&b, "\n## %s\n\n", sec.Name)
		var rows [][]string
		for _, r := range sec.Rows {
			label := r.Label
			if r.Title != "" {
				label += " " + r.Title
			}
			line := []string{label}
			for _, x := range r.Cells {
				line = append(line, x.Text)
			}
			rows = append(rows, line)
		}
		if err := mdTable(&b, compareHeader(c), escapeAll(rows), "No verdicts."); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// CompareHTML writes the comparison as one self-contained page (no
// script, no external file): one table, a column per run, a heading row
// per section, the status cells coloured.
func CompareHTML(w io.Writer, c *Comparison) error {
	if c == nil {
		return fmt.Errorf("compare: nil comparison")
	}
	return compareTemplate.Execute(w, struct {
		C         *Comparison
		Sections  []compareSection
		Result    string
		Simulated bool
		Span      int
	}{c, compareSections(c), compareResult(c), anySimulated(c), len(c.Runs) + 1})
}

var compareTemplate = template.Must(template.New("compare").Funcs(template.FuncMap{
	"stamp": stamp,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Comparison of {{len .C.Runs}} runs{{if .Simulated}} (SIMULATED){{end}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 90em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tr.section th { background: #e4e8ee; font-size: 1.05em; }
.pass { background: #e3f5e1; } .fail { background: #fbe0e0; } .warn { background: #fff3cd; } .skip { color: #777; }
.banner { background: #fff3cd; border: 2px solid #e0a800; padding: 0.6em 1em; font-weight: bold; }
.result { font-size: 1.2em; font-weight: bold; }
.title { display: block; font-weight: normal; font-size: 0.85em; color: #555; }
code { font-size: 0.85em; }
</style>
</head>
<body>
{{if .Simulated}}<p class="banner" id="simulated">SIMULATED — at least one of these runs ran against simulated nodes and GPU tools; it is not evidence about real hardware.</p>{{end}}
<h1>Comparison of {{len .C.Runs}} runs{{if .Simulated}} (SIMULATED){{end}}</h1>
<ul id="runs">
{{range .C.Runs}}<li>{{.Label}}: {{.ID}}, started {{stamp .Started}}, {{.Result}}{{if .Tool}} ({{.Tool}}){{end}}{{if .Path}}, <code>{{.Path}}</code>{{end}}</li>
{{end}}</ul>
<p class="result" id="result">Result: {{.Result}}</p>
{{if .C.Notes}}<h2>Notes</h2>
<ul id="notes">
{{range .C.Notes}}<li>{{.}}</li>
{{end}}</ul>
{{end}}
<table id="compare">
<thead><tr><th></th>{{range .C.Runs}}<th scope="col">{{.Label}}</th>{{end}}</tr></thead>
{{range .Sections}}<tbody>
<tr class="section"><th colspan="{{$.Span}}" scope="rowgroup">{{.Name}}</th></tr>
{{range .Rows}}<tr><th scope="row">{{.Label}}{{if .Title}}<span class="title">{{.Title}}</span>{{end}}</th>{{range .Cells}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</tbody>
{{end}}</table>
</body>
</html>
`))
