package fabric

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gpuaccept/hostlist"
)

// SlowGroup is a slow part of the fabric named by the inventory's labels
// (rack, leaf) instead of node by node: every node that carries
// Label=Value is slow (the group itself: its switch, its power), or every
// slow pair crosses from it to another group (its uplink).
type SlowGroup struct {
	Label string   `json:"label"`
	Value string   `json:"value"`
	Nodes []string `json:"nodes"`
	// Uplink: the slow pairs are the group's with the rest, its own pairs
	// are fast. With two groups only, the path between them (Other the
	// second group's value): which end is slow no pair can tell.
	Uplink     bool     `json:"uplink,omitempty"`
	Other      string   `json:"other,omitempty"`
	OtherNodes []string `json:"other_nodes,omitempty"`
}

// Explains says whether the group accounts for a slow link a–b (one end
// in an uplink's group, the two ends on the two sides of a path), or for
// a slow node a (b empty: a node of a group all slow).
func (g SlowGroup) Explains(a, b string) bool {
	inA, inB := slices.Contains(g.Nodes, a), slices.Contains(g.Nodes, b)
	switch {
	case b == "":
		// A node: only a group all slow explains one.
		return inA && !g.Uplink && g.Other == ""
	case g.Other != "":
		return inA && slices.Contains(g.OtherNodes, b) || inB && slices.Contains(g.OtherNodes, a)
	case g.Uplink:
		return inA != inB
	}
	return inA || inB
}

// String reads "leaf=ib-leaf-3 (gpu-[01-20]): all 20 nodes slow" or
// "leaf=ib-leaf-3's uplink (gpu-[01-20]): slow to every other leaf, fast inside".
func (g SlowGroup) String() string {
	if g.Other != "" {
		return fmt.Sprintf("the path between %s=%s (%s) and %s=%s (%s): slow across, fast inside", g.Label, g.Value, hostlist.Compress(g.Nodes),
			g.Label, g.Other, hostlist.Compress(g.OtherNodes))
	}
	if g.Uplink {
		return fmt.Sprintf("%s=%s's uplink (%s): slow to every other %s, fast inside", g.Label, g.Value, hostlist.Compress(g.Nodes), g.Label)
	}
	return fmt.Sprintf("%s=%s (%s): all %d nodes slow", g.Label, g.Value, hostlist.Compress(g.Nodes), len(g.Nodes))
}

// Groups names the slow parts of b by labels (node → label → value): a
// group of at least two nodes all slow, or one whose cross-group pairs
// were all slow while its own were fast. The nodes and links a group
// explains stay in b too; a reader sees the group first.
func Groups(b Bisection, labels map[string]map[string]string) []SlowGroup {
	members := map[string]map[string][]string{} // key → value → nodes
	for n, ls := range labels {
		for k, v := range ls {
			if members[k] == nil {
				members[k] = map[string][]string{}
			}
			members[k][v] = append(members[k][v], n)
		}
	}
	// The largest groups first (fewest values: a leaf before its racks),
	// so that what a leaf explains is not named again as its racks.
	var keys []string
	for k, vs := range members {
		if len(vs) > 1 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(members[keys[i]]) != len(members[keys[j]]) {
			return len(members[keys[i]]) < len(members[keys[j]])
		}
		return keys[i] < keys[j]
	})
	var out []SlowGroup
	explained := func(a, c string) bool {
		for _, g := range out {
			if g.Explains(a, c) {
				return true
			}
		}
		return false
	}
	for _, key := range keys {
		vals := make([]string, 0, len(members[key]))
		for v := range members[key] {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		var found, uplinks []SlowGroup
		for _, v := range vals {
			nodes := slices.Clone(members[key][v])
			sort.Strings(nodes)
			if len(nodes) < 2 {
				continue
			}
			if allIn(nodes, b.SlowNodes) {
				if !allExplained(nodes, explained) {
					found = append(found, SlowGroup{Label: key, Value: v, Nodes: nodes})
				}
				continue
			}
			if uplinkSlow(b, labels, key, v, explained) {
				uplinks = append(uplinks, SlowGroup{Label: key, Value: v, Nodes: nodes, Uplink: true})
			}
		}
		if len(vals) == 2 && len(uplinks) == 2 {
			g := uplinks[0]
			g.Other, g.OtherNodes = uplinks[1].Value, uplinks[1].Nodes
			uplinks = []SlowGroup{g}
		}
		out = append(append(out, found...), uplinks...)
	}
	return out
}

func allExplained(nodes []string, explained func(a, c string) bool) bool {
	for _, n := range nodes {
		if !explained(n, "") {
			return false
		}
	}
	return true
}

func allIn(nodes, set []string) bool {
	for _, n := range nodes {
		if !slices.Contains(set, n) {
			return false
		}
	}
	return true
}

// uplinkSlow: the group's pairs with other groups were slow every time
// (two or more of them, none with a node already named slow, none a
// larger group already explains), and its pairs inside were fast.
func uplinkSlow(b Bisection, labels map[string]map[string]string, key, v string, explained func(a, c string) bool) bool {
	in := func(n string) bool { return labels[n][key] == v }
	ratio := b.SlowRatio
	if ratio <= 0 {
		ratio = 0.8
	}
	cross, slowCross, inside := 0, 0, 0
	others := map[string]bool{}
	groups := map[string]bool{}
	for _, ls := range labels {
		if g, ok := ls[key]; ok {
			groups[g] = true
		}
	}
	for _, p := range b.Pairs {
		slow := p.Err != "" || p.BusBW < ratio*b.Reference
		_, okA := labels[p.A][key]
		_, okB := labels[p.B][key]
		switch {
		case !okA || !okB:
		case in(p.A) && in(p.B):
			inside++
			if slow {
				return false
			}
		case in(p.A) || in(p.B):
			if slices.Contains(b.SlowNodes, p.A) || slices.Contains(b.SlowNodes, p.B) || explained(p.A, p.B) {
				continue
			}
			cross++
			if slow {
				slowCross++
			}
			o := labels[p.A][key]
			if in(p.A) {
				o = labels[p.B][key]
			}
			others[o] = true
		}
	}
	// Slow with two other groups at least, where there are: slow with one
	// only is as much that group's uplink as this one's.
	return cross >= 2 && slowCross == cross && inside >= 1 && (len(others) >= 2 || len(groups) == 2)
}

// groupText is the groups in one clause for Summary.
func groupText(gs []SlowGroup) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, g.String())
	}
	return strings.Join(parts, "; ")
}
