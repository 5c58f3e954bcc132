package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// The idle guard (inventory idle): a node whose every GPU sits under
// idle.util_pct for idle.after while it is held for nothing is signalled,
// and with idle.action release, torn down at once. It hears each GPU row
// of the telemetry as it arrives (IdleSample), so it needs no connection
// of its own and costs nothing where the guard is off.
type idleGuard struct {
	cfg inventory.Idle
	w   *Window

	mu sync.Mutex
	// phase is the phase under way: its name and whether its work keeps
	// the GPUs busy. Between phases, nil.
	phase *Phase
	nodes map[string]*idleNode
	done  []record.IdleStretch // stretches closed, and those of the journal
	// held: nodes the guard leaves alone (the provider check's node).
	held map[string]bool
	// heard counts each node's GPU rows.
	heard map[string]int
	// done: the nodes whose own part of the per-node phase under way has
	// returned (they wait for the others).
	partsDone map[string]bool
	// closed: the guard has said its last word (finish); a sampler still
	// ending is no longer heard, and nothing more is released.
	closed bool

	releases sync.WaitGroup
}

type idleNode struct {
	// last is the last sample at which the node was not idle for the
	// guard: a busy GPU, or a phase meant to be idle.
	last time.Time
	// open is the stretch signalled and not yet over.
	open *record.IdleStretch
	// told: how many times idle.after the open stretch was said to last.
	told int
	// pending: to be released when the next phase starts (an active node
	// is never torn down under a phase it takes part in).
	pending bool
}

// idleNotifyWithin bounds idle.notify: a hung command must not keep
// notices from the next nodes.
const idleNotifyWithin = time.Minute

func newIdleGuard(w *Window) *idleGuard {
	if !w.Inv.Idle.On() {
		return nil
	}
	return &idleGuard{cfg: w.Inv.Idle, w: w, nodes: map[string]*idleNode{}, held: map[string]bool{}, heard: map[string]int{},
		partsDone: map[string]bool{}}
}

// IdleOn says whether the window runs the idle guard: the telemetry feeds
// it each GPU's utilisation when it does.
func (w *Window) IdleOn() bool { return w.idle != nil }

// IdleHold keeps the guard off node n from now on (the provider's idle
// shutdown check holds it idle on purpose).
func (w *Window) IdleHold(n *Node) {
	if g := w.idle; g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.held[n.Name] = true
		g.closeLocked(n.Name, time.Now().UTC())
	}
}

// setPhase tells the guard which phase is under way (nil: none).
func (g *idleGuard) setPhase(p *Phase) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.phase = p
	g.partsDone = map[string]bool{}
	g.mu.Unlock()
}

// partDone tells the guard that n's own part of the per-node phase under
// way has returned: from now on it waits for the others.
func (g *idleGuard) partDone(n *Node) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.partsDone[n.Name] = true
	g.mu.Unlock()
}

// heldForNothing says whether node n, quarantined or not, is held for
// nothing now: out of the window (quarantined), or done with its own part
// of a per-node phase that loads the GPUs while the others go on. A node
// waiting for its turn (the fan-out's waves), taking part in a
// cluster-wide job, or in a phase meant to leave the GPUs idle is not:
// its idle GPUs are the phase's doing, not waste to signal (a 64-node
// demo released every node waiting in the all-reduce).
func (g *idleGuard) heldForNothing(n *Node, quarantined bool) bool {
	if quarantined {
		return true
	}
	p := g.phase
	return p != nil && p.Loads && p.PerNode != nil && g.partsDone[n.Name]
}

