package record

import (
	"encoding/json"
	"fmt"
	"gpuaccept/hostlist"
	"slices"
	"sort"
	"strings"
)

// The three outcomes of a window, and the fourth of one cut short.
const (
	OutcomeAccepted    = "ACCEPTED"
	OutcomeNotAccepted = "NOT ACCEPTED"
	OutcomeIncomplete  = "INCOMPLETE"
	OutcomeInterrupted = "INTERRUPTED"
)

// Result is the window's outcome and why.
type Result struct {
	Outcome string `json:"outcome"`
	// Failed: the requirements some verdict failed, in catalog order.
	Failed []string `json:"failed,omitempty"`
	// Incomplete: what the window could not measure that it must judge,
	// each in words (a NOT ACCEPTED window may have some too).
	Incomplete []string `json:"incomplete,omitempty"`
}

// Result judges the window: NOT ACCEPTED when any verdict failed;
// INCOMPLETE when nothing failed but the window could not measure what it
// must judge (nodes not reached for the buyer's own reasons, a figure the
// quote states that nothing measured, an abort, nothing judged at all);
// ACCEPTED otherwise. A missing measurement is never a pass.
func (r *Run) Result() Result {
	if r.Interrupted {
		return Result{Outcome: OutcomeInterrupted, Incomplete: []string{"interrupted before the end: gpuaccept run --resume finishes it"}}
	}
	var res Result
	failed := map[string]bool{}
	passed, reached, conn := false, false, false
	judged := map[string]bool{}
	// Verdicts that could not be judged, the same reason on many nodes in
	// one line.
	incomplete := map[string][]string{}
	var order []string
	for _, v := range r.Verdicts {
		switch v.Status {
		case Fail:
			failed[v.ID] = true
			judged[v.ID] = true
		case Pass:
			passed = true
			judged[v.ID] = true
		case Warn:
			judged[v.ID] = true
		}
		if v.ID == "CONN-001" {
			conn = true
			reached = reached || v.Status == Pass
		}
		if v.Incomplete != "" {
			// Its own reason says why it was not measured: the quote's
			// figure is not listed again as one nothing measured.
			judged[v.ID] = true
			if _, ok := incomplete[v.Incomplete]; !ok {
				order = append(order, v.Incomplete)
			}
			// A node once per reason, however many of its requirements
			// it left unjudged (a tool it lacks leaves several).
			if !slices.Contains(incomplete[v.Incomplete], orCluster(v.Node)) {
				incomplete[v.Incomplete] = append(incomplete[v.Incomplete], orCluster(v.Node))
			}
		}
	}
	if !conn {
		// A record without connect's verdicts (another tool's, a
		// fixture): a node passed something, so something was reached.
		reached = passed
	}
	if r.Aborted != "" {
		res.Incomplete = append(res.Incomplete, "aborted: "+r.Aborted)
	}
	for _, why := range order {
		res.Incomplete = append(res.Incomplete, fmt.Sprintf("%s: %s", nodeList(incomplete[why]), why))
	}
	if len(r.Nodes) > 0 && !reached && len(order) == 0 && r.Aborted == "" {
		res.Incomplete = append(res.Incomplete, "no node was reached: nothing could be measured")
	}
	if reached {
		res.Incomplete = append(res.Incomplete, r.unmeasured(judged)...)
	}
	for _, q := range catalog {
		if failed[q.ID] {
			res.Failed = append(res.Failed, q.ID)
			delete(failed, q.ID)
		}
	}
	for id := range failed { // IDs of another version's catalog
		res.Failed = append(res.Failed, id)
	}
	sort.Strings(res.Failed[len(res.Failed)-len(failed):])
	switch {
	case len(res.Failed) > 0:
		res.Outcome = OutcomeNotAccepted
	case len(res.Incomplete) > 0:
		res.Outcome = OutcomeIncomplete
	case passed:
		res.Outcome = OutcomeAccepted
	default:
		res.Outcome = OutcomeIncomplete
		res.Incomplete = append(res.Incomplete, "no requirement was judged")
	}
	return res
}

// unmeasured lists every figure the quote states that no verdict judged:
// the window passed over a promise it was to hold the provider to.
func (r *Run) unmeasured(judged map[string]bool) []string {
	var quote map[string]any
	if len(r.Quote) == 0 || json.Unmarshal(r.Quote, &quote) != nil {
		return nil
	}
	var out []string
	for _, q := range catalog {
		if len(q.Quote) == 0 || judged[q.ID] {
			continue
		}
		for _, key := range q.Quote {
			if stated(quote[key]) {
				out = append(out, fmt.Sprintf("quote.%s is %v, and nothing measured %s (%s): turn on %s", key, quote[key], q.ID, q.Title, q.Enable))
				break
			}
		}
	}
	return out
}

func stated(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return strings.TrimSpace(x) != ""
	case float64:
		return x != 0
	case bool:
		return x
	}
	return true
}

func orCluster(node string) string {
	if node == "" {
		return "cluster"
	}
	return node
}

// nodeList names the nodes of a reason line as a host range.
func nodeList(nodes []string) string {
	if len(nodes) > 1 {
		return fmt.Sprintf("%d nodes %s", len(nodes), hostlist.Compress(nodes))
	}
	return hostlist.Compress(nodes)
}

// Impersonal is text with what names its node taken out: "NODE: "
// (errors name their node first) and the node's address, as "<address>",
// so that what many nodes say alike reads alike and is said once for all.
// Each of addresses (longest first: "host:port" before "host") is
// replaced.
func Impersonal(text, node string, addresses ...string) string {
	if node != "" {
		text = strings.ReplaceAll(text, node+": ", "")
	}
	for _, a := range addresses {
		if a != "" && a != node {
			text = strings.ReplaceAll(text, a, "<address>")
		}
	}
	return text
}
