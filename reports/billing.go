package reports

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

// maxBillRows bounds the reconciliation table: past it, the nodes whose
// bill agrees with the ledger are counted, not listed.
const maxBillRows = 30

// maxBillFindings bounds the findings listed per requirement.
const maxBillFindings = 12

// BillText writes a reconciliation for a person: what was read, a row per
// node (the disagreeing first when there are many), the BILL verdicts
// (alike passes as one line with a host range), and the outcome, each
// line at most width columns (DefaultWidth when 0).
func BillText(w io.Writer, rc *record.Reconciliation, verdicts []record.Verdict, width int) error {
	if width <= 0 {
		width = DefaultWidth
	}
	var b strings.Builder
	line := func(s string) {
		for _, l := range wrap(redact.Controls(s), width, "      ") {
			b.WriteString(l + "\n")
		}
	}
	line(billRead(rc))
	b.WriteString("\n")
	header, rows, hidden := billRows(rc)
	b.WriteString(billTextTable(header, rows, width))
	if hidden > 0 {
		fmt.Fprintf(&b, "%d more node(s) billed as the ledger priced them\n", hidden)
	}
	b.WriteString("\n")
	for _, l := range billVerdictLines(verdicts) {
		line(l)
	}
	b.WriteString("\n")
	line(BillOutcome(verdicts))
	_, err := io.WriteString(w, b.String())
	return err
}

// billRead says what was read.
func billRead(rc *record.Reconciliation) string {
	lines := rc.UnmatchedLines
	for _, n := range rc.Nodes {
		lines += len(n.Lines)
	}
	return fmt.Sprintf("%s: %s, %d line(s) of the windows' days (%d outside them), %s", rc.Export, rc.Format, lines,
		rc.OutsideLines, orNoneStr(rc.Currency))
}

// BillFailed is whether a reconciliation found what the provider must
// answer for.
func BillFailed(vs []record.Verdict) bool {
	return slices.ContainsFunc(vs, func(v record.Verdict) bool { return v.Status == record.Fail })
}

// BillOutcome is the reconciliation's last line.
func BillOutcome(vs []record.Verdict) string {
	var failed []string
	nf, nw := 0, 0
	for _, v := range vs {
		switch v.Status {
		case record.Fail:
			nf++
			if !slices.Contains(failed, v.ID) {
				failed = append(failed, v.ID)
			}
		case record.Warn:
			nw++
		}
	}
	if nf == 0 {
		return fmt.Sprintf("RECONCILED (%d WARN)", nw)
	}
	return fmt.Sprintf("NOT RECONCILED: %s failed (%d FAIL, %d WARN)", strings.Join(failed, ", "), nf, nw)
}

func orNoneStr(s string) string {
	if s == "" {
		return "no currency given"
	}
	return s
}

// billRows are the reconciliation table: billed against the window's own
// time and the ledger's cost, per node, then the lines of no node and the
// total; past maxBillRows nodes, those whose bill agrees with the ledger
// are counted (hidden), not listed.
func billRows(rc *record.Reconciliation) (header []string, rows [][]string, hidden int) {
	nodes := slices.Clone(rc.Nodes)
	differs := func(n record.ReconciledNode) bool {
		return len(n.Lines) == 0 || n.LedgerCost == nil || math.Abs(n.BilledCost-*n.LedgerCost) >= 0.005 ||
			n.BilledSecs > n.ExpectedSecs+1
	}
	if len(nodes) > maxBillRows {
		slices.SortStableFunc(nodes, func(a, b record.ReconciledNode) int {
			switch da, db := differs(a), differs(b); {
			case da && !db:
				return -1
			case db && !da:
				return 1
			}
			return 0
		})
		hidden = len(nodes) - maxBillRows
		nodes = nodes[:maxBillRows]
	}
	for _, n := range nodes {
		ledger, diff := "-", "-"
		if n.LedgerCost != nil {
			ledger = fmt.Sprintf("%.2f", *n.LedgerCost)
			diff = fmt.Sprintf("%+.2f", n.BilledCost-*n.LedgerCost)
		}
		rows = append(rows, []string{n.Node, billLines(n.Lines), billDur(n.BilledSecs), billDur(n.WindowSecs),
			billDur(n.ExpectedSecs), fmt.Sprintf("%.2f", n.BilledCost), ledger, diff})
	}
	if rc.UnmatchedLines > 0 {
		rows = append(rows, []string{"(no node)", fmt.Sprint(rc.UnmatchedLines), "", "", "",
			fmt.Sprintf("%.2f", rc.UnmatchedCost), "", fmt.Sprintf("%+.2f", rc.UnmatchedCost)})
	}
	ledger, diff := "-", "-"
	if rc.Ledger != nil {
		ledger, diff = fmt.Sprintf("%.2f", *rc.Ledger), fmt.Sprintf("%+.2f", rc.Billed-*rc.Ledger)
	}
	rows = append(rows, []string{"total", "", "", "", "", fmt.Sprintf("%.2f", rc.Billed), ledger, diff})
	cur := ""
	if rc.Currency != "" {
		cur = " (" + rc.Currency + ")"
	}
	header = []string{"node", "on lines", "billed", "window", "to granule", "billed cost" + cur, "ledger", "diff"}
	return header, rows, hidden
}

