package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/ledger"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/remote"
)

// Options tune a window.
type Options struct {
	// RunsDir is where a new window's directory is made (<RunsDir>/<id>).
	RunsDir string
	// Strict aborts the window when a node fails a gating phase, instead of
	// quarantining the node.
	Strict bool
	// Progress receives phase banners and node events; nil discards.
	Progress *Progress
	// Tool is the gpuaccept version recorded in the evidence.
	Tool string
	// TeardownTimeout, when set, bounds each teardown phase; by default
	// only each node's phase deadline does.
	TeardownTimeout time.Duration
	// Dial reaches a node; remote.DialNode when nil (the transport the
	// inventory names for the node picks the executor). Tests give a
	// fake fleet's.
	Dial remote.Dialer
	// Lint is what the record keeps of the quote lint at the start
	// (inventory.LintQuote when nil; the CLI adds the plan's PLAN-001).
	Lint func(*inventory.Inventory) []inventory.Warning
	// Build is the binary's build information, for the record.
	Build *record.Build
	// Selection narrows the window to some nodes and phases.
	Selection *Selection
	// Executable is the gpuaccept binary the window uploads to the nodes
	// (the load test's generator, `gpuaccept loadgen`); the running
	// binary (os.Executable) when empty.
	Executable string
}

// Start runs a new window over inv's nodes. The returned record is
// complete even when the window was interrupted (ctx cancelled) or aborted;
// the error is for the tool's own failures (the run directory cannot be
// written), never for a node's.
func Start(ctx context.Context, inv *inventory.Inventory, phases []Phase, o Options) (*record.Run, string, error) {
	inv, phases, err := applySelection(inv, phases, o.Selection)
	if err != nil {
		return nil, "", err
	}
	now := time.Now().UTC()
	// A few random characters: the ID also names the window's directory on
	// every node, and two windows may start in the same second on the same
	// hosts (the demo's loopback nodes, two CI jobs).
	var salt [2]byte
	rand.Read(salt[:])
	id, dir, err := newRunDir(o.RunsDir, fmt.Sprintf("%s-%s-%x", now.Format("20060102T150405Z"), slug(firstNonEmpty(inv.Window, inv.Provider, "window")), salt))
	if err != nil {
		return nil, "", err
	}
	w, err := newWindow(inv, dir, o)
	if err != nil {
		return nil, dir, err
	}
	w.rec = header(inv, id, now, o.Tool)
	w.rec.Build = o.Build
	w.rec.Plan = plan(inv, phases)
	if sel := o.Selection; sel != nil && (sel.Nodes != "" || len(sel.Only) > 0 || len(sel.Skip) > 0) {
		w.rec.Selection = sel
	}
	lint := o.Lint
	if lint == nil {
		lint = inventory.LintQuote
	}
	w.rec.Lint = []record.Finding{} // recorded, even when it found nothing
	for _, x := range lint(inv) {
		w.rec.Lint = append(w.rec.Lint, record.Finding{ID: x.ID, Message: x.Message, Keys: x.Keys})
	}
	j, err := createJournal(dir)
	if err != nil {
		return nil, dir, err
	}
	defer j.close()
	hdr := *w.rec
	if err := j.write(entry{Type: "start", Run: &hdr}); err != nil {
		return nil, dir, err
	}
	switch {
	case inv.Slurm.Allocates():
		w.allocate(ctx, j, phases)
	case w.namedSlurmNodes():
		w.readSlurmNodes(ctx)
	}
	return w.execute(ctx, phases, j, nil, o)
}

