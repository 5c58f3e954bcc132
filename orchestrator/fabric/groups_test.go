package fabric

import (
	"fmt"
	"strings"
	"testing"
)

// leaves labels n nodes into leaves of size each: leaf=l1, l2, ...
func leaves(names []string, size int) map[string]map[string]string {
	out := map[string]map[string]string{}
	for i, n := range names {
		out[n] = map[string]string{"leaf": fmt.Sprintf("l%d", i/size+1), "rack": fmt.Sprintf("r%d", i/2+1)}
	}
	return out
}

func leafOf(labels map[string]map[string]string) map[string]string {
	g := map[string]string{}
	for n, ls := range labels {
		g[n] = ls["leaf"]
	}
	return g
}

// A slow leaf is named as the leaf, not as its nodes one by one: every
// node of it slow (its switch), or only its pairs with the other leaves
// (its uplink).
func TestSlowLeafIsNamedAsALeaf(t *testing.T) {
	names := nodes(16)
	labels := leaves(names, 4) // l1 = n1..n4, ..., l4 = n13..n16

	// l2's switch: all of n5..n8 slow.
	m := fabricModel{rate: uniform(names, 12)}
	for _, n := range []string{"n5", "n6", "n7", "n8"} {
		m.rate[n] = 5
	}
	res := bisectIn(t, names, leafOf(labels), m, 3)
	res.Groups = Groups(res, labels)
	if len(res.Groups) != 1 || res.Groups[0].String() != "leaf=l2 (n[5-8]): all 4 nodes slow" {
		t.Fatalf("groups %+v\nslow %v unresolved %v\n%+v", res.Groups, res.SlowNodes, res.Unresolved, res.Pairs)
	}
	if s := res.Summary(); !strings.HasPrefix(s, "slow: leaf=l2 (n[5-8]): all 4 nodes slow, in ") || strings.Contains(s, "node n6") {
		t.Errorf("summary: %s", s)
	}

	// l3's uplink: its nodes slow with everyone outside l3, fast inside.
	m = fabricModel{rate: uniform(names, 12), links: map[[2]string]float64{}}
	for _, a := range names {
		for _, b := range names {
			if labels[a]["leaf"] == "l3" && labels[b]["leaf"] != "l3" {
				m.links[[2]string{a, b}] = 5
			}
		}
	}
	res = bisectIn(t, names, leafOf(labels), m, 3)
	res.Groups = Groups(res, labels)
	if len(res.Groups) != 1 || !res.Groups[0].Uplink || res.Groups[0].Value != "l3" {
		t.Fatalf("uplink groups %+v\nslow %v links %v unresolved %v\n%+v", res.Groups, res.SlowNodes, res.SlowLinks, res.Unresolved, res.Pairs)
	}
	if s := res.Summary(); !strings.HasPrefix(s, "slow: leaf=l3's uplink (n[9-12]): slow to every other leaf, fast inside, in ") {
		t.Errorf("summary: %s", s)
	}
	// What was named says how much of the fabric the pairs covered: a
	// link whose ends were never paired cannot have been named.
	if ran, of := res.coverage(); of != 16*15/2 || ran < 8 || ran > of ||
		!strings.Contains(res.Summary(), fmt.Sprintf(" round(s) of pairs, %d of 120 pairs run (typical pair ", ran)) {
		t.Errorf("coverage %d of %d in %q", ran, of, res.Summary())
	}

	// A healthy fabric, and one slow node, name no group.
	res = bisectIn(t, names, leafOf(labels), fabricModel{rate: uniform(names, 12)}, 3)
	if res.Rounds != 2 {
		t.Errorf("a healthy grouped fabric: %d rounds, want 2 (inside the leaves, then across)", res.Rounds)
	}
	if g := Groups(res, labels); len(g) != 0 {
		t.Errorf("healthy fabric: %+v", g)
	}
	m = fabricModel{rate: uniform(names, 12)}
	m.rate["n3"] = 6
	res = bisectIn(t, names, leafOf(labels), m, 3)
	if g := Groups(res, labels); len(g) != 0 || len(res.SlowNodes) != 1 || res.SlowNodes[0] != "n3" {
		t.Errorf("one slow node: %+v, slow %v\n%+v", g, res.SlowNodes, res.Pairs)
	}
}

// Two leaves: a slow path between them cannot be put on either end.
func TestSlowPathBetweenTwoLeaves(t *testing.T) {
	names := nodes(8)
	labels := leaves(names, 4)
	m := fabricModel{rate: uniform(names, 12), links: map[[2]string]float64{}}
	for _, a := range names {
		for _, b := range names {
			if labels[a]["leaf"] != labels[b]["leaf"] {
				m.links[[2]string{a, b}] = 5
			}
		}
	}
	res := bisectIn(t, names, leafOf(labels), m, 3)
	res.Groups = Groups(res, labels)
	if len(res.Groups) != 1 || res.Groups[0].String() != "the path between leaf=l1 (n[1-4]) and leaf=l2 (n[5-8]): slow across, fast inside" {
		t.Fatalf("groups %+v\n%+v", res.Groups, res.Pairs)
	}
}
