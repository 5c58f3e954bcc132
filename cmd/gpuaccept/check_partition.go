package main

import (
	"fmt"
	"io"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// printPartition is check --connect's word on the partition the window's
// job would run in: its limits against what the window asks, and each
// limit that would cut the window (SLURM-004 would FAIL it), or why the
// limits could not be read. Nothing when the login node was not reached.
func printPartition(w io.Writer, p *record.SlurmPartition) {
	if p == nil {
		return
	}
	if p.ReadError != "" {
		fmt.Fprintf(w, "the partition's limits: NOT MEASURED\n  %s\n\n", clip(shown(p.ReadError), 96))
		return
	}
	fmt.Fprintf(w, "the %s\n  the window asks %s\n", clip(shown(orchestrator.PartitionSummary(p)), 94), orchestrator.AskedText(p))
	for _, c := range p.Cuts {
		fmt.Fprintf(w, "  cuts the window: %s\n", clip(shown(c), 80))
	}
	for _, u := range p.Unread {
		fmt.Fprintf(w, "  not read: %s\n", clip(shown(u), 88))
	}
	fmt.Fprintln(w)
}
