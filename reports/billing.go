package reports

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/billing"
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
func BillText(w io.Writer, res *billing.Result, export string, width int) error {
	if width <= 0 {
		width = DefaultWidth
	}
	var b strings.Builder
	line := func(s string) {
		for _, l := range wrap(redact.Controls(s), width, "      ") {
			b.WriteString(l + "\n")
		}
	}
	lines := len(res.Unmatched)
	for _, r := range res.Rows {
		lines += len(r.Lines)
	}
	line(fmt.Sprintf("%s: %s, %d line(s) of the windows' days (%d outside them), %s", export, res.Format, lines,
		res.Outside, orNoneStr(res.Currency)))
	b.WriteString("\n")
	b.WriteString(billTable(res, width))
	b.WriteString("\n")
	for _, l := range billVerdictLines(res.Verdicts) {
		line(l)
	}
	b.WriteString("\n")
	line(BillOutcome(res.Verdicts))
	_, err := io.WriteString(w, b.String())
	return err
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

// billTable is the reconciliation table: billed against the window's own
// time and the ledger's cost, per node.
func billTable(res *billing.Result, width int) string {
	rows := slices.Clone(res.Rows)
	differs := func(r billing.Row) bool {
		return len(r.Lines) == 0 || math.Abs(r.BilledCost-r.LedgerCost) >= 0.005 || r.BilledSecs > r.ExpectedSecs+1
	}
	hidden := 0
	if len(rows) > maxBillRows {
		slices.SortStableFunc(rows, func(a, b billing.Row) int {
			switch da, db := differs(a), differs(b); {
			case da && !db:
				return -1
			case db && !da:
				return 1
			}
			return 0
		})
		hidden = len(rows) - maxBillRows
		rows = rows[:maxBillRows]
	}
	var t [][]string
	for _, r := range rows {
		ledger := "-"
		diff := "-"
		if r.HasLedger {
			ledger = fmt.Sprintf("%.2f", r.LedgerCost)
			diff = fmt.Sprintf("%+.2f", r.BilledCost-r.LedgerCost)
		}
		t = append(t, []string{r.Label, billLines(r.Lines), billDur(r.BilledSecs), billDur(r.PresentSecs),
			billDur(r.ExpectedSecs), fmt.Sprintf("%.2f", r.BilledCost), ledger, diff})
	}
	var cost float64
	for _, l := range res.Unmatched {
		cost += l.Cost
	}
	if len(res.Unmatched) > 0 {
		t = append(t, []string{"(no node)", fmt.Sprint(len(res.Unmatched)), "", "", "", fmt.Sprintf("%.2f", cost), "", fmt.Sprintf("%+.2f", cost)})
	}
	ledger, diff := "-", "-"
	if res.HasLedger {
		ledger, diff = fmt.Sprintf("%.2f", res.Ledger), fmt.Sprintf("%+.2f", res.Billed-res.Ledger)
	}
	t = append(t, []string{"total", "", "", "", "", fmt.Sprintf("%.2f", res.Billed), ledger, diff})
	var b strings.Builder
	header := []string{"node", "on lines", "billed", "window", "to granule", "billed cost", "ledger", "diff"}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range t {
		for i := range r {
			r[i] = clip(redact.Controls(r[i]), 28)
			widths[i] = max(widths[i], len([]rune(r[i])))
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
	if hidden > 0 {
		fmt.Fprintf(&b, "%d more node(s) billed as the ledger priced them\n", hidden)
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
	switch len(ns) {
	case 0:
		return "0"
	case 1:
		return fmt.Sprint(ns[0])
	}
	if ns[len(ns)-1]-ns[0] == len(ns)-1 {
		return fmt.Sprintf("%d-%d", ns[0], ns[len(ns)-1])
	}
	return fmt.Sprintf("%d (%d…)", len(ns), ns[0])
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
