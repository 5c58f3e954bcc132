package orchestrator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// billing.export, when it is there at the window's end, is judged into
// the window's verdicts; absent, it is no finding.
func TestWindowJudgesBillingExport(t *testing.T) {
	inv := testInventory(t, "a", "b")
	inv.Quote = inventory.Quote{PricePerGPUHr: 2.49, GPUsPerNode: 8, Currency: "USD", Billing: "1m"}
	dir := t.TempDir()
	inv.Billing = inventory.Billing{Export: filepath.Join(dir, "export.csv"), RequiredTags: []string{"team"}}
	start := time.Now().UTC().Truncate(time.Minute)
	write := func(rows ...string) {
		t.Helper()
		body := "resource,start,end,quantity,unit,cost,currency,tags\n" + strings.Join(rows, "")
		if err := os.WriteFile(inv.Billing.Export, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	line := func(node string) string {
		return fmt.Sprintf("%s,%s,%s,1,min,0.332,USD,team=ml\n", node, start.Format(time.RFC3339), start.Add(time.Minute).Format(time.RFC3339))
	}
	var last *record.Run
	bills := func() map[string]record.Status {
		t.Helper()
		var c calls
		rec, _, err := Start(t.Context(), inv, []Phase{phase("one", &c, false, nil)}, Options{RunsDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if rec.Billing == nil || rec.Billing.RequiredTags[0] != "team" {
			t.Fatalf("run.json's billing: %+v", rec.Billing)
		}
		last = rec
		out := map[string]record.Status{}
		for _, v := range rec.Verdicts {
			if strings.HasPrefix(v.ID, "BILL-") && (out[v.ID+" "+v.Node] == "" || v.Status == record.Fail) {
				out[v.ID+" "+v.Node] = v.Status
			}
		}
		return out
	}
	if got := bills(); len(got) != 0 {
		t.Errorf("no export yet: %v", got)
	}
	write(line("a"), line("b"))
	got := bills()
	if rc := last.Billing.Reconciled; rc == nil || rc.Export != "export.csv" || len(rc.Nodes) != 2 || rc.Nodes[0].BilledSecs != 60 {
		t.Errorf("run.json keeps no reconciliation for the report: %+v", rc)
	}
	for _, k := range []string{"BILL-001 ", "BILL-002 a", "BILL-002 b", "BILL-004 ", "BILL-006 ", "BILL-007 "} {
		if got[k] != record.Pass {
			t.Errorf("%s: %s (%v)", k, got[k], got)
		}
	}
	write(line("a"), line("b"), line("b"))
	if got := bills(); got["BILL-004 b"] != record.Fail {
		t.Errorf("a line billed twice: %v", got)
	}
	// An export the window cannot read is the buyer's input: NOT
	// MEASURED, the window INCOMPLETE with the reason, never NOT ACCEPTED.
	write("not,an,export\n")
	if got := bills(); got["BILL-001 "] != record.Skip {
		t.Errorf("an unreadable export: %v", got)
	}
	res := last.Result()
	if res.Outcome != record.OutcomeIncomplete || !strings.Contains(strings.Join(res.Incomplete, "\n"),
		"billing.export export.csv cannot be read: record on line 2: wrong number of fields") {
		t.Errorf("an unreadable export: %s %q", res.Outcome, res.Incomplete)
	}
}
