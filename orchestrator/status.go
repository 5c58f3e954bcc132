package orchestrator

import (
	"encoding/json"
	"fmt"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
)

// Status is what a run directory says of its window, from the journal
// alone: `gpuaccept status` reads it from another terminal (or another
// machine that sees the directory) while the window runs, and never talks
// to the nodes.
type Status struct {
	// Run is the header and the phase results journaled so far.
	Run *record.Run
	// Done are the phases marked done, in the plan's order.
	Done []string
	// Current is the phase under way: the first one of the plan still to
	// run; "" once the window ended.
	Current string
	// Since is when Current began: the end of the phase before it, the
	// latest resumption, or the window's start, whichever came last.
	Since time.Time
	// Left is at most how long the window still has: the bounds of the
	// phases still to run, Current's less what it has used.
	Left time.Duration
	// Last is the journal's last entry; Ended and EndReason say whether
	// and how the window ended.
	Last      time.Time
	Ended     bool
	EndReason string
	// Quarantined: node name → "phase: reason".
	Quarantined map[string]string
	// Notes: node name → what the phases noted of it by key (the latest
	// value of each, a resumed window's earlier tries included), as a
	// resumed window reads them back.
	Notes map[string]map[string]string
	// Plan is the plan entry of each phase by name.
	Plan map[string]record.PlannedPhase
	// Idle: the idle guard's signals so far, in order; Released: node
	// name → when its release teardown ended.
	Idle     []record.IdleStretch
	Released map[string]time.Time
	// Slurm is the window's own allocation, as journaled; nil without one.
	Slurm *SlurmStatus
}

// SlurmStatus is the window's own Slurm allocation as the journal has it.
type SlurmStatus struct {
	Job string
	// Nodes: the granted job's nodelist and count; "" until granted.
	NodeList  string
	Nodes     []string
	Cancelled bool
}

// ReadStatus reads the window's status from its run directory dir at now.
func ReadStatus(dir string, now time.Time) (*Status, error) {
	r, err := readJournal(dir)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	st := &Status{Run: r.run, Last: r.last, Ended: r.ended, EndReason: r.endReason, Quarantined: map[string]string{},
		Notes: map[string]map[string]string{}, Plan: map[string]record.PlannedPhase{}}
	for _, q := range r.quarantine {
		st.Quarantined[q.Node] = q.Phase + ": " + q.Reason
	}
	st.Released = map[string]time.Time{}
	for _, e := range r.release {
		st.Released[e.Node] = e.At
	}
	for _, e := range r.idle {
		var s record.IdleStretch
		if json.Unmarshal([]byte(e.Value), &s) == nil && s.Node == e.Node {
			st.Idle = append(st.Idle, s)
		}
	}
	for _, e := range r.notes {
		if st.Notes[e.Node] == nil {
			st.Notes[e.Node] = map[string]string{}
		}
		st.Notes[e.Node][e.Key] = e.Value
	}
	for _, p := range r.run.Plan {
		st.Plan[p.Name] = p
	}
	for _, e := range r.slurm {
		if st.Slurm == nil {
			st.Slurm = &SlurmStatus{}
		}
		switch e.Key {
		case slurmJobKey:
			st.Slurm.Job = e.Value
		case slurmAllocationKey:
			var a slurm.Allocation
			if json.Unmarshal([]byte(e.Value), &a) == nil {
				st.Slurm.Job, st.Slurm.NodeList, st.Slurm.Nodes = a.JobID, a.NodeList, nil
				for _, n := range a.Nodes {
					st.Slurm.Nodes = append(st.Slurm.Nodes, n.Name)
				}
			}
		case slurmCancelledKey:
			st.Slurm.Cancelled = true
		}
	}
	st.Since = r.run.Started
	for _, at := range r.run.Resumed {
		st.Since = later(st.Since, at)
	}
	for _, p := range r.run.Plan {
		if r.done[p.Name] {
			st.Done = append(st.Done, p.Name)
			st.Since = later(st.Since, r.doneAt[p.Name])
		}
	}
	if r.ended {
		return st, nil
	}
	for _, p := range r.run.Plan {
		if !p.Enabled || r.done[p.Name] {
			continue
		}
		d, _ := time.ParseDuration(p.Deadline)
		if st.Current == "" {
			st.Current = p.Name
			d -= now.Sub(st.Since)
		}
		st.Left += max(d, 0)
	}
	return st, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
