package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/reports"
)

func newCheckCmd() *cobra.Command {
	var output string
	var strictQuote, connect bool
	cmd := &cobra.Command{
		Use:   "check INVENTORY",
		Short: "Validate an inventory, print the plan of the window and lint the quote; --connect reaches the nodes",
		Long: `Validate an inventory and print the plan of the window, then the quote lint: a warning,
with a stable ID (QUOTE-001..QUOTE-014), for each red flag in the provider's offer (the
quote section): what the offer leaves out that a buyer should have in writing.

A warning does not change the exit status (0 for a valid inventory, 2 for an invalid one)
unless --strict-quote is given: then any warning exits 1. -o json prints the warnings as
JSON instead of the plan.

--connect also reaches every node as a window would (host keys, authentication, jump hosts,
ssh.concurrency at a time), writes nothing there, and lists the tools each has and their
versions (nvidia-smi and the driver, dcgmi, mpirun, all_reduce_perf, podman, docker, python3,
torch, the kernel and the OS), each answer once with its nodes; what the plan cannot measure
for a tool a node lacks (each reason once with its nodes); then how long the window may take
at most (its phases' deadlines) and what that costs at the quote. With -o json it prints all
of it, the quote lint's warnings too, as one JSON object. A node not reached exits 3.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return exitWith(exitBadInput, fmt.Errorf("--output: %q is not text or json", output))
			}
			inv, err := inventory.Load(args[0])
			if err != nil {
				return err
			}
			ws := append(inventory.LintQuote(inv), phases.Unmeasured(inv)...)
			// The text fits the terminal: lines too wide wrap under
			// themselves (a table row that fits keeps its columns).
			var text *fitWriter
			out := cmd.OutOrStdout()
			if output == "text" {
				text = &fitWriter{w: out, width: summaryOptions(out, false).Width}
				defer text.Flush()
				out = text
			}
			if output == "json" && !connect {
				if err := printLintJSON(out, inv, ws); err != nil {
					return exitWith(exitCouldNotRun, err)
				}
			} else if output == "text" {
				printPlan(out, inv, phases.All())
				fmt.Fprintln(out)
				printLint(out, ws)
			}
			if connect {
				// -o json: one object, the lint's warnings in it.
				var asJSON *connectJSON
				if output == "json" {
					asJSON = &connectJSON{Warnings: ws}
				} else {
					fmt.Fprintln(out)
				}
				// Asked first: a credential that may not list nodes fails
				// the node_selector's expansion, and this says why.
				access := kubeAccess(contextOf(cmd), inv)
				expanded, err := inv.WithKubeNodes(contextOf(cmd))
				if err != nil {
					if asJSON == nil {
						printKubeAccess(out, inv, access)
					}
					return exitWith(exitCouldNotRun, err)
				}
				unreached, err := checkConnect(contextOf(cmd), out, cmd.ErrOrStderr(), expanded, phases.All(), asJSON, access)
				if err != nil {
					return exitWith(exitCouldNotRun, err)
				}
				if unreached > 0 {
					if inv.Slurm.Allocates() {
						return exitWith(exitCouldNotRun, fmt.Errorf("check --connect: the Slurm allocation could not be tried, would not be granted, "+
							"or its partition's limits would cut the window"))
					}
					return exitWith(exitCouldNotRun, fmt.Errorf("check --connect: %d of %d node(s) not reached or not answering", unreached, len(inv.Nodes)))
				}
			}
			if strictQuote && len(ws) > 0 {
				return exitWith(exitNotAccepted, fmt.Errorf("--strict-quote: the quote has %d warning(s)", len(ws)))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "what to print on stdout: text (the plan and the quote lint) or json (the quote lint; with --connect, the nodes too)")
	cmd.Flags().BoolVar(&strictQuote, "strict-quote", false, "exit 1 when the quote lint has any warning")
	cmd.Flags().BoolVar(&connect, "connect", false, "also reach every node, list its tools and their versions, and bound the window's length and cost")
	return cmd
}

// fitWriter writes whole lines, each too wide for width broken at spaces
// under its own indent.
type fitWriter struct {
	w       io.Writer
	width   int
	partial []byte
}

func (f *fitWriter) Write(p []byte) (int, error) {
	f.partial = append(f.partial, p...)
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(f.partial[:i])
		f.partial = f.partial[i+1:]
		if err := f.line(line); err != nil {
			return len(p), err
		}
	}
}

func (f *fitWriter) line(s string) error {
	width := f.width
	if width <= 0 {
		width = reports.DefaultWidth
	}
	indent := s[:len(s)-len(strings.TrimLeft(s, " "))] + "    "
	if len(indent) > width/2 {
		// A narrow terminal: a continuation that leaves room to advance.
		indent = strings.Repeat(" ", width/4)
	}
	r := []rune(s)
	for len(r) > width {
		// The last space that leaves the line in width (past the
		// indent), else a cut: the spacing of the rest is kept.
		cut := -1
		for i := width; i > len(indent); i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		next := cut + 1
		if cut < 0 {
			cut, next = width, width
		}
		if _, err := io.WriteString(f.w, strings.TrimRight(string(r[:cut]), " ")+"\n"); err != nil {
			return err
		}
		r = []rune(indent + strings.TrimLeft(string(r[next:]), " "))
	}
	_, err := io.WriteString(f.w, string(r)+"\n")
	return err
}

// Flush writes a last line without its newline.
func (f *fitWriter) Flush() {
	if len(f.partial) > 0 {
		f.line(string(f.partial))
		f.partial = nil
	}
}

// printLint prints the quote lint's warnings, one a line, ID first.
func printLint(w io.Writer, ws []inventory.Warning) {
	if len(ws) == 0 {
		fmt.Fprintln(w, "quote lint: no warnings")
		return
	}
	fmt.Fprintf(w, "quote lint: %d warning(s)\n", len(ws))
	for _, x := range ws {
		fmt.Fprintf(w, "  %s  %s\n", x.ID, x.Message)
	}
}

// printLintJSON prints which inventory was linted and its warnings ([]
// when there are none).
func printLintJSON(w io.Writer, inv *inventory.Inventory, ws []inventory.Warning) error {
	return writeJSON(w, lintOf(inv, ws))
}

// lintJSON is the quote lint as JSON (check -o json; check --connect -o
// json begins with it).
type lintJSON struct {
	Inventory string              `json:"inventory"`
	Digest    string              `json:"sha256"`
	Warnings  []inventory.Warning `json:"warnings"`
}

func lintOf(inv *inventory.Inventory, ws []inventory.Warning) lintJSON {
	return lintJSON{inv.Path, inv.Digest, nonNil(ws)}
}

// writeJSON writes v indented, as every JSON the check prints.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printPlan(w io.Writer, inv *inventory.Inventory, ps []orchestrator.Phase) {
	fmt.Fprintf(w, "inventory %s\n  sha256 %s\n", inv.Path, inv.Digest)
	sim := ""
	if inv.Simulated {
		sim = "  [SIMULATED]"
	}
	fmt.Fprintf(w, "provider %s, region %s, window %s%s\n\n", orDash(inv.Provider), orDash(inv.Region), orDash(inv.Window), sim)

	if cmdline := orchestrator.SlurmCommand(inv, ps); cmdline != "" {
		// No nodes named: they are the allocation's, known once granted.
		fmt.Fprintf(w, "nodes: the window's own Slurm allocation, asked for on the login node %s\n", inv.Slurm.Login.Address)
		fmt.Fprintf(w, "  %s\n", cmdline)
		fmt.Fprintf(w, "  granted within %s, or the window ends INCOMPLETE with squeue's reason; given back at its end\n",
			inv.Slurm.AllocateTimeout)
		way, steps := "at its NodeAddr through the login node as the SSH jump host", ""
		if inv.Transport == inventory.TransportSrun {
			way = "by srun steps of the job from the login node (no SSH to the nodes)"
			steps = "  a job step per command (slurm.steps: each)\n"
			if inv.Slurm.Steps != inventory.StepsEach {
				steps = "  the commands the nodes start together share one job step (slurm.steps: shared)\n"
			}
		}
		fmt.Fprintf(w, "  each node reached %s, %s\n%s\n", way, atATime(inv.FanOut()), steps)
	} else {
		printNodes(w, inv)
		if inv.Slurm.Enabled() && len(inv.Nodes) > 0 {
			// The window reads it (slurm_named.go): say so, and where.
			fmt.Fprintf(w, "slurm: each node's state and GRES as Slurm lists them (SLURM-002, SLURM-003),\n"+
				"  read on the login node %s at the window's start and end\n\n", inv.Slurm.Login.Address)
		}
	}

	q := inv.Quote
	nics := "NICs not stated"
	if q.NICsPerNode > 0 || q.NICGbps > 0 {
		nics = fmt.Sprintf("%d × %g Gb/s NICs", q.NICsPerNode, q.NICGbps)
	}
	fmt.Fprintf(w, "quote: %d × %s (%s, %g GiB) per node; fabric %s, %s\n",
		q.GPUsPerNode, orDash(q.GPUModel), orDash(q.FormFactor), q.GPUMemoryGiB, orDash(q.Fabric), nics)
	if q.Driver != "" || q.CUDA != "" {
		fmt.Fprintf(w, "       driver %s, CUDA %s\n", orDash(q.Driver), orDash(q.CUDA))
	}
	fmt.Fprintf(w, "acceptance: tolerance %.2f%s\n", inv.Acceptance.Tolerance, thresholds(inv.Acceptance.Thresholds))
	if line := idleGuardLine(inv); line != "" {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "phases:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, p := range ps {
		state := "runs"
		if p.Enabled != nil && !p.Enabled(inv) {
			state = "disabled"
		}
		var notes []string
		if p.Gating {
			notes = append(notes, "gating: a node that fails it is quarantined")
		}
		if p.Teardown {
			notes = append(notes, "always, also after an interrupt")
		}
		if p.Name == "diag" {
			notes = append(notes, fmt.Sprintf("dcgmi diag -r %d", max(inv.Phases.Diag.Level, 1)))
		}
		if p.Name == "burnin" && state == "runs" {
			notes = append(notes, phases.BurninPlan(inv))
		}
		fmt.Fprintf(tw, "  %d. %s\t%s\tdeadline %s\t%s\n", i+1, p.Name, state, orchestrator.PhaseDeadline(&p, inv), strings.Join(notes, "; "))
	}
	tw.Flush()
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func thresholds(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s %.2f", k, v))
	}
	sort.Strings(kv)
	return " (" + strings.Join(kv, ", ") + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// idleGuardLine says what the idle guard will do; "" when it is off.
func idleGuardLine(inv *inventory.Inventory) string {
	g := inv.Idle
	if !g.On() {
		return ""
	}
	s := fmt.Sprintf("idle guard: a node idle %s (every GPU under %g%%) while held for nothing is signalled", g.After, g.UtilPct)
	if g.Notify != "" {
		s += "\n    idle.notify: " + shownLine(g.Notify, 80)
	}
	if g.Action == inventory.IdleRelease {
		s += "\n    and released: torn down at once if quarantined, else before the next phase; billed to its release"
	}
	if g.ProviderCheck.Enabled {
		s += fmt.Sprintf("\n    provider check: one node held idle %s + %s grace (quote.terms.idle_shutdown_after)",
			inv.Quote.Terms.IdleShutdownAfter, g.ProviderCheck.Grace)
	}
	return s
}

// printNodes is the plan's table of nodes: those alike but for their
// names and addresses share a row, as a host range (a 1,000-node fleet
// is a few lines), then how they are reached.
func printNodes(w io.Writer, inv *inventory.Inventory) {
	type row struct {
		names, addrs []string
		port         int
		user, labels string
	}
	var rows []*row
	byKey := map[string]*row{}
	for _, n := range inv.Nodes {
		user := n.User
		if user == "" {
			user = inv.SSH.User
		}
		key := fmt.Sprintf("%d\x00%s\x00%s", n.Port, user, labels(n.Labels))
		r := byKey[key]
		if r == nil {
			r = &row{port: n.Port, user: orDash(user), labels: labels(n.Labels)}
			byKey[key] = r
			rows = append(rows, r)
		}
		r.names, r.addrs = append(r.names, n.Name), append(r.addrs, n.Address)
	}
	if len(inv.Nodes) == 0 && inv.Kubernetes.NodeSelector != "" {
		// Nothing to tabulate: the selector's nodes are the API's to say.
		fmt.Fprintf(w, "nodes: those kubernetes.node_selector %s finds when the window starts (check --connect lists them)\n",
			inv.Kubernetes.NodeSelector)
	} else {
		fmt.Fprintf(w, "%d node(s)\n", len(inv.Nodes))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "NODE\tADDRESS\tUSER\tLABELS\n")
		for _, r := range rows {
			addr := hostlist.Compress(r.addrs)
			if r.port != 0 {
				addr += fmt.Sprintf(" port %d", r.port)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", hostlist.Compress(r.names), addr, r.user, r.labels)
		}
		tw.Flush()
	}
	if len(inv.SSH.Jump) > 0 {
		fmt.Fprintf(w, "through jump host(s) %s\n", strings.Join(inv.SSH.Jump, " -> "))
	}
	pods := 0
	for _, n := range inv.Nodes {
		if inv.TransportOf(n) == inventory.TransportKubernetes {
			pods++
		}
	}
	switch {
	case len(inv.Nodes) == 1 && inv.Nodes[0].Local():
		// No SSH: known_hosts and the rest of ssh do not apply.
		fmt.Fprintf(w, "reached locally, without SSH: the machine gpuaccept runs on\n\n")
	case pods > 0 || inv.Kubernetes.NodeSelector != "":
		fmt.Fprintf(w, "%s\n", kubeReach(inv, pods))
		if pods < len(inv.Nodes) {
			fmt.Fprintf(w, "the others: known_hosts %s, accept-new %v\n", strings.Join(inv.SSH.KnownHosts, ", "), inv.SSH.AcceptNew)
		}
		fmt.Fprintf(w, "nodes %s\n\n", atATime(inv.FanOut()))
	default:
		fmt.Fprintf(w, "known_hosts %s, accept-new %v, nodes %s\n\n", strings.Join(inv.SSH.KnownHosts, ", "), inv.SSH.AcceptNew, atATime(inv.FanOut()))
	}
}

// kubeReach says how the plan reaches the pods nodes of inv that are a
// Kubernetes cluster's: the kubeconfig, the pods it makes and what it
// reads of the cluster, so the buyer sees what the window will create.
func kubeReach(inv *inventory.Inventory, pods int) string {
	k := inv.KubeConfig(inventory.Node{}, nil).WithDefaults()
	where := "kubeconfig " + cmp.Or(k.Kubeconfig, "from KUBECONFIG or ~/.kube/config")
	if k.Context != "" {
		where += ", context " + k.Context
	}
	where += ", namespace " + cmp.Or(k.Namespace, "the context's")
	sel := ""
	n := fmt.Sprintf("%d node(s)", pods)
	switch {
	case pods > 0 && inv.Kubernetes.NodeSelector != "":
		sel = "; more nodes from node_selector " + inv.Kubernetes.NodeSelector + " when the window starts"
	case pods == 0 && len(inv.Nodes) > 0:
		// The table lists the inventory's other nodes only.
		n = "the nodes node_selector " + inv.Kubernetes.NodeSelector + " finds when the window starts"
	case pods == 0:
		n = "the nodes" // said above the table
	}
	var vols []string
	for _, v := range k.Volumes {
		from := "host_path " + v.HostPath
		if v.Claim != "" {
			from = "claim " + v.Claim
		}
		if v.ReadOnly {
			from += ", read-only"
		}
		vols = append(vols, fmt.Sprintf("%s (%s)", v.MountPath, from))
	}
	mounts := ""
	if len(vols) > 0 {
		mounts = ", mounting " + strings.Join(vols, ", ")
	}
	return fmt.Sprintf("%s through the Kubernetes API (%s)%s: one pod each of %s asking for %d %s%s, "+
		"deleted at the window's end; KUBE-001..003 from the API", n, where, sel, inv.Image.Reference, k.GPUs, k.GPUResource, mounts)
}

// atATime says how many nodes the window works on at once (0: all).
func atATime(n int) string {
	if n <= 0 {
		return "all at once"
	}
	return fmt.Sprintf("%d at a time", n)
}
