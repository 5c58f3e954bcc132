package orchestrator

import (
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// idleVerdicts is IDLE-001 of every node from the guard's record: WARN
// for a node held idle (the idle work the card asks to be visible, not a
// fault of the node), PASS for one that never was, SKIP where the guard
// had no utilisation to read.
func (w *Window) idleVerdicts() []record.Verdict {
	g := w.rec.Idle
	if g == nil {
		return nil
	}
	const id = "IDLE-001"
	title := record.TitleOf(id, id)
	after := time.Duration(g.AfterS * float64(time.Second))
	byNode := map[string][]record.IdleStretch{}
	for _, st := range g.Stretches {
		byNode[st.Node] = append(byNode[st.Node], st)
	}
	var out []record.Verdict
	for _, n := range w.Nodes {
		v := record.Verdict{ID: id, Title: title, Node: n.Name}
		sts := byNode[n.Name]
		if len(sts) == 0 {
			heard := g.Heard[n.Name]
			if heard == 0 {
				// Not watched is not "never idle".
				why := "no GPU utilisation heard from it"
				if r, ok := w.Result("telemetry", n.Index, nil); ok && r.Outcome != record.OK && r.Error != "" {
					why += ": " + firstLine(r.Error)
				} else if len(w.rec.Resumed) > 0 {
					why += " since the window was resumed (the sampler restarts on the nodes still in it)"
				}
				v.Status, v.Detail = record.Skip, why
				out = append(out, v)
				continue
			}
			v.Status, v.Detail = record.Pass, fmt.Sprintf("never idle %s outside a phase meant to be idle (%d GPU samples heard)", after, heard)
			out = append(out, v)
			continue
		}
		var secs float64
		var parts []string
		for i, st := range sts {
			secs += st.Seconds()
			if i < 3 {
				parts = append(parts, w.idleStretchText(st))
			}
		}
		if len(sts) > 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(sts)-3))
		}
		v.Status = record.Warn
		v.Value, v.Unit = &secs, record.UnitSeconds
		v.Detail = "idle " + parts[0]
		if len(sts) > 1 {
			v.Detail = fmt.Sprintf("idle %s in all: %s", seconds(secs), strings.Join(parts, "; "))
		}
		out = append(out, v)
	}
	return out
}

// idleStretchText says one stretch: when, where, its price, what was done.
func (w *Window) idleStretchText(st record.IdleStretch) string {
	d := seconds(st.Seconds())
	s := fmt.Sprintf("%s from +%s (%s)", d, st.Since.Sub(w.rec.Started).Round(time.Second), st.Where())
	if q := w.Inv.Quote; q.PricePerGPUHr > 0 {
		gpus := max(q.GPUsPerNode, 1)
		s += fmt.Sprintf(", %.2f %s", d.Hours()*float64(gpus)*q.PricePerGPUHr, strings.TrimSpace(q.Currency))
	}
	if st.Notify != "" {
		s += ", idle.notify " + st.Notify
	}
	if !st.Released.IsZero() {
		s += fmt.Sprintf(", released at +%s", st.Released.Sub(w.rec.Started).Round(time.Second))
	}
	return s
}

// seconds is s seconds to the second.
func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}
