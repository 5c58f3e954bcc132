package orchestrator

import (
	"fmt"
	"slices"
	"strings"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Selection narrows a window to some nodes and phases (run --nodes,
// --only, --skip). The record keeps it, so that a report says what ran,
// and a resumed window runs the same.
type Selection = record.Selection

// essential phases run whatever the selection: the ones every window
// runs again on --resume (connect, tools, the window's key: without them
// no other phase can run) and teardown (or the nodes are left as the
// window found them not).
func essential(p *Phase) bool { return p.Teardown || p.AlwaysRun }

// selectPhases checks the names of sel and marks the phases it leaves out.
func selectPhases(phases []Phase, inv *inventory.Inventory, sel *Selection) ([]Phase, error) {
	if sel == nil || len(sel.Only) == 0 && len(sel.Skip) == 0 {
		return phases, nil
	}
	var names []string
	for i := range phases {
		names = append(names, phases[i].Name)
	}
	check := func(flag string, list []string) error {
		for _, n := range list {
			if !slices.Contains(names, n) {
				return fmt.Errorf("%s: no phase %q (the phases: %s)", flag, n, strings.Join(names, ", "))
			}
			p := &phases[slices.Index(names, n)]
			if flag == "--skip" && essential(p) && len(p.Serves) > 0 {
				return fmt.Errorf("--skip %s: it runs only for %s; skip those instead", n, strings.Join(p.Serves, ", "))
			}
			if flag == "--skip" && essential(p) {
				return fmt.Errorf("--skip %s: every window runs %s", n, strings.Join(essentials(phases), ", "))
			}
		}
		return nil
	}
	if err := check("--only", sel.Only); err != nil {
		return nil, err
	}
	if err := check("--skip", sel.Skip); err != nil {
		return nil, err
	}
	out := slices.Clone(phases)
	for i := range out {
		p := &out[i]
		switch {
		case essential(p):
		case slices.Contains(sel.Skip, p.Name):
			p.Skipped = "--skip " + p.Name
		case len(sel.Only) > 0 && !slices.Contains(sel.Only, p.Name):
			p.Skipped = "not in --only"
		}
	}
	for i := range out {
		if p := &out[i]; len(p.Serves) > 0 && !servesAny(out, p, inv) {
			p.Skipped = "needed only by " + strings.Join(p.Serves, ", ") + ", none of them selected"
		}
	}
	return out, nil
}

// servesAny says whether one of the phases p serves is still selected.
func servesAny(phases []Phase, p *Phase, inv *inventory.Inventory) bool {
	for i := range phases {
		if p.serves(phases[i].Name, inv) && phases[i].Skipped == "" {
			return true
		}
	}
	return false
}

// essentials names the phases every window runs (those that serve
// others run only with them).
func essentials(phases []Phase) []string {
	var out []string
	for i := range phases {
		if essential(&phases[i]) && len(phases[i].Serves) == 0 {
			out = append(out, phases[i].Name)
		}
	}
	return out
}

// SelectNodes is inv with only the nodes a --nodes flag names, checked
// as run's are (gpuaccept exec takes the same flag).
func SelectNodes(inv *inventory.Inventory, nodes string) (*inventory.Inventory, error) {
	return selectNodes(inv, &Selection{Nodes: nodes})
}

// selectNodes is inv with only the nodes sel names (a host range of
// node names); each name must be one of the inventory's.
func selectNodes(inv *inventory.Inventory, sel *Selection) (*inventory.Inventory, error) {
	if sel == nil || strings.TrimSpace(sel.Nodes) == "" {
		return inv, nil
	}
	want, err := hostlist.Expand(sel.Nodes)
	if err != nil {
		return nil, fmt.Errorf("--nodes %q: %w", sel.Nodes, err)
	}
	known := map[string]bool{}
	for _, n := range inv.Nodes {
		known[n.Name] = true
	}
	wanted := map[string]bool{}
	var unknown []string
	for _, name := range want {
		if !known[name] {
			unknown = append(unknown, name)
		}
		wanted[name] = true
	}
	// In the inventory's order, whatever the flag's: the first node holds
	// the rendezvous and launches mpirun, as in a whole window.
	out := *inv
	out.Nodes = nil
	for _, n := range inv.Nodes {
		if wanted[n.Name] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("--nodes %q: %s not in %s", sel.Nodes, hostlist.Compress(unknown), inv.Path)
	}
	return &out, nil
}
