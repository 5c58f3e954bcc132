// Package orchestrator runs an acceptance window: phases in lockstep over
// the nodes, a barrier between phases, a journal that survives the
// coordinator, quarantine of nodes that fail a gating phase, verdicts.
package orchestrator

import (
	"context"
	"slices"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Phase is one step of the window, as data. Exactly one of PerNode and
// Cluster is set.
type Phase struct {
	Name string
	// Gating: a node that fails it is quarantined (or, with --strict, the
	// window aborts).
	Gating bool
	// AlwaysRun phases run again on --resume even when the journal holds
	// their results (connect: connections do not survive the coordinator).
	AlwaysRun bool
	// Provisions: a per-node phase that puts on a node what the later
	// phases run (the tools phase's scripts). It runs again on a node
	// whose pod was replaced by a new one (Reconnect), whose filesystem
	// started empty.
	Provisions bool
	// Serves names the phases an essential phase exists for (the window's
	// key: the MPI launches and the image relay). When the selection
	// leaves out every one of them, it is left out too, and on --resume it
	// runs again only while one of them is still to run: at 1,000 nodes a
	// --only preflight spent 741 s installing a key nothing used.
	Serves []string
	// ServesIf narrows Serves by the inventory: a phase named there
	// counts only when this says the inventory has it need this one (the
	// burn-in needs the window's key only when it loops the cluster
	// all-reduce); nil: each one always does.
	ServesIf func(inv *inventory.Inventory, name string) bool
	// Teardown phases run after everything else, also when the window was
	// interrupted or aborted, on every node that was reached.
	Teardown bool
	// Release: this teardown phase also runs on a node the idle guard
	// releases early, at its release (what only checks runs at the end).
	Release bool
	// Together: every node at once, whatever the transport's fan-out: its load
	// is the fleet's at the same time (the burn-in). A per-node phase
	// otherwise runs the fan-out's nodes at a time, and a burn-in of a
	// day on 1,000 nodes would take a month of waves.
	Together bool
	// Loads: its work keeps the GPUs busy, so a node whose GPUs sit idle
	// under it is held for nothing (the idle guard); every other phase is
	// meant to leave them idle.
	Loads bool
	// Enabled says whether the inventory wants it; nil means always.
	Enabled func(inv *inventory.Inventory) bool
	// Skipped says why the window's selection (--only, --skip) leaves it
	// out; "" when it does not.
	Skipped string
	// Deadline bounds the phase on each node (or the cluster body): the
	// phase's built-in bound, which the inventory's phases.deadline
	// replaces unless Own says the inventory set this phase's bound itself.
	Deadline func(inv *inventory.Inventory) time.Duration
	// Own says the inventory sets this phase's bound itself
	// (phases.<name>.timeout, or a setting Deadline is computed from, such
	// as the all-reduce's per-sweep timeout); nil means it never does.
	Own func(inv *inventory.Inventory) bool
	// Duration is how long the phase is set to run, whatever its work (a
	// burn-in's duration), recorded in the plan for `gpuaccept status`;
	// nil for a phase that runs as long as its work takes.
	Duration func(inv *inventory.Inventory) time.Duration
	// PerNode runs on every node still in the window, all at once. Its
	// value is recorded as the node's result data (JSON).
	PerNode func(ctx context.Context, w *Window, n *Node) (any, error)
	// Cluster runs once for the whole window.
	Cluster func(ctx context.Context, w *Window) (any, error)
	// Judge turns recorded results into verdicts; it reads only the record
	// (so a resumed window judges exactly as an uninterrupted one).
	Judge func(w *Window) []record.Verdict
}

func (p *Phase) enabled(inv *inventory.Inventory) bool {
	return p.Skipped == "" && (p.Enabled == nil || p.Enabled(inv))
}

// runsAgain says whether p runs on --resume although the journal holds
// its results: an AlwaysRun phase does, unless every phase it serves is
// done or not in the window.
func (p *Phase) runsAgain(phases []Phase, inv *inventory.Inventory, done map[string]bool) bool {
	if !p.AlwaysRun {
		return false
	}
	if len(p.Serves) == 0 {
		return true
	}
	for i := range phases {
		if q := &phases[i]; p.serves(q.Name, inv) && q.enabled(inv) && !done[q.Name] {
			return true
		}
	}
	return false
}

// serves says whether p is there for the phase named, in this inventory.
func (p *Phase) serves(name string, inv *inventory.Inventory) bool {
	return slices.Contains(p.Serves, name) && (p.ServesIf == nil || p.ServesIf(inv, name))
}

// deadline is the phase's own bound when the inventory sets one, else
// phases.deadline (the default for every phase without a timeout of its
// own: it used to lose to every built-in bound, so it changed nothing),
// else the built-in bound. Teardown keeps its built-in budget: cleanup
// must not be cut short, nor a hung node held, by a bound chosen for
// measuring. The plan, check --connect's bound and the run all read this.
func (p *Phase) deadline(inv *inventory.Inventory) time.Duration {
	builtin := time.Duration(0)
	if p.Deadline != nil {
		builtin = p.Deadline(inv)
	}
	if builtin > 0 && p.Own != nil && p.Own(inv) {
		return builtin
	}
	if inv.Phases.Deadline > 0 && !p.Teardown {
		return inv.Phases.Deadline
	}
	if builtin > 0 {
		return builtin
	}
	return 10 * time.Minute
}

// PhaseDeadline is the deadline p runs under for inv (for plans).
func PhaseDeadline(p *Phase, inv *inventory.Inventory) time.Duration { return p.deadline(inv) }

type phaseKey struct{}
type logKey struct{}

// withPhase marks ctx as the work of the phase named name.
func withPhase(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, phaseKey{}, name)
}

type releasingKey struct{}

// Releasing says ctx carries the teardown of a node the idle guard is
// releasing while the window goes on: it takes only what is its own.
func Releasing(ctx context.Context) bool {
	b, _ := ctx.Value(releasingKey{}).(bool)
	return b
}

// PhaseOf is the name of the phase whose work ctx carries; "" outside
// one. The runner sets it, so a phase never writes its own name again.
func PhaseOf(ctx context.Context) string {
	s, _ := ctx.Value(phaseKey{}).(string)
	return s
}

// WithLog sends the raw output of work under ctx to raw/<node>/<name>.log
// instead of the phase's own log (one log per bisection pair, say).
func WithLog(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, logKey{}, name)
}

// LogOf is the raw log that work under ctx writes: WithLog's, else the
// phase's; "window" outside both.
func LogOf(ctx context.Context) string {
	if s, _ := ctx.Value(logKey{}).(string); s != "" {
		return s
	}
	if s := PhaseOf(ctx); s != "" {
		return s
	}
	return "window"
}
