// Package record is the evidence of one acceptance window: what ran on
// which node, what it found, and the verdicts. The runner fills it; the
// reports package renders it; run.json is its JSON form.
package record

import (
	"encoding/json"
	"math"
	"time"
)

// Schema is the version of run.json's layout; bump it on any incompatible
// change. OldestSchema is the oldest this gpuaccept still reads: schema 2
// keeps a node's facts only in its preflight result (NodeFacts reads
// both) and thins what sweeps, the failure test and windowkey record.
const (
	Schema       = 2
	OldestSchema = 1
)

// Status of a verdict.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Warn Status = "WARN"
	Skip Status = "SKIP"
)

// Run is everything a window produced.
type Run struct {
	Schema    int       `json:"schema"`
	ID        string    `json:"id"`   // e.g. 20261130T054012Z-vendor-a
	Tool      string    `json:"tool"` // gpuaccept version
	Simulated bool      `json:"simulated"`
	Inventory Inventory `json:"inventory"`
	Provider  string    `json:"provider"`
	Region    string    `json:"region"`
	Window    string    `json:"window"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
	// Interrupted is set when the window was cut short (Ctrl-C, SIGTERM).
	Interrupted bool `json:"interrupted,omitempty"`
	// Aborted explains a window stopped by --strict or a fatal error.
	Aborted string `json:"aborted,omitempty"`
	// Resumed lists the times the window was resumed after its
	// coordinator was lost.
	Resumed []time.Time `json:"resumed,omitempty"`

	Nodes    []Node        `json:"nodes"`
	Phases   []PhaseResult `json:"phases"`
	Verdicts []Verdict     `json:"verdicts"`
	// Quote is the provider's quote as given in the inventory.
	Quote json.RawMessage `json:"quote,omitempty"`
	// Plan is what the window set out to run: every phase, on or off, in
	// order, with its deadline.
	Plan []PlannedPhase `json:"plan,omitempty"`
	// Lint is what `gpuaccept check` said of the quote and the plan when
	// the window started (QUOTE-..., PLAN-...): the red flags a buyer signs
	// over. [] when it found none, absent when the run did not keep it
	// (made before gpuaccept did): a clean quote is not missing data.
	Lint []Finding `json:"lint,omitzero"`
	// Selection is what run --nodes, --only and --skip narrowed the window
	// to; absent for the whole inventory.
	Selection *Selection `json:"selection,omitempty"`
	// Build is the gpuaccept binary that made the run, from its build
	// information.
	Build *Build `json:"build,omitempty"`
	// Regression is how much worse than in an earlier run of the same
	// cluster a measured figure may be before `gpuaccept diff` calls it a
	// regression (the inventory's acceptance.regression and
	// acceptance.regression_by_id). Absent in runs made before it existed.
	Regression *Regression `json:"regression,omitempty"`
	// Ledger is what the window cost and what that bought (absent when the
	// quote has no price).
	Ledger *Ledger `json:"ledger,omitempty"`
	// Billing is how the provider's usage export is read and what it must
	// carry (the inventory's billing keys); absent when none is given.
	Billing *Billing `json:"billing,omitempty"`
	// Idle is what the idle guard saw; nil when it was off.
	Idle *IdleGuard `json:"idle,omitempty"`
	// Slurm is the window's own allocation (slurm.allocate); nil when the
	// inventory named its nodes.
	Slurm *SlurmAllocation `json:"slurm,omitempty"`
	// Kubernetes is what the API said of the window's nodes and what
	// became of its pods; nil when no node is reached by transport
	// kubernetes.
	Kubernetes *KubeCluster `json:"kubernetes,omitempty"`
	// Telemetry is each node's GPUs summarised per phase (min / median /
	// max of what the window's sampler recorded; the series itself is
	// raw/<node>/telemetry.txt.gz). Absent when the sampler did not run.
	Telemetry map[string][]TelemetryPhase `json:"telemetry,omitempty"`
}

// Billing is the inventory's billing keys, kept so that `gpuaccept bill`
// reads a run's export as the window would have.
type Billing struct {
	// Export is the usage export the window judged, as the inventory
	// names it.
	Export string `json:"export,omitempty"`
	// Columns maps the generic export's fields (resource, start, end,
	// quantity, unit, cost, currency, rate, item, tags) to its columns.
	Columns map[string]string `json:"columns,omitempty"`
	// RequiredTags are the tags every billed line must carry to be
	// attributable (team, workload, environment, job).
	RequiredTags []string `json:"required_tags,omitempty"`
	// Reconciled is the export as the window judged it (billing.export
	// there at its end); absent when it was not.
	Reconciled *Reconciliation `json:"reconciled,omitempty"`
}

// Reconciliation is a usage export held against runs: what it billed
// each node against the window's own time and the ledger's cost.
type Reconciliation struct {
	Export   string           `json:"export"`
	Format   string           `json:"format"`
	Currency string           `json:"currency,omitempty"`
	Nodes    []ReconciledNode `json:"nodes"`
	// Unmatched: lines of the windows' days that name no node.
	UnmatchedLines int     `json:"unmatched_lines,omitempty"`
	UnmatchedCost  float64 `json:"unmatched_cost,omitempty"`
	// OutsideLines lie outside every window's days: not held against it.
	OutsideLines int      `json:"outside_lines,omitempty"`
	Billed       float64  `json:"billed"`
	Ledger       *float64 `json:"ledger,omitempty"` // absent: no run has a ledger
}

// ReconciledNode is one node's bill: the export's lines naming it, the
// node time and cost they bill, the window's own time (to its end or
// release) and that rounded up to the quote's granularity, and the
// ledger's cost.
type ReconciledNode struct {
	Node         string   `json:"node"` // "<run id>:<name>" when several runs are reconciled
	Lines        []int    `json:"lines"`
	BilledSecs   float64  `json:"billed_seconds"`
	WindowSecs   float64  `json:"window_seconds"`
	ExpectedSecs float64  `json:"expected_seconds"`
	BilledCost   float64  `json:"billed_cost"`
	LedgerCost   *float64 `json:"ledger_cost,omitempty"`
}

// TelemetryPhase is one GPU's figures over one phase of the window, as
// the telemetry package summarises them (telemetry.GPUPhase: this package
// cannot import that one, which judges into Verdicts).
type TelemetryPhase struct {
	Phase   string        `json:"phase"`
	GPU     int           `json:"gpu"`
	Temp    TelemetryStat `json:"temp_c"`
	Power   TelemetryStat `json:"power_w"`
	SMClock TelemetryStat `json:"sm_clock_mhz"`
	Util    TelemetryStat `json:"util_pct"`
}

// TelemetryStat is a figure's distribution over a phase: N samples.
type TelemetryStat struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Ledger is the window's cost: billed time per node rounded to the
// quote's billing granularity (each node's time counted once), the other
// billed components, and the cost per accepted unit.
type Ledger struct {
	Currency        string       `json:"currency"`
	Granularity     string       `json:"granularity"` // the quote's billing_granularity, e.g. "1m"
	PricePerGPUHour float64      `json:"price_per_gpu_hour"`
	Nodes           []LedgerNode `json:"nodes"`
	// BilledGPUHours and ComputeCost: the nodes' billed time, summed.
	BilledGPUHours float64 `json:"billed_gpu_hours"`
	ComputeCost    float64 `json:"compute_cost"`
	// Extras are the other components of the window's cost (storage,
	// egress, support, licences), each once.
	Extras    map[string]float64 `json:"extras,omitempty"`
	TotalCost float64            `json:"total_cost"`
	// Unit is what the buyer counts as accepted work ("accepted node",
	// "1k training steps"); AcceptedUnits how many the window produced;
	// CostPerUnit = TotalCost / AcceptedUnits (nil when none was accepted).
	Unit          string   `json:"unit"`
	AcceptedUnits float64  `json:"accepted_units"`
	CostPerUnit   *float64 `json:"cost_per_unit,omitempty"`
	// TCO is the monthly total cost of ownership, when the inventory gives
	// its inputs.
	TCO *TCO `json:"tco,omitempty"`
}

// LedgerNode is one node's billed time. IdleSecs (billed, no phase running
// on it) and FailedSecs (billed while its work failed or was quarantined)
// are diagnostics inside BilledSecs, never added to it.
type LedgerNode struct {
	Name       string  `json:"name"`
	GPUs       int     `json:"gpus"`
	Secs       float64 `json:"seconds"`        // from its first to its last moment in the window
	BilledSecs float64 `json:"billed_seconds"` // Secs rounded up to the granularity
	Cost       float64 `json:"cost"`
	IdleSecs   float64 `json:"idle_seconds"`
	FailedSecs float64 `json:"failed_seconds"`
	Accepted   bool    `json:"accepted"`
}

// TCO is the monthly formula: committed compute + burst + persistent
// storage + snapshots + egress + support + idle waste + retry waste +
// engineering overhead.
type TCO struct {
	Components map[string]float64 `json:"components"`
	Monthly    float64            `json:"monthly"`
}

// TCOComponents are the names of TCO.Components, in the formula's order.
var TCOComponents = []string{"committed_compute", "burst", "persistent_storage", "snapshots", "egress",
	"support", "idle_waste", "retry_waste", "engineering_overhead"}

// LedgerExtras are the names of Ledger.Extras, in the order reports list
// them: host resources billed apart from the GPUs, storage, egress, support,
// licences.
var LedgerExtras = []string{"host", "storage", "egress", "support", "licences"}

// DefaultRegression is the fraction by which a figure may be worse than
// the baseline's before it is a regression, when a run says nothing.
const DefaultRegression = 0.05

// Regression holds the regression thresholds of a run: fractions of the
// baseline's figure (0.05: a figure 5% worse is still no regression).
type Regression struct {
	Threshold float64            `json:"threshold"`
	ByID      map[string]float64 `json:"by_id,omitempty"`
}

// For is the threshold for requirement id: its own when set, else the
// run's; DefaultRegression when r is nil.
func (r *Regression) For(id string) float64 {
	if r == nil {
		return DefaultRegression
	}
	if t, ok := r.ByID[id]; ok {
		return t
	}
	return r.Threshold
}

// Inventory identifies the input exactly.
// Selection is what the window was narrowed to: a host range of node
// names, the phases it ran only, the phases it skipped.
type Selection struct {
	Nodes string   `json:"nodes,omitempty"`
	Only  []string `json:"only,omitempty"`
	Skip  []string `json:"skip,omitempty"`
}

// PlannedPhase is one phase of the plan.
type PlannedPhase struct {
	Name     string `json:"name"`
	Enabled  bool   `json:"enabled"`
	Deadline string `json:"deadline,omitempty"` // a Go duration, e.g. "10m0s"
	Gating   bool   `json:"gating,omitempty"`   // a node that fails it is quarantined
	// Duration is how long the phase is set to run (the burn-in's
	// phases.burnin.duration), a Go duration; absent for a phase that runs
	// as long as its work takes.
	Duration string `json:"duration,omitempty"`
	// Skipped: why the selection left it out (--skip, --only).
	Skipped string `json:"skipped,omitempty"`
}

// Finding is one warning of the quote lint: a stable ID, what it says, and
// the inventory keys it is about.
type Finding struct {
	ID      string   `json:"id"`
	Message string   `json:"message"`
	Keys    []string `json:"keys,omitempty"`
}

// Build is what the Go toolchain stamped into the binary.
type Build struct {
	Version  string `json:"version"`            // the module version, "(devel)" for a plain go build
	Commit   string `json:"commit,omitempty"`   // vcs.revision
	Time     string `json:"time,omitempty"`     // vcs.time
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go,omitempty"`
}

