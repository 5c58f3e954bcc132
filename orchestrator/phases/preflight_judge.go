package phases

import (
	"fmt"
	"sort"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// nodeFacts returns the preflight facts of every node that has them.
func nodeFacts(w *orchestrator.Window) map[int]*Facts {
	out := map[int]*Facts{}
	for _, n := range w.Nodes {
		var f Facts
		if r, ok := w.Result("preflight", n.Index, &f); ok && len(r.Data) > 0 {
			out[n.Index] = &f
		}
	}
	return out
}

// judgePreflight checks each node against the quote and against the rest
// of the fleet.
func judgePreflight(w *orchestrator.Window) []record.Verdict {
	inv := w.Inv
	q := inv.Quote
	facts := nodeFacts(w)
	var vs []record.Verdict
	for _, n := range w.Nodes {
		f, ok := facts[n.Index]
		if !ok {
			reason := "no preflight facts"
			if qd, why := n.Quarantined(); qd {
				reason = why
			}
			for _, id := range []string{"GPU-001", "GPU-002", "GPU-003", "GPU-004", "NET-002"} {
				v := record.NewVerdict(id, n.Name)
				v.Status, v.Detail = record.Skip, reason
				vs = append(vs, v)
			}
			continue
		}
		vs = append(vs,
			exact("GPU-001", n.Name, f.GPUModel, q.GPUModel),
			exact("GPU-002", n.Name, itoa(f.GPUCount), itoa(q.GPUsPerNode)),
			atLeast("GPU-003", n.Name, round1(float64(f.GPUMemoryMiB)/1024), q.GPUMemoryGiB, "GiB", inv.Acceptance.ToleranceFor("GPU-003")),
			formVerdict(n.Name, f, q.FormFactor),
		)
		if q.NICsPerNode > 0 || q.NICGbps > 0 {
			vs = append(vs, nicVerdict(n.Name, f, q, inv.Acceptance.ToleranceFor("NET-001")))
		}
		vs = append(vs, neighbourVerdict(n.Name, f, len(w.Nodes)-1, q, inv.Acceptance.ToleranceFor("NET-001")))
	}
	vs = append(vs, versionVerdict("GPU-005", w, facts, func(f *Facts) string { return f.Driver }, q.Driver)...)
	vs = append(vs, versionVerdict("GPU-006", w, facts, func(f *Facts) string { return f.CUDA }, q.CUDA)...)
	vs = append(vs, homogeneity(w, facts)...)
	return vs
}

func exact(id, node, measured, quoted string) record.Verdict {
	v := record.NewVerdict(id, node)
	v.Measured, v.Quoted = measured, quoted
	switch {
	case quoted == "" || quoted == "0":
		v.Status, v.Quoted, v.Detail = record.Skip, "", "not stated in the quote"
	case strings.EqualFold(strings.TrimSpace(measured), strings.TrimSpace(quoted)):
		v.Status = record.Pass
	default:
		v.Status = record.Fail
	}
	return v
}

func atLeast(id, node string, measured, quoted float64, unit string, tol float64) record.Verdict {
	v := record.NewVerdict(id, node)
	v.Measured = fmt.Sprintf("%g %s", measured, unit)
	if quoted <= 0 {
		v.Status, v.Detail = record.Skip, "not stated in the quote"
		return v
	}
	ratio := measured / quoted
	v.Quoted, v.Ratio, v.Tolerance = fmt.Sprintf("%g %s", quoted, unit), &ratio, &tol
	v.Status = record.Pass
	if ratio < tol {
		v.Status = record.Fail
	}
	return v
}

func formVerdict(node string, f *Facts, quoted string) record.Verdict {
	v := record.NewVerdict("GPU-004", node)
	v.Measured, v.Quoted, v.Detail = f.FormFactor, quoted, f.FormWhy
	switch {
	case quoted == "":
		v.Status, v.Detail = record.Skip, "not stated in the quote"
	case f.FormFactor == "":
		// The quoted form factor was not measured: NOT MEASURED, never a
		// WARN that a card counts as judged. What was read goes with it:
		// a SKU to add to formfactor.go's tables, or readings that
		// disagree.
		why := "the node's tools do not tell SXM from PCIe"
		if f.FormWhy != "" {
			why += ": " + f.FormWhy
		}
		notMeasured(&v, why+": quote.form_factor "+quoted+" not measured")
	case strings.EqualFold(f.FormFactor, quoted):
		v.Status = record.Pass
	default:
		v.Status = record.Fail
	}
	return v
}

// nicVerdict counts the ports that are up at the quoted speed; slower
// ports are other networks (front-end, storage) and do not count towards
// the quoted fabric.
func nicVerdict(node string, f *Facts, q inventory.Quote, tol float64) record.Verdict {
	v := record.NewVerdict("NET-001", node)
	fast := 0
	var down []string
	for _, p := range f.NICs {
		switch {
		case p.State != "Active":
			down = append(down, fmt.Sprintf("%s/%d %s", p.Device, p.Port, p.State))
		case atQuotedSpeed(p, q, tol):
			fast++
		}
	}
	if q.NICGbps > 0 {
		v.Measured = fmt.Sprintf("%d active at ≥ %g Gb/s", fast, q.NICGbps*tol)
		v.Quoted = fmt.Sprintf("%d × %g Gb/s", q.NICsPerNode, q.NICGbps)
	} else {
		v.Measured = fmt.Sprintf("%d active", fast)
		v.Quoted = fmt.Sprintf("%d", q.NICsPerNode)
	}
	switch {
	case len(f.NICs) == 0:
		v.Status, v.Detail = record.Warn, "no InfiniBand/RoCE ports reported (ibstat, ibv_devinfo absent or empty)"
	case fast < max(q.NICsPerNode, 1):
		v.Status, v.Detail = record.Fail, "not active: "+orNone(down)
	case len(down) > 0:
		v.Status, v.Detail = record.Warn, "beyond the quoted ports, not active: "+strings.Join(down, ", ")
	default:
		v.Status = record.Pass
	}
	return v
}

// neighbourVerdict: on a flat network the node holds a neighbour entry for
// every peer on each network it reaches them on: the front end's sockets,
// and each RoCE port of the fabric (RoCE addresses its peers through the
// same table; ports slower than quoted are other networks, as for
// NET-001). Past gc_thresh3 the kernel makes no new entry and a connect to
// a peer not yet met fails; Linux's default is 1,024, under a 128-node
// fleet with eight RoCE rails. A routed fabric needs fewer entries, which
// the node cannot tell: a low limit is a warning, as is an overflow the
// kernel already logged.
func neighbourVerdict(node string, f *Facts, peers int, q inventory.Quote, tol float64) record.Verdict {
	v := record.NewVerdict("NET-002", node)
	nb := f.Neighbours
	switch {
	case nb == nil:
		v.Status, v.Detail = record.Skip, "preflight read no neighbour table (a record made before the check existed)"
		return v
	case peers == 0:
		v.Status, v.Detail = record.Skip, "one node: no peers to hold"
		return v
	}
	rails := 0
	for _, p := range f.NICs {
		if p.State == "Active" && p.LinkLayer == "Ethernet" && atQuotedSpeed(p, q, tol) {
			rails++
		}
	}
	need := peers * (1 + rails)
	var warn []string
	if nb.Unread == "" {
		v.Measured = fmt.Sprintf("limit %d, needs %d (%d peers x %d networks)", nb.GCThresh3, need, peers, 1+rails)
		if nb.GCThresh3 < need {
			warn = append(warn, fmt.Sprintf("gc_thresh3 is under what a flat network of the window's nodes needs "+
				"(the front end and %d RoCE port(s)): raise net.ipv4.neigh.default.gc_thresh1/2/3", rails))
		}
	} else {
		v.Measured = fmt.Sprintf("limit not readable, needs %d (%d peers x %d networks)", need, peers, 1+rails)
	}
	if h := f.Health; h != nil && h.Kernel != nil && h.Kernel.NeighOverflows > 0 {
		warn = append(warn, fmt.Sprintf("the kernel logged a neighbour table overflow since boot (%d line(s)): %s",
			h.Kernel.NeighOverflows, h.Kernel.NeighOverflow))
	}
	switch {
	case len(warn) > 0:
		v.Status, v.Detail = record.Warn, strings.Join(warn, "; ")
	case nb.Unread != "":
		v.Status, v.Detail = record.Skip, "gc_thresh3 not readable ("+nb.Unread+"; in a network namespace the host's limit applies)"
	default:
		v.Status = record.Pass
	}
	return v
}

// atQuotedSpeed: a port of the quoted fabric (any port when the quote
// states no speed).
func atQuotedSpeed(p NICFact, q inventory.Quote, tol float64) bool {
	return q.NICGbps == 0 || p.RateGbps >= q.NICGbps*tol
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none (ports are up but slower than quoted)"
	}
	return strings.Join(s, ", ")
}

