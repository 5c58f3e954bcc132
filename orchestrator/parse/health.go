package parse

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// GPUHealth is what nvidia-smi -q says of one GPU's health on an idle
// node: the clock event (throttle) reasons active, uncorrectable ECC
// counts, retired pages and remapped rows.
type GPUHealth struct {
	BusID string `json:"bus_id"`
	// Throttle are the active reasons that slow an idle GPU for a fault:
	// HW Slowdown, HW Thermal Slowdown, HW Power Brake Slowdown, SW
	// Thermal Slowdown. PowerCap: SW Power Cap active on an idle GPU.
	Throttle []string `json:"throttle,omitempty"`
	PowerCap bool     `json:"sw_power_cap,omitempty"`
	// Uncorrectable ECC errors: since the driver loaded (volatile) and
	// over the GPU's life (aggregate); nil when the GPU does not say.
	VolatileUncorrectable  *int64 `json:"volatile_uncorrectable,omitempty"`
	AggregateUncorrectable *int64 `json:"aggregate_uncorrectable,omitempty"`
	// Retired pages (before Ampere) and remapped rows (Ampere on).
	RetiredDoubleBit *int64 `json:"retired_double_bit,omitempty"`
	RetirePending    bool   `json:"retire_pending,omitempty"`
	RemapUncorrect   *int64 `json:"remapped_uncorrectable,omitempty"`
	RemapPending     bool   `json:"remap_pending,omitempty"`
	RemapFailed      bool   `json:"remap_failed,omitempty"`
}

// faultReasons are the clock event reasons that, active on an idle GPU,
// mean something is wrong with it or its node (the rest, Idle,
// Applications Clocks Setting, Sync Boost, Display Clock Setting, are
// settings or the idle state itself).
var faultReasons = []string{"HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown"}

// QHealth reads every GPU's health from nvidia-smi -q. Drivers call the
// clock section "Clocks Event Reasons" (535 on) or "Clocks Throttle
// Reasons", and count ECC errors by DRAM/SRAM (Ampere on) or by single and
// double bit (before): both are read.
func QHealth(q Query) []GPUHealth {
	var out []GPUHealth
	for _, g := range q.GPUs {
		h := GPUHealth{BusID: g.BusID}
		for _, sec := range []string{"Clocks Event Reasons.", "Clocks Throttle Reasons."} {
			for _, r := range faultReasons {
				if strings.EqualFold(g.Fields[sec+r], "Active") && !slices.Contains(h.Throttle, r) {
					h.Throttle = append(h.Throttle, r)
				}
			}
			if strings.EqualFold(g.Fields[sec+"SW Power Cap"], "Active") {
				h.PowerCap = true
			}
		}
		for k, v := range g.Fields {
			n, ok := count(v)
			switch {
			case !ok:
			case strings.HasPrefix(k, "ECC Errors.Volatile.") && uncorrectable(k):
				h.VolatileUncorrectable = add(h.VolatileUncorrectable, n)
			case strings.HasPrefix(k, "ECC Errors.Aggregate.") && uncorrectable(k):
				h.AggregateUncorrectable = add(h.AggregateUncorrectable, n)
			}
		}
		if n, ok := count(g.Fields["Retired Pages.Double Bit ECC"]); ok {
			h.RetiredDoubleBit = &n
		} else if n, ok := count(g.Fields["Retired Pages.Double Bit ECC.Count"]); ok {
			h.RetiredDoubleBit = &n
		}
		h.RetirePending = yes(g.Fields["Retired Pages.Pending Page Blacklist"]) || yes(g.Fields["Retired Pages.Pending"]) ||
			yes(g.Fields["Retired Pages.Pending Page Retirement"])
		if n, ok := count(g.Fields["Remapped Rows.Uncorrectable Error"]); ok {
			h.RemapUncorrect = &n
		}
		h.RemapPending = yes(g.Fields["Remapped Rows.Pending"])
		h.RemapFailed = yes(g.Fields["Remapped Rows.Remapping Failure Occurred"])
		out = append(out, h)
	}
	return out
}

// uncorrectable: an ECC counter of errors that were not corrected (DRAM
// or SRAM Uncorrectable, Double Bit), not a total that sums them again.
func uncorrectable(key string) bool {
	k := strings.ToLower(key)
	return (strings.Contains(k, "uncorrectable") || strings.Contains(k, "double bit")) && !strings.HasSuffix(k, ".total") &&
		!strings.Contains(k, "threshold")
}

func count(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil && n >= 0
}

func add(p *int64, n int64) *int64 {
	if p == nil {
		return &n
	}
	s := *p + n
	return &s
}

func yes(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "Yes") }

// KernelEvent is one GPU or NVSwitch event of the kernel log.
type KernelEvent struct {
	// Kind: xid (NVRM: Xid), sxid (NVSwitch SXid), off-bus (a GPU that
	// fell off the bus).
	Kind   string `json:"kind"`
	Device string `json:"device,omitempty"` // the PCI address as the driver printed it
	Code   int    `json:"code,omitempty"`
	Text   string `json:"text"` // the line (at most 240 bytes)
}

