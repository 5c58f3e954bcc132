package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/phases"
)

// nodeBurnin is what one node journaled of its burn-in.
type nodeBurnin struct {
	node   string
	runs   int
	done   time.Duration
	failed string
}

// printBurnin: while the burn-in is under way, and after, each node's
// load time of phases.burnin.duration as its journaled runs say (a
// resumed window's runs before the resume included), nodes alike on one
// line. Nothing when the window has no burn-in or has not reached it.
func printBurnin(w io.Writer, st *orchestrator.Status, names []string) {
	name := phases.Burnin.Name
	p, ok := st.Plan[name]
	if !ok || !p.Enabled {
		return
	}
	finished := slices.Contains(st.Done, name)
	var all []nodeBurnin
	noted := false
	for _, n := range names {
		notes := st.Notes[n]
		runs, done, failed := phases.BurninProgress(func(k string) string { return notes[k] })
		noted = noted || runs > 0 || failed != ""
		if _, out := st.Quarantined[n]; out && runs == 0 && failed == "" {
			continue // not in the burn-in: the quarantine line says why
		}
		all = append(all, nodeBurnin{node: n, runs: runs, done: done, failed: failed})
	}
	if !finished && st.Current != name && !noted {
		return // not reached yet
	}
	dur, _ := time.ParseDuration(p.Duration)
	if dur <= 0 {
		dur = burninDurationOfResults(st)
	}
	state := "under way"
	switch {
	case finished:
		state = "done"
	case st.Current != name:
		state = "cut short"
	}
	of := ""
	if dur > 0 {
		of = ", " + shortDur(dur, dur >= time.Hour) + " per node"
	}
	fmt.Fprintf(w, "burn-in%s, %s (the load time of each node's finished runs):\n", of, state)
	groups := map[string][]nodeBurnin{}
	for _, b := range all {
		k := fmt.Sprintf("%d", b.runs)
		if b.failed != "" {
			k += " failed: " + shownLine(b.failed, 50)
		}
		groups[k] = append(groups[k], b)
	}
	keys := sortedKeys(groups)
	// The fleet's line first, then the nodes that differ, the fewest runs
	// first (a node that fell behind).
	slices.SortStableFunc(keys, func(a, b string) int {
		if c := cmp.Compare(len(groups[b]), len(groups[a])); c != 0 {
			return c
		}
		return cmp.Compare(groups[a][0].runs, groups[b][0].runs)
	})
	printGroups(w, keys, func(k string) int { return len(groups[k]) }, func(k string) string { return burninLine(groups[k], dur, finished) })
}

// burninLine is one group of nodes that finished as many runs: the range
// of their load time, of the duration, and what is left of it (to the
// minute in a burn-in of an hour or more); once the phase is done, what
// is left is none (the last run did not fit in it).
func burninLine(g []nodeBurnin, dur time.Duration, finished bool) string {
	lo, hi := g[0].done, g[0].done
	names := make([]string, 0, len(g))
	for _, b := range g {
		lo, hi = min(lo, b.done), max(hi, b.done)
		names = append(names, b.node)
	}
	coarse := dur >= time.Hour || hi >= time.Hour
	span := func(a, b time.Duration) string {
		if x, y := shortDur(a, coarse), shortDur(b, coarse); x != y {
			return x + "-" + y
		}
		return shortDur(a, coarse)
	}
	b := g[0]
	rest := "burn-in: no run finished yet"
	if b.runs > 0 || b.failed != "" {
		rest = "burn-in " + span(lo, hi)
		if dur > 0 {
			rest += " of " + shortDur(dur, coarse)
			if !finished {
				rest += ", " + span(max(dur-hi, 0), max(dur-lo, 0)) + " left"
			}
		}
		rest += fmt.Sprintf(", %d run", b.runs)
		if b.runs != 1 {
			rest += "s"
		}
	}
	who := orchestrator.NodesWho(names, max(20, 100-2-len("9999 nodes : ")-utf8.RuneCountInString(rest)))
	line := who + ": " + rest
	if b.failed != "" {
		line += ", failed: "
		line += shownLine(b.failed, max(20, 100-2-utf8.RuneCountInString(line)))
	}
	return line
}

// burninDurationOfResults is the duration a node's burn-in result states
// (duration_s), for a run whose plan does not record it (made before the
// plan did): known only once a node's burn-in ended.
func burninDurationOfResults(st *orchestrator.Status) time.Duration {
	for _, r := range st.Run.Phases {
		var d struct {
			DurationS float64 `json:"duration_s"`
		}
		if r.Phase == phases.Burnin.Name && json.Unmarshal(r.Data, &d) == nil && d.DurationS > 0 && d.DurationS < 1e8 {
			return time.Duration(d.DurationS * float64(time.Second))
		}
	}
	return 0
}

// shortDur is d as a person reads a burn-in's time: 4h, 1h02m, 12m05s,
// 45s (a day and more in hours: 36h); coarse: to the minute (12m).
func shortDur(d time.Duration, coarse bool) string {
	if coarse && d >= time.Minute {
		d = d.Round(time.Minute)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		d = d.Round(time.Second)
		m, s := d/time.Minute, (d%time.Minute)/time.Second
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	d = d.Round(time.Minute)
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	if m == 0 {
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%02dm", h, m)
}
