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
// gonum/plot), the pairwise bisection matrix, the failure test's timeline
// and the evidence with checksums (nil: see MANIFEST.sha256).
func HTML(w io.Writer, run *record.Run, evidence []EvidenceFile) error {
	if run == nil {
		return fmt.Errorf("html: nil run")
	}
	page := htmlPage{Run: run, Result: result(run), Evidence: evidence, Bisect: bisection(run)}
	for _, v := range verdicts(run) {
		page.Verdicts = append(page.Verdicts, htmlVerdict{Verdict: v, NodeLabel: nodeLabel(v.Node),
			Ratio: decimal(v.Ratio), Tolerance: decimal(v.Tolerance), Class: strings.ToLower(string(v.Status))})
	}
	for _, n := range run.Nodes {
		row := htmlNode{Node: n}
		var f struct {
			GPUModel string `json:"gpu_model"`
			GPUCount int    `json:"gpu_count"`
			Driver   string `json:"driver"`
			CUDA     string `json:"cuda"`
			Kernel   string `json:"kernel"`
			OS       string `json:"os"`
		}
		if hasData(run, "preflight", n.Name, &f) {
			if f.GPUCount > 0 {
				row.GPUs = fmt.Sprintf("%d × %s", f.GPUCount, f.GPUModel)
			}
			row.Driver, row.CUDA, row.Kernel, row.OS = f.Driver, f.CUDA, f.Kernel, f.OS
		}
		page.Nodes = append(page.Nodes, row)
	}
	for _, mk := range []func(*record.Run) (*chart, error){busbwChart, intraChart, ioChart, failureChart} {
		c, err := mk(run)
		if err != nil {
			return fmt.Errorf("html: %w", err)
		}
		if c != nil {
			page.Charts = append(page.Charts, htmlChart{chart: *c, SVG: template.HTML(c.SVG)})
		}
	}
	page.Cost = newHTMLCost(run.Ledger)
	var fd struct {
		Timeline string `json:"timeline"`
	}
	if hasData(run, "failure", "", &fd) {
		page.Timeline = strings.TrimRight(fd.Timeline, "\n")
	}
	return htmlTemplate.Execute(w, page)
}

