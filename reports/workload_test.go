package reports

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
)

var workloadCases = []struct {
	name string
	run  func() *record.Run
}{
	{"inference", inferenceRun},
	{"training", trainingRun},
}

// The load test's windows at 4 nodes: run.json as the phases record it
// (kept in testdata for other tools to read), the summary and report.md
// held to goldens, the summary within 100 columns.
func TestWorkloadGolden(t *testing.T) {
	for _, c := range workloadCases {
		t.Run(c.name, func(t *testing.T) {
			run := c.run()
			js, err := json.MarshalIndent(run, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".run.json", append(js, '\n'))
			s := summaryOf(t, run, SummaryOptions{})
			golden(t, c.name+".summary.txt", []byte(s))
			fits(t, c.name, s, DefaultWidth)
			var md bytes.Buffer
			if err := Markdown(&md, run); err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".report.md", md.Bytes())
			// The fixture reads back as gpuaccept diff and compare read it.
			back, _, err := LoadRun(filepath.Join("testdata", c.name+".run.json"))
			if err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if err := Markdown(&again, back); err != nil {
				t.Fatal(err)
			}
			if again.String() != md.String() {
				t.Error("the run.json fixture renders otherwise than the run it was written from")
			}
		})
	}
}

// The card's load-test row says the figure that decided it: the node
// whose tail failed its target, or the straggler; never PASS over the
// figures measured without a target.
func TestCardLoadRow(t *testing.T) {
	row := cardRowOf(t, inferenceRun(), record.CardLoad)
	if row.Status != string(record.Fail) || !strings.Contains(row.Figure, "WORK-002 gpu-03: p95 TTFT") ||
		!strings.Contains(row.Figure, "needs ≤ 800 ms at p95, concurrency:32") {
		t.Errorf("inference: %s %q", row.Status, row.Figure)
	}
	row = cardRowOf(t, trainingRun(), record.CardLoad)
	if row.Status != string(record.Fail) || !strings.Contains(row.Figure, "WORK-009 gpu-04") {
		t.Errorf("training: %s %q", row.Status, row.Figure)
	}
	// Every target met, but no throughput target: not a PASS.
	run := trainingRun()
	for i, v := range run.Verdicts {
		if v.ID == "WORK-009" && v.Status == record.Fail {
			run.Verdicts[i].Status = record.Pass
		}
	}
	row = cardRowOf(t, run, record.CardLoad)
	if row.Status != cardPartly || !strings.Contains(row.Figure, "not judged: WORK-008") {
		t.Errorf("training without a throughput target: %s %q", row.Status, row.Figure)
	}
	// And with every target met and set: the worst tail against its target.
	run = inferenceRun()
	run.Verdicts = slicesFilter(run.Verdicts, func(v record.Verdict) bool { return v.Status != record.Skip })
	for i := range run.Verdicts {
		run.Verdicts[i].Status = record.Pass
	}
	row = cardRowOf(t, run, record.CardLoad)
	if row.Status != string(record.Pass) || !strings.HasPrefix(row.Figure, "WORK-002 worst gpu-03: p95 TTFT") {
		t.Errorf("all passed: %s %q", row.Status, row.Figure)
	}
}

func slicesFilter[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// report.html of each kind: its tables, the request logs linked, the
// charts of the load test, escaped node text.
func TestWorkloadHTML(t *testing.T) {
	for _, c := range []struct {
		run  *record.Run
		want []string
	}{
		{inferenceRun(), []string{`<table id="inference">`, `<table id="sweep">`, `<table id="latency">`, `id="chart-ttft-cdf"`,
			`id="chart-tokens"`, `<a href="raw/gpu-03/workload-requests-0.jsonl.gz">`, "target ≤ 800 ms at p95, concurrency:32",
			"run 1 failed (901 ms), run 2 failed (858 ms): failed on every retest", `<h2 id="retested">Passed on a retest</h2>`}},
		{trainingRun(), []string{`<table id="training">`, `id="chart-steps"`, "gpu-04 (straggler)", "1.36: straggler (&gt; 1.1)"}},
	} {
		var b bytes.Buffer
		if err := HTML(&b, c.run, nil); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: the page has no %q", c.run.ID, w)
			}
		}
		if strings.Contains(b.String(), "<script") {
			t.Errorf("%s: a script in the page", c.run.ID)
		}
	}
}