// Resume continues the window in dir whose coordinator was lost: phases the
// journal records as done are not run again (except those that must, like
// connect), the rest run as they would have.
func Resume(ctx context.Context, dir string, load func(path string) (*inventory.Inventory, error), phases []Phase, o Options) (*record.Run, string, error) {
	r, err := readJournal(dir)
	if err != nil {
		return nil, dir, fmt.Errorf("resume: %w", err)
	}
	if r.ended {
		return nil, dir, fmt.Errorf("resume %s: the window already ended; start a new one", dir)
	}
	inv, err := load(r.run.Inventory.Path)
	if err != nil {
		return nil, dir, err
	}
	if inv.Digest != r.run.Inventory.Digest {
		return nil, dir, fmt.Errorf("resume %s: %s changed since the window started (sha256 %s, now %s); a resumed window must use the same inventory",
			dir, r.run.Inventory.Path, r.run.Inventory.Digest, inv.Digest)
	}
	inv = recordedKubeNodes(inv, r.run.Nodes)
	// The nodes and phases the window was narrowed to, as it started.
	if inv, phases, err = applySelection(inv, phases, r.run.Selection); err != nil {
		return nil, dir, fmt.Errorf("resume %s: %w", dir, err)
	}
	// Asked once per phase, not once per journal entry (a node each).
	again := map[string]bool{}
	for i := range phases {
		again[phases[i].Name] = phases[i].runsAgain(phases, inv, r.done)
	}
	// A node some phase ran on before the coordinator was lost is one
	// teardown must visit, whether or not anything runs on it again.
	reached := map[string]bool{}
	for _, p := range r.run.Phases {
		if (p.Outcome == record.OK || p.Outcome == record.NotMeasured) && p.Node != "" {
			reached[p.Node] = true
		}
	}
	r.teardown = map[string]bool{}
	for _, p := range phases {
		if p.Teardown {
			r.teardown[p.Name] = true
		}
	}
	r.keep(func(name string) bool { return again[name] })
	if !validRunID(r.run.ID) || filepath.Base(filepath.Clean(dir)) != r.run.ID {
		// The ID names directories on every node that teardown removes: a
		// journal that says otherwise is not this window's.
		return nil, dir, fmt.Errorf("resume %s: the journal's run ID %q is not this run directory's (%s)", dir, r.run.ID, filepath.Base(filepath.Clean(dir)))
	}
	w, err := newWindow(inv, dir, o)
	if err != nil {
		return nil, dir, err
	}
	w.rec = r.run
	if inv.Slurm.Allocates() {
		if err := w.resumeAllocation(ctx, r.slurm, phases); err != nil {
			w.closeClients()
			return nil, dir, fmt.Errorf("resume %s: %w", dir, err)
		}
	}
	for _, q := range r.quarantine {
		for _, n := range w.Nodes {
			if n.Name == q.Node {
				n.setQuarantined(q.Reason, q.At)
			}
		}
	}
	for _, n := range w.Nodes {
		n.reached = reached[n.Name]
	}
	w.resumeReleased(r.release)
	w.idle.resumeIdle(r.idle)
	for _, e := range r.notes {
		for _, n := range w.Nodes {
			if n.Name == e.Node {
				n.note(e.Key, e.Value)
			}
		}
	}
	j, err := appendJournal(dir, r.size)
	if err != nil {
		return nil, dir, err
	}
	defer j.close()
	if err := j.write(entry{Type: "resume"}); err != nil {
		return nil, dir, err
	}
	w.rec.Resumed = append(w.rec.Resumed, time.Now().UTC())
	switch {
	case inv.Slurm.Allocates() && w.rec.Slurm == nil:
		w.allocate(ctx, j, phases)
	case w.namedSlurmNodes():
		// Not journaled: Slurm's view as it stands now.
		w.readSlurmNodes(ctx)
	case w.slurmUnjournaled != nil:
		w.journalAllocation(j, *w.slurmUnjournaled)
	}
	w.Progress.Line("resuming %s: %d phase(s) already done", w.rec.ID, len(r.done))
	return w.execute(ctx, phases, j, r.done, o)
}

// CheckSelection says what is wrong with sel for inv and phases, before a
// window starts (the CLI's bad input).
func CheckSelection(inv *inventory.Inventory, phases []Phase, sel *Selection) error {
	_, _, err := applySelection(inv, phases, sel)
	return err
}

