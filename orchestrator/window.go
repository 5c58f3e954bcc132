package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
)

// Window is the state of one acceptance window, shared with the phases.
type Window struct {
	Inv      *inventory.Inventory
	Dir      string // the run directory
	Nodes    []*Node
	Progress *Progress
	// Executable is the gpuaccept binary phases upload to the nodes (the
	// load generator): Options.Executable, else the running binary; ""
	// when neither is known.
	Executable string

	mu     sync.Mutex
	rec    *record.Run
	shared map[string]*sharedValue
	login  *Node
	// slurmUnjournaled: an allocation a resumed window found granted that
	// its journal did not hold yet (journaled once the journal is open).
	slurmUnjournaled *slurm.Allocation
	reach            *Reach
	podsReleased     bool // releasePods ran
	j                *journal
	ends             time.Time
	// bundleErr: the first write of the bundle (journal, raw log) that
	// failed; the window ends at the next phase, tears down and says so.
	bundleErr error
	// bg: what runs beside the phases until teardown (Background).
	bg background
	// idle is the idle guard; nil when it is off. teardowns are the
	// window's teardown phases, which a released node runs at once.
	idle      *idleGuard
	teardowns []*Phase
	// provision is the phase run again on a node whose pod was replaced
	// (Phase.Provisions), nil when the window has none.
	provision *Phase
}

// Deadline is when the window will be over at the latest: when it (or its
// resumption) began, plus every phase's deadline still to run, plus
// teardown's. What must not outlive the window (the window key) expires
// by it.
func (w *Window) Deadline() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ends.IsZero() {
		return time.Now().Add(time.Hour)
	}
	return w.ends
}

// Node is one node of the window.
type Node struct {
	Index  int
	Name   string
	Config remote.Config

	// exec is how phases reach the node: set by the window's Connect and
	// Reconnect, nil while the node is not connected. dialling serialises
	// the dials of one node.
	mu       sync.Mutex
	exec     remote.Executor
	dialling sync.Mutex
	// unprovisioned: the address of the pod the node's new one replaced,
	// until the provisioning phase ran in it (held under dialling).
	unprovisioned string
	notes         map[string]string

	quarantined   bool
	reason        string
	quarantinedAt time.Time
	// reached: some phase ran on the node; teardown visits every such node.
	reached bool
	// released: the idle guard ended the window's use of the node.
	released releasedMark
}

// setQuarantined takes n out of the window's later phases. Under n.mu:
// the idle guard reads it from the sampler's goroutine.
func (n *Node) setQuarantined(reason string, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.quarantined, n.reason, n.quarantinedAt = true, reason, at
}

// Released says the idle guard ended the window's use of n: its teardown
// is under way or done, while the others go on.
func (n *Node) Released() bool { return n.released.Load() }

func (n *Node) quarantinedNow() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.quarantined
}

// Exec is the node's executor; nil when it is not connected (never
// reached, or its connection was closed).
func (n *Node) Exec() remote.Executor {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exec
}

func (n *Node) setExec(e remote.Executor) (old remote.Executor) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old, n.exec = n.exec, e
	return old
}

// Note keeps a fact about node n that later phases, teardown and a
// resumed window need (where its private directory is): journaled before
// it returns, so a coordinator lost right after still finds it.
func (w *Window) Note(n *Node, key, value string) error {
	if w.j != nil {
		// Kept in memory even when the journal cannot take it: teardown
		// needs it to find what to clean.
		w.journal(w.j, entry{Type: "note", Node: n.Name, Key: key, Value: value})
	}
	n.note(key, value)
	return nil
}

// Noted is what Note kept about n under key, in this window or in the
// journal of the one it resumes; "" when nothing.
func (n *Node) Noted(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.notes[key]
}

func (n *Node) note(key, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.notes == nil {
		n.notes = map[string]string{}
	}
	n.notes[key] = value
}

// Connect dials n afresh (closing the connection it had): the connect
// phase's way in, since no connection outlives a coordinator.
func (w *Window) Connect(ctx context.Context, n *Node) (remote.Executor, error) {
	n.dialling.Lock()
	defer n.dialling.Unlock()
	if old := n.setExec(nil); old != nil {
		old.Close()
	}
	e, err := w.reach.Dial(ctx, n.Config)
	if err != nil {
		return nil, err
	}
	n.setExec(e)
	return e, nil
}

