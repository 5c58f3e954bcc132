package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/reports"
)

// windowFlags are shared by run and demo.
type windowFlags struct {
	runsDir string
	strict  bool
	output  string
	detail  bool
	nodes   string
	only    []string
	skip    []string
}

func (f *windowFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.runsDir, "runs-dir", "reports/runs", "where run directories are made")
	cmd.Flags().BoolVar(&f.strict, "strict", false, "abort the window when a node fails a gating phase, instead of quarantining it")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text",
		"what to print on stdout: text (the summary: one line per requirement), table (the summary and every node's verdicts) or json (run.json)")
	cmd.Flags().BoolVar(&f.detail, "detail", false, "print every node's verdicts under the summary (as -o table)")
	cmd.Flags().StringVar(&f.nodes, "nodes", "", "run on these nodes only: a host range of node names, e.g. 'gpu-[001-016]'")
	cmd.Flags().StringSliceVar(&f.only, "only", nil, "run only these phases (connect, tools, teardown and deletion always run; windowkey with allreduce, bisect or image), e.g. preflight,diag")
	cmd.Flags().StringSliceVar(&f.skip, "skip", nil, "skip these phases, e.g. allreduce,bisect")
}

// selection is what --nodes, --only and --skip ask for; nil for none.
func (f *windowFlags) selection() *orchestrator.Selection {
	if f.nodes == "" && len(f.only) == 0 && len(f.skip) == 0 {
		return nil
	}
	return &orchestrator.Selection{Nodes: f.nodes, Only: f.only, Skip: f.skip}
}

func (f *windowFlags) validate() error {
	switch f.output {
	case "text", "json":
	case "table":
		f.detail = true
	default:
		return exitWith(exitBadInput, fmt.Errorf("--output: %q is not text, table or json", f.output))
	}
	if f.detail && f.output == "json" {
		return exitWith(exitBadInput, fmt.Errorf("--detail: run.json holds every verdict already; give --detail or -o json, not both"))
	}
	return nil
}

func newRunCmd() *cobra.Command {
	var f windowFlags
	var resume string
	cmd := &cobra.Command{
		Use:   "run INVENTORY | run --resume DIR",
		Short: "Run the acceptance window over the inventory's nodes",
		Long: `Run the acceptance window: connect, preflight, diagnostics, teardown, in lockstep over
every node. Progress goes to stderr; the summary (or run.json with -o json) to stdout; the
evidence bundle to --runs-dir/<run-id>/.

--resume DIR continues a window whose coordinator died: phases the journal records as done
are not run again.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if resume != "" && len(args) > 0 {
				return fmt.Errorf("give either INVENTORY or --resume DIR, not both")
			}
			if resume == "" && len(args) != 1 {
				return fmt.Errorf("run needs one INVENTORY (or --resume DIR)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			o := f.options(cmd)
			if resume != "" {
				if f.selection() != nil {
					return exitWith(exitBadInput, fmt.Errorf("--resume runs the nodes and phases the window started with: give no --nodes, --only or --skip"))
				}
				// The selector's nodes are the ones the window recorded
				// (orchestrator.Resume), not asked of the API again.
				rec, dir, err := orchestrator.Resume(cmd.Context(), resume, inventory.Load, phases.All(), o)
				if rec == nil {
					// Nothing ran: DIR is not a resumable window, or its
					// inventory changed or is gone.
					return exitWith(exitBadInput, err)
				}
				return finish(cmd, rec, dir, err, f)
			}
			inv, err := inventory.LoadContext(contextOf(cmd), args[0])
			if err != nil {
				return err
			}
			if inv, err = inv.WithKubeNodes(contextOf(cmd)); err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			o.Selection = f.selection()
			if err := orchestrator.CheckSelection(inv, phases.All(), o.Selection); err != nil {
				return exitWith(exitBadInput, err)
			}
			rec, dir, err := orchestrator.Start(cmd.Context(), inv, phases.All(), o)
			return finish(cmd, rec, dir, err, f)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&resume, "resume", "", "continue the window in this run directory")
	return cmd
}

func (f *windowFlags) options(cmd *cobra.Command) orchestrator.Options {
	stderr := cmd.ErrOrStderr()
	return orchestrator.Options{
		RunsDir:  f.runsDir,
		Strict:   f.strict,
		Progress: orchestrator.NewProgress(stderr, isTerminal(stderr)),
		Tool:     toolName(),
		Build:    buildInfo(),
		// The load test uploads this binary (`gpuaccept loadgen`) to the
		// nodes; phases.workload.inference.loadgen overrides it.
		Executable: executable(),
		Lint: func(inv *inventory.Inventory) []inventory.Warning {
			return append(inventory.LintQuote(inv), phases.Unmeasured(inv)...)
		},
	}
}

// finish writes the bundle, prints the result and picks the exit code.
func finish(cmd *cobra.Command, rec *record.Run, dir string, runErr error, f windowFlags) error {
	if rec == nil {
		return exitWith(exitCouldNotRun, runErr)
	}
	if err := reports.WriteBundle(dir, rec); err != nil {
		err = fmt.Errorf("write evidence to %s: %w", dir, err)
		if runErr == nil {
			// The window tore down before its bundle failed: what the
			// evidence would have said of the nodes is said here.
			stderr := cmd.ErrOrStderr()
			fmt.Fprintln(stderr, redact.Controls(orchestrator.BundleAborted(err)))
			for _, l := range orchestrator.Cleanup(rec, phases.All()) {
				fmt.Fprintln(stderr, redact.Controls(l))
			}
		}
		return exitWith(exitCouldNotRun, err)
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rec); err != nil {
			return exitWith(exitCouldNotRun, err)
		}
	} else if err := reports.Summary(out, rec, summaryOptions(out, f.detail)); err != nil {
		return exitWith(exitCouldNotRun, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "evidence: %s\n", dir)
	if runErr != nil {
		return exitWith(exitCouldNotRun, runErr)
	}
	return exitWith(exitCode(rec), nil)
}

// exitCode maps a finished window onto DESIGN.md's codes.
func exitCode(rec *record.Run) int {
	switch rec.Result().Outcome {
	case record.OutcomeInterrupted:
		return exitInterrupted
	case record.OutcomeIncomplete:
		return exitCouldNotRun
	case record.OutcomeNotAccepted:
		return exitNotAccepted
	}
	return exitAccepted
}

// summaryOptions fits the summary to where it goes: COLUMNS when set
// (what a shell exports, and what a user sets to get another width),
// else the terminal's width, else reports.DefaultWidth.
func summaryOptions(w io.Writer, detail bool) reports.SummaryOptions {
	o := reports.SummaryOptions{Color: isTerminal(w), Detail: detail}
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		o.Width = n
	} else if f, ok := w.(*os.File); ok && o.Color {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			o.Width = cols
		}
	}
	return o
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// contextOf is the command's context, never nil.
func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// executable is the running gpuaccept, links resolved: what the nodes get
// as the load generator. "" when the system cannot say (the phase that
// needs it then says so).
func executable() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
