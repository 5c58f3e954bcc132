package reports

import (
	"fmt"
	"html/template"
	"io"
	"strings"

	"gpuaccept/orchestrator/record"
)

// EvidenceFile is one file of the bundle, listed in the HTML report with
// its checksum.
type EvidenceFile struct {
	Path   string
	SHA256 string
	Bytes  int64
}

// HTML writes the run as one self-contained page (no script, no external
// file: it opens offline and prints as it shows): the verdicts with their
// requirement IDs, the nodes and their facts, the charts (SVG drawn with
// gonum/plot), the telemetry of every node over the window (read from
// bf.Dir's raw/<node>/telemetry.txt.gz), the pairwise bisection matrix,
// the failure test's timeline and the evidence with checksums (nil: see
// MANIFEST.sha256).
func HTML(w io.Writer, run *record.Run, bf *BundleFacts) error {
	if run == nil {
		return fmt.Errorf("html: nil run")
	}
	page := htmlPage{Run: run, Result: result(run), Bisect: bisection(run), Nodes0: nodeCounts(run),
		Card: card(run), Quote: quoteRows(run), Lint: run.Lint, LintKnown: LintRecorded(run),
		Matrix: nodeMatrix(run), Signoff: signoffLines(run, bf), Outcome: run.Result().Outcome, Selection: selectionText(run)}
	if bf != nil {
		page.Evidence, page.Raw = evidenceRows(bf.Evidence)
	}
	for _, g := range reasons(run, record.Fail) {
		page.Failed = append(page.Failed, g.line())
	}
	for _, g := range reasons(run, record.Warn) {
		page.Warned = append(page.Warned, g.line())
	}
	page.Missing = run.Result().Incomplete
	page.Retested = retestedLines(run)
	for _, r := range requirements(run) {
		page.Reqs = append(page.Reqs, htmlReq{requirement: r, Anchor: reqAnchor(r.ID), Held: r.Worst.Rule(),
			Worst: r.worstText(), Passed: r.passedText(), Class: statusClass(r.Status)})
	}
	for _, g := range groupedVerdicts(run) {
		page.Verdicts = append(page.Verdicts, htmlVerdict{Verdict: g.Verdict, NodeLabel: g.Nodes,
			Ratio: decimal(g.Ratio), Tolerance: decimal(g.Tolerance), Class: strings.ToLower(string(g.Status))})
	}
	slurmOf := slurmFacts(run)
	page.Slurm = slurmOf != nil
	for _, n := range run.Nodes {
		row := htmlNode{Node: n, Slurm: slurmOf[n.Name]}
		var f struct {
			GPUModel string `json:"gpu_model"`
			GPUCount int    `json:"gpu_count"`
			Driver   string `json:"driver"`
			CUDA     string `json:"cuda"`
			Kernel   string `json:"kernel"`
			OS       string `json:"os"`
		}
		if hasData(run, record.FactsPhase, n.Name, &f) {
			if f.GPUCount > 0 {
				row.GPUs = fmt.Sprintf("%d × %s", f.GPUCount, f.GPUModel)
			}
			row.Driver, row.CUDA, row.Kernel, row.OS = f.Driver, f.CUDA, f.Kernel, f.OS
		}
		page.Nodes = append(page.Nodes, row)
	}
	for _, mk := range []func(*record.Run) (*chart, error){busbwChart, intraChart, ioChart, failureChart,
		ttftCDFChart, tokensChart, stepChart} {
		c, err := mk(run)
		if err != nil {
			return fmt.Errorf("html: %w", err)
		}
		if c != nil {
			page.Charts = append(page.Charts, htmlChart{chart: *c, SVG: template.HTML(c.SVG)})
		}
	}
	if bf != nil {
		tcs, err := telemetryCharts(run, bf.Dir)
		if err != nil {
			return fmt.Errorf("html: telemetry: %w", err)
		}
		for _, c := range tcs {
			page.Telemetry = append(page.Telemetry, htmlChart{chart: *c, SVG: template.HTML(c.SVG)})
		}
	}
	page.Cost = newHTMLCost(run.Ledger)
	page.Billing = newHTMLBilling(run)
	page.Workload = newHTMLWorkload(run)
	var fd struct {
		Timeline string `json:"timeline"`
	}
	if hasData(run, "failure", "", &fd) {
		page.Timeline = strings.TrimRight(fd.Timeline, "\n")
	}
	return htmlTemplate.Execute(w, page)
}

