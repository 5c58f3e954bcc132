package orchestrator

import (
	"context"
	"encoding/json"
	"path/filepath"
	"time"

	"gpuaccept/orchestrator/record"
)

// journalIdle keeps a signalled stretch in the journal: `gpuaccept status`
// shows it, and a resumed window's record keeps it.
func (w *Window) journalIdle(n *Node, st record.IdleStretch) {
	data, err := json.Marshal(st)
	if err != nil || w.j == nil {
		return
	}
	w.journal(w.j, entry{Type: "idle", Node: n.Name, Phase: st.Phase, Value: string(data)})
}

// release ends the window's use of n: its sampler stops, the window's
// teardown phases run on it now, and it takes part in nothing after.
// The rest of the window goes on. Calling it again does nothing.
func (w *Window) release(n *Node, why string) {
	if n.released.on.CompareAndSwap(false, true) {
		w.releaseMarked(n, why)
	}
}

// releaseMarked is release for a node already marked released.
func (w *Window) releaseMarked(n *Node, why string) {
	w.Progress.Node(n.Name, "released (%s): tearing it down while the window goes on", why)
	if err := w.StopBackgroundOf(n.Name, backgroundGrace); err != nil {
		w.Progress.Node(n.Name, "%s", firstLine(err.Error()))
	}
	for _, p := range w.teardowns {
		if p.Release {
			w.teardownOne(p, n)
		}
	}
	end := time.Now().UTC()
	n.released.at.Store(end.UnixNano())
	if w.j != nil {
		// Journaled once its teardown ended: a coordinator lost before
		// that leaves the node to the window's own teardown.
		w.journal(w.j, entry{Type: "release", Node: n.Name, Reason: why, At: end})
	}
	w.Progress.Node(n.Name, "released: teardown done")
}

// teardownOne runs teardown phase p on n alone, bounded by its deadline,
// on a context nothing of the window cancels (a window interrupted while
// a node is being released still cleans it).
func (w *Window) teardownOne(p *Phase, n *Node) {
	if !p.enabled(w.Inv) || p.PerNode == nil {
		return
	}
	deadline := p.deadline(w.Inv)
	ctx, cancel := context.WithTimeout(context.WithValue(withPhase(context.Background(), p.Name), releasingKey{}, true), deadline)
	defer cancel()
	start := time.Now().UTC()
	w.redialLost(ctx, n)
	v, err := guarded(func() (any, error) { return p.PerNode(ctx, w, n) })
	pr := record.PhaseResult{Phase: p.Name, Node: n.Name, Index: n.Index, Outcome: record.OK,
		Started: start, Ended: time.Now().UTC()}
	if rel := filepath.Join("raw", n.Name, p.Name+".log"); fileExists(filepath.Join(w.Dir, rel)) {
		pr.Log = rel
	}
	if v != nil {
		if data, jerr := json.Marshal(v); jerr == nil {
			pr.Data = data
		}
	}
	if nm, unmeasured := IsNotMeasured(err); unmeasured {
		pr.Outcome, pr.Error = record.NotMeasured, nm.Error()
	} else if err != nil {
		pr.Outcome, pr.Error = record.Failed, explain(err, deadline)
		w.Progress.Node(n.Name, "%s failed: %s", p.Name, firstLine(pr.Error))
	}
	bounded(&pr)
	if w.j != nil {
		w.record(w.j, pr, nil)
	}
}

// releasePending releases, before a phase starts, the active nodes the
// guard signalled during the last one.
func (w *Window) releasePending() {
	g := w.idle
	if g == nil {
		return
	}
	for _, name := range g.takePending() {
		n := w.node(name)
		if n == nil || n.released.Load() {
			continue
		}
		// Out of Active at once, so the phase about to start leaves it
		// out; its teardown runs beside that phase.
		if !n.released.on.CompareAndSwap(false, true) {
			continue
		}
		g.releases.Add(1)
		go func() {
			defer g.releases.Done()
			w.releaseMarked(n, "idle under a phase that loads the GPUs")
		}()
	}
}

// resumeReleased marks the nodes the journal says were released.
func (w *Window) resumeReleased(es []entry) {
	for _, e := range es {
		if n := w.node(e.Node); n != nil {
			n.released.on.Store(true)
			n.released.at.Store(e.At.UnixNano())
		}
	}
}

// resumeIdle gives a resumed guard the stretches the journal holds.
func (g *idleGuard) resumeIdle(es []entry) {
	if g == nil {
		return
	}
	for _, e := range es {
		var st record.IdleStretch
		if json.Unmarshal([]byte(e.Value), &st) == nil && st.Node == e.Node {
			g.done = append(g.done, st)
		}
	}
}
