package reports

import "gpuaccept/orchestrator/record"

// htmlWorkload is the load test's tables as report.html shows them.
type htmlWorkload struct {
	workloadView
	// InferenceRows are Inference without the request log, which Logs
	// links.
	InferenceRows []htmlLogRow
}

type htmlLogRow struct {
	Cells []string
	Log   string
}

func newHTMLWorkload(run *record.Run) *htmlWorkload {
	w := newWorkloadView(run)
	if w.empty() {
		return nil
	}
	h := &htmlWorkload{workloadView: w}
	if n := len(w.InferenceHeader); n > 0 {
		h.InferenceHeader = w.InferenceHeader[:n-1]
	}
	for i, r := range w.Inference {
		h.InferenceRows = append(h.InferenceRows, htmlLogRow{Cells: r[:len(r)-1], Log: w.Logs[i]})
	}
	return h
}

// htmlWorkloadTemplate is the load test's part of the page, after the
// requirements: the tables, their notes, the request logs linked.
const htmlWorkloadTemplate = `{{define "workload"}}{{with .Workload}}
{{if .InferenceRows}}<h2>Load test: inference</h2>
<p>Each server at the level its targets were judged at, measured from the node itself (TTFT: time to first token, TPOT: time per output token, ITL: inter-token latency, E2EL: end-to-end; as vLLM's bench serve names them).</p>
<table id="inference">
<tr>{{range .InferenceHeader}}<th>{{.}}</th>{{end}}<th>Request log</th></tr>
{{range .InferenceRows}}<tr>{{range $i, $c := .Cells}}<td{{if eq $i 0}} class="node"{{else if gt $i 1}} class="num"{{end}}>{{$c}}</td>{{end}}<td>{{if .Log}}<a href="{{.Log}}">{{.Log}}</a>{{else}}-{{end}}</td></tr>
{{end}}</table>
{{range .InferenceNote}}<p class="note">{{.}}</p>{{end}}
{{end}}{{if .Sweep}}<h3>Level sweep</h3>
<table id="sweep">
<tr>{{range .SweepHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Sweep}}<tr>{{range $i, $c := .}}<td{{if $i}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{if or .Training .TrainingNote}}<h2>Load test: training</h2>
{{if .Training}}<table id="training">
<tr>{{range .TrainingHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Training}}<tr>{{range $i, $c := .}}<td{{if $i}} class="num"{{else}} class="node"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{range .TrainingNote}}<p class="note">{{.}}</p>{{end}}
{{end}}{{if .Compute}}<h2>Burn-in: compute rate</h2>
<table id="compute">
<tr>{{range .ComputeHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Compute}}<tr>{{range $i, $c := .}}<td{{if eq $i 0}} class="node"{{else if gt $i 2}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{range .ComputeNote}}<p class="note">{{.}}</p>{{end}}
{{end}}{{if .BurnLoads}}<h2>Burn-in: collective and stress per iteration</h2>
<table id="burnin-loads">
<tr>{{range .BurnLoadsHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .BurnLoads}}<tr>{{range $i, $c := .}}<td{{if eq $i 0}} class="node"{{else if eq $i 1}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{range .BurnLoadsNote}}<p class="note">{{.}}</p>{{end}}
{{end}}{{if .Latency}}<h2>All-reduce latency</h2>
<table id="latency">
<tr>{{range .LatencyHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .Latency}}<tr class="{{class (index . 2)}}">{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{end}}{{end}}`
