package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"gpuaccept/orchestrator"
)

// printIdle says what the idle guard signalled so far: nodes signalled
// alike (where they sat idle, what idle.notify said, whether they were
// released) on one line, at most 8 lines.
func printIdle(w io.Writer, st *orchestrator.Status, now time.Time) {
	if len(st.Idle) == 0 && len(st.Released) == 0 {
		return
	}
	started := st.Run.Started
	type group struct {
		nodes         []string
		since, signal time.Time // the first node's
	}
	groups := map[string]*group{}
	var keys []string
	seen := map[string]bool{}
	for _, s := range st.Idle {
		if seen[s.Node] {
			continue // the first signal of a node says when it began
		}
		seen[s.Node] = true
		key := s.Where()
		if s.Notify != "" {
			key += ", notify " + s.Notify
		}
		if r, ok := st.Released[s.Node]; ok {
			key += fmt.Sprintf(", released +%s", roundDur(r.Sub(started)))
		}
		g := groups[key]
		if g == nil {
			g = &group{since: s.Since, signal: s.Signalled}
			groups[key] = g
			keys = append(keys, key)
		}
		g.nodes = append(g.nodes, s.Node)
	}
	slices.SortStableFunc(keys, func(a, b string) int { return len(groups[b].nodes) - len(groups[a].nodes) })
	fmt.Fprintf(w, "idle guard: %d node(s) signalled, %d released\n", len(seen), len(st.Released))
	printGroups(w, keys, func(k string) int { return len(groups[k].nodes) }, func(k string) string {
		g := groups[k]
		who := orchestrator.NodesWho(g.nodes, 30)
		when := fmt.Sprintf("idle +%s, signalled +%s", roundDur(g.since.Sub(started)), roundDur(g.signal.Sub(started)))
		if len(g.nodes) > 1 {
			when = "idle +" + roundDur(g.since.Sub(started)) + ", first signalled +" + roundDur(g.signal.Sub(started))
		}
		// Two spaces, ": ", " (" and ")" besides.
		return fmt.Sprintf("%s: %s (%s)", who, when, shownLine(k, max(20, 100-7-len(who)-len(when))))
	})
}