// KernelLog is what the kernel log since boot says of the GPUs: the
// events (the first maxEvents; Counts keeps them all), by kind and code.
type KernelLog struct {
	Events []KernelEvent `json:"events,omitempty"`
	// Counts: "xid 48", "sxid 22013", "off-bus" → how many lines.
	Counts map[string]int `json:"counts,omitempty"`
	// NeighOverflows counts the kernel's own "neighbor table overflow"
	// lines (it rate-limits them): a connect to a peer failed for want of
	// an ARP entry. NeighOverflow is the last of them.
	NeighOverflows int    `json:"neigh_overflows,omitempty"`
	NeighOverflow  string `json:"neigh_overflow,omitempty"`
}

const maxEvents = 200

var (
	reXid    = regexp.MustCompile(`\bNVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),\s*(.*)`)
	reSXid   = regexp.MustCompile(`\bSXid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),\s*(.*)`)
	reOffBus = regexp.MustCompile(`(?i)fallen off the bus`)
	reNeigh  = regexp.MustCompile(`(?i)\bneighbou?r table overflow`)
	reGPUPCI = regexp.MustCompile(`(?i)\bGPU (?:at PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)`)
)

// ParseKernelLog reads the kernel log in any of its forms (dmesg with
// monotonic or -T/--ctime times, --time-format=iso, --decode, journalctl
// -k): Xid and SXid lines, and GPUs fallen off the bus, whose message the
// driver spreads over several lines ("NVRM: The NVIDIA GPU 0000:b3:00.0"
// / "NVRM: ... has" / "NVRM: fallen off the bus ..."). A log with none of
// them is a log of a healthy node, not an error.
func ParseKernelLog(text string) KernelLog {
	k := KernelLog{Counts: map[string]int{}}
	lines := strings.Split(normalize(text), "\n")
	keep := func(e KernelEvent) {
		e.Text = clipLine(e.Text)
		key := e.Kind
		if e.Kind != "off-bus" {
			key += " " + strconv.Itoa(e.Code)
		}
		k.Counts[key]++
		if len(k.Events) < maxEvents {
			k.Events = append(k.Events, e)
		}
	}
	for i, line := range lines {
		if reNeigh.MatchString(line) {
			k.NeighOverflows++
			k.NeighOverflow = clipLine(strings.TrimSpace(line))
		}
		if !kernelLine(line) {
			continue
		}
		switch {
		case reXid.MatchString(line):
			m := reXid.FindStringSubmatch(line)
			code, _ := strconv.Atoi(m[2])
			keep(KernelEvent{Kind: "xid", Device: m[1], Code: code, Text: strings.TrimSpace(line)})
			if code == 79 {
				keep(KernelEvent{Kind: "off-bus", Device: m[1], Text: strings.TrimSpace(line)})
			}
		case reSXid.MatchString(line):
			m := reSXid.FindStringSubmatch(line)
			code, _ := strconv.Atoi(m[2])
			keep(KernelEvent{Kind: "sxid", Device: m[1], Code: code, Text: strings.TrimSpace(line)})
		case reOffBus.MatchString(line):
			// The GPU is named on this line or up to two lines before.
			dev := ""
			for j := i; j >= max(0, i-2) && dev == ""; j-- {
				if m := reGPUPCI.FindStringSubmatch(lines[j]); m != nil {
					dev = m[1]
				}
			}
			keep(KernelEvent{Kind: "off-bus", Device: dev, Text: strings.TrimSpace(line)})
		}
	}
	if len(k.Counts) == 0 {
		k.Counts = nil
	}
	return k
}

// clipLine keeps a logged line to 240 bytes, as the evidence holds it.
func clipLine(s string) string {
	if len(s) > 240 {
		return s[:240] + "…"
	}
	return s
}

// XidSeverity says what an Xid means for a node under acceptance: "warn"
// for the codes an application causes (a bad kernel, a job killed: 13
// graphics engine exception, 31 memory page fault, 43 stopped processing,
// 45 preemptive cleanup, 68 video decoder exception), "fail" for every
// other: memory (48, 63, 64, 92, 94, 95), NVLink (74), the GPU off the bus
// (79), the GSP or the micro-controllers (61, 62, 119, 120) and the codes
// this list does not know.
func XidSeverity(code int) string {
	switch code {
	case 13, 31, 43, 45, 68:
		return "warn"
	}
	return "fail"
}

// KernelMessages is ParseKernelLog for text that must be kernel messages
// of the NVIDIA drivers: ErrNotRecognized when no line is (no NVRM, SXid
// or nvidia-nvswitch line at all).
func KernelMessages(text string) (KernelLog, error) {
	for _, line := range strings.Split(normalize(text), "\n") {
		if kernelLine(line) {
			return ParseKernelLog(text), nil
		}
	}
	return KernelLog{}, notRecognized("kernel log", splitLines(text), `"NVRM:" or "SXid" line`)
}

// kernelLine: a line the NVIDIA drivers wrote, after whatever prefix the
// log form gives it (a time, a facility, "kernel:"), not one that quotes
// such a line (prose, a Markdown note: a quote or backquote before it).
func kernelLine(line string) bool {
	i := -1
	for _, mark := range []string{"NVRM:", "SXid (", "nvidia-nvswitch"} {
		if j := strings.Index(line, mark); j >= 0 && (i < 0 || j < i) {
			i = j
		}
	}
	return i >= 0 && !strings.ContainsAny(line[:i], "`\"'")
}
