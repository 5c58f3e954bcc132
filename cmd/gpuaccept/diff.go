package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"gpuaccept/reports"
)

func newDiffCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "diff BASELINE CANDIDATE",
		Short: "Compare two runs of the same cluster: what changed, what regressed",
		Long: `Compare two runs of the same cluster (run directories or run.json files), say before and after
a driver upgrade: what changed on the nodes (driver, CUDA, NCCL, image, kernel, firmware, GPU serials),
every figure both runs measured with its change, and the verdicts whose status changed. A figure worse
than the baseline's by more than the threshold (acceptance.regression, recorded in run.json; 5% by
default), or a verdict that passed and now fails, is a regression; a change of version is shown, not
judged.

Exit codes: 0 no regression, 1 regression (each named on stderr too), 2 bad input (a missing or
unreadable run.json).`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "text", "json", "markdown":
			default:
				return exitWith(exitBadInput, fmt.Errorf("--output: %q is not text, json or markdown", output))
			}
			base, basePath, err := reports.LoadRun(args[0])
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			cand, candPath, err := reports.LoadRun(args[1])
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			d := reports.Compare(base, cand)
			d.Baseline.Path, d.Candidate.Path = basePath, candPath
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				err = reports.DiffJSON(out, d)
			case "markdown":
				err = reports.DiffMarkdown(out, d)
			default:
				err = reports.DiffText(out, d, isTerminal(out))
			}
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			if !d.Regressed {
				return nil
			}
			for _, r := range d.Regressions {
				fmt.Fprintln(cmd.ErrOrStderr(), "gpuaccept: regression:", r)
			}
			return exitWith(exitNotAccepted, fmt.Errorf("%s regressed against %s: %d regression(s)", d.Candidate.ID, d.Baseline.ID, len(d.Regressions)))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text (a terminal table), json (schema "+reports.DiffSchema+") or markdown (for a ticket)")
	return cmd
}
