package phases

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
)

// judgeHealth: the one-shot health check every acceptance needs, from what
// preflight read of the idle node: clocks slowed for a fault (HEALTH-001),
// memory errors (HEALTH-002), Xid and SXid events in the kernel log since
// boot (HEALTH-003), GPUs fallen off the bus (HEALTH-004). Each verdict
// names the GPUs by their PCI address.
func judgeHealth(w *orchestrator.Window) []record.Verdict {
	facts := nodeFacts(w)
	var vs []record.Verdict
	for _, n := range w.Nodes {
		ids := []string{"HEALTH-001", "HEALTH-002", "HEALTH-003", "HEALTH-004"}
		f, ok := facts[n.Index]
		if !ok || f.Health == nil {
			reason := "no preflight facts"
			if ok {
				reason = "preflight read no health (a record made before the check existed)"
			}
			if q, why := n.Quarantined(); q && !ok {
				reason = why
			}
			for _, id := range ids {
				v := record.NewVerdict(id, n.Name)
				v.Status, v.Detail = record.Skip, reason
				vs = append(vs, v)
			}
			continue
		}
		h := f.Health
		vs = append(vs, clocksVerdict(n.Name, h), memoryVerdict(n.Name, h), kernelVerdict(n.Name, h), offBusVerdict(n.Name, h))
	}
	return vs
}

func clocksVerdict(node string, h *Health) record.Verdict {
	v := record.NewVerdict("HEALTH-001", node)
	if len(h.GPUs) == 0 {
		v.Status, v.Detail = record.Skip, "nvidia-smi -q gave no GPU to read"
		return v
	}
	var slowed, capped []string
	for _, g := range h.GPUs {
		switch {
		case len(g.Throttle) > 0:
			slowed = append(slowed, fmt.Sprintf("GPU %s: %s", g.BusID, strings.Join(g.Throttle, ", ")))
		case g.PowerCap:
			capped = append(capped, "GPU "+g.BusID)
		}
	}
	switch {
	case len(slowed) > 0:
		v.Status = record.Fail
		v.Measured = fmt.Sprintf("%d of %d GPU(s) slowed on an idle node", len(slowed), len(h.GPUs))
		v.Detail = strings.Join(slowed, "; ")
	case len(capped) > 0:
		v.Status = record.Warn
		v.Measured = fmt.Sprintf("%d of %d GPU(s) at their software power cap on an idle node", len(capped), len(h.GPUs))
		v.Detail = strings.Join(capped, ", ")
	default:
		v.Status, v.Measured = record.Pass, fmt.Sprintf("no clock event reason active on %d idle GPU(s)", len(h.GPUs))
	}
	return v
}

func memoryVerdict(node string, h *Health) record.Verdict {
	v := record.NewVerdict("HEALTH-002", node)
	if len(h.GPUs) == 0 {
		v.Status, v.Detail = record.Skip, "nvidia-smi -q gave no GPU to read"
		return v
	}
	var bad, history []string
	for _, g := range h.GPUs {
		var b, w []string
		if n := g.VolatileUncorrectable; n != nil && *n > 0 {
			b = append(b, fmt.Sprintf("%d uncorrectable ECC error(s) since the driver loaded", *n))
		}
		if g.RemapPending {
			b = append(b, "a row remapping pending (the GPU needs a reset)")
		}
		if g.RemapFailed {
			b = append(b, "a row remapping failed")
		}
		if g.RetirePending {
			b = append(b, "a page retirement pending")
		}
		if n := g.AggregateUncorrectable; n != nil && *n > 0 {
			w = append(w, fmt.Sprintf("%d uncorrectable ECC error(s) over its life", *n))
		}
		if n := g.RemapUncorrect; n != nil && *n > 0 {
			w = append(w, fmt.Sprintf("%d row(s) remapped for uncorrectable errors", *n))
		}
		if n := g.RetiredDoubleBit; n != nil && *n > 0 {
			w = append(w, fmt.Sprintf("%d page(s) retired for double-bit errors", *n))
		}
		if len(b) > 0 {
			bad = append(bad, "GPU "+g.BusID+": "+strings.Join(append(b, w...), ", "))
		} else if len(w) > 0 {
			history = append(history, "GPU "+g.BusID+": "+strings.Join(w, ", "))
		}
	}
	switch {
	case len(bad) > 0:
		v.Status, v.Measured, v.Detail = record.Fail, fmt.Sprintf("%d of %d GPU(s) with memory errors", len(bad), len(h.GPUs)), strings.Join(append(bad, history...), "; ")
	case len(history) > 0:
		v.Status, v.Measured, v.Detail = record.Warn, fmt.Sprintf("%d of %d GPU(s) with a history of memory errors", len(history), len(h.GPUs)), strings.Join(history, "; ")
	default:
		v.Status, v.Measured = record.Pass, fmt.Sprintf("no uncorrectable ECC error, nothing pending on %d GPU(s)", len(h.GPUs))
	}
	return v
}