// At 1,000 nodes the load test reads in a screen: the summary within 100
// columns and 50 lines, report.md's tables the worst nodes and a line on
// the spread, report.html bounded with every chart.
func TestWorkloadAtAThousandNodes(t *testing.T) {
	for _, kind := range []string{"inference", "training"} {
		t.Run(kind, func(t *testing.T) {
			run := fleet{n: 1000, interQuoted: 370, workload: kind, workSlow: []int{16, 711}}.run()
			s := summaryOf(t, run, SummaryOptions{})
			golden(t, "summary-1000-"+kind+".txt", []byte(s))
			fits(t, kind, s, DefaultWidth)
			if n := strings.Count(s, "\n"); n >= 50 {
				t.Errorf("%d lines:\n%s", n, s)
			}
			var md, page bytes.Buffer
			if err := Markdown(&md, run); err != nil {
				t.Fatal(err)
			}
			if err := HTML(&page, run, nil); err != nil {
				t.Fatal(err)
			}
			section := md.String()[strings.Index(md.String(), "## Load test"):]
			section = section[:strings.Index(section, "\n## Nodes")]
			if rows := strings.Count(section, "\n| gpu-"); rows > workloadWorst {
				t.Errorf("%d node rows in the load test's tables:\n%s", rows, section)
			}
			want := map[string][]string{
				"inference": {"The 10 servers with the worst judged TTFT of 1000", "p95 TTFT at the judged level, servers over 1000: median",
					"(gpu-0017)", `id="chart-ttft-cdf"`, "The 12 servers with the worst judged TTFT of 1000", `id="chart-tokens"`,
					"Over 1000 servers: the median and the lowest"},
				"training": {"The 10 nodes with the slowest median step of 1000", "Median step, nodes over 1000: median", "Straggler: gpu-0712",
					`id="chart-steps"`, "the 32 slowest of 1000 nodes"},
			}[kind]
			for _, w := range want {
				if !strings.Contains(section, w) && !strings.Contains(page.String(), w) {
					t.Errorf("neither report.md nor report.html says %q", w)
				}
			}
			if page.Len() > 4<<20 {
				t.Errorf("report.html is %d bytes", page.Len())
			}
			t.Logf("report.md %d bytes, report.html %d bytes", md.Len(), page.Len())
		})
	}
}

// setInference rewrites node's inference evidence with f.
func setInference(t *testing.T, run *record.Run, node string, f func(*workload.Inference)) {
	t.Helper()
	for i, p := range run.Phases {
		if p.Phase == inferencePhase && p.Node == node {
			var in workload.Inference
			if err := json.Unmarshal(p.Data, &in); err != nil {
				t.Fatal(err)
			}
			f(&in)
			run.Phases[i].Data = []byte(mustJSON(in))
			return
		}
	}
	t.Fatalf("no inference result of %s", node)
}

// A driver upgrade that moved gpu-01's p99 TTFT by 20 % is a regression,
// a 1 ms move of a small latency is not, and the all-reduce latency is
// compared in µs.
func TestDiffWorkload(t *testing.T) {
	base, cand := inferenceRun(), inferenceRun()
	setInference(t, cand, "gpu-01", func(in *workload.Inference) {
		top := &in.Servers[0].Levels[len(in.Servers[0].Levels)-1]
		top.TTFT.P99 *= 1.2
	})
	setInference(t, base, "gpu-02", func(in *workload.Inference) {
		top := &in.Servers[0].Levels[len(in.Servers[0].Levels)-1]
		top.ITL.P99 = 5
	})
	setInference(t, cand, "gpu-02", func(in *workload.Inference) {
		top := &in.Servers[0].Levels[len(in.Servers[0].Levels)-1]
		top.ITL.P99 = 6
	})
	for i, v := range cand.Verdicts {
		if v.ID == "NCCL-006" {
			cand.Verdicts[i].Value = f64(22.4 * 1.3)
		}
	}
	d := Compare(base, cand)
	regs := strings.Join(d.Regressions, "\n")
	for _, want := range []string{"WORK-002 p99 TTFT at concurrency:32 gpu-01: 593.5 → 712.2 ms (+20.0%", "NCCL-006 cluster: 22.4 → 29.12 µs"} {
		if !strings.Contains(regs, want) {
			t.Errorf("no regression %q in\n%s", want, regs)
		}
	}
	if strings.Contains(regs, "gpu-02") {
		t.Errorf("a 1 ms move of ITL is a regression:\n%s", regs)
	}
	found := false
	for _, m := range d.Metrics {
		if m.ID == "WORK-003" && m.Node == "gpu-02" && m.Figure == "p99 ITL at concurrency:32" {
			found = m.Change == ChangeWorse && strings.Contains(m.Note, "under the 2 ms")
		}
	}
	if !found {
		t.Error("gpu-02's p99 ITL is not compared as worse within the floor")
	}
	var b bytes.Buffer
	if err := DiffText(&b, d, false); err != nil {
		t.Fatal(err)
	}
	fits(t, "diff", b.String(), 160)
}

// compare sets two providers' load tests side by side: each row the
// worst node's figure in its unit, the all-reduce latency in µs, within
// 100 columns.
func TestCompareWorkload(t *testing.T) {
	a, b := inferenceRun(), inferenceRun()
	b.Provider, b.ID = "vendor-b", "20261205T090000Z-vendor-b-inference"
	for i, v := range b.Verdicts {
		if v.ID == "WORK-002" && v.Node == "gpu-03" {
			b.Verdicts[i].Status, b.Verdicts[i].Value, b.Verdicts[i].Measured = record.Pass, f64(612), "p95 TTFT 612 ms"
		}
	}
	c := CompareRuns([]*record.Run{a, b})
	var out bytes.Buffer
	if err := CompareText(&out, c, false, DefaultWidth); err != nil {
		t.Fatal(err)
	}
	fits(t, "compare", out.String(), DefaultWidth)
	plain := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"WORK-002", "858 ms", "612 ms", "NCCL-006", "22.4 µs"} {
		if !strings.Contains(plain, want) {
			t.Errorf("compare does not say %q:\n%s", want, out.String())
		}
	}
}

