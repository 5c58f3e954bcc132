package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// reconciledRun is costedRun with a usage export the window judged:
// gpu-02 billed an hour more than the ledger priced, a line of no node.
func reconciledRun() *record.Run {
	r := costedRun()
	ledger := func(c float64) *float64 { return &c }
	r.Billing = &record.Billing{RequiredTags: []string{"team"}, Reconciled: &record.Reconciliation{
		Export: "cur.csv", Format: "aws-cur", Currency: "USD", OutsideLines: 2,
		Nodes: []record.ReconciledNode{
			{Node: "gpu-01", Lines: []int{2}, BilledSecs: 2880, WindowSecs: 2823, ExpectedSecs: 2880, BilledCost: 15.936, LedgerCost: ledger(15.936)},
			{Node: "gpu-02", Lines: []int{3, 4}, BilledSecs: 6480, WindowSecs: 2823, ExpectedSecs: 2880, BilledCost: 35.856, LedgerCost: ledger(15.936)},
			{Node: "gpu-03", Lines: []int{5}, BilledSecs: 2880, WindowSecs: 2823, ExpectedSecs: 2880, BilledCost: 15.936, LedgerCost: ledger(15.936)},
		},
		UnmatchedLines: 1, UnmatchedCost: 4.5, Billed: 72.228, Ledger: ledger(53.043753),
	}}
	v := record.NewVerdict("BILL-002", "gpu-02")
	v.Status, v.Measured = record.Fail, "billed 1h48m on line(s) 3-4"
	r.Verdicts = append(r.Verdicts, v)
	return r
}

func TestMarkdownAndHTMLShowTheReconciliation(t *testing.T) {
	run := reconciledRun()
	var md, page bytes.Buffer
	if err := Markdown(&md, run); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, run, nil); err != nil {
		t.Fatal(err)
	}
	perUnit := "Cost per training step from the invoice: 0.00602 USD (72.23 USD billed ÷ 12000 training step(s)); from the ledger: 0.00442 USD."
	for _, want := range []string{"## Billing reconciliation",
		"cur.csv: aws-cur, 5 line(s) of the windows' days (2 outside them), USD",
		"| gpu-02    | 3-4      | 1h48m  | 47m03s | 48m00s     | 35.86             | 15.94  | +19.92 |",
		"| (no node) | 1 ", "| total     ", "| 72.23             | 53.04  | +19.18 |", perUnit} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, want := range []string{`<h2>Billing reconciliation</h2>`, `<table id="billing">`, `<td>gpu-02</td><td class="num">3-4</td>`,
		`<p id="invoice-per-unit">` + perUnit + `</p>`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	md.Reset()
	if err := Markdown(&md, costedRun()); err != nil || strings.Contains(md.String(), "Billing reconciliation") {
		t.Errorf("a reconciliation where the window judged no export (%v)", err)
	}
}

func TestCompareCostFromTheInvoice(t *testing.T) {
	runs := vendorRuns()
	runs[0].Billing = &record.Billing{Reconciled: &record.Reconciliation{Export: "x.csv", Currency: "USD", Billed: 70}}
	var b bytes.Buffer
	if err := CompareMarkdown(&b, CompareRuns(runs)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"35.00 USD per accepted node from the invoice (ledger 29.88 USD, 2 accepted)",
		"70.00 USD (+10.24 against the ledger)", "no usage export judged",
		"8.40 EUR per accepted node from the ledger (2 accepted)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("compare lacks %q:\n%s", want, b.String())
		}
	}
}

// At 1,000 nodes the table lists the 30 that disagree first and counts
// the rest; every line fits 100 columns.
func TestBillTextAtAThousandNodes(t *testing.T) {
	rc := &record.Reconciliation{Export: "export.csv", Format: "generic", Currency: "USD"}
	var vs []record.Verdict
	for i := range 1000 {
		c := 0.332
		n := record.ReconciledNode{Node: fmt.Sprintf("gpu-%04d", i+1), Lines: []int{i + 2}, BilledSecs: 60, WindowSecs: 20,
			ExpectedSecs: 60, BilledCost: c, LedgerCost: &c}
		v := record.NewVerdict("BILL-002", n.Node)
		v.Status = record.Pass
		if i == 711 {
			n.BilledSecs, n.BilledCost = 7260, 40.172
			v.Status, v.Measured = record.Fail, "billed 2h01m on line(s) 713"
		}
		rc.Nodes = append(rc.Nodes, n)
		rc.Billed += n.BilledCost
		vs = append(vs, v)
	}
	rc.Ledger = new(332.0)
	var b bytes.Buffer
	if err := BillText(&b, rc, vs, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if len(lines) > 50 {
		t.Errorf("%d lines", len(lines))
	}
	for _, l := range lines {
		if len([]rune(l)) > 100 {
			t.Errorf("%d columns: %q", len([]rune(l)), l)
		}
	}
	for _, want := range []string{"\ngpu-0712  713 ", "970 more node(s) billed as the ledger priced them",
		"BILL-002 FAIL gpu-0712: billed 2h01m on line(s) 713", "BILL-002 PASS gpu-[0001-0711,0713-1000]",
		"NOT RECONCILED: BILL-002 failed (1 FAIL, 0 WARN)"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

func TestBillLines(t *testing.T) {
	for want, ns := range map[string][]int{"none": nil, "7": {7}, "2-4": {2, 3, 4}, "2,6": {2, 6}, "1,5,9,+2": {1, 5, 9, 12, 14}} {
		if got := billLines(ns); got != want {
			t.Errorf("%v: %q, want %q", ns, got, want)
		}
	}
}
