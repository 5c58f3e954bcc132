package orchestrator

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// Window is the state of one acceptance window, shared with the phases.
type Window struct {
	Inv      *inventory.Inventory
	Dir      string // the run directory
	Nodes    []*Node
	Progress *Progress
	HostKeys *remote.HostKeys

	mu  sync.Mutex
	rec *record.Run
}

// Node is one node of the window.
type Node struct {
	Index  int
	Name   string
	Config remote.Config
	// Client is set by the connect phase; nil when the node is unreachable.
	Client *remote.Client

	quarantined bool
	reason      string
	// reached: some phase ran on the node; teardown visits every such node.
	reached bool
}

// Quarantined reports whether the node was left out, and why.
func (n *Node) Quarantined() (bool, string) { return n.quarantined, n.reason }

// Record returns the run record. Phases read it in Judge; they do not
// modify it.
func (w *Window) Record() *record.Run { return w.rec }

// RunID is the window's identity, also used to mark its processes on the
// nodes.
func (w *Window) RunID() string { return w.rec.ID }

// Result returns the recorded data of phase on node index i, decoded into
// v; false when there is none (not run, failed without data).
func (w *Window) Result(phase string, i int, v any) (record.PhaseResult, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := len(w.rec.Phases) - 1; j >= 0; j-- {
		r := w.rec.Phases[j]
		if r.Phase == phase && r.Index == i {
			if v != nil && len(r.Data) > 0 {
				if err := json.Unmarshal(r.Data, v); err != nil {
					return r, false
				}
			}
			return r, true
		}
	}
	return record.PhaseResult{}, false
}

// LogFile opens raw/<node>/<phase>.log for appending; every byte a phase
// gets from a node goes there, so the evidence holds the tools' own words.
func (w *Window) LogFile(n *Node, phase string) (io.WriteCloser, string, error) {
	rel := filepath.Join("raw", n.Name, phase+".log")
	path := filepath.Join(w.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %s: %w", n.Name, phase, err)
	}
	return f, rel, nil
}

// Active lists the nodes not quarantined, in index order.
func (w *Window) Active() []*Node {
	var out []*Node
	for _, n := range w.Nodes {
		if !n.quarantined {
			out = append(out, n)
		}
	}
	return out
}