// Reconnect is n's executor, dialled again when the node has none or its
// connection was lost: one more try, so that a network blip does not
// leave a node unprobed or uncleaned.
func (w *Window) Reconnect(ctx context.Context, n *Node) (remote.Executor, error) {
	n.dialling.Lock()
	defer n.dialling.Unlock()
	if e := n.Exec(); e != nil && !e.Lost() {
		return e, w.provisionAgain(ctx, n, e)
	}
	e, err := w.reach.Dial(ctx, n.Config)
	if err != nil {
		return nil, err
	}
	old := n.setExec(e)
	if old != nil {
		old.Close()
		// A pod deleted (an eviction, the failure test's delete-pod) comes
		// back as a new pod whose filesystem holds nothing of the window:
		// the provisioning phase's work is done there again before any
		// later phase runs a script it pushed.
		if _, pod := e.(remote.PodImager); pod && old.Addr() != e.Addr() && w.provision != nil {
			n.unprovisioned = old.Addr()
		}
	}
	return e, w.provisionAgain(ctx, n, e)
}

// provisionAgain runs the provisioning phase on n when its pod was
// replaced and that has not been done yet (or failed: tried again at the
// next Reconnect). Called with n.dialling held.
func (w *Window) provisionAgain(ctx context.Context, n *Node, e remote.Executor) error {
	if n.unprovisioned == "" {
		return nil
	}
	p := w.provision
	if _, err := guarded(func() (any, error) { return p.PerNode(ctx, w, n) }); err != nil {
		return fmt.Errorf("%s: its pod %s replaced by %s, and %s failed there: %w", n.Name, n.unprovisioned, e.Addr(), p.Name, err)
	}
	w.Progress.Node(n.Name, "its pod %s was replaced by %s: %s done there again", n.unprovisioned, e.Addr(), p.Name)
	n.unprovisioned = ""
	return nil
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

// MaxLogBytes bounds one raw log: a node that prints without end fills
// its log to here, then the log says it was cut.
const MaxLogBytes = 32 << 20

// LogFile opens raw/<node>/<phase>.log for appending; every byte a phase
// gets from a node goes there, so the evidence holds the tools' own words
// (secrets scrubbed, redact.Writer; at most MaxLogBytes).
func (w *Window) LogFile(n *Node, phase string) (io.WriteCloser, string, error) {
	rel := filepath.Join("raw", n.Name, phase+".log")
	path := filepath.Join(w.Dir, rel)
	// A log that cannot be written (the bundle's disk is full) is the
	// tool's failure, not the node's: the work goes on without it (a
	// teardown must still clean the node) and the window ends after the
	// phase (bundleError).
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		w.bundleFailed(fmt.Errorf("raw log %s: %w", rel, err))
		return discardLog{}, "", nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		w.bundleFailed(fmt.Errorf("raw log %s: %w", rel, err))
		return discardLog{}, "", nil
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		w.bundleFailed(fmt.Errorf("raw log %s: %w", rel, err))
		return discardLog{}, "", nil
	}
	// Capped before it is scrubbed: a node that prints without end costs
	// the scrubbing of one log's worth, no more.
	return &cappedLog{w: redact.Writer(f), f: f, left: MaxLogBytes - st.Size(), room: st.Size() < MaxLogBytes,
		fail: func(err error) { w.bundleFailed(fmt.Errorf("raw log %s: %w", rel, err)) }}, rel, nil
}

// cappedLog writes up to left bytes (scrubbed, through w), then one line
// saying how much more was not kept.
type cappedLog struct {
	// mu: a command's stdout and stderr are copied into one log by two
	// goroutines.
	mu      sync.Mutex
	w       io.WriteCloser
	f       *os.File
	left    int64
	dropped int64
	room    bool // the log was not full when opened: the cut is said once
	// fail hears a write that failed; what follows is dropped.
	fail func(error)
}