// IdleSample hears one GPU's utilisation on node n at a moment (nil: the
// GPU did not say). It never blocks on the node or the notice: what a
// signal does runs on its own goroutine.
func (w *Window) IdleSample(n *Node, at time.Time, utilPct *float64) {
	g := w.idle
	if g == nil || utilPct == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.held[n.Name] || n.released.Load() {
		return
	}
	g.heard[n.Name]++
	s := g.nodes[n.Name]
	if s == nil {
		s = &idleNode{last: at}
		g.nodes[n.Name] = s
	}
	quarantined := n.quarantinedNow()
	if *utilPct >= g.cfg.UtilPct || !g.heldForNothing(n, quarantined) {
		if at.After(s.last) {
			s.last = at
		}
		g.closeLocked(n.Name, at)
		return
	}
	idle := at.Sub(s.last)
	if s.open != nil {
		s.open.Until = at
		if k := int(idle / g.cfg.After); k > s.told {
			s.told = k
			g.w.Progress.Node(n.Name, "still idle: %s, %s", idle.Round(time.Second), g.priced(n, idle))
		}
		return
	}
	if idle < g.cfg.After {
		return
	}
	st := &record.IdleStretch{Node: n.Name, Since: s.last, Until: at, Signalled: at, Quarantined: quarantined}
	if g.phase != nil {
		st.Phase = g.phase.Name
	}
	s.open, s.told = st, 1
	g.w.Progress.Node(n.Name, "idle %s (%s, every GPU under %g%%): %s", idle.Round(time.Second), st.Where(), g.cfg.UtilPct, g.priced(n, idle))
	release := g.cfg.Action == inventory.IdleRelease
	if release && !quarantined {
		s.pending = true
	}
	stretch := *st
	g.releases.Add(1)
	go func() {
		defer g.releases.Done()
		g.signal(n, stretch, release && quarantined)
	}()
}

// closeLocked ends node name's open stretch at at and keeps it.
func (g *idleGuard) closeLocked(name string, at time.Time) {
	s := g.nodes[name]
	if s == nil || s.open == nil {
		return
	}
	if at.After(s.open.Until) {
		s.open.Until = at
	}
	g.done = append(g.done, *s.open)
	s.open = nil
}

// priced says what idle time d on n costs at the quote's rate.
func (g *idleGuard) priced(n *Node, d time.Duration) string {
	q := g.w.Inv.Quote
	if q.PricePerGPUHr <= 0 {
		return "no quote.price_per_gpu_hour to price it"
	}
	gpus := q.GPUsPerNode
	if gpus <= 0 {
		gpus = 1
	}
	cost := d.Hours() * float64(gpus) * q.PricePerGPUHr
	return fmt.Sprintf("%.2f %s so far at the quote's rate", cost, strings.TrimSpace(q.Currency))
}

// signal journals the stretch, runs idle.notify, and releases a
// quarantined node at once.
func (g *idleGuard) signal(n *Node, st record.IdleStretch, releaseNow bool) {
	st.Notify = g.notify(n, st)
	g.w.journalIdle(n, st)
	g.mu.Lock()
	if s := g.nodes[n.Name]; s != nil && s.open != nil && s.open.Signalled.Equal(st.Signalled) {
		s.open.Notify = st.Notify
	} else {
		for i := range g.done {
			if g.done[i].Node == n.Name && g.done[i].Signalled.Equal(st.Signalled) {
				g.done[i].Notify = st.Notify
			}
		}
	}
	g.mu.Unlock()
	g.mu.Lock()
	goOn := releaseNow && !g.held[n.Name]
	g.mu.Unlock()
	if goOn {
		g.w.release(n, "idle "+time.Since(st.Since).Round(time.Second).String()+" while quarantined")
	}
}

