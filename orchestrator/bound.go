package orchestrator

import (
	"fmt"
	"sort"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// WindowBound is how long a window of inv may take at most: the runner
// ends every phase at its deadline, per node for a per-node phase (whose
// nodes run the transport's fan-out at a time, a sliding window: at most Waves
// deadlines end to end) and once for a cluster phase or one that runs on
// every node together.
type WindowBound struct {
	Total  time.Duration
	Phases int
	Waves  int
	// Longest names the phases that bound it most, with their share.
	Longest []string
}

// Bound is the WindowBound of inv with phases.
func Bound(inv *inventory.Inventory, phases []Phase) WindowBound {
	n := len(inv.Nodes)
	c := inv.FanOut()
	if c <= 0 || c > n {
		c = n
	}
	b := WindowBound{Waves: 1}
	if c > 0 {
		b.Waves = (n + c - 1) / c
	}
	type part struct {
		name string
		d    time.Duration
	}
	var parts []part
	for i := range phases {
		p := &phases[i]
		if !p.enabled(inv) {
			continue
		}
		d := PhaseDeadline(p, inv)
		if p.Cluster == nil && !p.Together {
			d *= time.Duration(b.Waves)
		}
		b.Total += d
		b.Phases++
		parts = append(parts, part{p.Name, d})
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].d > parts[j].d })
	for _, p := range parts[:min(3, len(parts))] {
		d := p.d.Round(time.Minute)
		if p.d < time.Minute {
			d = p.d.Round(time.Second)
		}
		b.Longest = append(b.Longest, fmt.Sprintf("%s %s", p.name, d))
	}
	return b
}
