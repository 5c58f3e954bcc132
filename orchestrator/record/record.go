// Package record is the evidence of one acceptance window: what ran on
// which node, what it found, and the verdicts. The runner fills it; the
// reports package renders it; run.json is its JSON form.
package record

import (
	"encoding/json"
	"time"
)

// Schema is the version of run.json's layout; bump it on any incompatible
// change.
const Schema = 1

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
}

// Inventory identifies the input exactly.
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
	// Facts are what preflight found (GPU models, versions, NICs...).
	Facts json.RawMessage `json:"facts,omitempty"`
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
}

// Accepted reports whether no verdict failed and at least one passed: a
// window that judged nothing accepted nothing.
func (r *Run) Accepted() bool {
	passed := false
	for _, v := range r.Verdicts {
		switch v.Status {
		case Fail:
			return false
		case Pass:
			passed = true
		}
	}
	return passed
}
