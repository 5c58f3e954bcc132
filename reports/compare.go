package reports

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// CompareSchema names the layout of a Comparison's JSON form (`gpuaccept
// compare -o json`); a change that would break a reader of it gets a new
// version.
const CompareSchema = "gpuaccept.compare/v1"

// Comparison sets two or more runs side by side, one column each — say
// the same acceptance window on several providers' clusters: what each
// quoted, what each node shape and GPU was, every acceptance criterion
// (one row per requirement ID), the failure test's recovery figures, the
// cost per accepted unit, and each run's verdict. It judges nothing
// itself: each run keeps its own verdicts.
type Comparison struct {
	Schema string `json:"schema"`
	// Runs: in the order given; every criterion's Runs is in this order.
	Runs     []ComparedRun `json:"runs"`
	Criteria []Criterion   `json:"criteria"`
	// Notes: what makes the runs less than like for like (simulated runs,
	// different GPU models or currencies, a run cut short...).
	Notes []string `json:"notes"`
}

// ComparedRun is one column: a run and what the comparison reads of it.
type ComparedRun struct {
	// Label heads the column: the provider, with "#n" (its position, from
	// 1) when another run has the same provider.
	Label     string    `json:"label"`
	ID        string    `json:"id"`
	Path      string    `json:"path,omitempty"` // the run.json read
	Tool      string    `json:"tool,omitempty"`
	Provider  string    `json:"provider,omitempty"`
	Region    string    `json:"region,omitempty"`
	Window    string    `json:"window,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	Simulated bool      `json:"simulated"`
	// Quote: the provider's quote as run.json keeps it; absent when it
	// keeps none.
	Quote *ComparedQuote `json:"quote,omitempty"`
	// NodesTested: the nodes of the window. NodesAccepted: those neither
	// quarantined nor named by a FAIL verdict; NodesNotAccepted the others,
	// each with why.
	NodesTested      int            `json:"nodes_tested"`
	NodesAccepted    []string       `json:"nodes_accepted"`
	NodesNotAccepted []RejectedNode `json:"nodes_not_accepted"`
	// Failure: the failure test's figures; absent when the run did not
	// run the test.
	Failure *ComparedFailure `json:"failure,omitempty"`
	// Cost: from the run's ledger; absent when it has none.
	Cost *ComparedCost `json:"cost,omitempty"`
	// FailureWhyNot and CostWhyNot say why a run has no Failure or Cost.
	FailureWhyNot string `json:"failure_why_not,omitempty"`
	CostWhyNot    string `json:"cost_why_not,omitempty"`
	// Lint is the quote lint the run recorded at its start; LintRecorded
	// false: a run made before runs kept it, true with no Lint: the lint
	// found nothing.
	Lint         []record.Finding `json:"lint,omitempty"`
	LintRecorded bool             `json:"lint_recorded"`
	// Accepted is the run's verdict; Result its outcome as its summary
	// says it.
	Accepted bool   `json:"accepted"`
	Result   string `json:"result"`
}

// ComparedQuote is the part of a quote the comparison shows. A field the
// quote does not state (0 or empty in run.json) is left out.
type ComparedQuote struct {
	GPUModel        string  `json:"gpu_model,omitempty"`
	GPUsPerNode     int     `json:"gpus_per_node,omitempty"`
	GPUMemoryGiB    float64 `json:"gpu_memory_gib,omitempty"`
	FormFactor      string  `json:"form_factor,omitempty"`
	Fabric          string  `json:"fabric,omitempty"`
	NICsPerNode     int     `json:"nics_per_node,omitempty"`
	NICGbps         float64 `json:"nic_gbps,omitempty"`
	PricePerGPUHour float64 `json:"price_per_gpu_hour,omitempty"`
	Currency        string  `json:"currency,omitempty"`
}

// RejectedNode is a node that was tested and not accepted.
type RejectedNode struct {
	Node string `json:"node"`
	Why  string `json:"why"`
}

// ComparedFailure is what the failure test measured (run.json's phase
// "failure", cluster-wide). A figure left out was not measured: the job
// never saw the failure, never resumed, or the victim never came back.
type ComparedFailure struct {
	Outcome  string `json:"outcome"` // the phase's: ok, failed, interrupted
	Inject   string `json:"inject,omitempty"`
	Recovery string `json:"recovery,omitempty"`
	Victim   string `json:"victim,omitempty"`
	// InjectedAt and VictimBackAt are seconds since the job was launched;
	// the others durations from the failure.
	InjectedAt     float64  `json:"injected_at"`
	DetectionSecs  *float64 `json:"detection_seconds,omitempty"`
	ResumeSecs     *float64 `json:"resume_seconds,omitempty"`
	StepsLost      *int     `json:"steps_lost,omitempty"`
	VictimBackAt   *float64 `json:"victim_back_at,omitempty"`
	BilledNodeSecs float64  `json:"billed_node_seconds"`
}

// ComparedCost is the run's ledger, as far as the comparison shows it.
type ComparedCost struct {
	TotalCost     float64  `json:"total_cost"`
	Currency      string   `json:"currency,omitempty"`
	Unit          string   `json:"unit,omitempty"`
	AcceptedUnits float64  `json:"accepted_units"`
	CostPerUnit   *float64 `json:"cost_per_unit,omitempty"` // absent: nothing was accepted
	// Invoiced is what the provider's usage export billed, when the
	// window judged one; InvoicePerUnit that per accepted unit.
	Invoiced       *float64 `json:"invoiced,omitempty"`
	InvoicePerUnit *float64 `json:"invoice_per_unit,omitempty"`
}

// Criterion is one requirement ID across the runs.
type Criterion struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	// Runs: the criterion in each run, in the runs' order; null where the
	// run has no verdict of this ID.
	Runs []*CriterionCell `json:"runs"`
}

// CriterionCell is one requirement ID in one run, its verdicts (one per
// node, or one for the cluster, or both) taken together.
type CriterionCell struct {
	// Status is the worst of the judged verdicts': FAIL, then WARN, then
	// PASS; SKIP only when none was judged. Counts: how many verdicts had
	// each status; Verdicts: how many there were; NotJudged: how many of
	// them judged nothing (skipped, or could not be measured), which a
	// PASS does not count as passed.
	Status    record.Status         `json:"status"`
	Verdicts  int                   `json:"verdicts"`
	Counts    map[record.Status]int `json:"counts"`
	NotJudged int                   `json:"not_judged"`
	// The verdict shown: the cluster's when it measured a value, else,
	// of the verdicts with the worst status, the node's with the worst
	// value (in its unit's direction), else the first. Node is its node
	// (absent: the cluster); the rest are its own.
	Node     string   `json:"node,omitempty"`
	Value    *float64 `json:"value,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	Measured string   `json:"measured,omitempty"`
	Quoted   string   `json:"quoted,omitempty"`
	Ratio    *float64 `json:"ratio,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// LoadRuns reads the runs to compare, in the order given: each path is a
// run directory or a run.json. It needs two or more, and no run twice
// (the same file, or a copy of the same run: same ID and start). Errors
// name the path.
func LoadRuns(paths []string) ([]*record.Run, []string, error) {
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("compare needs 2 or more runs (run directories or run.json files), got none")
	}
	// One directory of runs is as many runs as it holds.
	paths, err := expandRunDirs(paths)
	if err != nil {
		return nil, nil, err
	}
	if len(paths) < 2 {
		return nil, nil, fmt.Errorf("compare needs 2 or more runs (run directories or run.json files), got 1: %s", paths[0])
	}
	runs := make([]*record.Run, 0, len(paths))
	files := make([]string, 0, len(paths))
	stats := make([]os.FileInfo, 0, len(paths))
	for i, p := range paths {
		run, file, err := LoadRun(p)
		if err != nil {
			return nil, nil, err
		}
		st, err := os.Stat(file)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: cannot read: %w", file, err)
		}
		for j := range i {
			switch {
			case os.SameFile(st, stats[j]):
				return nil, nil, fmt.Errorf("%s: the same run.json as %s: each run once", p, paths[j])
			case run.ID == runs[j].ID && run.Started.Equal(runs[j].Started):
				return nil, nil, fmt.Errorf("%s: the same run as %s (%s, a copy?): each run once", p, paths[j], orNone(run.ID))
			}
		}
		runs, files, stats = append(runs, run), append(files, file), append(stats, st)
	}
	return runs, files, nil
}

// expandRunDirs replaces each directory that is not a run (no run.json in
// it) by the runs in it (its subdirectories that hold one), by name; one
// that holds none is an error naming it.
func expandRunDirs(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			out = append(out, p) // LoadRun says what is wrong with it
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "run.json")); err == nil {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		n := 0
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(p, e.Name(), "run.json")); e.IsDir() && err == nil {
				out = append(out, filepath.Join(p, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: neither a run (no run.json in it) nor a directory of runs (none of its subdirectories holds one)", p)
		}
	}
	return out, nil
}

// CompareRuns sets the runs side by side, in the order given. It reads
// them and modifies none.
// labels, where given (non-empty), head the runs' columns; the others are
// the provider (with the window where it has several runs), and "#n"
// where two still read alike.
func CompareRuns(runs []*record.Run, labels ...string) *Comparison {
	c := &Comparison{Schema: CompareSchema, Runs: []ComparedRun{}, Criteria: []Criterion{}, Notes: []string{}}
	names := make([]string, len(runs))
	providers := map[string]int{}
	for _, r := range runs {
		providers[r.Provider]++
	}
	seen := map[string]int{}
	for i, r := range runs {
		if i < len(labels) && strings.TrimSpace(labels[i]) != "" {
			names[i] = oneLine(labels[i])
			continue
		}
		// The provider; its window too where it has several runs.
		names[i] = orNone(oneLine(r.Provider))
		if w := oneLine(r.Window); providers[r.Provider] > 1 && w != "" && w != r.Provider {
			names[i] += " (" + w + ")"
		}
		seen[names[i]]++
	}
	for i, r := range runs {
		label := names[i]
		if seen[label] > 1 {
			label += fmt.Sprintf(" #%d", i+1)
		}
		c.Runs = append(c.Runs, comparedRun(r, label))
	}
	c.criteria(runs)
	c.notes(runs)
	return c
}

func comparedRun(r *record.Run, label string) ComparedRun {
	cr := ComparedRun{Label: label, ID: r.ID, Tool: r.Tool, Provider: r.Provider, Region: r.Region, Window: r.Window,
		Started: r.Started, Simulated: r.Simulated, NodesTested: len(r.Nodes), NodesAccepted: []string{},
		NodesNotAccepted: []RejectedNode{}, Result: windowOutcome(r)}
	cr.Accepted = cr.Result == "ACCEPTED"
	if len(r.Quote) > 0 {
		var q ComparedQuote
		if json.Unmarshal(r.Quote, &q) == nil {
			cr.Quote = &q
		}
	}

	failed := map[string][]string{} // node → the IDs that failed on it
	for _, v := range verdicts(r) {
		if v.Status != record.Fail || v.Node == "" {
			continue
		}
		for _, n := range strings.Split(v.Node, ",") {
			if n = strings.TrimSpace(n); !slices.Contains(failed[n], v.ID) {
				failed[n] = append(failed[n], v.ID)
			}
		}
	}
	for _, n := range r.Nodes {
		var why []string
		if n.Quarantined {
			why = append(why, "quarantined")
			if reason := oneLine(n.Reason); reason != "" {
				why[0] += ": " + reason
			}
		}
		if ids := failed[n.Name]; len(ids) > 0 {
			why = append(why, "FAIL "+strings.Join(ids, ", "))
		}
		if len(why) == 0 {
			cr.NodesAccepted = append(cr.NodesAccepted, n.Name)
		} else {
			cr.NodesNotAccepted = append(cr.NodesNotAccepted, RejectedNode{Node: n.Name, Why: strings.Join(why, "; ")})
		}
	}

	cr.Failure = failureOf(r)
	if cr.Failure == nil {
		cr.FailureWhyNot = "not run: the run has no failure phase"
		for _, p := range r.Plan {
			if p.Name == "failure" {
				cr.FailureWhyNot = "not run: phases.failure.enabled is off"
				if p.Enabled {
					cr.FailureWhyNot = "no result: the failure phase did not get to run"
				}
			}
		}
	}
	if l := r.Ledger; l != nil {
		cr.Cost = &ComparedCost{TotalCost: l.TotalCost, Currency: l.Currency, Unit: l.Unit, AcceptedUnits: l.AcceptedUnits, CostPerUnit: l.CostPerUnit}
		if rc := reconciled(r); rc != nil {
			billed := rc.Billed
			cr.Cost.Invoiced = &billed
			if l.AcceptedUnits > 0 {
				per := billed / l.AcceptedUnits
				cr.Cost.InvoicePerUnit = &per
			}
		}
	} else if cr.Quote == nil || cr.Quote.PricePerGPUHour == 0 {
		cr.CostWhyNot = "no price: the quote states no price_per_gpu_hour"
	} else {
		cr.CostWhyNot = "no ledger in the run"
	}
	cr.Lint, cr.LintRecorded = r.Lint, LintRecorded(r)
	return cr
}

// LintRecorded says whether run kept its quote lint, whatever it found:
// runs record it as [] when clean; those made before that, but after
// runs kept their build (the same change), left a clean lint out.
func LintRecorded(run *record.Run) bool { return run.Lint != nil || run.Build != nil }

// failureOf reads the failure test's figures by their JSON names: nil
// when the run has no failure phase with data (the test was off, or did
// not get to run).
func failureOf(r *record.Run) *ComparedFailure {
	var f ComparedFailure
	p, ok := phaseData(r, "failure", "", &f)
	if !ok {
		return nil
	}
	f.Outcome = string(p.Outcome)
	return &f
}

// severity orders statuses from the best to the worst for a criterion:
// a skipped verdict judged nothing, so it only shows when nothing else
// was judged.
func severity(s record.Status) int {
	switch s {
	case record.Skip:
		return 0
	case record.Pass:
		return 1
	case record.Warn:
		return 2
	case record.Fail:
		return 3
	}
	return 4 // a status this gpuaccept does not know: never hide it
}

// worse reports whether value a of requirement id is worse than b in
// unit's direction.
func worse(id string, a, b float64, unit string) bool {
	if lowerIsBetter(id, unit) {
		return a > b
	}
	return a < b
}

func (c *Comparison) criteria(runs []*record.Run) {
	byID := make([]map[string][]record.Verdict, len(runs))
	var ids []string
	titles := map[string]string{}
	for i, r := range runs {
		byID[i] = map[string][]record.Verdict{}
		for _, v := range verdicts(r) {
			if _, seen := titles[v.ID]; !seen {
				titles[v.ID] = v.Title
				ids = append(ids, v.ID)
			}
			if titles[v.ID] == "" {
				titles[v.ID] = v.Title
			}
			byID[i][v.ID] = append(byID[i][v.ID], v)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(natural(a, b), cmp.Compare(a, b)) })
	for _, id := range ids {
		cr := Criterion{ID: id, Title: oneLine(record.TitleOf(id, titles[id]))}
		for i := range runs {
			cr.Runs = append(cr.Runs, cell(byID[i][id]))
		}
		c.Criteria = append(c.Criteria, cr)
	}
}

// cell takes one ID's verdicts in one run together (nil: there are none).
func cell(vs []record.Verdict) *CriterionCell {
	if len(vs) == 0 {
		return nil
	}
	c := &CriterionCell{Verdicts: len(vs), Counts: map[record.Status]int{}}
	worst := -1
	for i, v := range vs {
		c.Counts[v.Status]++
		if !judged(v) {
			// An unmeasured verdict may carry any status: it judged
			// nothing, so it decides nothing while another was judged.
			c.NotJudged++
			if worst < 0 {
				worst = i
			}
			continue
		}
		if worst < 0 || !judged(vs[worst]) || severity(v.Status) > severity(vs[worst].Status) {
			worst = i
		}
	}
	c.Status = vs[worst].Status
	// The figure: the cluster's, else the worst among the verdicts that
	// decided the status, else the first of those (no figure).
	shown := slices.IndexFunc(vs, func(v record.Verdict) bool { return v.Node == "" && v.Value != nil })
	if shown < 0 {
		for i, v := range vs {
			if v.Status != c.Status || v.Value == nil {
				continue
			}
			if shown < 0 || (v.Unit == vs[shown].Unit && worse(v.ID, *v.Value, *vs[shown].Value, v.Unit)) {
				shown = i
			}
		}
	}
	if shown < 0 {
		shown = worst
	}
	v := vs[shown]
	c.Node, c.Value, c.Unit, c.Measured, c.Quoted, c.Ratio, c.Detail = v.Node, v.Value, v.Unit, oneLine(v.Measured), oneLine(v.Quoted), v.Ratio, oneLine(v.Detail)
	return c
}

// notes: what the reader should know before comparing the columns.
func (c *Comparison) notes(runs []*record.Run) {
	var sim []string
	for _, r := range c.Runs {
		if r.Simulated {
			sim = append(sim, r.Label)
		}
	}
	switch {
	case len(sim) == len(runs):
		c.Notes = append(c.Notes, "every run ran on SIMULATED nodes: their figures are not evidence about real hardware")
	case len(sim) > 0:
		c.Notes = append(c.Notes, fmt.Sprintf("%s ran on SIMULATED nodes: not evidence about real hardware, and not comparable with the others", strings.Join(sim, ", ")))
	}
	distinct := func(field func(q *ComparedQuote) string) []string {
		var out []string
		for _, r := range c.Runs {
			if r.Quote == nil {
				continue
			}
			if s := field(r.Quote); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	if models := distinct(func(q *ComparedQuote) string { return q.GPUModel }); len(models) > 1 {
		c.Notes = append(c.Notes, fmt.Sprintf("the quotes name different GPU models (%s): the figures are not like for like", strings.Join(models, "; ")))
	}
	if cur := distinct(func(q *ComparedQuote) string { return q.Currency }); len(cur) > 1 {
		c.Notes = append(c.Notes, fmt.Sprintf("the prices are in different currencies (%s): convert them before comparing costs", strings.Join(cur, ", ")))
	}
	for i, r := range runs {
		label := c.Runs[i].Label
		if o := windowOutcome(r); strings.HasPrefix(o, "INCOMPLETE") || o == "INTERRUPTED" {
			c.Notes = append(c.Notes, fmt.Sprintf("%s did not run to its end (%s): what it did not measure is missing", label, o))
		}
		if r.Ledger == nil {
			c.Notes = append(c.Notes, fmt.Sprintf("%s has no ledger (no price in its quote, or made before gpuaccept kept one): no cost per accepted unit", label))
		}
	}
}
