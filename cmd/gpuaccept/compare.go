package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator/record"
	"gpuaccept/reports"
)

func newCompareCmd() *cobra.Command {
	var output string
	var labelFlags []string
	cmd := &cobra.Command{
		Use:   "compare RUN_DIR RUN_DIR...",
		Short: "Set runs side by side, one column each: quotes, criteria, recovery, cost, verdicts",
		Long: `Set two or more runs side by side (run directories or run.json files), one column per run,
say the same window on several providers' clusters: provider, region, window, run ID and date; the
GPU model and node shape as quoted, and the price; the nodes tested and accepted; every acceptance
criterion, one row per requirement ID (the worst status over the nodes, and the cluster's figure
or the worst node's, measured vs quoted with their ratio); the failure test's recovery figures;
the cost per accepted unit from the run's ledger; and each run's verdict. "—": the run has none.

A RUN_DIR that holds runs rather than being one (reports/runs, say) stands for every run in
it. Columns are headed by the provider and the window (with "#n" where two read alike);
--label KEY=TEXT heads one with TEXT, KEY being the run's directory name (or that of the
directory of runs it is in), its path, its run ID, or its position (1, 2, ...). The text table fits COLUMNS (else the terminal,
else 100 columns): side by side, cells wrapped, while each run gets 24 columns; past that each
row is a block of its own, the runs one under the other.

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
			labels, err := runLabels(labelFlags, runs, files)
			if err != nil {
				return exitWith(exitBadInput, err)
			}
			c := reports.CompareRuns(runs, labels...)
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
				o := summaryOptions(out, false)
				err = reports.CompareText(out, c, o.Color, o.Width)
			}
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&labelFlags, "label", nil, "KEY=TEXT: head the run KEY (its directory name, path, run ID or position) with TEXT; repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "text",
		"text (a terminal table), markdown, html (a self-contained page) or json (schema "+reports.CompareSchema+")")
	return cmd
}

// runLabels reads --label KEY=TEXT flags into a label per run; a key that
// names no run, or names two, is an error that says which runs there are.
func runLabels(flags []string, runs []*record.Run, files []string) ([]string, error) {
	labels := make([]string, len(runs))
	var known []string
	for _, f := range files {
		known = append(known, filepath.Base(filepath.Dir(f)))
	}
	for _, fl := range flags {
		key, text, ok := strings.Cut(fl, "=")
		key, text = strings.TrimSpace(key), strings.TrimSpace(text)
		if !ok || key == "" || text == "" {
			return nil, fmt.Errorf("--label %q: want KEY=TEXT, e.g. --label %s=\"Vendor A\"", fl, known[0])
		}
		var hits []int
		for i, f := range files {
			dir := filepath.Dir(f)
			// The run's directory, or the directory of runs it came from
			// (compare runs/a runs/b --label a=...).
			if key == strconv.Itoa(i+1) || key == filepath.Base(dir) || key == filepath.Base(filepath.Dir(dir)) || key == runs[i].ID ||
				filepath.Clean(key) == filepath.Clean(dir) || filepath.Clean(key) == filepath.Clean(f) {
				hits = append(hits, i)
			}
		}
		switch len(hits) {
		case 0:
			return nil, fmt.Errorf("--label %s: no run is %q (the runs: %s, or 1..%d)", fl, key, strings.Join(known, ", "), len(runs))
		case 1:
		default:
			return nil, fmt.Errorf("--label %s: %q names %d runs; use a run ID or position", fl, key, len(hits))
		}
		if labels[hits[0]] != "" {
			return nil, fmt.Errorf("--label %s: run %s is labelled twice", fl, known[hits[0]])
		}
		labels[hits[0]] = text
	}
	return labels, nil
}
