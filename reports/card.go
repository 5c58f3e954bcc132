package reports

import (
	"encoding/json"
	"fmt"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
)

// cardConditions are the pass conditions of the buyer's acceptance card
// (DESIGN.md), by row.
var cardConditions = map[string]string{
	record.CardContainer:  "the pinned image starts quickly and reproducibly on every node",
	record.CardGPU:        "every GPU reports the expected model, memory, driver, CUDA compatibility",
	record.CardHealth:     "idle-node diagnostic passes, warnings recorded",
	record.CardNCCL:       "inter-node busbw and latency match the quoted cluster class",
	record.CardStaging:    "dataset + weights staged within the planned setup window",
	record.CardCheckpoint: "checkpoints complete without long GPU idle; restore verified",
	record.CardFailure:    "stop one worker: restart, checkpoint resume and billing behave",
	record.CardBilling:    "billed time is attributable; idle and failed work are visible; the provider's usage export agrees with what was measured",
	record.CardSecurity:   "access, isolation, secrets, logs, data deletion and audit records match policy",
	record.CardLoad:       "the buyer's workload and a burn-in run at the quoted rate without throttling, Xid or ECC errors",
}

// cardEnable is what turns on the phases that fill a row, for a row left
// empty.
var cardEnable = map[string]string{
	record.CardContainer:  "image.reference (phases.image)",
	record.CardGPU:        "phases.preflight.enabled",
	record.CardHealth:     "phases.diag.enabled",
	record.CardNCCL:       "phases.allreduce.enabled",
	record.CardStaging:    "phases.staging.enabled",
	record.CardCheckpoint: "phases.checkpoint.enabled",
	record.CardFailure:    "phases.failure.enabled",
	record.CardSecurity:   "phases.security.enabled",
	record.CardLoad:       "phases.workload.enabled",
	record.CardBilling:    "idle.after (the idle guard), a quote.price_per_gpu_hour (the cost ledger) or billing.export (the usage export)",
}

// Statuses of a card row besides a verdict's.
const (
	cardNotRun   = "NOT RUN"
	cardRecorded = "RECORDED"
)

// cardRow is one row of the acceptance card.
type cardRow struct {
	Test, Condition string
	Status          string // the worst of its requirements, or NOT RUN, RECORDED
	// Figure is what decided the status, against the quote where there is
	// one.
	Figure string
	// IDs are the requirements that fill the row (the evidence: each has
	// its verdicts and raw logs).
	IDs []string
}

// card fills the buyer's acceptance card from the run: every row, in
// DESIGN.md's order, whether or not the window measured it.
func card(run *record.Run) []cardRow {
	byCard := map[string][]requirement{}
	for _, r := range requirements(run) {
		if q, ok := record.Lookup(r.ID); ok && q.Card != "" {
			byCard[q.Card] = append(byCard[q.Card], r)
		}
	}
	var rows []cardRow
	for _, name := range record.CardRows {
		row := cardRow{Test: name, Condition: cardConditions[name]}
		reqs := byCard[name]
		switch {
		case name == record.CardBilling && len(reqs) > 0:
			// The idle guard's verdicts decide; the ledger says what the
			// window cost beside them.
			row.Status, row.Figure = cardJudge(name, reqs)
			if run.Ledger != nil {
				row.Figure += "; cost ledger: " + costBrief(run.Ledger) + " (see Cost)"
			}
		case name == record.CardBilling && run.Ledger != nil:
			row.Status, row.Figure = cardRecorded, "cost ledger: "+costBrief(run.Ledger)+" (see Cost)"
		case len(reqs) == 0:
			row.Status = cardNotRun
			if on := cardEnable[name]; on != "" {
				row.Figure = "not measured in this window: " + on + " is off"
			} else {
				row.Figure = "not measured by gpuaccept yet"
			}
		default:
			row.Status, row.Figure = cardJudge(name, reqs)
		}
		for _, r := range reqs {
			row.IDs = append(row.IDs, r.ID)
		}
		rows = append(rows, row)
	}
	return rows
}

func cardRank(s string) int {
	switch s {
	case string(record.Fail):
		return 0
	case StatusIncomplete:
		return 1
	case string(record.Warn):
		return 2
	case string(record.Pass):
		return 3
	}
	return 4
}