// notify runs idle.notify on the coordinator for the stretch.
func (g *idleGuard) notify(n *Node, st record.IdleStretch) string {
	command := strings.TrimSpace(g.cfg.Notify)
	if command == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), idleNotifyWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(),
		"GPUACCEPT_RUN="+g.w.RunID(),
		"GPUACCEPT_IDLE_NODE="+n.Name,
		"GPUACCEPT_IDLE_ADDRESS="+n.Config.Address(),
		"GPUACCEPT_IDLE_MINUTES="+strconv.FormatFloat(st.Until.Sub(st.Since).Minutes(), 'f', 1, 64),
		"GPUACCEPT_IDLE_SINCE="+st.Since.UTC().Format(time.RFC3339),
		"GPUACCEPT_IDLE_ACTION="+g.cfg.Action,
		"GPUACCEPT_IDLE_QUARANTINED="+strconv.FormatBool(st.Quarantined))
	cmd.WaitDelay = 5 * time.Second
	// As every path in the inventory: relative to its file.
	if g.w.Inv.Path != "" {
		cmd.Dir = filepath.Dir(g.w.Inv.Path)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{b: &out, left: 64 << 10}, &limited{b: &out, left: 64 << 10}
	err := cmd.Run()
	if log, _, lerr := g.w.LogFile(n, "idle-notify"); lerr == nil {
		fmt.Fprintf(log, "# %s: idle.notify, idle since %s\n$ %s\n%s", time.Now().UTC().Format(time.RFC3339), st.Since.Format(time.RFC3339), command, out.Bytes())
		log.Close()
	}
	switch {
	case ctx.Err() != nil:
		g.w.Progress.Node(n.Name, "idle.notify timed out after %s", idleNotifyWithin)
		return "timed out after " + idleNotifyWithin.String()
	case err != nil:
		if ee, ok := err.(*exec.ExitError); ok {
			g.w.Progress.Node(n.Name, "idle.notify failed: exit %d", ee.ExitCode())
			return "exit " + strconv.Itoa(ee.ExitCode())
		}
		g.w.Progress.Node(n.Name, "idle.notify did not run: %s", firstLine(err.Error()))
		return "not run: " + firstLine(err.Error())
	}
	return "exit 0"
}

// limited keeps at most left bytes of what it is given.
type limited struct {
	mu   sync.Mutex
	b    *bytes.Buffer
	left int
}

func (l *limited) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := min(len(p), l.left); k > 0 {
		l.b.Write(p[:k])
		l.left -= k
	}
	return len(p), nil
}

// takePending hands the runner the active nodes signalled for release.
func (g *idleGuard) takePending() []string {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for name, s := range g.nodes {
		// Released only if still idle: a node that went back to work
		// since it was signalled stays.
		if s.pending && s.open != nil && !g.closed && !g.held[name] {
			out = append(out, name)
		}
		s.pending = false
	}
	slices.Sort(out)
	return out
}

// finish closes every open stretch at the end of the sampling and waits
// for the notices and releases under way. It returns the record.
func (g *idleGuard) finish() *record.IdleGuard {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.releases.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for name := range g.nodes {
		g.closeLocked(name, time.Time{})
	}
	r := &record.IdleGuard{AfterS: g.cfg.After.Seconds(), UtilPct: g.cfg.UtilPct, Action: g.cfg.Action,
		Notify: g.cfg.Notify, Stretches: append([]record.IdleStretch{}, g.done...), Heard: maps.Clone(g.heard)}
	// A release is known by the node, not by the stretch that caused it.
	for i := range r.Stretches {
		if n := g.w.node(r.Stretches[i].Node); n != nil && !n.releasedAt().IsZero() && r.Stretches[i].Released.IsZero() &&
			!n.releasedAt().Before(r.Stretches[i].Signalled) {
			r.Stretches[i].Released = n.releasedAt()
		}
	}
	return r
}

// released is a node the idle guard let go: set once, read by the
// sampler's goroutine and the runner.
type releasedMark struct {
	on atomic.Bool
	at atomic.Int64 // unix ns of the release teardown's end
}

func (r *releasedMark) Load() bool { return r.on.Load() }

func (n *Node) releasedAt() time.Time {
	if ns := n.released.at.Load(); ns != 0 {
		return time.Unix(0, ns).UTC()
	}
	return time.Time{}
}

func (w *Window) node(name string) *Node {
	for _, n := range w.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
