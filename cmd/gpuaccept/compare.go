package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gpuaccept/reports"
)

func newCompareCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "compare RUN_DIR RUN_DIR...",
		Short: "Set runs side by side, one column each: quotes, criteria, recovery, cost, verdicts",
		Long: `Set two or more runs side by side (run directories or run.json files), one column per run,
say the same window on several providers' clusters: provider, region, window, run ID and date; the
GPU model and node shape as quoted, and the price; the nodes tested and accepted; every acceptance
criterion, one row per requirement ID (the worst status over the nodes, and the cluster's figure
or the worst node's, measured vs quoted with their ratio); the failure test's recovery figures;
the cost per accepted unit from the run's ledger; and each run's verdict. "—": the run has none.

Exit codes: 0 compared (whatever the runs' verdicts), 2 bad input (fewer than 2 runs, a missing or
unreadable run.json, the same run twice).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "text", "markdown", "html", "json":
			default:
				return exitWith(exitBadInput, fmt.Errorf("--output: %q is not text, markdown, html or json", output))
			}
			runs, files, err := reports.LoadRuns(args)
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			c := reports.CompareRuns(runs)
			for i := range c.Runs {
				c.Runs[i].Path = files[i]
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				err = reports.CompareJSON(out, c)
			case "markdown":
				err = reports.CompareMarkdown(out, c)
			case "html":
				err = reports.CompareHTML(out, c)
			default:
				err = reports.CompareText(out, c, isTerminal(out))
			}
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text",
		"text (a terminal table), markdown, html (a self-contained page) or json (schema "+reports.CompareSchema+")")
	return cmd
}
