package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gpuaccept/orchestrator/record"
)

// demoBillingExport is the name of the usage export the demo writes into
// its bundle.
const demoBillingExport = "billing-export.csv"

// writeDemoBillingExport writes what an honest provider would bill for
// the demo's window, in the generic export format, into its bundle
// (before the manifest, so the manifest covers it): one line per node, its
// ledger's billed time and cost, tagged as the demo inventory's
// billing.required_tags ask. `gpuaccept bill DIR DIR/billing-export.csv`
// then reconciles cleanly, and a line edited in it shows what each BILL
// finding looks like. Nothing when the window has no ledger (a quote
// without a price).
func writeDemoBillingExport(dir string, rec *record.Run) error {
	if rec.Ledger == nil || dir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, demoBillingExport), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"resource", "start", "end", "quantity", "unit", "cost", "currency", "item", "tags"})
	for _, n := range rec.Ledger.Nodes {
		start := rec.Started.UTC()
		end := start.Add(time.Duration(n.BilledSecs * float64(time.Second)))
		w.Write([]string{n.Name, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano),
			strconv.FormatFloat(n.BilledSecs, 'f', -1, 64), "s", strconv.FormatFloat(n.Cost, 'f', -1, 64),
			rec.Ledger.Currency, fmt.Sprintf("%d-GPU node (simulated)", n.GPUs), "team=demo;job=" + rec.ID})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
