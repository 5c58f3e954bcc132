package telemetry

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
)

// xid: HEALTH-012. Any Xid, SXid or GPU off the bus the sampler saw fails
// the node; the detail gives each code's severity (parse.XidSeverity).
func (j *judge) xid() record.Verdict {
	const id = "HEALTH-012"
	var evs []string
	for _, e := range j.s.Kernel {
		dev := j.device(e.BusID)
		switch e.Kind {
		case "xid":
			class := ""
			if parse.XidSeverity(e.Xid) == "warn" {
				class = " (a code most often the application's)"
			}
			evs = append(evs, fmt.Sprintf("Xid %d%s on %s at %s", e.Xid, class, dev, j.moment(e.At)))
		case "sxid":
			evs = append(evs, fmt.Sprintf("SXid %d on %s at %s", e.Xid, dev, j.moment(e.At)))
		case "off-bus":
			if len(evs) > 0 && strings.HasPrefix(evs[len(evs)-1], "Xid 79 ") {
				continue // the Xid 79 line said it
			}
			evs = append(evs, fmt.Sprintf("%s fell off the bus at %s", dev, j.moment(e.At)))
		}
	}
	if len(evs) > 0 {
		v := record.NewVerdict(id, j.node)
		v.Status = record.Fail
		v.Detail = list(plural(len(evs), "kernel event"), evs)
		return v
	}
	if why := j.sourceMissing(true, "dmesg", "journalctl", "journal", "kernel"); why != "" {
		return notMeasured(id, j.node, why)
	}
	if len(j.s.Starts) == 0 && len(j.s.GPUs) == 0 {
		return notMeasured(id, j.node, "the sampler never started")
	}
	v := record.NewVerdict(id, j.node)
	v.Status = record.Pass
	v.Detail = "no Xid or SXid in " + j.window() + " of the kernel log"
	return v
}

// device names a kernel line's PCI device as the GPU whose samples carry
// that bus id ("GPU 5 (0000:a8:00)"): the kernel writes 0000:a8:00,
// nvidia-smi 00000000:A8:00.0. An id no sampled GPU has (an NVSwitch, a
// GPU the sampler never read) is named as the kernel wrote it.
func (j *judge) device(bus string) string {
	dev := clean(bus, 20)
	if dev == "" {
		return "GPU ?"
	}
	key := busKey(bus)
	for _, i := range j.gpus {
		if gs := j.byGPU[i]; len(gs) > 0 && key != "" && busKey(gs[0].BusID) == key {
			return fmt.Sprintf("GPU %d (%s)", i, dev)
		}
	}
	return "device " + dev
}

// busKey: a PCI address's domain, bus and device as numbers, the function
// left out ("0000:a8:00" and "00000000:A8:00.0" both read 0:168:0).
func busKey(id string) string {
	id, _, _ = strings.Cut(strings.TrimSpace(id), ".")
	parts := strings.Split(id, ":")
	if len(parts) != 3 {
		return ""
	}
	var n [3]uint64
	for k, p := range parts {
		v, err := strconv.ParseUint(p, 16, 32)
		if err != nil {
			return ""
		}
		n[k] = v
	}
	return fmt.Sprintf("%d:%d:%d", n[0], n[1], n[2])
}

// window: from the first start (or sample) to the last line seen.
func (j *judge) window() string {
	last := j.t0
	for _, g := range j.s.GPUs {
		last = maxTime(last, g.At)
	}
	for _, e := range j.s.Kernel {
		last = maxTime(last, e.At)
	}
	for _, ib := range j.s.IB {
		last = maxTime(last, ib.At)
	}
	return span(last.Sub(j.t0))
}

