package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/remote"
)

func newExecCmd() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec INVENTORY -- COMMAND...",
		Short: "Run a command on every node at once; identical outputs grouped",
		Long: `Run a shell command on every node of the inventory (or those --nodes names) at once.
Outputs are collated per node, and nodes whose output is identical are shown together (as
dshbak -c does), then the exit status of every node. Each node's command ends at --timeout
and is named as timed out. Of what a node prints, the first and the last 32 KiB are kept
(per stream with -o json), and the cut says how many bytes were dropped; control characters
are shown escaped. -o json prints, per node: node, exit_code (null when there is none),
status, timed_out, duration_s, stdout and stderr with their byte counts and a truncated flag.
Exit 0 when every node exited 0, 1 when any did not (or timed out), 3 when a node could not
be reached.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return fmt.Errorf("usage: gpuaccept exec INVENTORY -- COMMAND... (the command after --)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != "text" && o.output != "json" {
				return exitWith(exitBadInput, fmt.Errorf("--output: %q is not text or json", o.output))
			}
			if o.timeout <= 0 {
				return exitWith(exitBadInput, fmt.Errorf("--timeout %s: must be above 0", o.timeout))
			}
			inv, err := inventory.Load(args[0])
			if err != nil {
				return err
			}
			if inv, err = inv.WithKubeNodes(contextOf(cmd)); err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			if inv, err = orchestrator.SelectNodes(inv, o.nodes); err != nil {
				return exitWith(exitBadInput, err)
			}
			return execAll(contextOf(cmd), cmd.OutOrStdout(), inv, strings.Join(args[1:], " "), o)
		},
	}
	cmd.Flags().StringVar(&o.nodes, "nodes", "", "run on these nodes only: a host range of node names, e.g. 'gpu-[001-016]'")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultExecTimeout, "each node's command (connecting included) ends at this")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text (outputs collated, then statuses) or json (one object per node)")
	return cmd
}

// execOptions are exec's flags.
type execOptions struct {
	nodes   string
	timeout time.Duration
	output  string
}

const defaultExecTimeout = time.Minute

// execKeep bounds what exec keeps of a node's output (each stream's, with
// -o json): its head and its tail. A node printed 3 GB into memory in 10 s.
const execKeep = 32 << 10

type nodeOutput struct {
	name   string
	output string
	status string
	code   int // 0 ok, 1 command failed or timed out, 3 unreachable
	json   execJSON
}

// execJSON is one node's result with -o json.
type execJSON struct {
	Node            string  `json:"node"`
	ExitCode        *int    `json:"exit_code"`
	Status          string  `json:"status"`
	TimedOut        bool    `json:"timed_out"`
	Duration        float64 `json:"duration_s"`
	Stdout          string  `json:"stdout"`
	StdoutBytes     int64   `json:"stdout_bytes"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	Stderr          string  `json:"stderr"`
	StderrBytes     int64   `json:"stderr_bytes"`
	StderrTruncated bool    `json:"stderr_truncated"`
}

func execAll(ctx context.Context, out io.Writer, inv *inventory.Inventory, command string, o execOptions) error {
	// The window's own way to the nodes: whatever transport the
	// inventory names, exec reaches a node as a window would.
	reach, err := orchestrator.NewReach(inv, nil)
	if err != nil {
		return exitWith(exitBadInput, err)
	}
	// On a managed cluster the command runs in pods of exec's own, deleted
	// before it returns, with a budget of their own.
	var salt [4]byte
	rand.Read(salt[:])
	reach.ForRun(fmt.Sprintf("exec-%x", salt))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := reach.ReleasePods(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "gpuaccept exec: %v\n", err)
		}
	}()
	if o.timeout <= 0 {
		o.timeout = defaultExecTimeout
	}
	results := remote.Each(ctx, len(inv.Nodes), remote.FanOut{Limit: reach.FanOut()},
		func(ctx context.Context, i int) (nodeOutput, error) {
			return execOn(ctx, reach, inv.Nodes[i], command, o), nil
		})
	outs := make([]nodeOutput, len(results))
	for i, r := range results {
		outs[i] = r.Value
		if r.Err != nil {
			outs[i] = nodeOutput{name: inv.Nodes[i].Name, status: r.Err.Error(), code: exitCouldNotRun}
			outs[i].json = execJSON{Node: inv.Nodes[i].Name, Status: r.Err.Error()}
		}
	}
	if o.output == "json" {
		nodes := make([]execJSON, len(outs))
		for i, r := range outs {
			nodes[i] = r.json
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Command string     `json:"command"`
			Nodes   []execJSON `json:"nodes"`
		}{command, nodes}); err != nil {
			return err
		}
	} else {
		writeCollated(out, outs)
	}
	code := exitAccepted
	for _, r := range outs {
		code = max(code, r.code)
	}
	if ctx.Err() != nil {
		code = exitInterrupted
	}
	return exitWith(code, nil)
}

