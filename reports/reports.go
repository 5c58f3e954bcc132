// Package reports renders a record.Run: a terminal summary, report.md,
// junit.xml, and the evidence bundle (run.json + MANIFEST.sha256) that a
// procurement team signs on.
package reports

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// none stands in for an empty field so a blank cell is never mistaken for
// a rendering bug.
const none = "-"

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return none
	}
	return s
}

// oneLine folds newlines and runs of spaces: table cells must stay on one
// line (tablewriter mis-sizes multi-line cells, Markdown tables break).
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func decimal(f *float64) string {
	if f == nil {
		return none
	}
	return strconv.FormatFloat(*f, 'f', 2, 64)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// nodeLabel names a verdict's or phase's node; empty means cluster-wide.
func nodeLabel(node string) string {
	if node == "" {
		return "cluster"
	}
	return node
}

// verdicts returns the run's verdicts ordered by ID, then by the node's
// position in the run (cluster-wide first, unknown nodes last), so every
// report lists them alike whatever order the runner recorded them in. The
// run itself is not modified.
func verdicts(run *record.Run) []record.Verdict {
	pos := map[string]int{"": -1}
	for i, n := range run.Nodes {
		pos[n.Name] = i
	}
	at := func(node string) int {
		if i, ok := pos[node]; ok {
			return i
		}
		return len(run.Nodes)
	}
	vs := slices.Clone(run.Verdicts)
	slices.SortStableFunc(vs, func(a, b record.Verdict) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(at(a.Node), at(b.Node)))
	})
	return vs
}

func count(run *record.Run, s record.Status) int {
	n := 0
	for _, v := range run.Verdicts {
		if v.Status == s {
			n++
		}
	}
	return n
}

// result is the one-line outcome of the window. A window that did not run
// to its end is never reported as accepted, whatever its verdicts say.
func result(run *record.Run) string {
	r := windowOutcome(run)
	if run.Simulated {
		// The last line is what gets quoted; it must not read as a real
		// acceptance.
		r += " (SIMULATED)"
	}
	return r
}

func windowOutcome(run *record.Run) string {
	res := run.Result()
	switch res.Outcome {
	case record.OutcomeInterrupted, record.OutcomeAccepted:
		return res.Outcome
	case record.OutcomeIncomplete:
		s := "INCOMPLETE: " + oneLine(res.Incomplete[0])
		if n := len(res.Incomplete); n > 1 {
			s += fmt.Sprintf(" (and %d more)", n-1)
		}
		return s
	}
	failed := res.Failed
	if len(failed) > 6 {
		failed = append(slices.Clone(failed[:5]), fmt.Sprintf("%d more", len(failed)-5))
	}
	return fmt.Sprintf("NOT ACCEPTED: %s failed (%d FAIL, %d WARN, %d SKIP)", strings.Join(failed, ", "),
		count(run, record.Fail), count(run, record.Warn), count(run, record.Skip))
}

// banner names the window. SIMULATED comes first so that no truncation or
// narrow terminal can hide it.
func banner(run *record.Run) string {
	s := fmt.Sprintf("gpuaccept run %s | provider %s | region %s | window %s",
		orNone(run.ID), orNone(run.Provider), orNone(run.Region), orNone(run.Window))
	if run.Simulated {
		s = "SIMULATED | " + s
	}
	return oneLine(s)
}

// outcome describes a verdict's numbers in one sentence, for JUnit.
func outcome(v record.Verdict) string {
	s := fmt.Sprintf("measured %s vs quoted %s (ratio %s, tolerance %s)",
		orNone(v.Measured), orNone(v.Quoted), decimal(v.Ratio), decimal(v.Tolerance))
	if d := oneLine(verdictDetail(v)); d != "" {
		s += ": " + d
	}
	return s
}

// verdictDetail is a verdict's detail as every report shows it: what the
// judge said, then the history of a figure measured again because a run
// failed (record.Retest.Note), which the judges leave to the reports.
func verdictDetail(v record.Verdict) string {
	return joinNonEmpty("; ", v.Detail, v.Retest.Note())
}

func nodeHeader() []string { return []string{"Node", "Address", "Quarantined", "Reason"} }

func nodeRows(run *record.Run) [][]string {
	rows := make([][]string, 0, len(run.Nodes))
	for _, n := range run.Nodes {
		q := "no"
		if n.Quarantined {
			q = "yes"
		}
		rows = append(rows, []string{n.Name, n.Address, q, n.Reason})
	}
	return rows
}

const statusCol = 2 // index of Status in verdictHeader

func verdictHeader() []string {
	return []string{"ID", "Node", "Status", "Measured", "Quoted", "Ratio", "Tolerance", "Detail"}
}

func verdictRows(run *record.Run) [][]string {
	vs := verdicts(run)
	rows := make([][]string, 0, len(vs))
	for _, v := range vs {
		rows = append(rows, []string{v.ID, nodeLabel(v.Node), string(v.Status), v.Measured, v.Quoted,
			decimal(v.Ratio), decimal(v.Tolerance), verdictDetail(v)})
	}
	return rows
}

// cells applies f to every cell, after folding it to one line and filling
// blanks with "-".
func cells(rows [][]string, f func(col int, s string) string) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = make([]string, len(r))
		for j, c := range r {
			out[i][j] = f(j, orNone(oneLine(c)))
		}
	}
	return out
}

// phaseData decodes into v the data of the last result of phase on node
// ("" for the cluster) that has some, and returns that result: reports
// read phase data by its documented JSON field names (SCHEMA.md), never
// through the phases package.
func phaseData(run *record.Run, phase, node string, v any) (record.PhaseResult, bool) {
	for i := len(run.Phases) - 1; i >= 0; i-- {
		p := run.Phases[i]
		if p.Phase == phase && p.Node == node && len(p.Data) > 0 && string(p.Data) != "null" {
			return p, json.Unmarshal(p.Data, v) == nil
		}
	}
	return record.PhaseResult{}, false
}

// hasData is phaseData when the result itself is not needed.
func hasData(run *record.Run, phase, node string, v any) bool {
	_, ok := phaseData(run, phase, node, v)
	return ok
}
