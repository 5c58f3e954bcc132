package reports

import (
	"bytes"
	"fmt"

	"gpuaccept/orchestrator/record"
)

// mdWorkload writes the load test's sections of report.md: the inference
// servers at their judged level, the level sweep, the training job per
// node, and the all-reduce latency; nothing for a run that has none.
func mdWorkload(b *bytes.Buffer, run *record.Run) error {
	w := newWorkloadView(run)
	if w.empty() {
		return nil
	}
	if len(w.Inference) > 0 {
		b.WriteString("\n## Load test: inference\n\n")
		b.WriteString("Each server at the level its targets were judged at, measured from the node itself " +
			"(TTFT: time to first token, TPOT: time per output token, ITL: inter-token latency, E2EL: " +
			"end-to-end; as vLLM's bench serve names them).\n\n")
		rows := escapeAll(w.Inference)
		for i, p := range w.Logs {
			if p != "" {
				rows[i][len(rows[i])-1] = logLink(p)
			}
		}
		if err := mdTable(b, w.InferenceHeader, rows, ""); err != nil {
			return err
		}
		for _, n := range w.InferenceNote {
			fmt.Fprintf(b, "\n%s\n", md(n))
		}
	}
	if len(w.Sweep) > 0 {
		b.WriteString("\n### Level sweep\n\nThroughput against load, over every server that ran the level.\n\n")
		if err := mdTable(b, w.SweepHeader, escapeAll(w.Sweep), ""); err != nil {
			return err
		}
	}
	if len(w.Training) > 0 || len(w.TrainingNote) > 0 {
		b.WriteString("\n## Load test: training\n\n")
		if err := mdTable(b, w.TrainingHeader, escapeAll(w.Training), "No node logged a step."); err != nil {
			return err
		}
		for _, n := range w.TrainingNote {
			fmt.Fprintf(b, "\n%s\n", md(n))
		}
	}
	if len(w.Compute) > 0 {
		b.WriteString("\n## Burn-in: compute rate\n\n")
		if err := mdTable(b, w.ComputeHeader, escapeAll(w.Compute), ""); err != nil {
			return err
		}
		for _, n := range w.ComputeNote {
			fmt.Fprintf(b, "\n%s\n", md(n))
		}
	}
	if len(w.BurnLoads) > 0 {
		b.WriteString("\n## Burn-in: collective and stress per iteration\n\n")
		if err := mdTable(b, w.BurnLoadsHeader, escapeAll(w.BurnLoads), ""); err != nil {
			return err
		}
		for _, n := range w.BurnLoadsNote {
			fmt.Fprintf(b, "\n%s\n", md(n))
		}
	}
	if len(w.Latency) > 0 {
		b.WriteString("\n## All-reduce latency\n\nSmall messages (8 B to 64 KiB), against the quoted latency.\n\n")
		if err := mdTable(b, w.LatencyHeader, escapeAll(w.Latency), ""); err != nil {
			return err
		}
	}
	return nil
}