// applySelection narrows inv and phases to sel.
func applySelection(inv *inventory.Inventory, phases []Phase, sel *Selection) (*inventory.Inventory, []Phase, error) {
	inv, err := selectNodes(inv, sel)
	if err != nil {
		return nil, nil, err
	}
	phases, err = selectPhases(phases, inv, sel)
	return inv, phases, err
}

func newWindow(inv *inventory.Inventory, dir string, o Options) (*Window, error) {
	reach, err := NewReach(inv, o.Dial)
	if err != nil {
		return nil, err
	}
	p := o.Progress
	if p == nil {
		p = NewProgress(nil, false)
	}
	p.Addresses(inv.Nodes)
	// The run's pods on a managed cluster carry its ID; a window without a
	// directory (Probe's) has one of its own and releases them itself.
	run := filepath.Base(dir)
	if dir == "" {
		var salt [4]byte
		rand.Read(salt[:])
		run = fmt.Sprintf("probe-%x", salt)
	}
	reach.ForRun(run)
	w := &Window{Inv: inv, Dir: dir, Progress: p, reach: reach, Executable: o.Executable}
	if w.Executable == "" {
		// Not fatal here: only a phase that uploads it needs it, and
		// that phase says why it cannot.
		w.Executable, _ = os.Executable()
	}
	for i, n := range inv.Nodes {
		w.Nodes = append(w.Nodes, &Node{Index: i, Name: n.Name, Config: reach.Config(n)})
	}
	w.idle = newIdleGuard(w)
	return w, nil
}

func header(inv *inventory.Inventory, id string, now time.Time, tool string) *record.Run {
	rec := &record.Run{
		Schema: record.Schema, ID: id, Tool: tool, Simulated: inv.Simulated,
		Inventory: record.Inventory{Path: inv.Path, Digest: inv.Digest},
		Provider:  inv.Provider, Region: inv.Region, Window: inv.Window, Started: now,
	}
	if q, err := json.Marshal(inv.Quote); err == nil {
		rec.Quote = q
	}
	rec.Regression = &record.Regression{Threshold: inv.Acceptance.Regression, ByID: inv.Acceptance.RegressionByID}
	for i, n := range inv.Nodes {
		rec.Nodes = append(rec.Nodes, record.Node{Index: i, Name: n.Name, Address: n.Address, Labels: n.Labels, BillingID: n.BillingID})
	}
	rec.Billing = billingTerms(inv.Billing)
	return rec
}

// plan is the phases as the window will run them.
func plan(inv *inventory.Inventory, phases []Phase) []record.PlannedPhase {
	out := make([]record.PlannedPhase, 0, len(phases))
	for i := range phases {
		p := &phases[i]
		pp := record.PlannedPhase{Name: p.Name, Enabled: p.enabled(inv), Deadline: PhaseDeadline(p, inv).String(), Gating: p.Gating, Skipped: p.Skipped}
		if p.Duration != nil && pp.Enabled {
			if d := p.Duration(inv); d > 0 {
				pp.Duration = d.String()
			}
		}
		out = append(out, pp)
	}
	return out
}

