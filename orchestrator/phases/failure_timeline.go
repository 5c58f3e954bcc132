package phases

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JobEvent is one line of the training job's log contract (scripts/
// ddp_train.py), stamped when it reached the coordinator: the nodes'
// clocks are not the coordinator's, and every figure is a difference of
// the coordinator's times.
type JobEvent struct {
	At    float64 `json:"at"` // seconds since the job was first launched
	Node  string  `json:"node"`
	Kind  string  `json:"kind"` // start | step | checkpoint | error
	Rank  int     `json:"rank"`
	World int     `json:"world,omitempty"`
	Step  int     `json:"step"`
	// Restart is torchrun's restart count (start lines).
	Restart int `json:"restart,omitempty"`
	// Torch is the worker's torch.__version__ (start lines).
	Torch string `json:"torch,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

// parseJobLine reads a "GPUACCEPT kind k=v ..." line wherever it starts
// in line (launchers prefix their workers' lines); ok false otherwise.
func parseJobLine(line string) (JobEvent, bool) {
	i := strings.Index(line, "GPUACCEPT ")
	if i < 0 {
		return JobEvent{}, false
	}
	rest := line[i+len("GPUACCEPT "):]
	kind, kv, _ := strings.Cut(rest, " ")
	e := JobEvent{Kind: kind}
	switch kind {
	case "start", "step", "checkpoint", "error":
	default:
		return JobEvent{}, false
	}
	if m, ok := strings.CutPrefix(kv, "msg="); ok {
		e.Msg = m
		kv = ""
	} else if j := strings.Index(kv, " msg="); j >= 0 {
		e.Msg, kv = kv[j+len(" msg="):], kv[:j]
	}
	for _, f := range strings.Fields(kv) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(v)
		switch k {
		case "node":
			e.Node = v
		case "rank":
			e.Rank = n
		case "world":
			e.World = n
		case "step":
			e.Step = n
		case "resume_step":
			if kind == "start" {
				e.Step = n
			}
		case "restart":
			e.Restart = n
		case "torch":
			if kind == "start" {
				e.Torch = v
			}
		}
	}
	return e, true
}

// jobLog collects the job's events from every node's stream.
type jobLog struct {
	mu     sync.Mutex
	start  time.Time
	events []JobEvent
	notify chan struct{} // closed and replaced on every event
}

func newJobLog(start time.Time) *jobLog {
	return &jobLog{start: start, notify: make(chan struct{})}
}

// add records a line from node; the node name is the inventory's, whatever
// the job printed.
func (l *jobLog) add(node, line string, at time.Time) {
	e, ok := parseJobLine(line)
	if !ok {
		return
	}
	e.Node = node
	l.mu.Lock()
	e.At = at.Sub(l.start).Seconds()
	l.events = append(l.events, e)
	close(l.notify)
	l.notify = make(chan struct{})
	l.mu.Unlock()
}

// poke wakes the waiters without an event (a launcher ended).
func (l *jobLog) poke() {
	l.mu.Lock()
	close(l.notify)
	l.notify = make(chan struct{})
	l.mu.Unlock()
}

// snapshot returns the events so far and a channel closed at the next one.
func (l *jobLog) snapshot() ([]JobEvent, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]JobEvent(nil), l.events...), l.notify
}

// FailureFigures is what one failure test measured; times are seconds
// since the job was launched, durations seconds.
type FailureFigures struct {
	InjectedAt float64 `json:"injected_at"`
	// DetectedAt: the first sign on a survivor that the job saw the
	// failure (a worker's error line, or workers starting again).
	DetectedAt *float64 `json:"detected_at,omitempty"`
	// ResumedAt: the first step of the job after the failure; Resumed is
	// set once ResumeSteps steps followed.
	ResumedAt   *float64 `json:"resumed_at,omitempty"`
	Resumed     bool     `json:"resumed"`
	ResumedFrom *int     `json:"resumed_from_step,omitempty"`
	// LastStep reached before the job started again, and the last
	// checkpoint then.
	LastStep       int  `json:"last_step_before"`
	LastCheckpoint int  `json:"last_checkpoint_step"`
	StepsLost      *int `json:"steps_lost,omitempty"`
	// VictimBackAt: the victim logging steps again in the job.
	VictimBackAt *float64 `json:"victim_back_at,omitempty"`
}

// DetectionSecs and ResumeSecs are the headline durations (nil: never).
func (f FailureFigures) DetectionSecs() *float64 { return since(f.DetectedAt, f.InjectedAt) }
func (f FailureFigures) ResumeSecs() *float64    { return since(f.ResumedAt, f.InjectedAt) }

func since(t *float64, from float64) *float64 {
	if t == nil {
		return nil
	}
	d := *t - from
	return &d
}

// figures reads the events against the moment of injection.
func figures(events []JobEvent, injectedAt float64, victim string, resumeSteps int) FailureFigures {
	f := FailureFigures{InjectedAt: injectedAt}
	// What the job had done before it started again: a step or a
	// checkpoint can still complete between the coordinator's act and its
	// effect (a cut takes a moment), or reach the coordinator after a
	// survivor's error line, and the job could resume from it.
	until := math.Inf(1)
	for _, e := range events {
		if e.At > injectedAt && e.Node != victim && e.Kind == "start" {
			until = e.At
			break
		}
	}
	for _, e := range events {
		if e.At > until || e.Kind == "start" {
			continue
		}
		switch e.Kind {
		case "step":
			f.LastStep = max(f.LastStep, e.Step)
		case "checkpoint":
			f.LastCheckpoint = max(f.LastCheckpoint, e.Step)
		}
	}
	var restartAt *float64
	stepsAfter := 0
	for _, e := range events {
		if e.At <= injectedAt {
			continue
		}
		at := e.At
		survivor := e.Node != victim
		if f.DetectedAt == nil && survivor && (e.Kind == "error" || e.Kind == "start") {
			f.DetectedAt = &at
		}
		if e.Kind == "start" && restartAt == nil && survivor {
			restartAt = &at
			from := e.Step
			f.ResumedFrom = &from
		}
		// Progress after the failure is a step of a job started again
		// (elastic or relaunched): steps of the old one that slipped out
		// before it noticed do not count.
		if e.Kind == "step" && restartAt != nil && e.At > *restartAt {
			if f.ResumedAt == nil {
				f.ResumedAt = &at
			}
			if e.Rank == 0 {
				stepsAfter++
				if stepsAfter >= resumeSteps {
					f.Resumed = true
				}
			}
			if e.Node == victim && f.VictimBackAt == nil {
				f.VictimBackAt = &at
			}
		}
	}
	if f.ResumedFrom != nil {
		lost := max(f.LastStep-*f.ResumedFrom, 0)
		f.StepsLost = &lost
	}
	return f
}

// recordedEvents are the events the record keeps: every start, checkpoint
// and error, and of the steps, for the nodes the timeline draws one event
// per node and step (the first rank's: the ranks of a data-parallel job
// step together), for the others the first and the last step of each run
// between starts — a fleet's every step was a third of run.json, and grew
// with the test's length. Each rank's lines stay in the raw log. Times are
// kept to the millisecond.
func recordedEvents(events []JobEvent, drawn []string) []JobEvent {
	type run struct {
		node string
		gen  int
	}
	type key struct {
		run
		step int
	}
	gen := map[string]int{} // starts seen per node
	seen := map[key]bool{}
	var kept []JobEvent
	var runs []run // kept[i]'s run, for steps
	ends := map[run][2]int{}
	for _, e := range events {
		e.At = math.Round(e.At*1000) / 1000
		var r run
		switch e.Kind {
		case "start":
			gen[e.Node]++
		case "step":
			r = run{e.Node, gen[e.Node]}
			k := key{r, e.Step}
			if seen[k] {
				continue
			}
			seen[k] = true
			se, ok := ends[r]
			if !ok {
				se[0] = len(kept)
			}
			se[1] = len(kept)
			ends[r] = se
		}
		kept = append(kept, e)
		runs = append(runs, r)
	}
	var out []JobEvent
	for i, e := range kept {
		if e.Kind == "step" && !slices.Contains(drawn, e.Node) {
			if se := ends[runs[i]]; i != se[0] && i != se[1] {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// textTimeline draws each node's steps over time, up to ended (at least),
// a column per bucket:
// '#' steps logged, '.' none, 'x' an error; a ruler marks the failure
// window (from injection to resumed progress, or to the end) with '!'.
func textTimeline(nodes []string, events []JobEvent, f FailureFigures, ended float64, width int) string {
	end := ended
	for _, e := range events {
		end = math.Max(end, e.At)
	}
	if end <= 0 || width < 10 {
		return ""
	}
	bucket := end / float64(width)
	col := func(t float64) int { return min(int(t/bucket), width-1) }
	pad := 0
	for _, n := range nodes {
		pad = max(pad, len(n))
	}
	rows := map[string][]byte{}
	for _, n := range nodes {
		rows[n] = []byte(strings.Repeat(".", width))
	}
	for _, e := range events {
		r, ok := rows[e.Node]
		if !ok {
			continue
		}
		c := col(e.At)
		switch {
		case e.Kind == "error":
			r[c] = 'x'
		case e.Kind == "step" && r[c] != 'x':
			r[c] = '#'
		}
	}
	ruler := []byte(strings.Repeat(" ", width))
	stop := end
	if f.ResumedAt != nil {
		stop = *f.ResumedAt
	}
	for c := col(f.InjectedAt); c <= col(stop); c++ {
		ruler[c] = '!'
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %s  failure window (injection to resumed progress)\n", pad, "", ruler)
	names := append([]string(nil), nodes...)
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%-*s  %s\n", pad, n, rows[n])
	}
	fmt.Fprintf(&b, "%-*s  0 s%s%.0f s  (one column = %.1f s; # steps, x error)\n", pad, "", strings.Repeat(" ", max(width-10, 1)), end, bucket)
	return b.String()
}
