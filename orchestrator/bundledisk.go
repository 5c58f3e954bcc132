package orchestrator

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
)

// journal appends e to the window's journal; a write that fails (the
// bundle's disk is full) is the window's to end with (bundleError), not
// the phase's that asked: the window goes on in memory to tear down.
func (w *Window) journal(j *journal, e entry) {
	if err := j.write(e); err != nil {
		w.bundleFailed(err)
	}
}

// bundleFailed keeps the first error writing the bundle.
func (w *Window) bundleFailed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bundleErr == nil {
		w.bundleErr = err
	}
}

func (w *Window) bundleError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bundleErr
}

// BundleAborted is why a window whose bundle could not be written ended.
func BundleAborted(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return "the bundle's disk is full: " + err.Error()
	}
	return "the bundle could not be written: " + err.Error()
}

// bundleLost ends a window whose bundle could not be written, after its
// teardown: the window is aborted (INCOMPLETE), and the operator reads
// which nodes were cleaned and which were left as they were, since the
// evidence that would say so may never reach the disk.
func (w *Window) bundleLost(phases []Phase, err error) error {
	why := BundleAborted(err)
	if w.rec.Aborted == "" {
		w.rec.Aborted = why
	}
	w.Progress.Line("%s", why)
	for _, l := range Cleanup(w.rec, phases) {
		w.Progress.Line("%s", l)
	}
	return errors.New(why)
}

// Cleanup says, for every node of rec, whether the window's teardown
// phases (those of phases marked Teardown) all ran on it: cleaned, left
// uncleaned (and why), or never reached (nothing of the window's is on
// it). Many nodes saying the same thing are one line.
func Cleanup(rec *record.Run, phases []Phase) []string {
	teardown := map[string]bool{}
	for i := range phases {
		if phases[i].Teardown {
			teardown[phases[i].Name] = true
		}
	}
	if len(teardown) == 0 {
		return nil
	}
	// The teardown phases that ran on some node (one disabled in the
	// inventory, the deletion check without a security section, did not).
	var order []string
	for i := range phases {
		if p := phases[i].Name; teardown[p] && !slices.Contains(order, p) && slices.ContainsFunc(rec.Phases, func(r record.PhaseResult) bool { return r.Phase == p && r.Node != "" }) {
			order = append(order, p)
		}
	}
	type state struct {
		ran map[string]bool
		why string
	}
	byNode := map[string]*state{}
	reached := map[string]bool{}
	for _, p := range rec.Phases {
		if p.Node == "" {
			continue
		}
		if !teardown[p.Phase] {
			reached[p.Node] = reached[p.Node] || p.Outcome == record.OK || p.Outcome == record.NotMeasured
			continue
		}
		s := byNode[p.Node]
		if s == nil {
			s = &state{ran: map[string]bool{}}
			byNode[p.Node] = s
		}
		if p.Outcome == record.OK {
			s.ran[p.Phase] = true
		} else if s.why == "" {
			s.why = fmt.Sprintf("%s: %s", p.Phase, firstLine(p.Error))
		}
	}
	groups := map[string][]string{}
	for _, n := range rec.Nodes {
		s, k := byNode[n.Name], ""
		switch {
		case s == nil && !reached[n.Name]:
			k = "never reached, nothing of the window's on it"
		case s == nil:
			k = "left uncleaned: teardown did not run"
		case s.why != "":
			k = "left uncleaned: " + s.why
		case len(s.ran) < len(order):
			k = "left uncleaned: teardown did not finish"
		default:
			k = "cleaned (" + strings.Join(order, ", ") + ")"
		}
		groups[k] = append(groups[k], n.Name)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	// Cleaned first, then what was left, then what was never reached.
	rank := func(k string) int {
		switch {
		case strings.HasPrefix(k, "cleaned"):
			return 0
		case strings.HasPrefix(k, "left"):
			return 1
		}
		return 2
	}
	sort.Slice(keys, func(a, b int) bool {
		if ra, rb := rank(keys[a]), rank(keys[b]); ra != rb {
			return ra < rb
		}
		return keys[a] < keys[b]
	})
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		line := []rune(fmt.Sprintf("  %s: %s", hostlist.Compress(groups[k]), k))
		if len(line) > 100 {
			line = append(line[:99], '…')
		}
		out = append(out, string(line))
	}
	return out
}

// discardLog stands for a raw log the bundle's disk could not take.
type discardLog struct{}

func (discardLog) Write(p []byte) (int, error) { return len(p), nil }
func (discardLog) Close() error                { return nil }