type htmlPage struct {
	Run                     *record.Run
	Result, Outcome, Nodes0 string
	Selection               string
	Card                    []cardRow
	Failed, Missing, Warned []string
	Retested                []string
	Quote                   [][]string
	Lint                    []record.Finding
	LintKnown               bool
	Matrix                  matrix
	Signoff                 []string
	Reqs                    []htmlReq
	Verdicts                []htmlVerdict
	Nodes                   []htmlNode
	Slurm                   bool // the nodes are a Slurm allocation's: their Slurm facts shown
	Charts                  []htmlChart
	Telemetry               []htmlChart
	Bisect                  *bisectMatrix
	Timeline                string
	Evidence                []EvidenceFile
	Raw                     rawSummary
	Cost                    *htmlCost
	Billing                 *htmlBilling
	Workload                *htmlWorkload
}

// htmlCost is the ledger's tables, as report.md has them.
type htmlCost struct {
	Intro, PerUnit                         string
	NodeHeader, ComponentHeader, TCOHeader []string
	Nodes                                  []htmlCostNode
	Components, TCO                        [][]string
}

type htmlCostNode struct {
	Cells    []string
	Accepted bool
}

func newHTMLCost(l *record.Ledger) *htmlCost {
	if l == nil {
		return nil
	}
	c := &htmlCost{Intro: costIntro(l), PerUnit: costPerUnit(l), NodeHeader: costNodeHeader(l),
		ComponentHeader: costComponentHeader(l), Components: costCells(costComponentRows(l))}
	for i, row := range costCells(costNodeRows(l)) {
		c.Nodes = append(c.Nodes, htmlCostNode{Cells: row, Accepted: l.Nodes[i].Accepted})
	}
	if l.TCO != nil {
		c.TCOHeader, c.TCO = costTCOHeader(l), costCells(costTCORows(l.TCO))
	}
	return c
}

type htmlReq struct {
	requirement
	Anchor, Held, Worst, Passed, Class string
}

// statusClass is the CSS class of a status ("not-run" for NOT RUN).
func statusClass(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "-")) }

// rawSummary is the raw logs of the bundle in one row: a 1,000-node
// bundle has some fifteen thousand, each listed with its sha256 in
// MANIFEST.sha256, which verify checks.
type rawSummary struct {
	Files, Nodes int
	Bytes        int64
}

// evidenceRows splits the bundle's files into those the page lists one by
// one and the raw logs it sums up.
func evidenceRows(files []EvidenceFile) ([]EvidenceFile, rawSummary) {
	var top []EvidenceFile
	var raw rawSummary
	nodes := map[string]bool{}
	for _, f := range files {
		rest, ok := strings.CutPrefix(f.Path, "raw/")
		if !ok {
			top = append(top, f)
			continue
		}
		raw.Files++
		raw.Bytes += f.Bytes
		node, _, _ := strings.Cut(rest, "/")
		nodes[node] = true
	}
	raw.Nodes = len(nodes)
	return top, raw
}

type htmlVerdict struct {
	record.Verdict
	NodeLabel, Ratio, Tolerance, Class string
}

type htmlNode struct {
	record.Node
	GPUs, Driver, CUDA, Kernel, OS string
	// Slurm: the node as Slurm showed it at the grant (state, GRES,
	// features), beside what preflight found on it.
	Slurm string
}

type htmlChart struct {
	chart
	SVG template.HTML
}

