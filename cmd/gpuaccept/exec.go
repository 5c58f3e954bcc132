package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/remote"
)

func newExecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec INVENTORY -- COMMAND...",
		Short: "Run a command on every node at once; identical outputs grouped",
		Long: `Run a shell command on every node of the inventory at once. Outputs are collated per
node, and nodes whose output is identical are shown together (as dshbak -c does), then the
exit status of every node. Exit 0 when every node exited 0, 1 when any did not, 3 when a node
could not be reached.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return fmt.Errorf("usage: gpuaccept exec INVENTORY -- COMMAND... (the command after --)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := inventory.Load(args[0])
			if err != nil {
				return err
			}
			return execAll(contextOf(cmd), cmd.OutOrStdout(), inv, strings.Join(args[1:], " "))
		},
	}
	return cmd
}

type nodeOutput struct {
	name   string
	output string
	status string
	code   int // 0 ok, 1 command failed, 3 unreachable
}

func execAll(ctx context.Context, out io.Writer, inv *inventory.Inventory, command string) error {
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: inv.SSH.KnownHosts, AcceptNew: inv.SSH.AcceptNew})
	if err != nil {
		return exitWith(exitBadInput, err)
	}
	results := remote.Each(ctx, len(inv.Nodes), remote.FanOut{Limit: inv.SSH.Concurrency},
		func(ctx context.Context, i int) (nodeOutput, error) {
			n := inv.Nodes[i]
			o := nodeOutput{name: n.Name}
			c, err := remote.DialNode(ctx, orchestrator.NodeConfig(inv, n, hk))
			if err != nil {
				o.status, o.code = "unreachable: "+err.Error(), exitCouldNotRun
				return o, nil
			}
			defer c.Close()
			var buf lockedBuffer
			err = c.Run(ctx, remote.Cmd{Command: command, Stdout: &buf, Stderr: &buf})
			o.output = buf.String()
			switch e := err.(type) {
			case nil:
				o.status = "exit 0"
			case *remote.ExitError:
				o.code = exitNotAccepted
				if e.Signal != "" {
					o.status = "killed by signal " + e.Signal
				} else {
					o.status = "exit " + strconv.Itoa(e.Status)
				}
			default:
				o.status, o.code = err.Error(), exitCouldNotRun
			}
			return o, nil
		})
	outs := make([]nodeOutput, len(results))
	for i, r := range results {
		outs[i] = r.Value
		if r.Err != nil {
			outs[i] = nodeOutput{name: inv.Nodes[i].Name, status: r.Err.Error(), code: exitCouldNotRun}
		}
	}
	writeCollated(out, outs)
	code := exitAccepted
	for _, o := range outs {
		code = max(code, o.code)
	}
	if ctx.Err() != nil {
		code = exitInterrupted
	}
	return exitWith(code, nil)
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

// lockedBuffer collects stdout and stderr in arrival order.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
