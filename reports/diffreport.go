package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// The renderings of a Diff: DiffText for the terminal, DiffMarkdown for a
// ticket, DiffJSON for programs (schema DiffSchema).

const notRecordedText = "not recorded"

func recorded(s string) string { return orWord(s, notRecordedText) }

// DiffJSON writes the diff as indented JSON.
func DiffJSON(w io.Writer, d *Diff) error {
	if d == nil {
		return fmt.Errorf("diff: nil diff")
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// diffResult is the last line: what a reader (or a script grepping for
// REGRESSED) needs.
func diffResult(d *Diff) string {
	s := fmt.Sprintf("NO REGRESSION: %d figure(s) compared, %d change(s) on the nodes", len(d.Metrics), len(d.Changed))
	if d.Regressed {
		s = fmt.Sprintf("REGRESSED: %d regression(s)", len(d.Regressions))
	}
	if d.Baseline.Simulated || d.Candidate.Simulated {
		s += " (SIMULATED)"
	}
	return s
}

func diffBanner(d *Diff) string {
	s := fmt.Sprintf("gpuaccept diff | baseline %s (%s) | candidate %s (%s)",
		orNone(d.Baseline.ID), stamp(d.Baseline.Started), orNone(d.Candidate.ID), stamp(d.Candidate.Started))
	if d.Baseline.Simulated || d.Candidate.Simulated {
		s = "SIMULATED | " + s
	}
	return oneLine(s)
}

func thresholdText(d *Diff) string {
	s := fmt.Sprintf("a figure more than %s worse than the baseline's is a regression", percent(d.Threshold))
	if len(d.ThresholdByID) > 0 {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(d.ThresholdByID)) {
			parts = append(parts, id+" "+percent(d.ThresholdByID[id]))
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	switch d.ThresholdFrom {
	case "default":
		s += "; neither run.json records a threshold: the default"
	default:
		s += "; as the " + d.ThresholdFrom + "'s run.json records it"
	}
	return s
}

func changeHeader() []string { return []string{"Node", "What", "Baseline", "Candidate"} }

func changeRows(cs []Change) [][]string {
	var rows [][]string
	for _, c := range cs {
		rows = append(rows, []string{c.Node, c.Item, recorded(c.Baseline), recorded(c.Candidate)})
	}
	return rows
}

func notRecordedLines(d *Diff) []string {
	var out []string
	for _, n := range d.NotRecorded {
		where := strings.Join(n.Nodes, ", ")
		switch {
		case n.Every && len(n.Nodes) == 1 && n.Nodes[0] == clusterNode:
			where = "the cluster"
		case n.Every:
			where = "every node"
		}
		out = append(out, fmt.Sprintf("%s (run.json: the %s phase's %s): on %s", n.Item, strings.Fields(n.Field)[0], strings.Fields(n.Field)[1], where))
	}
	return out
}

const metricResultCol = 6 // index of Result in metricHeader

func metricHeader() []string {
	return []string{"ID", "Node", "Baseline", "Candidate", "Delta", "Allowed", "Result"}
}

func metricRows(d *Diff) [][]string {
	var rows [][]string
	for _, m := range d.Metrics {
		result := m.Change
		if m.Regression {
			result = "REGRESSION"
		}
		if m.Note != "" {
			result += " (noise: " + m.Note + ")"
		}
		limit := percent(m.Threshold)
		if m.Spread > m.Threshold {
			limit = "spread " + percent(m.Spread)
		}
		rows = append(rows, []string{metricName(m), nodeLabel(m.Node), figure(m.Baseline, m.Unit), figure(m.Candidate, m.Unit),
			deltaText(m.DeltaPct), limit, result})
	}
	return rows
}

const statusResultCol = 4 // index of Result in statusHeader

func statusHeader() []string {
	return []string{"ID", "Node", "Baseline", "Candidate", "Result", "Candidate measured", "Note"}
}

func statusRows(d *Diff) [][]string {
	var rows [][]string
	for _, s := range d.Statuses {
		result := "changed"
		switch {
		case s.Regression:
			result = "REGRESSION"
		case s.Candidate == "PASS":
			result = "better"
		}
		rows = append(rows, []string{s.ID, nodeLabel(s.Node), string(s.Baseline), string(s.Candidate), result, s.Measured, s.Note})
	}
	return rows
}

func missingHeader() []string { return []string{"ID", "Node", "Baseline", "Candidate", "Why"} }

func missingRows(d *Diff) [][]string {
	var rows [][]string
	for _, m := range d.Missing {
		val := func(x *float64, unit string) string {
			if x == nil {
				return none
			}
			return figure(*x, unit)
		}
		rows = append(rows, []string{m.ID, nodeLabel(m.Node), val(m.Baseline, m.BaselineUnit), val(m.Candidate, m.CandidateUnit), m.Why})
	}
	return rows
}

// DiffText writes the diff for a terminal: the runs, what changed on the
// nodes, the figures, the status changes, what could not be compared, and
// the outcome on the last line. Colour only when asked for.
func DiffText(w io.Writer, d *Diff, color bool) error {
	if d == nil {
		return fmt.Errorf("diff: nil diff")
	}
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	var b bytes.Buffer
	head := diffBanner(d)
	if d.Baseline.Simulated || d.Candidate.Simulated {
		head = paint(ansiYellow+ansiBold, head)
	} else {
		head = paint(ansiBold, head)
	}
	fmt.Fprintf(&b, "%s\n", head)
	fmt.Fprintf(&b, "baseline:  %s\ncandidate: %s\n", oneLine(d.Baseline.Result), oneLine(d.Candidate.Result))
	fmt.Fprintf(&b, "threshold: %s\n", thresholdText(d))
	for _, n := range d.Notes {
		fmt.Fprintf(&b, "note: %s\n", paint(ansiYellow, n))
	}

	b.WriteString("\n" + paint(ansiBold, "Changed on the nodes (shown, not judged: a change is no regression by itself)") + "\n")
	if err := textTable(&b, changeHeader(), cells(changeRows(d.Changed), asIs), "Nothing changed."); err != nil {
		return err
	}
	if len(d.OneSided) > 0 {
		b.WriteString("\nRecorded in one run only\n")
		if err := textTable(&b, changeHeader(), cells(changeRows(d.OneSided), asIs), ""); err != nil {
			return err
		}
	}
	if lines := notRecordedLines(d); len(lines) > 0 {
		b.WriteString("\nNot recorded in either run\n")
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}

	b.WriteString("\n" + paint(ansiBold, "Figures") + "\n")
	rows := cells(metricRows(d), func(col int, s string) string {
		switch {
		case col != metricResultCol:
			return s
		case s == "REGRESSION":
			return paint(ansiRed, s)
		case s == ChangeBetter:
			return paint(ansiGreen, s)
		}
		return s
	})
	if err := textTable(&b, metricHeader(), rows, "No figure measured in both runs."); err != nil {
		return err
	}

	b.WriteString("\n" + paint(ansiBold, "Status changes") + "\n")
	rows = cells(statusRows(d), func(col int, s string) string {
		if col == statusResultCol && s == "REGRESSION" {
			return paint(ansiRed, s)
		}
		return s
	})
	if err := textTable(&b, statusHeader(), rows, "No verdict changed its status."); err != nil {
		return err
	}

	if len(d.Missing) > 0 {
		b.WriteString("\nNot compared (measured in one run only)\n")
		if err := textTable(&b, missingHeader(), cells(missingRows(d), asIs), ""); err != nil {
			return err
		}
	}
	if len(d.NodesOnlyInBaseline)+len(d.NodesOnlyInCandidate) > 0 {
		b.WriteString("\n")
		if len(d.NodesOnlyInBaseline) > 0 {
			fmt.Fprintf(&b, "Nodes only in the baseline: %s\n", strings.Join(d.NodesOnlyInBaseline, ", "))
		}
		if len(d.NodesOnlyInCandidate) > 0 {
			fmt.Fprintf(&b, "Nodes only in the candidate: %s\n", strings.Join(d.NodesOnlyInCandidate, ", "))
		}
	}
	if d.Regressed {
		b.WriteString("\n" + paint(ansiBold, "Regressions") + "\n")
		for _, r := range d.Regressions {
			fmt.Fprintf(&b, "  %s\n", paint(ansiRed, oneLine(r)))
		}
	}
	b.WriteString("\n")
	if d.Regressed {
		fmt.Fprintln(&b, paint(ansiRed, diffResult(d)))
	} else {
		fmt.Fprintln(&b, paint(ansiGreen+ansiBold, diffResult(d)))
	}
	_, err := w.Write(b.Bytes())
	return err
}

func asIs(_ int, s string) string { return s }

// DiffMarkdown writes the diff for a ticket.
func DiffMarkdown(w io.Writer, d *Diff) error {
	if d == nil {
		return fmt.Errorf("diff: nil diff")
	}
	var b bytes.Buffer
	if d.Baseline.Simulated || d.Candidate.Simulated {
		b.WriteString("> **SIMULATED** - at least one of these runs ran against simulated nodes and GPU tools; " +
			"it is not evidence about real hardware.\n\n")
	}
	fmt.Fprintf(&b, "# Regression check: %s against %s\n\n", md(d.Candidate.ID), md(d.Baseline.ID))
	for _, r := range []struct {
		name string
		r    DiffRun
	}{{"Baseline", d.Baseline}, {"Candidate", d.Candidate}} {
		fmt.Fprintf(&b, "- %s: %s, started %s, %s (%s)", r.name, md(r.r.ID), stamp(r.r.Started), md(r.r.Result), md(r.r.Tool))
		if r.r.Path != "" {
			fmt.Fprintf(&b, ", `%s`", strings.ReplaceAll(r.r.Path, "`", "'"))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- Threshold: %s\n\n", md(thresholdText(d)))
	fmt.Fprintf(&b, "**Result: %s**\n", md(diffResult(d)))
	if d.Regressed {
		b.WriteString("\n## Regressions\n\n")
		for _, r := range d.Regressions {
			fmt.Fprintf(&b, "- %s\n", md(r))
		}
	}
	if len(d.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range d.Notes {
			fmt.Fprintf(&b, "- %s\n", md(n))
		}
	}

	b.WriteString("\n## Changed on the nodes\n\nShown for the record: a change is not by itself a regression.\n\n")
	if err := mdTable(&b, changeHeader(), escapeAll(changeRows(d.Changed)), "Nothing changed."); err != nil {
		return err
	}
	if len(d.OneSided) > 0 {
		b.WriteString("\n### Recorded in one run only\n\n")
		if err := mdTable(&b, changeHeader(), escapeAll(changeRows(d.OneSided)), ""); err != nil {
			return err
		}
	}
	if lines := notRecordedLines(d); len(lines) > 0 {
		b.WriteString("\n### Not recorded in either run\n\n")
		for _, l := range lines {
			fmt.Fprintf(&b, "- %s\n", md(l))
		}
	}

	b.WriteString("\n## Figures\n\n")
	if err := mdTable(&b, metricHeader(), escapeAll(metricRows(d)), "No figure measured in both runs."); err != nil {
		return err
	}
	b.WriteString("\n## Status changes\n\n")
	if err := mdTable(&b, statusHeader(), escapeAll(statusRows(d)), "No verdict changed its status."); err != nil {
		return err
	}
	if len(d.Missing) > 0 {
		b.WriteString("\n## Not compared (measured in one run only)\n\n")
		if err := mdTable(&b, missingHeader(), escapeAll(missingRows(d)), ""); err != nil {
			return err
		}
	}
	if len(d.NodesOnlyInBaseline)+len(d.NodesOnlyInCandidate) > 0 {
		b.WriteString("\n## Nodes in one run only\n\n")
		if len(d.NodesOnlyInBaseline) > 0 {
			fmt.Fprintf(&b, "- Only in the baseline: %s\n", md(strings.Join(d.NodesOnlyInBaseline, ", ")))
		}
		if len(d.NodesOnlyInCandidate) > 0 {
			fmt.Fprintf(&b, "- Only in the candidate: %s\n", md(strings.Join(d.NodesOnlyInCandidate, ", ")))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}