// cardFigure says what decided a row: the worst requirement's reason when
// it did not pass; when every one passed, the first figure held to the
// quote with its margin, else how many passed.
func cardFigure(worst requirement, reqs []requirement) (figure string) {
	who := func(r requirement) string {
		if r.Cluster {
			return ""
		}
		return nodesIn(r.Alike, 24) + ": "
	}
	if worst.Status != string(record.Pass) {
		if worst.Status == string(record.Skip) {
			return worst.ID + " " + briefly(worst.Worst)
		}
		if h := worst.Worst.Retest; h != nil {
			// The card says the runs in a word; the reasons below it say
			// each run's figure.
			worst.Worst.Retest = nil
			defer func() { figure += fmt.Sprintf("; measured %d times", len(h.Runs)) }()
		}
		if worst.Cluster {
			return fmt.Sprintf("%s %s", worst.ID, reason(worst.Worst))
		}
		passed := fmt.Sprintf("%d/%d passed", worst.Passed, worst.Total-worst.NotJudged)
		if worst.NotJudged > 0 {
			passed += fmt.Sprintf(", %d not judged", worst.NotJudged)
		}
		return fmt.Sprintf("%s %s%s (%s)", worst.ID, who(worst), reason(worst.Worst), passed)
	}
	c := countVerdicts(reqs)
	for _, r := range reqs {
		if v := r.Worst; v.Value != nil && v.Rule() != "" {
			figure := record.Figure(*v.Value, v.Unit)
			if load(r.ID) && v.Measured != "" {
				// "p95 TTFT 612 ms": the figure alone does not say which
				// of the server's it is.
				figure = v.Measured
			}
			s := fmt.Sprintf("%s worst %s%s, held to %s", r.ID, who(r), figure, v.Rule())
			if c.notJudged > 0 {
				s += fmt.Sprintf(" (%s)", c)
			}
			return s
		}
	}
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.ID
	}
	switch {
	case c.notJudged > 0:
		return fmt.Sprintf("%s: %s", hostlist.Compress(ids), c)
	case c.passed == 1:
		return hostlist.Compress(ids) + ": its one verdict passed"
	}
	return fmt.Sprintf("%s: all %d verdicts passed", hostlist.Compress(ids), c.passed)
}

// load says whether id is a load test requirement (WORK-*).
func load(id string) bool { return record.FamilyOf(id) == "WORK" }

// worstText is a requirement's worst verdict in few words, with the nodes
// that said it.
func (r requirement) worstText() string {
	if r.Cluster {
		return briefly(r.Worst)
	}
	return nodesIn(r.Alike, 24) + ": " + briefly(r.Worst)
}

// quoteRows pair each figure the quote states with what the window
// measured of it: key, quoted value, requirement, what was measured (the
// worst), status.
func quoteRows(run *record.Run) [][]string {
	quote := quoteMap(run)
	if len(quote) == 0 {
		return nil
	}
	reqs := map[string]requirement{}
	for _, r := range requirements(run) {
		reqs[r.ID] = r
	}
	var rows [][]string
	seen := map[string]bool{}
	for _, q := range record.Catalog() {
		for _, key := range q.Quote {
			val, ok := quote[key]
			if !ok || seen[key+q.ID] || fmt.Sprint(val) == "" || fmt.Sprint(val) == "0" {
				continue
			}
			seen[key+q.ID] = true
			r, judged := reqs[q.ID]
			measured, status := "not measured: turn on "+q.Enable, cardNotRun
			if judged {
				measured, status = r.worstText(), r.Status
			}
			rows = append(rows, []string{"quote." + key, fmt.Sprint(val), q.ID, measured, status})
		}
	}
	return rows
}

// matrix is the node × requirement-family grid: each cell the worst
// status of the node's verdicts in the family, with the reasons it did
// not pass.
type matrix struct {
	Families []string
	Rows     []gridRow
}

type gridRow struct {
	Node  string
	Cells []gridCell
}

type gridCell struct {
	Status  string // "" when the family judged nothing on the node
	Reasons []string
}

func (c gridCell) Class() string { return strings.ToLower(strings.ReplaceAll(c.Status, " ", "-")) }

// Mark is the cell's text where colour is not shown (print, Markdown).
func (c gridCell) Mark() string {
	switch c.Status {
	case "":
		return "·"
	case string(record.Pass):
		return "ok"
	}
	return c.Status
}