func (c *cappedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left <= 0 {
		c.dropped += int64(len(p))
		return len(p), nil
	}
	k := min(int64(len(p)), c.left)
	n, err := c.w.Write(p[:k])
	c.left -= int64(n)
	c.dropped += int64(len(p)) - k
	if err != nil {
		// The disk failed, not the node: its output is dropped from here
		// on and the command goes on.
		c.fail(err)
		c.left, c.room = 0, false
	}
	return len(p), nil
}

func (c *cappedLog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.w.Close()
	if c.dropped > 0 && c.room {
		fmt.Fprintf(c.f, "\n[gpuaccept: raw log cut at %d bytes; %d more bytes of this command's output not kept]\n", MaxLogBytes, c.dropped)
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		c.fail(err)
	}
	return nil
}

// Log opens the raw log of the work ctx carries (LogOf) on n.
func (w *Window) Log(ctx context.Context, n *Node) (io.WriteCloser, string, error) {
	return w.LogFile(n, LogOf(ctx))
}

// FanOut is how many nodes a phase works on at once (0: all): the width
// of the transport that reaches them (inventory FanOut). Fan-out inside a
// phase goes through remote.Each with it.
func (w *Window) FanOut() int { return w.Inv.FanOut() }

// Active lists the nodes not quarantined, in index order.
func (w *Window) Active() []*Node {
	var out []*Node
	for _, n := range w.Nodes {
		if !n.quarantined && !n.released.Load() {
			out = append(out, n)
		}
	}
	return out
}

// Shared returns the window-wide value that mk makes, once per key, for
// the phases that need one value on every node (the window's key pair) or
// one answer per window (what a binary supports). mk runs outside the
// window's lock, so it may call a node. It is not journaled: a resumed
// window makes a new one.
func (w *Window) Shared(key string, mk func() (any, error)) (any, error) {
	w.mu.Lock()
	if w.shared == nil {
		w.shared = map[string]*sharedValue{}
	}
	sv, ok := w.shared[key]
	if !ok {
		sv = &sharedValue{}
		w.shared[key] = sv
	}
	w.mu.Unlock()
	sv.once.Do(func() { sv.v, sv.err = mk() })
	return sv.v, sv.err
}

type sharedValue struct {
	once sync.Once
	v    any
	err  error
}

// FabricHost is how the other nodes reach n: its fabric_address, else a
// pod's address (its node's, on the host network), else the address the
// coordinator dials.
func (w *Window) FabricHost(n *Node) string {
	if n.Index >= 0 && n.Index < len(w.Inv.Nodes) {
		if a := w.Inv.Nodes[n.Index].FabricAddress; a != "" {
			return a
		}
		if n.Local() {
			return localFabricHost
		}
		if pa, ok := n.Exec().(remote.PodAddresser); ok && pa.PodIP() != "" {
			return pa.PodIP()
		}
		return w.Inv.Nodes[n.Index].Address
	}
	return n.Config.Address()
}

// SlurmLogin is the Slurm login node (inventory slurm.login), connected on
// first use and closed with the window. It is no node of the window: no
// test runs on it, it only launches them.
func (w *Window) SlurmLogin(ctx context.Context) (*Node, error) {
	if !w.Inv.Slurm.Enabled() {
		return nil, errors.New("no Slurm login node in the inventory (slurm.login.address)")
	}
	w.mu.Lock()
	if w.login == nil {
		w.login = &Node{Index: -1, Name: inventory.LoginName, Config: w.reach.LoginConfig()}
	}
	login := w.login
	w.mu.Unlock()
	if _, err := w.Reconnect(ctx, login); err != nil {
		return nil, fmt.Errorf("slurm login node %s: %w", w.Inv.Slurm.Login.Address, err)
	}
	return login, nil
}

// SetTelemetry keeps each node's per-phase telemetry summaries in the
// record: the telemetry judge makes them from the bundle's files and the
// record alone, so a resumed window summarises as an uninterrupted one.
func (w *Window) SetTelemetry(byNode map[string][]record.TelemetryPhase) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(byNode) == 0 {
		w.rec.Telemetry = nil
		return
	}
	w.rec.Telemetry = byNode
}