func kernelVerdict(node string, h *Health) record.Verdict {
	v := record.NewVerdict("HEALTH-003", node)
	switch {
	case h.KernelUnread != "":
		v.Status, v.Detail = record.Skip, "the kernel log could not be read (dmesg, journalctl -k): "+h.KernelUnread
		return v
	case h.Kernel == nil:
		v.Status, v.Detail = record.Skip, "preflight read no kernel log"
		return v
	}
	fail, warn := map[string][]string{}, map[string][]string{}
	for _, e := range h.Kernel.Events {
		var label string
		switch e.Kind {
		case "xid":
			label = fmt.Sprintf("Xid %d", e.Code)
			if parse.XidSeverity(e.Code) == "fail" {
				fail[e.Device] = appendOnce(fail[e.Device], label)
			} else {
				warn[e.Device] = appendOnce(warn[e.Device], label)
			}
		case "sxid":
			label = fmt.Sprintf("SXid %d", e.Code)
			if strings.Contains(strings.ToLower(e.Text), ", fatal") {
				fail[e.Device] = appendOnce(fail[e.Device], label)
			} else {
				warn[e.Device] = appendOnce(warn[e.Device], label)
			}
		}
	}
	describe := func(m map[string][]string) string {
		var parts []string
		for _, dev := range slices.Sorted(maps.Keys(m)) {
			var codes []string
			for _, c := range m[dev] {
				codes = append(codes, fmt.Sprintf("%s ×%d", c, h.Kernel.Counts[strings.ToLower(c)]))
			}
			parts = append(parts, fmt.Sprintf("%s on %s", strings.Join(codes, ", "), orUnknown(dev)))
		}
		return strings.Join(parts, "; ")
	}
	switch {
	case len(fail) > 0:
		v.Status, v.Measured = record.Fail, describe(fail)
		v.Detail = join("hardware or driver faults since boot", describe(warn))
	case len(warn) > 0:
		v.Status, v.Measured = record.Warn, describe(warn)
		v.Detail = "events an application or a non-fatal link error causes, since boot"
	default:
		v.Status, v.Measured = record.Pass, "no Xid or SXid since boot"
	}
	return v
}

func offBusVerdict(node string, h *Health) record.Verdict {
	v := record.NewVerdict("HEALTH-004", node)
	if h.Kernel == nil {
		v.Status, v.Detail = record.Skip, firstNonEmpty(h.KernelUnread, "preflight read no kernel log")
		return v
	}
	var gone []string
	for _, e := range h.Kernel.Events {
		if e.Kind == "off-bus" {
			gone = appendOnce(gone, orUnknown(e.Device))
		}
	}
	if len(gone) > 0 {
		v.Status, v.Measured = record.Fail, "fallen off the bus since boot: "+strings.Join(gone, ", ")
		return v
	}
	v.Status, v.Measured = record.Pass, "no GPU fell off the bus since boot"
	return v
}

func appendOnce(s []string, x string) []string {
	if slices.Contains(s, x) {
		return s
	}
	return append(s, x)
}

func orUnknown(dev string) string {
	if dev == "" {
		return "a GPU the log does not name"
	}
	return dev
}
