package reports

import (
	"fmt"
	"strings"
	"testing"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
)

// slurmVerdicts are a window's verdicts on its own allocation as the
// window words them: the partition's MaxTime and MaxNodes would cut it,
// one node's GRES type names another GPU, one lacks a feature asked for.
func slurmVerdicts(nodes []record.Node) []record.Verdict {
	v := func(id, node string, s record.Status, measured, detail string) record.Verdict {
		x := record.NewVerdict(id, node)
		x.Status, x.Measured, x.Detail = s, measured, detail
		return x
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	out := []record.Verdict{
		v("SLURM-001", "", record.Pass, fmt.Sprintf("job 4242: %s, %d node(s)", hostlist.Compress(names), len(nodes)), "granted after 3s"),
		v("SLURM-004", "", record.Pass, "partition gpu: UP, MaxTime 01:00:00, MaxNodes 2, TotalNodes 64",
			"Slurm granted the job past the limits read (a QOS or the site lifts them): MaxTime 01:00:00 (1h) is shorter "+
				"than the 4h46m the window asks for; MaxNodes 2: at most 2 node(s) a job, not the 4 the window asks for"),
	}
	for i, n := range nodes {
		gres := v("SLURM-003", n.Name, record.Pass, "GRES gpu:h100:8(S:0-1): 8 GPU(s)",
			"as quoted and as nvidia-smi saw; its GRES type names the model's GPU")
		feat := v("SLURM-005", n.Name, record.Pass, "h100,ib,nvlink", "has the features asked for")
		if i == 1 {
			gres = v("SLURM-003", n.Name, record.Fail, "GRES gpu:a100:8: 8 GPU(s)",
				"Slurm schedules 8; its GRES type a100 is not the quote's NVIDIA H100 80GB HBM3, its GRES type a100 is not "+
					"nvidia-smi's NVIDIA H100 80GB HBM3")
			feat = v("SLURM-005", n.Name, record.Fail, "h100", "lacks ib (slurm.allocate.constraint h100&ib)")
		}
		out = append(out, v("SLURM-002", n.Name, record.Pass, "ALLOCATED", "in service when granted and at the window's end"), gres, feat)
	}
	return out
}

// The summary of a window in its own Slurm allocation that Slurm granted
// past its partition's limits (SLURM-004 passes, saying so), with one
// node's GRES type naming another GPU (SLURM-003) and lacking a feature
// asked for (SLURM-005): those are named, held to a golden, and fit every
// width from 60 to 160 columns.
func TestSummaryOfASlurmWindow(t *testing.T) {
	run := fleet{n: 4, interQuoted: 370}.run()
	run.Verdicts = append(run.Verdicts, slurmVerdicts(run.Nodes)...)
	if got := run.Result(); got.Outcome != record.OutcomeNotAccepted || !strings.Contains(strings.Join(got.Failed, " "), "SLURM-003") ||
		strings.Contains(strings.Join(got.Failed, " "), "SLURM-004") {
		t.Fatalf("result %+v", got)
	}
	s := summaryOf(t, run, SummaryOptions{})
	golden(t, "summary-4-slurm.txt", []byte(s))
	fits(t, "slurm", s, DefaultWidth)
	flat := strings.Join(strings.Fields(s), " ")
	for _, want := range []string{"its GRES type a100 is not the quote's",
		"lacks ib (slurm.allocate.constraint h100&ib)"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the summary does not say %q:\n%s", want, s)
		}
	}
	for w := 60; w <= 160; w += 7 {
		fits(t, fmt.Sprintf("slurm at %d", w), summaryOf(t, run, SummaryOptions{Width: w}), w)
	}
}

// The HTML and Markdown reports' node tables show each node of a Slurm allocation as
// Slurm showed it (state, and the state at the window's end where it
// changed; GRES; features) beside preflight's facts, the node's words
// escaped; without an allocation it has no Slurm column.
func TestHTMLShowsSlurmFacts(t *testing.T) {
	run := fleet{n: 2, interQuoted: 370}.run()
	var plain strings.Builder
	if err := HTML(&plain, run, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "<th>Slurm</th>") {
		t.Error("a window without an allocation has a Slurm column")
	}
	run.Slurm = &record.SlurmAllocation{JobID: "4242", Nodes: []record.SlurmNode{
		{Name: run.Nodes[0].Name, State: "ALLOCATED", GRES: "gpu:h100:8(S:0-1)", Features: "h100,ib"},
		{Name: run.Nodes[1].Name, State: "ALLOCATED", StateAtEnd: "ALLOCATED+DRAIN", Features: "<b>x</b>"},
	}}
	var b strings.Builder
	if err := HTML(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<th>Slurm</th>", "<td>ALLOCATED; GRES gpu:h100:8(S:0-1); features h100,ib</td>",
		"<td>ALLOCATED → ALLOCATED&#43;DRAIN; GRES none; features &lt;b&gt;x&lt;/b&gt;</td>"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in the node table", want)
		}
	}
	var md strings.Builder
	if err := Markdown(&md, run); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(md.String()), " ")
	for _, want := range []string{"| Node | Address | Quarantined | Reason | Slurm |",
		"| ALLOCATED → ALLOCATED+DRAIN; GRES none; features \\<b\\>x\\</b\\> |"} {
		if !strings.Contains(flat, want) {
			t.Errorf("no %q in the Markdown node table", want)
		}
	}
}
