package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator/billing"
	"gpuaccept/orchestrator/record"
	"gpuaccept/reports"
)

func newBillCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "bill RUN_DIR... EXPORT",
		Short: "Reconcile a provider's usage export with what the windows measured",
		Long: `Read a provider's usage export (AWS Cost and Usage Report, legacy or CUR 2.0; Google Cloud's
billing export; Azure cost details or usage; or the generic CSV/JSON the runs' billing.columns
map) and hold it against the runs' own records: each billed line is matched to a node by its
billing_id, name or address and by the window's days; billed time against the window's, rounded
to quote.billing_granularity (BILL-002); a failed or never-answering node against
quote.terms.failed_node (BILL-003); lines billed twice (BILL-004); the rate against the quote
(BILL-005); lines without billing.required_tags or of no node (BILL-006); the total against the
cost ledger, line by line (BILL-007); the failure test's victim (BILL-008).
Exit 0 when the export reconciles, 1 when it does not, 2 when a run or the export cannot be read
(an unknown header, two currencies, a currency other than the quote's, a time or figure it
cannot read: each named with its line).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return exitWith(exitBadInput, fmt.Errorf("--output: %q is not text or json", output))
			}
			exportPath := args[len(args)-1]
			var runs []*record.Run
			for _, p := range args[:len(args)-1] {
				run, _, err := reports.LoadRun(p)
				if err != nil {
					return exitWith(exitBadInput, err)
				}
				for _, r := range runs {
					if r.ID == run.ID && r.Started.Equal(run.Started) {
						return exitWith(exitBadInput, fmt.Errorf("%s: run %s is given twice: each run once", p, run.ID))
					}
				}
				runs = append(runs, run)
			}
			columns, err := runColumns(runs)
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			f, err := os.Open(exportPath)
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			defer f.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "bill: reading %s against %d run(s)\n", exportPath, len(runs))
			ex, err := billing.Read(f, billing.Options{Columns: billing.ColumnsFrom(columns)})
			if err != nil {
				return exitWith(exitBadInput, fmt.Errorf("%s: %w", exportPath, err))
			}
			res, err := billing.Reconcile(runs, ex)
			if err != nil {
				return exitWith(exitBadInput, fmt.Errorf("%s: %w", exportPath, err))
			}
			out := cmd.OutOrStdout()
			rc := res.Record(filepath.Base(exportPath))
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(billOut{rc, res.Verdicts, reports.BillOutcome(res.Verdicts)}); err != nil {
					return err
				}
			} else if err := reports.BillText(out, rc, res.Verdicts, billWidth()); err != nil {
				return err
			}
			if reports.BillFailed(res.Verdicts) {
				return exitWith(exitNotAccepted, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// runColumns is billing.columns as the runs recorded it: runs of one
// provider map one export one way; two mappings cannot read one file.
func runColumns(runs []*record.Run) (map[string]string, error) {
	var cols map[string]string
	var from string
	for _, r := range runs {
		if r.Billing == nil || len(r.Billing.Columns) == 0 {
			continue
		}
		if cols != nil && !maps.Equal(cols, r.Billing.Columns) {
			return nil, fmt.Errorf("runs %s and %s map billing.columns differently: reconcile them apart", from, r.ID)
		}
		cols, from = r.Billing.Columns, r.ID
	}
	return cols, nil
}

// billWidth is COLUMNS when set, else reports.DefaultWidth.
func billWidth() int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	return reports.DefaultWidth
}

// billOut is the reconciliation for machines: what the text shows.
type billOut struct {
	*record.Reconciliation
	Verdicts []record.Verdict `json:"verdicts"`
	Outcome  string           `json:"outcome"`
}
