package phases

import (
	"encoding/json"
	"fmt"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// fewNodes is what a cluster-wide phase records when fewer nodes are left
// in the window than it needs (a one-node inventory, quarantines): it
// did not run, so nothing was measured. It is the phase's result data,
// which no node writes, so a node's text cannot pass itself off as it.
type fewNodes struct {
	TooFew *tooFew `json:"too_few,omitempty"`
}

type tooFew struct {
	What string `json:"what"`
	Need int    `json:"need"`
	Left int    `json:"left"`
}

func (t tooFew) String() string {
	return fmt.Sprintf("%s needs at least %d nodes, %d left in the window", t.What, t.Need, t.Left)
}

// needNodes is the result a cluster-wide phase returns instead of running
// when fewer than need nodes are active, and whether it must.
func needNodes(w *orchestrator.Window, what string, need int) (any, bool) {
	left := len(w.Active())
	if left >= need {
		return nil, false
	}
	t := tooFew{What: what, Need: need, Left: left}
	w.Progress.Line("%s: not run: %s", what, t)
	return fewNodes{TooFew: &t}, true
}

// tooFewVerdicts are phase's verdicts for ids when it did not run for
// want of nodes: SKIP, said why; NOT MEASURED (the window INCOMPLETE)
// for a requirement the quote states a figure for, since the window was
// to hold the provider to it; not applicable otherwise. Never a FAIL: no
// node did anything wrong. ok is false when the phase did run.
func tooFewVerdicts(w *orchestrator.Window, phase string, ids ...string) (vs []record.Verdict, ok bool) {
	var f fewNodes
	if _, found := w.Result(phase, -1, &f); !found || f.TooFew == nil {
		return nil, false
	}
	for _, id := range ids {
		v := record.NewVerdict(id, "")
		v.Status, v.Measured = record.Skip, "not measured"
		if key := quoteStated(w, id); key != "" {
			v.Detail = f.TooFew.String()
			v.Incomplete = fmt.Sprintf("NOT MEASURED: %s (quote.%s is stated)", f.TooFew, key)
		} else {
			v.Detail = "not applicable: " + f.TooFew.String()
		}
		vs = append(vs, v)
	}
	return vs, true
}

// quoteStated is the first quote key requirement id is judged against
// that the inventory's quote gives a value for, or "".
func quoteStated(w *orchestrator.Window, id string) string {
	q, ok := record.Lookup(id)
	if !ok || len(q.Quote) == 0 {
		return ""
	}
	b, err := json.Marshal(w.Inv.Quote)
	if err != nil {
		return ""
	}
	var quote map[string]any
	if json.Unmarshal(b, &quote) != nil {
		return ""
	}
	for _, k := range q.Quote {
		switch v := quote[k].(type) {
		case float64:
			if v != 0 {
				return k
			}
		case string:
			if v != "" {
				return k
			}
		case bool:
			if v {
				return k
			}
		}
	}
	return ""
}