// execute runs the phases not yet done, then teardown, then judges.
func (w *Window) execute(ctx context.Context, phases []Phase, j *journal, done map[string]bool, o Options) (*record.Run, string, error) {
	// Given back after teardown below; these are for a panic past it.
	defer w.releaseAllocation(j)
	defer w.releasePods()
	defer w.closeClients()
	defer w.stopBackground() // whichever way the window ends
	defer w.Progress.Flush() // no node's line held past the window
	w.j = j
	defer func() { w.j = nil }()
	for i := range phases {
		if phases[i].Teardown {
			w.teardowns = append(w.teardowns, &phases[i])
		}
		if phases[i].Provisions && phases[i].PerNode != nil && w.provision == nil {
			w.provision = &phases[i]
		}
	}
	ends := time.Now()
	for i := range phases {
		if p := &phases[i]; p.enabled(w.Inv) && (!done[p.Name] || p.runsAgain(phases, w.Inv, done)) {
			ends = ends.Add(p.deadline(w.Inv))
		}
	}
	w.mu.Lock()
	w.ends = ends
	w.mu.Unlock()
	if ctx.Err() == nil && w.rec.Aborted == "" {
		w.readKube(ctx)
	}
	var ioErr error
	for i := range phases {
		p := &phases[i]
		if p.Teardown {
			continue
		}
		if ctx.Err() != nil || w.rec.Aborted != "" {
			break
		}
		if done[p.Name] && !p.runsAgain(phases, w.Inv, done) {
			continue
		}
		w.releasePending()
		if err := w.runPhase(ctx, p, j, o); err != nil {
			ioErr = err
			break
		}
		if err := w.bundleError(); err != nil {
			ioErr = err
		}
		if w.rec.Aborted != "" || ioErr != nil {
			break
		}
	}
	if ctx.Err() != nil {
		w.rec.Interrupted = true
		w.Progress.Line("interrupted: stopping remote work and tearing down")
		if s := w.rec.Slurm; s != nil && s.JobID != "" {
			w.Progress.Line("slurm: job %s is given back after teardown; a second Ctrl-C leaves it held (scancel %s on the login node)", s.JobID, s.JobID)
		}
	}
	// The sampler's streams end before teardown begins: teardown kills
	// the window's processes, and a stream still reading would call that
	// a lost node.
	w.stopBackground()
	// The guard's last word: its stretches end with the sampling, and the
	// nodes it is releasing finish their teardown first.
	w.rec.Idle = w.idle.finish()
	// Teardown must happen whatever befell the window, so each teardown
	// phase gets a context of its own. Each node's part is bounded by the
	// phase's deadline, and so the phase by the fleet's waves of them; a
	// second Ctrl-C ends the process. One minute shared by every teardown
	// phase was spent by 733 of 1,000 nodes' teardown: 267 kept the window
	// key, and the deletion check never started.
	// A bundle that cannot be written (its disk full) is no reason to
	// leave the nodes uncleaned: teardown needs no disk, and the window
	// says which nodes it cleaned.
	for i := range phases {
		if p := &phases[i]; p.Teardown {
			if err := w.runTeardown(ctx, p, j, o); err != nil && ioErr == nil {
				ioErr = err
			}
		}
	}
	// The allocation outlives nothing of the window: given back once its
	// teardown ran, an interrupted window's too. So do its pods.
	w.releaseAllocation(j)
	w.releasePods()
	if err := w.bundleError(); err != nil {
		ioErr = w.bundleLost(phases, err)
	}
	w.judge(phases)
	w.rec.Ended = time.Now().UTC()
	// What the window cost: every node is billed to its end, whatever
	// befell it. A ledger that cannot be made costs the window nothing.
	if l, err := ledger.Compute(w.rec, w.Inv); err != nil {
		w.Progress.Line("cost ledger: %v", err)
	} else {
		w.rec.Ledger = l
	}
	w.judgeBilling()
	w.rec = scrubbed(w.rec)
	reason := "completed"
	switch {
	case w.rec.Interrupted:
		reason = "interrupted"
	case w.rec.Aborted != "":
		reason = "aborted: " + w.rec.Aborted
	}
	if ioErr == nil && !w.rec.Interrupted {
		// An interrupted window stays resumable; anything else is over.
		ioErr = j.write(entry{Type: "end", Reason: reason})
		if ioErr == nil {
			ioErr = j.seal()
		}
	}
	return w.rec, w.Dir, ioErr
}

// backgroundGrace bounds the wait for the background work at the end of
// the window: each task's remote command is already told to stop, and its
// guard ends it on the node when the connection closes if it does not.
const backgroundGrace = 15 * time.Second