type htmlPage struct {
	Run      *record.Run
	Result   string
	Verdicts []htmlVerdict
	Nodes    []htmlNode
	Charts   []htmlChart
	Bisect   *bisectMatrix
	Timeline string
	Evidence []EvidenceFile
	Cost     *htmlCost
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

type htmlVerdict struct {
	record.Verdict
	NodeLabel, Ratio, Tolerance, Class string
}

type htmlNode struct {
	record.Node
	GPUs, Driver, CUDA, Kernel, OS string
}

type htmlChart struct {
	chart
	SVG template.HTML
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"stamp": stamp,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Acceptance report {{.Run.ID}}{{if .Run.Simulated}} (SIMULATED){{end}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.pass { background: #e3f5e1; } .fail { background: #fbe0e0; } .warn { background: #fff3cd; } .skip { color: #777; }
.banner { background: #fff3cd; border: 2px solid #e0a800; padding: 0.6em 1em; font-weight: bold; }
.result { font-size: 1.2em; font-weight: bold; }
figure.chart { margin: 1em 0 2em; } figure.chart svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; }
td.num { text-align: right; font-family: monospace; }
code { font-size: 0.85em; }
</style>
</head>
<body>
{{if .Run.Simulated}}<p class="banner" id="simulated">SIMULATED — this window ran against simulated nodes and GPU tools; it is not evidence about real hardware.</p>{{end}}
<h1>Acceptance report {{.Run.ID}}{{if .Run.Simulated}} (SIMULATED){{end}}</h1>
<ul>
<li>Provider: {{.Run.Provider}} · Region: {{.Run.Region}} · Window: {{.Run.Window}}</li>
<li>Started {{stamp .Run.Started}} · ended {{stamp .Run.Ended}}</li>
<li>Tool: {{.Run.Tool}} · Inventory: <code>{{.Run.Inventory.Path}}</code> (sha256 <code>{{.Run.Inventory.Digest}}</code>)</li>
</ul>
<p class="result" id="result">Result: {{.Result}}</p>

<h2>Verdicts</h2>
<table id="verdicts">
<tr><th>ID</th><th>Title</th><th>Node</th><th>Status</th><th>Measured</th><th>Quoted</th><th>Ratio</th><th>Tolerance</th><th>Detail</th></tr>
{{range .Verdicts}}<tr class="{{.Class}}"><td>{{.ID}}</td><td>{{.Title}}</td><td>{{.NodeLabel}}</td><td>{{.Status}}</td><td>{{.Measured}}</td><td>{{.Quoted}}</td><td class="num">{{.Ratio}}</td><td class="num">{{.Tolerance}}</td><td>{{.Detail}}</td></tr>
{{else}}<tr><td colspan="9">No verdicts.</td></tr>{{end}}
</table>

<h2>Nodes</h2>
<table id="nodes">
<tr><th>Node</th><th>Address</th><th>GPUs</th><th>Driver</th><th>CUDA</th><th>Kernel</th><th>OS</th><th>Quarantined</th></tr>
{{range .Nodes}}<tr{{if .Quarantined}} class="fail"{{end}}><td>{{.Name}}</td><td>{{.Address}}</td><td>{{.GPUs}}</td><td>{{.Driver}}</td><td>{{.CUDA}}</td><td>{{.Kernel}}</td><td>{{.OS}}</td><td>{{if .Quarantined}}yes: {{.Reason}}{{end}}</td></tr>
{{end}}</table>

{{with .Cost}}<h2>Cost</h2>
<p>{{.Intro}}</p>
<table id="cost-nodes">
<tr>{{range .NodeHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Nodes}}<tr{{if not .Accepted}} class="fail"{{end}}>{{range $i, $c := .Cells}}<td{{if and (ge $i 1) (le $i 6)}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
<table id="cost-components">
<tr>{{range .ComponentHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Components}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td></tr>
{{end}}</table>
<p id="cost-per-unit">{{.PerUnit}}</p>
{{if .TCO}}<h3>Monthly TCO</h3>
<table id="cost-tco">
<tr>{{range .TCOHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .TCO}}<tr><td>{{index . 0}}</td><td class="num">{{index . 1}}</td></tr>
{{end}}</table>
{{end}}{{end}}
{{if .Charts}}<h2>Charts</h2>{{end}}
{{range .Charts}}<figure class="chart" id="{{.ID}}">
{{.SVG}}
<figcaption>{{.Title}}. {{.Caption}}</figcaption>
</figure>
{{end}}
{{with .Bisect}}<h2>Pairwise bisection</h2>
<figure class="chart" id="chart-bisection">
<table>
<tr><th></th>{{range .Nodes}}<th>{{.}}</th>{{end}}</tr>
{{range $i, $row := .Rows}}<tr><th>{{index $.Bisect.Nodes $i}}</th>{{range $row}}<td class="num" style="{{.Style}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>
<figcaption>Each pair's all-reduce busbw over the typical pair's ({{printf "%.4g" .Reference}} GB/s), median of its runs, in {{.Rounds}} round(s).</figcaption>
</figure>
{{end}}
{{if .Timeline}}<h2>Failure test timeline</h2>
<pre id="timeline">{{.Timeline}}</pre>
{{end}}
<h2>Evidence</h2>
{{if .Evidence}}<table id="evidence">
<tr><th>File</th><th>Bytes</th><th>sha256</th></tr>
{{range .Evidence}}<tr><td><code>{{.Path}}</code></td><td class="num">{{.Bytes}}</td><td><code>{{.SHA256}}</code></td></tr>
{{end}}</table>
<p>This page and the other reports are listed with every file in <code>MANIFEST.sha256</code>; <code>gpuaccept verify</code> checks the bundle.</p>
{{else}}<p id="evidence">Every file of the bundle is listed with its sha256 in <code>MANIFEST.sha256</code>; <code>gpuaccept verify</code> checks it.</p>{{end}}
</body>
</html>
`))