// The request logs the inference phase leaves under raw/<node>/ are
// evidence like the phases' logs: the manifest lists each with its sum,
// verify checks them, compression leaves them as they are, and
// report.html links them.
func TestRequestLogsInTheBundle(t *testing.T) {
	dir := t.TempDir()
	run := inferenceRun()
	for _, n := range run.Nodes {
		p := filepath.Join(dir, "raw", n.Name, "workload-requests-0.jsonl.gz")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		fmt.Fprintf(zw, `{"level":"concurrency:32","start_s":0.1,"input_tokens":512,"output_tokens":128,"ttft_ms":201,"e2el_ms":2480,"tpot_ms":18}`+"\n")
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLName))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range run.Nodes {
		rel := "raw/" + n.Name + "/workload-requests-0.jsonl.gz"
		if !strings.Contains(string(manifest), "  "+rel+"\n") {
			t.Errorf("the manifest does not list %s:\n%s", rel, manifest)
		}
		if !strings.Contains(string(page), `<a href="`+rel+`">`) {
			t.Errorf("report.html does not link %s", rel)
		}
	}
	if problems, err := Verify(dir); err != nil || len(problems) > 0 {
		t.Fatalf("verify: %v %v", problems, err)
	}
	// A request log changed after the bundle was written is named.
	p := filepath.Join(dir, "raw", "gpu-03", "workload-requests-0.jsonl.gz")
	if err := os.WriteFile(p, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, err := Verify(dir)
	if err != nil || !strings.Contains(fmt.Sprint(problems), "gpu-03/workload-requests-0.jsonl.gz") {
		t.Errorf("an edited request log: %v %v", problems, err)
	}
}

// A server that never got ready shows why in its row, and what a node
// said reaches neither report unescaped.
func TestWorkloadServerNotReady(t *testing.T) {
	run := inferenceRun()
	setInference(t, run, "gpu-04", func(in *workload.Inference) {
		in.Servers[0].Levels = nil
		in.Servers[0].ReadySecs = nil
		in.Servers[0].Error = "not ready after 10m0s | <script>alert(1)</script> [x](http://evil.example)"
	})
	var md, page bytes.Buffer
	if err := Markdown(&md, run); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, run, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), `not ready after 10m0s \| \<script\>alert(1)\</script\> \[x\](http://evil.example)`) {
		t.Errorf("report.md does not say why gpu-04's server has no figures, escaped:\n%s", md.String())
	}
	if strings.Contains(page.String(), "<script>") || !strings.Contains(page.String(), "not ready after 10m0s | &lt;script&gt;") {
		t.Error("report.html does not say why gpu-04's server has no figures, escaped")
	}
	// The worst first past fleetRows: a server without figures is the
	// worst news.
	if w := worstInference(inferenceOf(run)); w[0].Node != "gpu-04" {
		t.Errorf("worst first: %s", w[0].Node)
	}
}

// The inference judge's cluster line (the worst node named in its
// detail) does not take the row from the node it names.
func TestClusterLineNamesTheNode(t *testing.T) {
	run := inferenceRun()
	v := record.NewVerdict("WORK-002", "")
	v.Status, v.Measured, v.Quoted, v.Detail = record.Fail, "p95 TTFT 858 ms", "≤ 800 ms at p95, concurrency:32", "worst node: gpu-03"
	for _, x := range run.Verdicts {
		if x.ID == "WORK-002" && x.Node == "gpu-03" {
			v.Value, v.Unit = x.Value, x.Unit
		}
	}
	run.Verdicts = append(run.Verdicts, v)
	if row := cardRowOf(t, run, record.CardLoad); !strings.HasPrefix(row.Figure, "WORK-002 gpu-03: p95 TTFT 858 ms") {
		t.Errorf("card: %q", row.Figure)
	}
	if s := summaryOf(t, run, SummaryOptions{}); !strings.Contains(s, "gpu-03: p95 TTFT 858 ms\n") {
		t.Errorf("summary:\n%s", s)
	}
}

// A training job that logged no step says why, and draws no chart.
func TestTrainingWithoutSteps(t *testing.T) {
	run := trainingRun()
	run.Phases[0].Data = []byte(mustJSON(workload.Training{Command: "torchrun ...", Error: "rendezvous timed out after 5m0s"}))
	var md bytes.Buffer
	if err := Markdown(&md, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No node logged a step.", "The job: rendezvous timed out after 5m0s"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md does not say %q", want)
		}
	}
	if c, err := stepChart(run); c != nil || err != nil {
		t.Errorf("a step chart of no steps: %v", err)
	}
}