var htmlTemplate = template.Must(template.Must(template.New("report").Funcs(template.FuncMap{
	"stamp":  stamp,
	"class":  statusClass,
	"anchor": reqAnchor,
	"first":  firstReasons,
	"more":   moreReasons,
}).Parse(htmlWorkloadTemplate)).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Acceptance report {{.Run.ID}}{{if .Run.Simulated}} (SIMULATED){{end}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; line-height: 1.35; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.45em; text-align: left; vertical-align: top; overflow-wrap: normal; word-break: normal; hyphens: none; }
th { background: #f4f4f4; }
td.id, td.node, td.status, th.node { white-space: nowrap; }
.pass { background: #e3f5e1; } .fail { background: #fbe0e0; } .warn, .incomplete, .partly-judged { background: #fff3cd; } .skip, .not-run { color: #666; } .recorded { background: #e8f0fb; }
.banner { background: #fff3cd; border: 2px solid #e0a800; padding: 0.6em 1em; font-weight: bold; }
.result { font-size: 1.3em; font-weight: bold; padding: 0.4em 0.6em; border: 2px solid #999; }
.result.ACCEPTED { border-color: #2e8b57; background: #e3f5e1; } .result.NOT { border-color: #c81e1e; background: #fbe0e0; } .result.INCOMPLETE, .result.INTERRUPTED { border-color: #e0a800; background: #fff3cd; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; margin: 0.6em 0; }
dl.facts dt { font-weight: bold; } dl.facts dd { margin: 0; }
table.matrix td { text-align: center; min-width: 3.2em; font-size: 0.85em; }
table.matrix td.node { text-align: left; }
figure.chart { margin: 1em 0 1.5em; break-inside: avoid; } figure.chart svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
td.num { text-align: right; font-family: monospace; }
code { font-size: 0.85em; overflow-wrap: anywhere; }
.signoff td { height: 2.2em; min-width: 12em; }
details > summary { cursor: pointer; font-weight: bold; margin: 0.5em 0; }
@page { size: A4; margin: 10mm 12mm; }
@media print {
  body { margin: 0; max-width: none; font-size: 9pt; line-height: 1.2; }
  table { font-size: 8pt; }
  .banner { padding: 0.2em 0.6em; margin: 0 0 0.3em; }
  .result { font-size: 11pt; padding: 0.2em 0.5em; margin: 0.3em 0; }
  dl.facts { margin: 0.3em 0; }
  #card { font-size: 7.5pt; margin: 0.3em 0 0.5em; width: 100%; } #card td, #card th { padding: 0.1em 0.3em; }
  #card td:nth-child(2) { width: 24%; } #card td:nth-child(4) { width: 40%; } #card td:nth-child(5) { width: 14%; font-size: 6.5pt; }
  #why-first h2 { font-size: 10pt; margin: 0.4em 0 0.1em; } #why-first ul { font-size: 8pt; }
  #why-first { break-inside: avoid; } /* page 1 says why, whole, or the print test fails */
  .page { break-before: page; }
  tr, figure, dl, .result { break-inside: avoid; }
  h2 { break-after: avoid; }
  details:not([open]) { display: none; }
  figure.chart { margin: 0.4em 0; }
  h1 { font-size: 14pt; margin: 0.1em 0; } h2 { font-size: 12pt; margin: 0.8em 0 0.3em; }
  ul { margin: 0.2em 0; }
  #requirements, #matrix { font-size: 7pt; } #requirements td, #matrix td { padding: 0 0.3em; }
  #requirements td:nth-child(2) { width: 30%; } #requirements td:nth-child(6) { width: 38%; }
  figure.chart { display: inline-block; width: 49%; vertical-align: top; }
  figure.chart svg { max-height: 58mm; width: 100%; } figcaption { font-size: 7pt; }
  #timeline { font-size: 6.5pt; padding: 0.3em; }
  .pass, .fail, .warn, .incomplete, .partly-judged, .recorded, .result, th { print-color-adjust: exact; -webkit-print-color-adjust: exact; }
}
</style>
</head>
<body>
<section id="first">
{{if .Run.Simulated}}<p class="banner" id="simulated">SIMULATED — this window ran against simulated nodes and GPU tools; it is not evidence about real hardware.</p>{{end}}
<h1>Acceptance report {{.Run.ID}}{{if .Run.Simulated}} (SIMULATED){{end}}</h1>
<p class="result {{.Outcome}}" id="result">Result: {{.Result}}</p>
<dl class="facts">
<dt>Provider</dt><dd>{{.Run.Provider}}</dd>
<dt>Region</dt><dd>{{.Run.Region}}</dd>
<dt>Window</dt><dd>{{.Run.Window}} (started {{stamp .Run.Started}}, ended {{stamp .Run.Ended}}{{range .Run.Resumed}}, resumed {{stamp .}}{{end}})</dd>
{{with .Selection}}<dt>Narrowed to</dt><dd>{{.}}</dd>{{end}}
<dt>Nodes</dt><dd>{{.Nodes0}}</dd>
</dl>
<h2>Acceptance card</h2>
<table id="card">
<tr><th>Test</th><th>Pass condition</th><th>Result</th><th>Figure, against the quote</th><th>Evidence</th></tr>
{{range .Card}}<tr class="{{class .Status}}"><td class="id">{{.Test}}</td><td>{{.Condition}}</td><td class="status">{{.Status}}</td><td>{{.Figure}}</td><td>{{range .IDs}}<a href="#{{anchor .}}">{{.}}</a> {{end}}</td></tr>
{{end}}</table>
<div id="why-first">
{{if .Failed}}<h2>Not accepted because</h2>
<ul id="failed">{{range first .Failed}}<li>{{.}}</li>{{end}}{{with more .Failed}}<li><a href="#all-failed">and {{.}} more</a></li>{{end}}</ul>{{end}}
{{if .Missing}}<h2>Incomplete because</h2>
<ul id="incomplete">{{range first .Missing}}<li>{{.}}</li>{{end}}{{with more .Missing}}<li><a href="#all-incomplete">and {{.}} more</a></li>{{end}}</ul>{{end}}
{{if .Warned}}<h2>Warnings</h2>
<ul id="warnings">{{range first .Warned}}<li>{{.}}</li>{{end}}{{with more .Warned}}<li><a href="#all-warnings">and {{.}} more</a></li>{{end}}</ul>{{end}}
</div>
</section>

<section class="page" id="why">
{{if more .Failed}}<h2 id="all-failed">Not accepted because: all {{len .Failed}}</h2>
<ul>{{range .Failed}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if more .Missing}}<h2 id="all-incomplete">Incomplete because: all {{len .Missing}}</h2>
<ul>{{range .Missing}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if more .Warned}}<h2 id="all-warnings">Warnings: all {{len .Warned}}</h2>
<ul>{{range .Warned}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Retested}}<h2 id="retested">Passed on a retest</h2>
<ul>{{range .Retested}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>The quote against what was measured</h2>
{{if .Quote}}<table id="quote">
<tr><th>Quote</th><th>Quoted</th><th>Requirement</th><th>Measured (worst)</th><th>Result</th></tr>
{{range .Quote}}<tr class="{{class (index . 4)}}"><td class="id"><code>{{index . 0}}</code></td><td>{{index . 1}}</td><td class="id"><a href="#{{anchor (index . 2)}}">{{index . 2}}</a></td><td>{{index . 3}}</td><td class="status">{{index . 4}}</td></tr>
{{end}}</table>{{else}}<p>The quote states no figure a requirement holds the nodes to.</p>{{end}}
<h3>Quote lint</h3>
{{if not .LintKnown}}<p id="lint">Not recorded (a run made before gpuaccept kept it).</p>{{else if .Lint}}<ul id="lint">{{range .Lint}}<li><b>{{.ID}}</b> {{.Message}}</li>{{end}}</ul>{{else}}<p id="lint">No warnings.</p>{{end}}
<h2>Sign-off</h2>
<ul id="signoff">{{range .Signoff}}<li>{{.}}</li>{{end}}</ul>
<table class="signoff"><tr><th></th><th>Name</th><th>Signature</th><th>Date</th></tr>
<tr><th>Prepared by</th><td></td><td></td><td></td></tr>
<tr><th>Approved by</th><td></td><td></td><td></td></tr></table>
</section>

<section id="detail">
<h2>Requirements</h2>
<table id="requirements">
<tr><th>ID</th><th>Requirement</th><th>Status</th><th>Passed</th><th>Held to</th><th>Worst</th></tr>
{{range .Reqs}}<tr class="{{.Class}}" id="{{.Anchor}}"><td class="id">{{.ID}}</td><td>{{.Title}}</td><td class="status">{{.Status}}</td><td class="num">{{.Passed}}</td><td>{{.Held}}</td><td>{{.Worst}}</td></tr>
{{else}}<tr><td colspan="6">No verdicts.</td></tr>{{end}}
</table>
{{with .Matrix}}{{if .Rows}}{{if .Families}}<h2>Nodes by requirement family</h2>
<table id="matrix" class="matrix">
<tr><th class="node">Node</th>{{range .Families}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td class="node">{{.Node}}</td>{{range .Cells}}<td class="{{.Class}}"{{if .Reasons}} title="{{range $i, $r := .Reasons}}{{if $i}}; {{end}}{{$r}}{{end}}"{{end}}>{{.Mark}}</td>{{end}}</tr>
{{end}}</table>
<ul class="footnotes">{{range .Rows}}{{$n := .Node}}{{range .Cells}}{{range .Reasons}}<li>{{$n}}: {{.}}</li>{{end}}{{end}}{{end}}</ul>
{{end}}{{end}}{{end}}
{{template "workload" .}}
</section>

{{if .Charts}}<section id="charts"><h2>Charts</h2>
{{range .Charts}}<figure class="chart" id="{{.ID}}">
{{.SVG}}
<figcaption>{{.Title}}. {{.Caption}}</figcaption>
</figure>
{{end}}
{{with .Bisect}}<figure class="chart" id="chart-bisection">
{{if .Rows}}<table>
<tr><th></th>{{range .Nodes}}<th>{{.}}</th>{{end}}</tr>
{{range $i, $row := .Rows}}<tr><th>{{index $.Bisect.Nodes $i}}</th>{{range $row}}<td class="num" style="{{.Style}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>
<figcaption>Pairwise bisection: each pair's all-reduce busbw over the typical pair's ({{printf "%.4g" .Reference}} GB/s), median of its runs, in {{.Rounds}} round(s).</figcaption>
{{else}}<table>
<tr><th>pair</th><th>busbw / typical</th><th>runs</th><th>error</th></tr>
{{range .Pairs}}<tr><td>{{.A}} – {{.B}}</td><td class="num" style="{{.Cell.Style}}">{{.Cell.Text}}</td><td class="num">{{.Runs}}</td><td>{{.Error}}</td></tr>
{{end}}</table>
<figcaption>Pairwise bisection over {{len .Nodes}} nodes: the {{len .Pairs}} slowest of the {{.Total}} pairs that ran, each pair's all-reduce busbw over the typical pair's ({{printf "%.4g" .Reference}} GB/s), median of its runs, in {{.Rounds}} round(s); every pair is in run.json.</figcaption>
{{end}}</figure>
{{end}}</section>{{end}}

{{if .Telemetry}}<section id="telemetry"><h2>Telemetry over the window</h2>
{{range .Telemetry}}<figure class="chart" id="{{.ID}}">
{{.SVG}}
<figcaption>{{.Title}}. {{.Caption}}</figcaption>
</figure>
{{end}}</section>{{end}}

<section id="more">
{{if .Timeline}}<h2>Failure test timeline</h2>
<pre id="timeline">{{.Timeline}}</pre>
{{end}}
{{with .Cost}}<h2>Cost</h2>
<p>{{.Intro}}</p>
<p id="cost-per-unit">{{.PerUnit}}</p>
<table id="cost-components">
<tr>{{range .ComponentHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Components}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td></tr>
{{end}}</table>
{{if .TCO}}<h3>Monthly TCO</h3>
<table id="cost-tco">
<tr>{{range .TCOHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .TCO}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td></tr>
{{end}}</table>
{{end}}<details><summary>Billed time per node</summary>
<table id="cost-nodes">
<tr>{{range .NodeHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Nodes}}<tr{{if not .Accepted}} class="fail"{{end}}>{{range $i, $c := .Cells}}<td{{if and (ge $i 1) (le $i 6)}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table></details>
{{end}}
{{with .Billing}}<h2>Billing reconciliation</h2>
<p>{{.Read}}</p>
<table id="billing">
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if ge $i 1}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{if .Hidden}}<p>{{.Hidden}} more node(s) billed as the ledger priced them.</p>
{{end}}<p id="invoice-per-unit">{{.PerUnit}}</p>
{{end}}
<h2>Nodes</h2>
<details><summary>{{len .Nodes}} node(s): addresses, GPUs, driver, CUDA, kernel, OS{{if .Slurm}}, Slurm's state, GRES and features{{end}}</summary>
<table id="nodes">
<tr><th>Node</th><th>Address</th><th>GPUs</th><th>Driver</th><th>CUDA</th><th>Kernel</th><th>OS</th>{{if .Slurm}}<th>Slurm</th>{{end}}<th>Quarantined</th></tr>
{{range .Nodes}}<tr{{if .Quarantined}} class="fail"{{end}}><td class="node">{{.Name}}</td><td>{{.Address}}</td><td>{{.GPUs}}</td><td>{{.Driver}}</td><td>{{.CUDA}}</td><td>{{.Kernel}}</td><td>{{.OS}}</td>{{if $.Slurm}}<td>{{.Slurm}}</td>{{end}}<td>{{if .Quarantined}}yes: {{.Reason}}{{end}}</td></tr>
{{end}}</table></details>
<h2>Verdicts</h2>
<details><summary>Every verdict of every node ({{len .Run.Verdicts}}; nodes whose verdicts read alike share a row)</summary>
<table id="verdicts">
<tr><th>ID</th><th>Node</th><th>Status</th><th>Measured</th><th>Quoted</th><th>Ratio</th><th>Tolerance</th><th>Detail</th></tr>
{{range .Verdicts}}<tr class="{{.Class}}"><td class="id"><a href="#{{anchor .ID}}">{{.ID}}</a></td><td class="node">{{.NodeLabel}}</td><td class="status">{{.Status}}</td><td>{{.Measured}}</td><td>{{.Quoted}}</td><td class="num">{{.Ratio}}</td><td class="num">{{.Tolerance}}</td><td>{{.Detail}}</td></tr>
{{else}}<tr><td colspan="8">No verdicts.</td></tr>{{end}}
</table></details>
<h2>Evidence</h2>
<p>Tool: {{.Run.Tool}} · Inventory: <code>{{.Run.Inventory.Path}}</code> (sha256 <code>{{.Run.Inventory.Digest}}</code>)</p>
{{if or .Evidence .Raw.Files}}<details><summary>{{len .Evidence}} file(s) with their sha256{{if .Raw.Files}}, and the raw logs{{end}}</summary><table id="evidence">
<tr><th>File</th><th>Bytes</th><th>sha256</th></tr>
{{range .Evidence}}<tr><td><code>{{.Path}}</code></td><td class="num">{{.Bytes}}</td><td><code>{{.SHA256}}</code></td></tr>
{{end}}{{if .Raw.Files}}<tr><td><code>raw/</code>: {{.Raw.Files}} raw log(s) of {{.Raw.Nodes}} node(s), gzip; each with its sha256 in <code>MANIFEST.sha256</code></td><td class="num">{{.Raw.Bytes}}</td><td></td></tr>
{{end}}</table></details>
<p>Every file is listed in <code>MANIFEST.sha256</code>; <code>gpuaccept verify</code> checks the bundle and this page.</p>
{{else}}<p id="evidence">Every file of the bundle is listed with its sha256 in <code>MANIFEST.sha256</code>; <code>gpuaccept verify</code> checks it.</p>{{end}}
</section>
</body>
</html>
`))

// reasonsOnPage1 is how many reasons of each kind page 1 shows, after the
// card: the first page holds the result, the card and why, and says how
// many more there are below (at 256 nodes the card's last row and the
// reasons were on pages 2 and 3).
const reasonsOnPage1 = 4

// firstReasons is what page 1 shows of reasons: all of them when they
// fit, else one fewer than the bound and a line saying how many more.
func firstReasons(all []string) []string {
	if len(all) <= reasonsOnPage1 {
		return all
	}
	return all[:reasonsOnPage1-1]
}

// moreReasons is how many reasons page 1 leaves to the full list below.
func moreReasons(all []string) int { return len(all) - len(firstReasons(all)) }