func nodeMatrix(run *record.Run) matrix {
	var m matrix
	col := map[string]int{}
	for _, q := range record.Catalog() {
		if _, ok := col[q.Family]; !ok {
			col[q.Family] = -1
		}
	}
	// Only the families the run judged, in catalog order.
	used := map[string]bool{}
	for _, v := range run.Verdicts {
		if v.Node != "" {
			used[record.FamilyOf(v.ID)] = true
		}
	}
	seen := map[string]bool{}
	for _, q := range record.Catalog() {
		if used[q.Family] && !seen[q.Family] {
			seen[q.Family] = true
			col[q.Family] = len(m.Families)
			m.Families = append(m.Families, q.Family)
		}
	}
	for f := range used {
		if !seen[f] { // another version's family
			col[f] = len(m.Families)
			m.Families = append(m.Families, f)
		}
	}
	row := map[string]*gridRow{}
	for _, n := range run.Nodes {
		r := &gridRow{Node: n.Name, Cells: make([]gridCell, len(m.Families))}
		row[n.Name] = r
		m.Rows = append(m.Rows, *r)
	}
	for _, v := range verdicts(run) {
		r := row[v.Node]
		if r == nil {
			continue
		}
		c := &r.Cells[col[record.FamilyOf(v.ID)]]
		status := string(v.Status)
		if v.Incomplete != "" {
			status = StatusIncomplete
		}
		if c.Status == "" || cardRank(status) < cardRank(c.Status) {
			c.Status = status
		}
		if v.Status == record.Fail || v.Status == record.Warn || v.Incomplete != "" {
			c.Reasons = append(c.Reasons, v.ID+" "+reason(v))
		}
	}
	for i := range m.Rows {
		m.Rows[i] = *row[m.Rows[i].Node]
	}
	return m
}

// quoteMap is the run's quote by key (nil when it has none or it does not
// decode).
func quoteMap(run *record.Run) map[string]any {
	var q map[string]any
	if len(run.Quote) == 0 || json.Unmarshal(run.Quote, &q) != nil {
		return nil
	}
	return q
}

// reqAnchor is the id a requirement's row carries in both reports.
func reqAnchor(id string) string { return "req-" + strings.ToLower(id) }

// SignatureName is the signature of the manifest `gpuaccept sign` wrote
// next to it (ssh-keygen -Y sign's name for it) before it kept one per
// signer (SignerSignatureName); verify still checks it.
const SignatureName = ManifestName + ".sig"

// signoffLines say what a signature covers and what made the bundle, as
// plain text; the reports add lines for names and dates.
func signoffLines(run *record.Run, bf *BundleFacts) []string {
	var out []string
	if bf != nil && bf.Digest != "" {
		out = append(out, "Evidence digest (sha256 of "+ManifestName+"'s lines but the reports'): "+bf.Digest,
			"The manifest lists every file of the bundle, this report included; gpuaccept sign signs it, "+
				"one "+ManifestName+".<key>.sig per signer (prepared by, approved by), which this report, signed "+
				"with it, cannot list: gpuaccept verify checks every file and every signature and names who signed")
	} else {
		out = append(out, "Bundle digest: none (this report was not written into a bundle)")
	}
	tool := orNone(run.Tool)
	if b := run.Build; b != nil {
		commit := "not recorded (built without version control information: make build)"
		if b.Commit != "" {
			commit = b.Commit
			if b.Modified {
				commit += " with uncommitted changes"
			}
			if b.Time != "" {
				commit += " of " + b.Time
			}
		}
		out = append(out, "Made by "+tool+": version "+b.Version+", commit "+commit+", "+orNone(b.Go))
	} else {
		out = append(out, "Made by "+tool)
	}
	return out
}

// selectionText says what the window was narrowed to ("" for the whole
// inventory and plan).
func selectionText(run *record.Run) string {
	sel := run.Selection
	if sel == nil {
		return ""
	}
	var parts []string
	if sel.Nodes != "" {
		parts = append(parts, "nodes "+sel.Nodes+" of the inventory's")
	}
	if len(sel.Only) > 0 {
		parts = append(parts, "only "+strings.Join(sel.Only, ", "))
	}
	if len(sel.Skip) > 0 {
		parts = append(parts, "skipping "+strings.Join(sel.Skip, ", "))
	}
	return strings.Join(parts, "; ")
}
