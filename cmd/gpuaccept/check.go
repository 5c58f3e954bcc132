package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
)

func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check INVENTORY",
		Short: "Validate an inventory and print the plan of the window",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := inventory.Load(args[0])
			if err != nil {
				return err
			}
			printPlan(cmd.OutOrStdout(), inv, phases.All())
			return nil
		},
	}
}

func printPlan(w io.Writer, inv *inventory.Inventory, ps []orchestrator.Phase) {
	fmt.Fprintf(w, "inventory %s (sha256 %s)\n", inv.Path, inv.Digest)
	sim := ""
	if inv.Simulated {
		sim = "  [SIMULATED]"
	}
	fmt.Fprintf(w, "provider %s, region %s, window %s%s\n\n", orDash(inv.Provider), orDash(inv.Region), orDash(inv.Window), sim)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NODE\tADDRESS\tUSER\tLABELS\n")
	for _, n := range inv.Nodes {
		user := n.User
		if user == "" {
			user = inv.SSH.User
		}
		addr := n.Address
		if n.Port != 0 {
			addr = fmt.Sprintf("%s:%d", n.Address, n.Port)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, addr, orDash(user), labels(n.Labels))
	}
	tw.Flush()
	if len(inv.SSH.Jump) > 0 {
		fmt.Fprintf(w, "through jump host(s) %s\n", strings.Join(inv.SSH.Jump, " -> "))
	}
	fmt.Fprintf(w, "known_hosts %s, accept-new %v, %d nodes at a time\n\n", strings.Join(inv.SSH.KnownHosts, ", "), inv.SSH.AcceptNew, inv.SSH.Concurrency)

	q := inv.Quote
	fmt.Fprintf(w, "quote: %d × %s (%s, %g GiB) per node; fabric %s, %d × %g Gb/s NICs\n",
		q.GPUsPerNode, orDash(q.GPUModel), orDash(q.FormFactor), q.GPUMemoryGiB, orDash(q.Fabric), q.NICsPerNode, q.NICGbps)
	if q.Driver != "" || q.CUDA != "" {
		fmt.Fprintf(w, "       driver %s, CUDA %s\n", orDash(q.Driver), orDash(q.CUDA))
	}
	fmt.Fprintf(w, "acceptance: tolerance %.2f%s\n\n", inv.Acceptance.Tolerance, thresholds(inv.Acceptance.Thresholds))

	fmt.Fprintln(w, "phases:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
