package reports

import (
	"bytes"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

func TestCostLine(t *testing.T) {
	per := 4.1133
	for _, c := range []struct {
		name string
		l    *record.Ledger
		want string
	}{
		{"none", nil, ""},
		{"accepted nodes", &record.Ledger{Currency: "USD", Granularity: "1m", TotalCost: 12.34, Unit: "accepted node", AcceptedUnits: 3, CostPerUnit: &per},
			"cost: 12.34 USD for 3 accepted node(s) = 4.11 USD per accepted node (billed 1m granularity)"},
		{"nothing accepted", &record.Ledger{Currency: "EUR", Granularity: "1h", TotalCost: 99.5, Unit: "accepted node"},
			"cost: 99.50 EUR for 0 accepted node(s): no cost per accepted node (billed 1h granularity)"},
		{"no currency", &record.Ledger{Granularity: "1s", TotalCost: 1, Unit: "training step", AcceptedUnits: 12.5, CostPerUnit: new(0.08)},
			"cost: 1.00 for 12.5 training step(s) = 0.08 per training step (billed 1s granularity)"},
	} {
		if got := costLine(c.l); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A ledger with nothing accepted says so in report.md, and a run without
// one has no Cost section.
func TestMarkdownCost(t *testing.T) {
	run := costedRun()
	run.Ledger.CostPerUnit, run.Ledger.AcceptedUnits, run.Ledger.TCO, run.Ledger.Extras = nil, 0, nil, nil
	var b bytes.Buffer
	if err := Markdown(&b, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Cost", "Cost per training step from the ledger: none (53.04 USD for 0 training step(s)).", "| total "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report.md has no %q", want)
		}
	}
	for _, unwanted := range []string{"Monthly TCO", "| host "} {
		if strings.Contains(b.String(), unwanted) {
			t.Errorf("report.md has %q", unwanted)
		}
	}
	b.Reset()
	if err := Markdown(&b, failedRun()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "## Cost") {
		t.Error("a Cost section without a ledger")
	}
}
