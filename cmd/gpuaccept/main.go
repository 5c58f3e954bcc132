// Command gpuaccept turns a short window of SSH access to rented GPU nodes
// into signed-off evidence. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator/inventory"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// Exit codes, as DESIGN.md fixes them.
const (
	exitAccepted    = 0
	exitNotAccepted = 1
	exitBadInput    = 2
	exitCouldNotRun = 3
	exitInterrupted = 130
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error // nil: nothing more to print
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// A second Ctrl-C is not caught: it ends the process at once.
		<-ctx.Done()
		stop()
	}()
	root := newRoot()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitAccepted
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			printError(os.Stderr, "gpuaccept: "+ee.err.Error())
		}
		return ee.code
	}
	var ie *inventory.Error
	if errors.As(err, &ie) {
		printError(os.Stderr, ie.Error())
		return exitBadInput
	}
	// Cobra's own complaints (unknown flag, missing argument) are usage
	// errors.
	printError(os.Stderr, "gpuaccept: "+err.Error())
	return exitBadInput
}

// printError writes an error's lines to w fitted to the terminal (COLUMNS,
// else its width, else reports.DefaultWidth), each too wide broken under
// its own indent: an inventory's problems lead with the file's path, line
// and key, and ran past the edge at half a message.
func printError(w io.Writer, text string) {
	f := &fitWriter{w: w, width: summaryOptions(w, false).Width}
	fmt.Fprintln(f, text)
	f.Flush()
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpuaccept",
		Short: "Acceptance tests for rented GPU nodes, with evidence",
		Long: `gpuaccept turns a short window of SSH access to rented GPU nodes into signed-off evidence:
it checks the nodes against the provider's quote, runs the acceptance tests in lockstep
across all nodes, and writes an evidence bundle and reports.

Exit codes: 0 accepted, 1 acceptance failed, 2 bad input or usage, 3 the window could not
run, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       toolName(),
	}
	root.AddCommand(newRunCmd(), newCheckCmd(), newExecCmd(), newVerifyCmd(), newDiffCmd(), newCompareCmd(), newParseCmd(),
		newDemoCmd(), newVersionCmd(), newStandinCmd(), newSignCmd(), newLoadgenCmd(), newStatusCmd(), newBillCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), toolName())
		},
	}
}

// exactArgs is cobra.ExactArgs with an error that says what is missing
// in the command's own words (its Use line), not "accepts 1 arg(s),
// received 0".
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		want := strings.Join(strings.Fields(cmd.Use)[1:], " ")
		usage := cmd.CommandPath() + " " + want
		if len(args) < n {
			return fmt.Errorf("%s needs %s (%s; --help says more)", cmd.Name(), want, usage)
		}
		return fmt.Errorf("%s takes %s, got %d argument(s): %s (%s)", cmd.Name(), want, len(args), strings.Join(args, " "), usage)
	}
}
