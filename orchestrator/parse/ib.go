package parse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// IBDevice is one HCA (channel adapter) as ibstat or ibv_devinfo show it.
// Both parsers fill the same fields the same way (GUIDs as 0x-prefixed hex,
// states in ibstat's words) so the two tools' views can be compared.
type IBDevice struct {
	CA       string   `json:"ca"`
	Type     string   `json:"type,omitempty"` // "MT4129"
	Firmware string   `json:"firmware,omitempty"`
	NodeGUID string   `json:"node_guid,omitempty"`
	Ports    []IBPort `json:"ports"`
}

// IBPort is one port of an HCA.
type IBPort struct {
	Port          int     `json:"port"`
	State         string  `json:"state"`                    // Active, Down, Initializing, Armed
	PhysicalState string  `json:"physical_state,omitempty"` // LinkUp, Polling, Disabled, ...
	RateGbps      float64 `json:"rate_gbps,omitempty"`
	LinkLayer     string  `json:"link_layer,omitempty"` // InfiniBand | Ethernet
	LID           string  `json:"lid,omitempty"`
}

const (
	ibstatTool    = "ibstat"
	ibvDevinfoStr = "ibv_devinfo"
)

var (
	reIBStatCA   = regexp.MustCompile(`^CA\s+'([^']+)'$`)
	reIBStatPort = regexp.MustCompile(`^Port\s+(\d+)\s*:$`)
	// ibv_devinfo appends the numeric value: "PORT_ACTIVE (4)", "4X (2)".
	reIBCode = regexp.MustCompile(`\s*\(\d+\)$`)
	// ibv_devinfo prints GUIDs as four groups: "7cfe:9003:00a5:95c0".
	reIBGUIDGroups = regexp.MustCompile(`^[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){3}$`)
)

// ibCA is an HCA being parsed, with the port count it declared.
type ibCA struct {
	dev      IBDevice
	declared int
	at       line
}

// IBStat parses `ibstat`. When ibstat gave up part-way (an "ibpanic:" line,
// exit status 255) the CAs printed before the panic are returned together
// with an ErrToolFailed error quoting it. A CA that declares more ports than
// it lists is reported as ErrMalformed (truncated output).
func IBStat(text string) ([]IBDevice, error) {
	lines := splitLines(text)
	var cas []*ibCA
	var cur *ibCA
	var port *IBPort
	var failures []string
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		switch {
		case t == "":
		case strings.HasPrefix(t, "ibpanic:") || strings.HasPrefix(t, "ibstat: "):
			failures = append(failures, fmt.Sprintf("line %d: %s", l.no, t))
			cur, port = nil, nil
		case strings.HasPrefix(t, "ibwarn:"):
			// a warning from libibumad; the data around it is still good
		case reIBStatCA.MatchString(t):
			cur = &ibCA{dev: IBDevice{CA: reIBStatCA.FindStringSubmatch(t)[1], Ports: []IBPort{}}, at: l}
			cas = append(cas, cur)
			port = nil
		case cur == nil:
			// noise before the first CA or after a panic
		case indentWidth(l.text) == 0:
			// Everything inside a CA block is indented; an unindented line
			// is a prompt or banner after the output, not part of the CA.
			cur, port = nil, nil
		case reIBStatPort.MatchString(t):
			n, err := strconv.Atoi(reIBStatPort.FindStringSubmatch(t)[1])
			if err != nil {
				return ibDevices(cas), malformed(ibstatTool, l, "port number is not a number")
			}
			cur.dev.Ports = append(cur.dev.Ports, IBPort{Port: n})
			port = &cur.dev.Ports[len(cur.dev.Ports)-1]
		default:
			if err := cur.setStat(l, t, port); err != nil {
				return ibDevices(cas), err
			}
		}
	}
	devs := ibDevices(cas)
	if len(failures) > 0 {
		return devs, fmt.Errorf("%s: %w: %s (%d CAs printed before it are returned)", ibstatTool, ErrToolFailed, strings.Join(failures, "; "), len(devs))
	}
	if len(cas) == 0 {
		return devs, notRecognized(ibstatTool, lines, `"CA '<name>'" line`)
	}
	for _, ca := range cas {
		if len(ca.dev.Ports) < ca.declared {
			return devs, malformed(ibstatTool, ca.at, "CA %s declares %d ports but lists %d (output truncated?)", ca.dev.CA, ca.declared, len(ca.dev.Ports))
		}
	}
	return devs, nil
}