// ecc: HEALTH-013. Against each GPU's first sample: an uncorrectable
// count, a retired page or a remapped row that rose, a remap or
// retirement pending or failed: FAIL; a corrected count that rose: WARN.
func (j *judge) ecc() record.Verdict {
	const id = "HEALTH-013"
	if len(j.s.GPUs) == 0 {
		return j.noGPUs(id)
	}
	var fails, warns []finding
	stated := false
	for _, i := range j.gpus {
		gs := j.byGPU[i]
		rose := func(name string, get func(*GPUSample) *int64) finding {
			var base *int64
			for _, g := range gs {
				p := get(g)
				if p == nil {
					continue
				}
				stated = true
				if base == nil {
					base = p
				} else if *p > *base {
					return finding{g.At, i, fmt.Sprintf("%s +%d at %s", name, *p-*base, j.moment(g.At))}
				}
			}
			return finding{}
		}
		set := func(name string, get func(*GPUSample) *bool) finding {
			for _, g := range gs {
				if p := get(g); p != nil {
					stated = true
					if *p {
						return finding{g.At, i, name + " at " + j.moment(g.At)}
					}
				}
			}
			return finding{}
		}
		for _, f := range []finding{
			rose("ECC uncorrected", func(g *GPUSample) *int64 { return g.ECCUncorrVolatile }),
			rose("ECC uncorrected (aggregate)", func(g *GPUSample) *int64 { return g.ECCUncorrAggregate }),
			rose("pages retired (DBE)", func(g *GPUSample) *int64 { return g.RetiredDBE }),
			rose("pages retired (SBE)", func(g *GPUSample) *int64 { return g.RetiredSBE }),
			rose("rows remapped", func(g *GPUSample) *int64 { return g.RemapUncorr }),
			rose("rows remapped (correctable)", func(g *GPUSample) *int64 { return g.RemapCorr }),
			set("remap pending", func(g *GPUSample) *bool { return g.RemapPending }),
			set("remap failed", func(g *GPUSample) *bool { return g.RemapFailure }),
			set("retirement pending", func(g *GPUSample) *bool { return g.RetirePending }),
		} {
			if f.text != "" {
				fails = append(fails, f)
			}
		}
		// The aggregate count follows the volatile one: say it once.
		if w := rose("ECC corrected", func(g *GPUSample) *int64 { return g.ECCCorrVolatile }); w.text != "" {
			warns = append(warns, w)
		} else if w := rose("ECC corrected (aggregate)", func(g *GPUSample) *int64 { return g.ECCCorrAggregate }); w.text != "" {
			warns = append(warns, w)
		}
	}
	v := record.NewVerdict(id, j.node)
	switch {
	case len(fails) > 0:
		v.Status = record.Fail
		v.Detail = list(plural(gpusOf(fails), "GPU")+" with counts that rose or pending", texts(fails, warns))
	case len(warns) > 0:
		v.Status = record.Warn
		v.Detail = list("corrected errors rose", texts(warns))
	case !stated:
		return notMeasured(id, j.node, "the GPUs reported no ECC or remapped-row counts")
	default:
		v.Status = record.Pass
		v.Detail = fit(fmt.Sprintf("%s, ECC and remapped-row counts steady over %s (%s samples)",
			plural(len(j.gpus), "GPU"), j.covered(), thousands(float64(len(j.s.GPUs)))))
	}
	return v
}

// finding is one thing a verdict names, at the moment it happened.
type finding struct {
	at   time.Time
	gpu  int
	text string
}

// texts: each group's findings first to last (faults before warnings),
// the GPUs that say the same as one.
func texts(groups ...[]finding) []string {
	var out []string
	for _, g := range groups {
		slices.SortStableFunc(g, func(a, b finding) int { return a.at.Compare(b.at) })
		items := make([]perGPU, 0, len(g))
		for _, f := range g {
			items = append(items, perGPU{f.gpu, f.text})
		}
		out = append(out, grouped(items)...)
	}
	return out
}

func gpusOf(fs []finding) int {
	seen := map[int]bool{}
	for _, f := range fs {
		seen[f.gpu] = true
	}
	return len(seen)
}

// ibErrors are the port counters that count errors (link_downed is judged
// apart: a link that went down fails).
var ibErrors = []string{"symbol_error", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
	"excessive_buffer_overrun_errors", "local_link_integrity_errors"}

// ib: HEALTH-015. A port whose link_downed rose or whose state left ACTIVE
// fails; error counters that rose warn with their counts.
func (j *judge) ib() record.Verdict {
	const id = "HEALTH-015"
	if len(j.s.IB) == 0 {
		if why := j.sourceMissing(false, "infiniband", "ib"); why != "" {
			return notMeasured(id, j.node, why)
		}
		return skip(id, j.node, "no IB port sampled on the node")
	}
	type port struct {
		first, last *IBSample
		down        string
	}
	ports := map[string]*port{}
	var names []string
	for k := range j.s.IB {
		s := &j.s.IB[k]
		p := ports[s.Port]
		if p == nil {
			p = &port{first: s}
			ports[s.Port] = p
			names = append(names, s.Port)
		}
		p.last = s
		if p.down != "" {
			continue
		}
		if s.State != "" && !strings.Contains(strings.ToUpper(s.State), "ACTIVE") {
			p.down = fmt.Sprintf("%s state %s at %s", clean(s.Port, 24), clean(s.State, 24), j.moment(s.At))
		} else if n, ok := s.Counters["link_downed"]; ok && n > p.first.Counters["link_downed"] {
			p.down = fmt.Sprintf("%s link down +%d at %s", clean(s.Port, 24),
				n-p.first.Counters["link_downed"], j.moment(s.At))
		}
	}
	slices.Sort(names)
	var fails, warns []string
	for _, n := range names {
		p := ports[n]
		if p.down != "" {
			fails = append(fails, p.down)
		}
		var rose []string
		for _, c := range ibErrors {
			a, okA := p.first.Counters[c]
			b, okB := p.last.Counters[c]
			if okA && okB && b > a {
				rose = append(rose, fmt.Sprintf("%s +%d", c, b-a))
			}
		}
		if len(rose) > 0 {
			warns = append(warns, clean(n, 24)+" "+strings.Join(rose, ", "))
		}
	}
	v := record.NewVerdict(id, j.node)
	switch {
	case len(fails) > 0:
		v.Status = record.Fail
		v.Detail = list(plural(len(fails), "IB port")+" went down", slices.Concat(fails, warns))
	case len(warns) > 0:
		v.Status = record.Warn
		v.Detail = list("IB error counters rose", warns)
	default:
		v.Status = record.Pass
		v.Detail = fit(fmt.Sprintf("%s ACTIVE, no error counted over %s", plural(len(names), "IB port"),
			j.window()))
	}
	return v
}