// versionVerdict: every node on the fleet's common version, and that
// version as quoted when the quote names one.
func versionVerdict(id string, w *orchestrator.Window, facts map[int]*Facts, get func(*Facts) string, quoted string) []record.Verdict {
	common := modal(facts, get)
	var vs []record.Verdict
	for _, n := range w.Nodes {
		f, ok := facts[n.Index]
		if !ok {
			continue
		}
		v := record.NewVerdict(id, n.Name)
		v.Measured, v.Quoted, v.Status = get(f), quoted, record.Pass
		switch {
		case get(f) == "":
			v.Status, v.Detail = record.Warn, "not reported"
		case quoted != "" && get(f) != quoted:
			v.Status, v.Detail = record.Fail, "differs from the quote"
		case get(f) != common:
			v.Status, v.Detail = record.Fail, fmt.Sprintf("differs from the rest of the fleet (%s)", common)
		}
		vs = append(vs, v)
	}
	return vs
}

// homogeneity names every node whose GPU model, count, driver or NIC set
// differs from what most nodes have.
func homogeneity(w *orchestrator.Window, facts map[int]*Facts) []record.Verdict {
	keys := []struct {
		name string
		get  func(*Facts) string
	}{
		{"GPU model", func(f *Facts) string { return f.GPUModel }},
		{"GPU count", func(f *Facts) string { return itoa(f.GPUCount) }},
		{"driver", func(f *Facts) string { return f.Driver }},
		{"NIC set", nicSet},
	}
	var vs []record.Verdict
	for _, n := range w.Nodes {
		f, ok := facts[n.Index]
		if !ok {
			continue
		}
		var diffs []string
		for _, k := range keys {
			if c := modal(facts, k.get); k.get(f) != c {
				diffs = append(diffs, fmt.Sprintf("%s %q (most nodes: %q)", k.name, k.get(f), c))
			}
		}
		v := record.NewVerdict("NODE-001", n.Name)
		v.Status, v.Measured = record.Pass, "same as the fleet"
		if len(diffs) > 0 {
			v.Status, v.Measured, v.Detail = record.Fail, "differs", strings.Join(diffs, "; ")
		}
		if len(facts) < 2 {
			v.Status, v.Detail = record.Skip, "one node: nothing to compare with"
		}
		vs = append(vs, v)
	}
	return vs
}

func nicSet(f *Facts) string {
	var s []string
	for _, p := range f.NICs {
		s = append(s, fmt.Sprintf("%s/%d@%g", p.Device, p.Port, p.RateGbps))
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// modal is the value most nodes have; ties go to the lowest node index, so
// the answer does not depend on map order.
func modal(facts map[int]*Facts, get func(*Facts) string) string {
	count := map[string]int{}
	first := map[string]int{}
	for i, f := range facts {
		v := get(f)
		count[v]++
		if j, ok := first[v]; !ok || i < j {
			first[v] = i
		}
	}
	best, bestN, bestFirst := "", -1, 0
	for v, n := range count {
		if n > bestN || (n == bestN && first[v] < bestFirst) {
			best, bestN, bestFirst = v, n, first[v]
		}
	}
	return best
}

func itoa(n int) string { return fmt.Sprint(n) }
