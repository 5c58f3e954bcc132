package orchestrator

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"gpuaccept/orchestrator/billing"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// billingTerms is the inventory's billing keys as run.json keeps them, so
// that `gpuaccept bill` reads the export later as the window would have;
// nil when none is given.
func billingTerms(b inventory.Billing) *record.Billing {
	if b.Export == "" && len(b.Columns) == 0 && len(b.RequiredTags) == 0 {
		return nil
	}
	return &record.Billing{Export: b.Export, Columns: b.Columns, RequiredTags: b.RequiredTags}
}

// judgeBilling holds the provider's usage export against the window when
// the inventory names one that is already there. Usually it comes days
// later, and `gpuaccept bill` judges it then: its absence now is no
// finding.
func (w *Window) judgeBilling() {
	path := w.Inv.Billing.Export
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		w.Progress.Line("billing: %s is not there yet: gpuaccept bill %s %s judges it when it is", path, w.Dir, path)
		return
	}
	var verdicts []record.Verdict
	if err == nil {
		defer f.Close()
		var ex *billing.Export
		if ex, err = billing.Read(f, billing.Options{Columns: billing.ColumnsFrom(w.Inv.Billing.Columns)}); err == nil {
			var res *billing.Result
			if res, err = billing.Reconcile([]*record.Run{w.rec}, ex); err == nil {
				verdicts = res.Verdicts
				w.mu.Lock()
				if w.rec.Billing == nil {
					w.rec.Billing = &record.Billing{}
				}
				w.rec.Billing.Reconciled = res.Record(filepath.Base(path))
				w.mu.Unlock()
			}
		}
	}
	if err != nil {
		// An export the window cannot read (a header it does not know,
		// two currencies, a figure past its bounds) is the buyer's input
		// to fix, as `gpuaccept bill` exits 2 on it: the bill is NOT
		// MEASURED and the window INCOMPLETE, saying why. It is no
		// finding against the nodes, and never a zero bill.
		v := record.NewVerdict("BILL-001", "")
		v.Status, v.Measured = record.Skip, "not measured"
		v.Incomplete = "billing.export " + filepath.Base(path) + " cannot be read: " + err.Error()
		verdicts = []record.Verdict{v}
	}
	w.mu.Lock()
	w.rec.Verdicts = append(w.rec.Verdicts, verdicts...)
	w.mu.Unlock()
}