// execOn runs command on node n within o.timeout, keeping a bounded part
// of what it prints.
// res is named: the deferred fill of its JSON must reach the caller.
func execOn(ctx context.Context, reach *orchestrator.Reach, n inventory.Node, command string, o execOptions) (res nodeOutput) {
	res.name = n.Name
	started := time.Now()
	nctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	// The node's own deadline passed, not the whole command's interrupt.
	timedOut := func() bool { return nctx.Err() == context.DeadlineExceeded && ctx.Err() == nil }
	var stdout, stderr *phases.Capture
	defer func() {
		j := &res.json
		j.Node, j.Status, j.Duration = n.Name, res.status, time.Since(started).Seconds()
		if stdout != nil {
			j.Stdout, j.StdoutBytes, j.StdoutTruncated = string(stdout.Bytes()), stdout.Total(), stdout.Dropped() > 0
			j.Stderr, j.StderrBytes, j.StderrTruncated = string(stderr.Bytes()), stderr.Total(), stderr.Dropped() > 0
		}
	}()
	c, err := reach.Dial(nctx, reach.Config(n))
	if err != nil {
		res.status, res.code = "unreachable: "+err.Error(), exitCouldNotRun
		if timedOut() {
			res.status = fmt.Sprintf("unreachable: timed out after %s connecting: %v", o.timeout, err)
			res.json.TimedOut = true
		}
		return res
	}
	defer c.Close()
	cmd := remote.Cmd{Command: command}
	var both *phases.Capture
	if o.output == "json" {
		stdout, stderr = phases.NewCapture(execKeep, execKeep), phases.NewCapture(execKeep, execKeep)
		cmd.Stdout, cmd.Stderr = stdout, stderr
	} else {
		both = phases.NewCapture(execKeep, execKeep)
		cmd.Stdout, cmd.Stderr = both, both
	}
	err = c.Run(nctx, cmd)
	if both != nil {
		res.output = string(both.Bytes())
	}
	var exit *remote.ExitError
	switch {
	case err == nil:
		res.status, res.json.ExitCode = "exit 0", new(int)
	case timedOut():
		res.status, res.code, res.json.TimedOut = fmt.Sprintf("timed out after %s", o.timeout), exitNotAccepted, true
	case errors.As(err, &exit):
		res.code = exitNotAccepted
		if exit.Signal != "" {
			res.status = "killed by signal " + exit.Signal
		} else {
			res.status = "exit " + strconv.Itoa(exit.Status)
			res.json.ExitCode = &exit.Status
		}
	default:
		res.status, res.code = err.Error(), exitCouldNotRun
	}
	return res
}

// writeCollated prints each distinct output once, under the names of the
// nodes that produced it, then every node's status grouped the same way.
func writeCollated(w io.Writer, outs []nodeOutput) {
	for _, g := range group(outs, func(o nodeOutput) string { return o.output }) {
		if g.key == "" {
			continue
		}
		bar := strings.Repeat("-", 16)
		// What a node printed cannot drive the terminal.
		fmt.Fprintf(w, "%s\n%s\n%s\n%s", bar, hostlist.Compress(g.names), bar, redact.Controls(g.key))
		if !strings.HasSuffix(g.key, "\n") {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, strings.Repeat("=", 16))
	for _, g := range group(outs, func(o nodeOutput) string { return o.status }) {
		fmt.Fprintf(w, "%s: %s\n", hostlist.Compress(g.names), redact.Controls(g.key))
	}
}

type outGroup struct {
	key   string
	names []string
}

func group(outs []nodeOutput, key func(nodeOutput) string) []outGroup {
	var groups []outGroup
	idx := map[string]int{}
	for _, o := range outs {
		k := key(o)
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, outGroup{key: k})
		}
		groups[i].names = append(groups[i].names, o.name)
	}
	return groups
}