// billTextTable lays rows out in columns, each line clipped to width.
func billTextTable(header []string, rows [][]string, width int) string {
	var b strings.Builder
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len([]rune(h))
	}
	t := make([][]string, len(rows))
	for j, r := range rows {
		t[j] = make([]string, len(r))
		for i := range r {
			t[j][i] = clip(redact.Controls(r[i]), 28)
			widths[i] = max(widths[i], len([]rune(t[j][i])))
		}
	}
	write := func(r []string) {
		var s strings.Builder
		for i, c := range r {
			if i > 0 {
				s.WriteString("  ")
			}
			s.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))))
		}
		b.WriteString(clip(strings.TrimRight(s.String(), " "), width) + "\n")
	}
	write(header)
	for _, r := range t {
		write(r)
	}
	return b.String()
}

// billVerdictLines are the verdicts one line each; passes of one
// requirement on many nodes are one line with their host range, and a
// requirement's findings past maxBillFindings are counted.
func billVerdictLines(vs []record.Verdict) []string {
	var ids []string
	by := map[string][]record.Verdict{}
	for _, v := range vs {
		if _, ok := by[v.ID]; !ok {
			ids = append(ids, v.ID)
		}
		by[v.ID] = append(by[v.ID], v)
	}
	var out []string
	for _, id := range ids {
		var passed []string
		shown := 0
		for _, v := range by[id] {
			if v.Status == record.Pass && v.Node != "" && len(by[id]) > 3 {
				passed = append(passed, v.Node)
				continue
			}
			if shown == maxBillFindings {
				out = append(out, fmt.Sprintf("%-8s  ...   and %d more", id, len(by[id])-shown-len(passed)))
				break
			}
			shown++
			out = append(out, billVerdictLine(v))
		}
		if len(passed) > 0 {
			out = append(out, fmt.Sprintf("%-8s  PASS  %s", id, hostlist.Compress(passed)))
		}
	}
	return out
}

func billVerdictLine(v record.Verdict) string {
	s := fmt.Sprintf("%-8s  %-4s  ", v.ID, v.Status)
	if v.Node != "" {
		s += v.Node + ": "
	}
	s += v.Measured
	if v.Quoted != "" {
		s += "; against " + v.Quoted
	}
	if v.Detail != "" {
		s += "; " + v.Detail
	}
	return s
}

func billLines(ns []int) string {
	switch {
	case len(ns) == 0:
		return "none"
	case len(ns) > 1 && ns[len(ns)-1]-ns[0] == len(ns)-1:
		return fmt.Sprintf("%d-%d", ns[0], ns[len(ns)-1])
	}
	var parts []string
	for _, n := range ns[:min(len(ns), 3)] {
		parts = append(parts, fmt.Sprint(n))
	}
	if len(ns) > 3 {
		parts = append(parts, fmt.Sprintf("+%d", len(ns)-3))
	}
	return strings.Join(parts, ",")
}

// billDur is seconds as a bill reads: 2h00m, 14m05s, 41s.
func billDur(secs float64) string {
	s := int64(math.Round(secs))
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}

// reconciled is the usage export the window judged, nil when none was.
func reconciled(run *record.Run) *record.Reconciliation {
	if run.Billing == nil {
		return nil
	}
	return run.Billing.Reconciled
}

// invoicePerUnit is the cost of a unit of accepted work as the
// provider's export billed it, beside the ledger's; "" when no export was
// judged.
func invoicePerUnit(run *record.Run) string {
	rc, l := reconciled(run), run.Ledger
	if rc == nil {
		return ""
	}
	if l == nil || l.AcceptedUnits <= 0 {
		return fmt.Sprintf("Cost per accepted unit from the invoice: none (%s billed, nothing accepted).",
			costMoney(rc.Billed, rc.Currency))
	}
	unit := orNone(oneLine(l.Unit))
	return fmt.Sprintf("Cost per %s from the invoice: %s (%s billed ÷ %s %s(s)); from the ledger: %s.", unit,
		costMoney(rc.Billed/l.AcceptedUnits, rc.Currency), costMoney(rc.Billed, rc.Currency), costCount(l.AcceptedUnits),
		unit, costMoney(l.TotalCost/l.AcceptedUnits, l.Currency))
}

// mdBilling writes the usage export as the window judged it: what was
// read, the reconciliation table, the cost per unit from the invoice;
// nothing when no export was judged.
func mdBilling(b *bytes.Buffer, run *record.Run) error {
	rc := reconciled(run)
	if rc == nil {
		return nil
	}
	fmt.Fprintf(b, "\n## Billing reconciliation\n\n%s\n\n", md(billRead(rc)))
	header, rows, hidden := billRows(rc)
	if err := mdTable(b, header, escapeAll(rows), ""); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(b, "\n%d more node(s) billed as the ledger priced them.\n", hidden)
	}
	fmt.Fprintf(b, "\n%s\n", md(invoicePerUnit(run)))
	return nil
}

// htmlBilling is the reconciliation as report.md has it.
type htmlBilling struct {
	Read, PerUnit string
	Header        []string
	Rows          [][]string
	Hidden        int
}

func newHTMLBilling(run *record.Run) *htmlBilling {
	rc := reconciled(run)
	if rc == nil {
		return nil
	}
	h := &htmlBilling{Read: redact.Controls(billRead(rc)), PerUnit: invoicePerUnit(run)}
	var rows [][]string
	h.Header, rows, h.Hidden = billRows(rc)
	h.Rows = cells(rows, func(_ int, s string) string { return redact.Controls(s) })
	return h
}