func (w *Window) stopBackground() {
	if err := w.StopBackground(backgroundGrace); err != nil {
		w.Progress.Line("%s", firstLine(err.Error()))
	}
}

// runPhase runs p on every node still in the window (all reached nodes for
// teardown), records each result in the journal, quarantines the nodes
// that failed a gating phase, and marks the phase done.
// runTeardown runs a teardown phase on a context the window's own end
// does not cancel.
func (w *Window) runTeardown(ctx context.Context, p *Phase, j *journal, o Options) error {
	tctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if o.TeardownTimeout > 0 {
		tctx, cancel = context.WithTimeout(tctx, o.TeardownTimeout)
	}
	defer cancel()
	return w.runPhase(tctx, p, j, o)
}

func (w *Window) runPhase(ctx context.Context, p *Phase, j *journal, o Options) error {
	ctx = withPhase(ctx, p.Name)
	// Kept past the phase's end: a node done with its part of it is held
	// for nothing until the next phase begins (and is released then).
	w.idle.setPhase(p)
	if !p.enabled(w.Inv) {
		why := "disabled in the inventory"
		if p.Skipped != "" {
			why = "skipped: " + p.Skipped
		}
		w.Progress.Line("== %s: %s", p.Name, why)
		w.record(j, record.PhaseResult{Phase: p.Name, Index: -1, Outcome: record.Skipped,
			Error: why, Started: time.Now().UTC(), Ended: time.Now().UTC()}, nil)
		return nil
	}
	if p.Cluster != nil {
		return w.runCluster(ctx, p, j)
	}
	nodes := w.Active()
	if p.Teardown {
		nodes = nil
		for _, n := range w.Nodes {
			// A node the idle guard released is visited again: its
			// release took only what was its own where it shared.
			if n.reached {
				nodes = append(nodes, n)
			}
		}
	}
	w.Progress.Phase(p.Name, len(nodes))
	deadline := p.deadline(w.Inv)
	starts := make([]time.Time, len(nodes))
	limit := w.FanOut()
	if p.Together {
		limit = len(nodes)
	}
	res := remote.Each(ctx, len(nodes), remote.FanOut{Limit: limit, Timeout: deadline},
		func(ctx context.Context, i int) (any, error) {
			starts[i] = time.Now().UTC()
			w.redialLost(ctx, nodes[i])
			v, err := p.PerNode(ctx, w, nodes[i])
			w.idle.partDone(nodes[i])
			_, unmeasured := IsNotMeasured(err)
			switch {
			case unmeasured:
				w.Progress.Node(nodes[i].Name, "%s not measured: %s", p.Name, firstLine(err.Error()))
			case err != nil:
				w.Progress.Node(nodes[i].Name, "%s failed: %s", p.Name, firstLine(explain(err, deadline)))
			}
			w.Progress.Finished(err != nil && !unmeasured)
			return v, err
		})
	w.Progress.End()
	for i, r := range res {
		n := nodes[i]
		pr := record.PhaseResult{Phase: p.Name, Node: n.Name, Index: n.Index, Outcome: record.OK,
			Started: starts[i], Ended: starts[i].Add(r.Elapsed)}
		if starts[i].IsZero() {
			pr.Started, pr.Ended = time.Now().UTC(), time.Now().UTC()
		}
		if rel := filepath.Join("raw", n.Name, p.Name+".log"); fileExists(filepath.Join(w.Dir, rel)) {
			pr.Log = rel
		}
		if r.Value != nil {
			data, err := json.Marshal(r.Value)
			if err != nil {
				return fmt.Errorf("%s: %s: record result: %w", n.Name, p.Name, err)
			}
			pr.Data = data
		}
		nm, unmeasured := IsNotMeasured(r.Err)
		if r.Err == nil || unmeasured {
			n.reached = true
		}
		if r.Err != nil && !unmeasured && p.Teardown && n.released.Load() {
			// Given back (idle.notify may have told the provider): its
			// release teardown ran, this second visit is a courtesy.
			nm, unmeasured = &NotMeasured{Tool: p.Name, Why: fmt.Sprintf("released at %s; not reached again at the window's end: %s",
				n.releasedAt().Format(time.RFC3339), firstLine(r.Err.Error()))}, true
		}
		switch {
		case unmeasured:
			// The node lacks a tool: not a failure, never a quarantine.
			pr.Outcome, pr.Error = record.NotMeasured, nm.Error()
		case r.Err != nil:
			pr.Outcome, pr.Error = record.Failed, explain(r.Err, deadline)
			if ctx.Err() != nil && !p.Teardown {
				pr.Outcome = record.Interrupted
			}
		}
		bounded(&pr)
		var quarantine *entry
		if pr.Outcome == record.Failed && p.Gating {
			reason := fmt.Sprintf("%s failed: %s", p.Name, firstLine(pr.Error))
			if o.Strict || w.Inv.Acceptance.Strict {
				w.rec.Aborted = fmt.Sprintf("%s: %s (--strict)", n.Name, reason)
			} else {
				n.setQuarantined(reason, pr.Ended)
				quarantine = &entry{Type: "quarantine", Phase: p.Name, Node: n.Name, Reason: reason}
				w.Progress.Node(n.Name, "quarantined: %s", reason)
			}
		}
		w.record(j, pr, quarantine)
	}
	if ctx.Err() != nil {
		return nil // not done: a resume runs it again
	}
	w.journal(j, entry{Type: "done", Phase: p.Name})
	return nil
}

