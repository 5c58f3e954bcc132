package reports

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

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

// Summary prints the terminal summary: a banner, the nodes, the verdicts
// and the outcome. Colour is only added when asked for (the CLI asks on a
// terminal), so piped output stays plain.
func Summary(w io.Writer, run *record.Run, color bool) error {
	if run == nil {
		return fmt.Errorf("summary: nil run")
	}
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	// Render into a buffer first so that a failing writer yields one
	// error instead of half a table.
	var b bytes.Buffer
	head := redact.Controls(banner(run))
	if run.Simulated {
		head = paint(ansiYellow+ansiBold, head)
	} else {
		head = paint(ansiBold, head)
	}
	fmt.Fprintf(&b, "%s\n\n", head)

	nodes := cells(shown(nodeRows(run)), func(col int, s string) string {
		if col == 2 && s == "yes" {
			return paint(ansiRed, s)
		}
		return s
	})
	if err := textTable(&b, nodeHeader(), nodes, "No nodes."); err != nil {
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
	if err := textTable(&b, verdictHeader(), rows, "No verdicts."); err != nil {
		return err
	}
	b.WriteString("\n")
	if line := costLine(run.Ledger); line != "" {
		fmt.Fprintln(&b, line)
	}

	verdict := result(run)
	if strings.HasPrefix(verdict, "ACCEPTED") {
		verdict = paint(ansiGreen+ansiBold, verdict)
	} else {
		verdict = paint(ansiRed, verdict)
	}
	fmt.Fprintln(&b, verdict)
	_, err := w.Write(b.Bytes())
	return err
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