// setStat files one "Key: value" line of an ibstat CA block.
func (ca *ibCA) setStat(l line, t string, port *IBPort) error {
	k, v, ok := cutKV(t)
	if !ok {
		return malformed(ibstatTool, l, "expected \"Key: value\" inside CA %s", ca.dev.CA)
	}
	switch k {
	case "CA type":
		ca.dev.Type = v
		return nil
	case "Firmware version":
		ca.dev.Firmware = v
		return nil
	case "Node GUID":
		ca.dev.NodeGUID = strings.ToLower(v)
		return nil
	case "Number of ports":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return malformed(ibstatTool, l, "port count %q is not a number", v)
		}
		ca.declared = n
		return nil
	case "State", "Physical state", "Rate", "Link layer", "Base lid":
		if port == nil {
			return malformed(ibstatTool, l, "port field before any \"Port N:\" line in CA %s", ca.dev.CA)
		}
	default:
		return nil // Hardware version, LMC, SM lid, Capability mask, GUIDs
	}
	switch k {
	case "State":
		port.State = ibPortState(v)
	case "Physical state":
		port.PhysicalState = ibPhysState(v)
	case "Rate":
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r >= 0 && r <= 1e6) {
			return malformed(ibstatTool, l, "rate %q is not a number", v)
		}
		port.RateGbps = r
	case "Link layer":
		port.LinkLayer = v
	case "Base lid":
		port.LID = v
	}
	return nil
}

func ibDevices(cas []*ibCA) []IBDevice {
	out := make([]IBDevice, 0, len(cas))
	for _, ca := range cas {
		out = append(out, ca.dev)
	}
	return out
}

// ibPortState maps ibstat ("Active") and ibv_devinfo ("PORT_ACTIVE (4)")
// spellings onto ibstat's words. An unknown state is kept as printed.
func ibPortState(v string) string {
	s := strings.ToLower(reIBCode.ReplaceAllString(strings.TrimSpace(v), ""))
	s = strings.TrimPrefix(s, "port_")
	switch s {
	case "active":
		return "Active"
	case "down":
		return "Down"
	case "init", "initialize", "initializing":
		return "Initializing"
	case "armed":
		return "Armed"
	}
	return strings.TrimSpace(v)
}

// ibPhysState maps "LinkUp" / "LINK_UP (5)", "Polling" / "POLLING (2)", ...
// onto ibstat's words. An unknown state is kept as printed.
func ibPhysState(v string) string {
	s := reIBCode.ReplaceAllString(strings.TrimSpace(v), "")
	key := strings.ToLower(strings.NewReplacer("_", "", " ", "").Replace(s))
	switch key {
	case "sleep":
		return "Sleep"
	case "polling":
		return "Polling"
	case "disabled":
		return "Disabled"
	case "portconfigurationtraining":
		return "PortConfigurationTraining"
	case "linkup":
		return "LinkUp"
	case "linkerrorrecovery":
		return "LinkErrorRecovery"
	case "phytest":
		return "PhyTest"
	}
	return s
}

// devinfoCA is an ibv_devinfo hca_id block being parsed.
type devinfoCA struct {
	dev      IBDevice
	vendorID string
	partID   string
}

// devinfoPort is a port block being parsed; the rate is computed from width
// and speed once the block is complete.
type devinfoPort struct {
	at    line
	port  IBPort
	width string
	speed string
}