func (w *Window) runCluster(ctx context.Context, p *Phase, j *journal) error {
	w.Progress.Phase(p.Name, len(w.Active()))
	dctx, cancel := context.WithTimeout(ctx, p.deadline(w.Inv))
	defer cancel()
	start := time.Now().UTC()
	remote.Each(dctx, len(w.Active()), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		w.redialLost(ctx, w.Active()[i])
		return nil, nil
	})
	v, err := guarded(func() (any, error) { return p.Cluster(dctx, w) })
	// The tally: every node took part; a failed phase failed them all, a
	// quarantine the nodes it names.
	failed := 0
	nm, unmeasured := IsNotMeasured(err)
	if err != nil && !unmeasured {
		failed = len(w.Active())
	} else if l, ok := v.(Quarantiner); ok {
		failed = len(l.Quarantine())
	}
	for i := range w.Active() {
		w.Progress.Finished(i < failed)
	}
	w.Progress.End()
	pr := record.PhaseResult{Phase: p.Name, Index: -1, Outcome: record.OK, Started: start, Ended: time.Now().UTC()}
	if v != nil {
		data, merr := json.Marshal(v)
		if merr != nil {
			return fmt.Errorf("%s: record result: %w", p.Name, merr)
		}
		pr.Data = data
	}
	switch {
	case unmeasured:
		pr.Outcome, pr.Error = record.NotMeasured, nm.Error()
		w.Progress.Line("%s not measured: %s", p.Name, firstLine(nm.Error()))
	case err != nil:
		pr.Outcome, pr.Error = record.Failed, err.Error()
		if ctx.Err() != nil {
			pr.Outcome = record.Interrupted
		}
	}
	bounded(&pr)
	w.record(j, pr, nil)
	// A node a cluster-wide phase found unfit (it stopped answering, its
	// image is not the pin) sits out the phases after it, as one that
	// failed a gating phase does.
	if l, ok := v.(Quarantiner); ok {
		q := l.Quarantine()
		for _, n := range w.Nodes {
			reason, lost := q[n.Name]
			if !lost || n.quarantined {
				continue
			}
			reason = fmt.Sprintf("%s: %s", p.Name, reason)
			n.setQuarantined(reason, pr.Ended)
			w.Progress.Node(n.Name, "quarantined: %s", reason)
			w.journal(j, entry{Type: "quarantine", Phase: p.Name, Node: n.Name, Reason: reason})
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	w.journal(j, entry{Type: "done", Phase: p.Name})
	return nil
}

// Quarantiner is a cluster phase's result that names nodes to leave out
// of the rest of the window (node name → why); the runner quarantines and
// journals them.
type Quarantiner interface {
	Quarantine() map[string]string
}

// record appends a result (and a quarantine) to the journal first, then to
// the in-memory record: what is in memory is on disk too, unless the
// bundle's disk failed (bundleError), which ends the window.
func (w *Window) record(j *journal, pr record.PhaseResult, q *entry) {
	w.journal(j, entry{Type: "result", Result: &pr})
	if q != nil {
		w.journal(j, *q)
	}
	w.mu.Lock()
	w.rec.Phases = append(w.rec.Phases, pr)
	w.mu.Unlock()
}

// judge fills the verdicts and the per-node summary of the record.
func (w *Window) judge(phases []Phase) {
	w.rec.Verdicts = nil
	for i := range phases {
		if j := phases[i].Judge; j != nil {
			vs, err := guarded(func() ([]record.Verdict, error) { return j(w), nil })
			if why := phases[i].Skipped; why != "" {
				// Left out by the selection: whatever the judge made of a
				// result with nothing in it (a 1,000-node --only preflight
				// failed NCCL-002 and RECOV-001 "skipped: not in --only"),
				// nothing was measured.
				for k := range vs {
					vs[k] = notRun(vs[k], "skipped: "+why)
				}
			}
			if err != nil {
				// A judge's bug must not cost the evidence: the window
				// ends, says why, and is not accepted.
				w.Progress.Line("%s: judging failed: %s", phases[i].Name, firstLine(err.Error()))
				w.rec.Aborted = firstNonEmpty(w.rec.Aborted, fmt.Sprintf("%s: judging failed: %s", phases[i].Name, firstLine(err.Error())))
			}
			w.rec.Verdicts = append(w.rec.Verdicts, vs...)
		}
	}
	w.rec.Verdicts = append(w.rec.Verdicts, w.idleVerdicts()...)
	w.rec.Verdicts = append(w.rec.Verdicts, w.judgeAllocation()...)
	w.rec.Verdicts = append(w.rec.Verdicts, w.judgeKube()...)
	for _, n := range w.Nodes {
		rn := &w.rec.Nodes[n.Index]
		rn.Quarantined, rn.Reason, rn.QuarantinedAt = n.quarantined, n.reason, n.quarantinedAt
		rn.ReleasedAt = n.releasedAt()
	}
}

// notRun is v as a requirement its phase did not run for: SKIP, said
// why, no figure.
func notRun(v record.Verdict, why string) record.Verdict {
	return record.Verdict{ID: v.ID, Title: v.Title, Node: v.Node, Status: record.Skip, Detail: why}
}

// releasePods deletes the window's pods on a managed cluster (every pod
// with its run's label, whichever coordinator made it) once its teardown
// ran, with a budget of its own, and waits until the API lists none.
func (w *Window) releasePods() {
	if w.podsReleased {
		return
	}
	w.podsReleased = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	names, err := w.reach.ReleasePods(ctx)
	if w.reach.kubePods() != nil && w.rec != nil {
		w.recordPodsDeleted(names, err)
	}
	var setup *remote.SetupError
	switch {
	case errors.As(err, &setup):
		// The kubeconfig could not be used: no pod was made with it either.
		w.Progress.Line("kubernetes: the window's pods not looked for: %s", clipText(err.Error(), 200))
	case err != nil:
		w.Progress.Line("kubernetes: the window's pods NOT all deleted: %s; delete them with kubectl delete pods -l %s=%s",
			clipText(err.Error(), 200), KubeRunLabel, w.reach.run)
	case len(names) > 0:
		w.Progress.Line("kubernetes: %d pod(s) of the window deleted; the API lists none with %s=%s", len(names), KubeRunLabel, w.reach.run)
	}
}

func (w *Window) closeClients() {
	var execs []remote.Executor
	for _, n := range w.Nodes {
		execs = append(execs, n.setExec(nil))
	}
	w.mu.Lock()
	if w.login != nil {
		execs = append(execs, w.login.setExec(nil))
	}
	w.mu.Unlock()
	remote.CloseExecutors(execs)
}

// What one result may hold of what nodes said: the journal must always be
// readable back (its line limit is 64 MiB) and run.json must stay a file
// a person can open, whatever a node printed.
const (
	maxResultBytes = 8 << 20
	maxErrorBytes  = 8 << 10
)

// bounded keeps pr within those limits: a longer error keeps its head and
// tail; data over the limit is not kept, and the phase failed on the node
// (its raw log, capped too, holds what it said).
func bounded(pr *record.PhaseResult) {
	if n := len(pr.Data); n > maxResultBytes {
		pr.Data = nil
		pr.Outcome = record.Failed
		pr.Error = strings.TrimSpace(fmt.Sprintf("the node's answers made a result of %d bytes, more than the %d a result may hold; not kept (see the raw log). %s",
			n, maxResultBytes, pr.Error))
	}
	if len(pr.Error) > maxErrorBytes {
		cut := len(pr.Error) - maxErrorBytes
		pr.Error = pr.Error[:maxErrorBytes/2] + fmt.Sprintf(" [... %d bytes cut ...] ", cut) + pr.Error[len(pr.Error)-maxErrorBytes/2:]
	}
}

// scrubbed is rec with every secret a node let slip replaced
// (redact.Bytes over its JSON): the record reports and run.json are made
// from.
func scrubbed(rec *record.Run) *record.Run {
	b, err := json.Marshal(rec)
	if err != nil {
		return rec
	}
	var out record.Run
	if err := json.Unmarshal(redact.Bytes(b), &out); err != nil {
		return rec
	}
	return &out
}

// redialLost gives a node whose connection dropped during an earlier
// phase one more dial before the next: the window owns its connections,
// and a resumed window, which dials afresh, must judge the node as an
// uninterrupted one does. A node never connected (connect failed) is
// left alone; a failed redial leaves the phase to fail on it.
func (w *Window) redialLost(ctx context.Context, n *Node) {
	if e := n.Exec(); e != nil && e.Lost() {
		if _, err := w.Reconnect(ctx, n); err != nil {
			w.Progress.Node(n.Name, "reconnect: %s", firstLine(err.Error()))
		}
	}
}

// guarded runs fn, turning a panic into its error (with the stack): a bug
// that one odd node triggers must not take the window and its evidence
// down with it.
func guarded[T any](fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn()
}

// explain turns a per-node deadline into words an operator can act on.
func explain(err error, deadline time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("%v (phase deadline %s)", err, deadline)
	}
	return err.Error()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// runID is the shape Start gives a window's ID: its time and a slug.
var runID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[a-z0-9-]{0,50}$`)

func validRunID(id string) bool { return runID.MatchString(id) }

// newRunDir makes a run directory of its own under runs: base, else
// base-2, base-3, ... (two windows started in the same second, by two
// people or two CI jobs sharing a runs directory, must not write one
// bundle).
func newRunDir(runs, base string) (string, string, error) {
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return "", "", fmt.Errorf("runs directory: %w", err)
	}
	for i := 1; i <= 1000; i++ {
		id := base
		if i > 1 {
			id = fmt.Sprintf("%s-%d", base, i)
		}
		dir := filepath.Join(runs, id)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return id, dir, nil
		}
		if !os.IsExist(err) {
			return "", "", fmt.Errorf("run directory: %w", err)
		}
	}
	return "", "", fmt.Errorf("run directory: %s and 999 more like it exist in %s", base, runs)
}

func slug(s string) string {
	s = strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}