type Inventory struct {
	Path   string `json:"path"`
	Digest string `json:"sha256"`
}

// Node is one node of the window.
type Node struct {
	Index   int               `json:"index"`
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Quarantined: the node failed a gating phase and was left out of
	// later multi-node phases; Reason says which and why.
	Quarantined bool   `json:"quarantined,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// QuarantinedAt is when it happened (the end of the phase that found it
	// unfit); zero in runs recorded before it existed.
	QuarantinedAt time.Time `json:"quarantined_at,omitzero"`
	// ReleasedAt: the idle guard ended the window's use of the node then
	// (idle.action release; its teardown ended); the ledger bills it to
	// here.
	ReleasedAt time.Time `json:"released_at,omitzero"`
	// BillingID is what the provider's usage export calls the node (an
	// instance or resource ID: the inventory's billing_id), when it is
	// neither its name nor its address.
	BillingID string `json:"billing_id,omitempty"`
	// Facts are what preflight found (GPU models, versions, NICs...), as
	// runs recorded them before the schema kept them once, in the node's
	// preflight result: read them with Run.NodeFacts.
	Facts json.RawMessage `json:"facts,omitempty"`
}

// FactsPhase is the phase whose successful result on a node is what the
// node is (its identity, GPUs, versions, NICs).
const FactsPhase = "preflight"

// NodeFacts is what preflight found on the named node: its successful
// FactsPhase result's data, or for runs recorded before that, the facts
// kept on the node; nil when neither exists.
func (r *Run) NodeFacts(node string) json.RawMessage {
	for _, p := range r.Phases {
		if p.Phase == FactsPhase && p.Node == node && p.Outcome == OK && len(p.Data) > 0 {
			return p.Data
		}
	}
	for _, n := range r.Nodes {
		if n.Name == node {
			return n.Facts
		}
	}
	return nil
}

// PhaseResult is one phase on one node (or on the cluster: Node == "").
type PhaseResult struct {
	Phase   string          `json:"phase"`
	Node    string          `json:"node,omitempty"`
	Index   int             `json:"index"` // node index; -1 for a cluster-wide result
	Outcome Outcome         `json:"outcome"`
	Error   string          `json:"error,omitempty"`
	Started time.Time       `json:"started"`
	Ended   time.Time       `json:"ended"`
	Log     string          `json:"log,omitempty"` // raw/<node>/<phase>.log, relative to the run dir
	Data    json.RawMessage `json:"data,omitempty"`
}

// Outcome of a phase on a node.
type Outcome string

const (
	OK          Outcome = "ok"
	Failed      Outcome = "failed"
	Skipped     Outcome = "skipped"     // not run: disabled, or the node was quarantined
	Interrupted Outcome = "interrupted" // cut short by Ctrl-C or SIGTERM
	// NotMeasured: the node lacks a tool the phase needs (Error says
	// which); its requirements are SKIP with an Incomplete reason, and
	// the node is not quarantined: a missing tool is not a broken node.
	NotMeasured Outcome = "not_measured"
)

// Verdict is one acceptance criterion judged.
type Verdict struct {
	ID        string   `json:"id"` // requirement ID, e.g. GPU-001
	Title     string   `json:"title"`
	Node      string   `json:"node,omitempty"` // empty: the whole cluster
	Status    Status   `json:"status"`
	Measured  string   `json:"measured,omitempty"`
	Quoted    string   `json:"quoted,omitempty"`
	Ratio     *float64 `json:"ratio,omitempty"`
	Tolerance *float64 `json:"tolerance,omitempty"`
	Detail    string   `json:"detail,omitempty"`
	// Value is the figure the verdict measured, as a number in Unit, for
	// comparing runs (`gpuaccept diff`); absent when it measured none.
	// Which way is better depends on the unit: see LowerIsBetter.
	Value *float64 `json:"value,omitempty"`
	Unit  string   `json:"unit,omitempty"`
	// Incomplete says why the requirement could not be judged for a
	// reason that is not the provider's (the node was not reached from
	// the buyer's side): the window is INCOMPLETE, not failed or passed.
	Incomplete string `json:"incomplete,omitempty"`
	// Retest is the figure's history when it was measured more than once
	// because a run failed: every run in order, the last the verdict rests
	// on (unless Unstable says the runs disagreed both ways).
	Retest *Retest `json:"retest,omitempty"`
}

// Units of Verdict.Value.
const (
	UnitGBs     = "GB/s"  // throughput: higher is better
	UnitSeconds = "s"     // a duration: lower is better
	UnitSteps   = "steps" // training steps lost: lower is better
	UnitScore   = ""      // a unitless ratio (NCCL-004's node score): higher is better

	UnitMicroseconds  = "µs"       // a latency: lower is better
	UnitMilliseconds  = "ms"       // a latency: lower is better
	UnitTokensPerSec  = "tokens/s" // throughput: higher is better
	UnitPerSecond     = "/s"       // samples or tokens per second (the verdict's Measured says which): higher is better
	UnitPercentFailed = "% failed" // a share that went wrong: lower is better
	UnitPercentGood   = "%"        // a share that went right (goodput, headroom): higher is better
	UnitTimesMedian   = "× median" // a node's figure over the fleet's median (the straggler's step): lower is better
	UnitMHz           = "MHz"      // a clock under load: higher is better
	UnitTFLOPS        = "TFLOP/s"  // a GPU's compute rate: higher is better
	UnitTimesFirst    = "× first"  // a burn-in's last window over its first (under 1: it slowed): higher is better
)

// LowerIsBetter says which way a Value in unit improves: durations and
// steps lost are better smaller; throughputs and scores better larger.
func LowerIsBetter(unit string) bool {
	switch unit {
	case UnitSeconds, UnitSteps, UnitMicroseconds, UnitMilliseconds, UnitPercentFailed, UnitTimesMedian:
		return true
	}
	return false
}

// Measure sets the verdict's Value and Unit; a NaN or infinite x (a rate
// over no time) is no measurement and leaves them unset, since run.json
// cannot hold it.
func (v *Verdict) Measure(x float64, unit string) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return
	}
	v.Value, v.Unit = &x, unit
}

// Accepted reports whether the window's outcome is ACCEPTED (Result).
func (r *Run) Accepted() bool { return r.Result().Outcome == OutcomeAccepted }

// IdleGuard is the idle guard's settings and the stretches it signalled.
type IdleGuard struct {
	AfterS  float64 `json:"after_s"`
	UtilPct float64 `json:"util_pct"`
	Action  string  `json:"action"`
	// Notify is idle.notify as written (its output stays in the raw log).
	Notify    string        `json:"notify,omitempty"`
	Stretches []IdleStretch `json:"stretches"`
	// Heard: node name → how many GPU rows the guard heard from it (in
	// the last coordinator's life: a resumed window counts anew). A node
	// it heard nothing from was not watched.
	Heard map[string]int `json:"heard,omitempty"`
}

// IdleStretch is one node's GPUs idle, every one of them, from Since to
// Until while the node was held for nothing.
type IdleStretch struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
	// Until is the last sample of the stretch: the GPUs' first busy
	// sample, the start of a phase meant to be idle, the release, or the
	// end of the sampling.
	Until time.Time `json:"until"`
	// Signalled is when the guard said so (Since + idle.after).
	Signalled time.Time `json:"signalled"`
	// Phase is the phase under way when it was signalled ("" between
	// phases); Quarantined says the node was out of the window then.
	Phase       string `json:"phase,omitempty"`
	Quarantined bool   `json:"quarantined,omitempty"`
	// Notify is how idle.notify ended: "exit 0", "exit 3", "timed out
	// after 1m0s", "not run: ..."; "" when there is none.
	Notify string `json:"notify,omitempty"`
	// Released is when the node's release teardown ended (idle.action
	// release); zero when it was not released.
	Released time.Time `json:"released,omitzero"`
}

// Where says where the node sat idle: "quarantined", or "in <phase>".
func (s IdleStretch) Where() string {
	if s.Quarantined {
		return "quarantined"
	}
	return "in " + s.Phase
}

// Seconds is the stretch's length.
func (s IdleStretch) Seconds() float64 { return max(s.Until.Sub(s.Since).Seconds(), 0) }