// IBVDevinfo parses `ibv_devinfo` and `ibv_devinfo -v`. The plain form does
// not print a rate; with -v the rate is active_width x active_speed (4X x
// 14.0 Gbps = 56, the figure ibstat prints). "No IB devices found" yields an
// empty list and no error.
func IBVDevinfo(text string) ([]IBDevice, error) {
	lines := splitLines(text)
	var cas []*devinfoCA
	var ports []*devinfoPort // ports of the current CA
	var failures []string
	finish := func() error {
		if len(cas) == 0 {
			return nil
		}
		ca := cas[len(cas)-1]
		for _, p := range ports {
			if err := p.finish(); err != nil {
				return err
			}
			ca.dev.Ports = append(ca.dev.Ports, p.port)
		}
		ports = nil
		return nil
	}
	noDevices := false
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		k, v, kv := cutKV(t)
		switch {
		case t == "":
		case strings.HasPrefix(t, "No IB devices found"):
			noDevices = true
		case isDevinfoFailure(t):
			failures = append(failures, fmt.Sprintf("line %d: %s", l.no, t))
		case kv && k == "hca_id":
			if err := finish(); err != nil {
				return devinfoDevices(cas), err
			}
			if v == "" {
				return devinfoDevices(cas), malformed(ibvDevinfoStr, l, "hca_id without a name")
			}
			cas = append(cas, &devinfoCA{dev: IBDevice{CA: v, Ports: []IBPort{}}})
		case len(cas) == 0 || !kv:
			// noise before the first device; capability flag lines in -v
		case k == "port":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return devinfoDevices(cas), malformed(ibvDevinfoStr, l, "port number %q is not a number", v)
			}
			ports = append(ports, &devinfoPort{at: l, port: IBPort{Port: n}})
		case len(ports) > 0:
			ports[len(ports)-1].set(k, v)
		default:
			cas[len(cas)-1].set(k, v)
		}
	}
	if err := finish(); err != nil {
		return devinfoDevices(cas), err
	}
	devs := devinfoDevices(cas)
	if len(failures) > 0 {
		return devs, fmt.Errorf("%s: %w: %s", ibvDevinfoStr, ErrToolFailed, strings.Join(failures, "; "))
	}
	if len(cas) == 0 && !noDevices {
		return devs, notRecognized(ibvDevinfoStr, lines, `"hca_id:" line`)
	}
	return devs, nil
}

func (ca *devinfoCA) set(k, v string) {
	switch k {
	case "fw_ver":
		ca.dev.Firmware = v
	case "node_guid":
		ca.dev.NodeGUID = normGUID(v)
	case "vendor_id":
		ca.vendorID = strings.ToLower(v)
	case "vendor_part_id":
		ca.partID = v
	}
}

func (p *devinfoPort) set(k, v string) {
	switch k {
	case "state":
		p.port.State = ibPortState(v)
	case "phys_state":
		p.port.PhysicalState = ibPhysState(v)
	case "link_layer":
		p.port.LinkLayer = v
	case "port_lid":
		p.port.LID = v
	case "active_width":
		p.width = reIBCode.ReplaceAllString(v, "")
	case "active_speed":
		p.speed = reIBCode.ReplaceAllString(v, "")
	}
}

// finish computes the port rate from "4X" and "14.0 Gbps" when both were
// printed (-v only).
func (p *devinfoPort) finish() error {
	if p.width == "" || p.speed == "" {
		return nil
	}
	w, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(p.width), "X"))
	if err != nil || w <= 0 || w > 64 {
		return malformed(ibvDevinfoStr, p.at, "port %d: active_width %q is not like 4X", p.port.Port, p.width)
	}
	num, unit, _ := strings.Cut(p.speed, " ")
	s, err := strconv.ParseFloat(num, 64)
	if err != nil || !(s >= 0 && s <= 1e5) || !strings.EqualFold(unit, "Gbps") {
		return nil // "invalid speed" on a port that is down: no rate rather than an error
	}
	p.port.RateGbps = float64(w) * s
	return nil
}

func devinfoDevices(cas []*devinfoCA) []IBDevice {
	out := make([]IBDevice, 0, len(cas))
	for _, ca := range cas {
		d := ca.dev
		// ibstat's "CA type" is "MT" + the PCI device id for Mellanox/NVIDIA
		// HCAs; derive the same so both tools' views compare equal.
		if (ca.vendorID == "0x02c9" || ca.vendorID == "0x15b3") && ca.partID != "" {
			d.Type = "MT" + ca.partID
		}
		out = append(out, d)
	}
	return out
}

// normGUID turns ibv_devinfo's "7cfe:9003:00a5:95c0" into ibstat's
// "0x7cfe900300a595c0".
func normGUID(v string) string {
	if !reIBGUIDGroups.MatchString(v) {
		return strings.ToLower(v)
	}
	return "0x" + strings.ToLower(strings.ReplaceAll(v, ":", ""))
}

// isDevinfoFailure recognizes the messages ibv_devinfo prints instead of a
// device block when libibverbs or a device cannot be opened.
func isDevinfoFailure(t string) bool {
	for _, p := range []string{
		"Failed to get IB devices list",
		"Failed to open device",
		"Failed to query device",
		"Failed to query port",
		"ibv_devinfo: ",
	} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
