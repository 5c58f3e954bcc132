package parse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Query is `nvidia-smi -q` (or `-q -i N`, which lists one GPU section while
// AttachedGPUs still counts every GPU on the node).
type Query struct {
	Timestamp     string     `json:"timestamp,omitempty"`
	DriverVersion string     `json:"driver_version"`
	CUDAVersion   string     `json:"cuda_version"`
	AttachedGPUs  int        `json:"attached_gpus"`
	GPUs          []QueryGPU `json:"gpus"`
}

// QueryGPU is one "GPU 00000000:18:00.0" section of `nvidia-smi -q`.
// Values that nvidia-smi reports as N/A (or deprecated, or not supported)
// are left at their zero value.
type QueryGPU struct {
	BusID          string  `json:"bus_id"`
	ProductName    string  `json:"product_name"`
	ProductBrand   string  `json:"product_brand,omitempty"`
	Architecture   string  `json:"architecture,omitempty"`
	Serial         string  `json:"serial,omitempty"`
	UUID           string  `json:"uuid"`
	VBIOS          string  `json:"vbios,omitempty"`
	MemoryTotalMiB int     `json:"memory_total_mib"`
	PCIeGen        string  `json:"pcie_gen,omitempty"`
	PCIeWidth      string  `json:"pcie_width,omitempty"`
	PowerLimitW    float64 `json:"power_limit_w,omitempty"`
	ECCMode        string  `json:"ecc_mode,omitempty"`
	MIGMode        string  `json:"mig_mode,omitempty"`
	Persistence    string  `json:"persistence_mode,omitempty"`
	// Fields holds every value of the section by its dotted path, e.g.
	// "FB Memory Usage.Total" or "PCI.GPU Link Info.PCIe Generation.Current",
	// for the evidence bundle. A key repeated under the same path (one entry
	// per process, per MIG device) gets "#2", "#3", ... appended.
	Fields map[string]string `json:"-"`
}

const qTool = "nvidia-smi -q"

var reQGPUHeader = regexp.MustCompile(`^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$`)

// qSection accumulates one GPU section. stack holds the enclosing
// sub-section headers ("PCI", "GPU Link Info") with their indentation.
type qSection struct {
	header line
	busID  string
	fields map[string]string
	lower  map[string]string // lower-cased path -> value, for lookups across driver spellings
	stack  []qFrame
}

type qFrame struct {
	indent int
	name   string
}

// NvidiaSmiQ parses `nvidia-smi -q` text output. Structure comes from
// indentation: a line without a colon opens a sub-section, "Key : Value"
// lines are filed under the open sub-sections.
func NvidiaSmiQ(text string) (Query, error) {
	lines := splitLines(text)
	q := Query{GPUs: []QueryGPU{}}
	var sections []*qSection
	var cur *qSection
	sawTop := false
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		if indentWidth(l.text) > 0 {
			if cur != nil {
				cur.add(indentWidth(l.text), t)
			}
			continue // indented text outside a GPU section is noise
		}
		if m := reQGPUHeader.FindStringSubmatch(t); m != nil {
			cur = &qSection{header: l, busID: m[1], fields: map[string]string{}, lower: map[string]string{}}
			sections = append(sections, cur)
			continue
		}
		cur = nil // any other unindented line ends a GPU section
		ok, err := q.setTop(l, t)
		if err != nil {
			return q, err
		}
		sawTop = sawTop || ok
	}
	if msgs := nvsmiFailures(lines); len(msgs) > 0 {
		return q, nvsmiFailureError(qTool, msgs)
	}
	if !sawTop && len(sections) == 0 {
		if hasNoDevices(lines) {
			return q, nil
		}
		return q, notRecognized(qTool, lines, `"Driver Version :" line or "GPU <bus id>" section`)
	}
	for _, s := range sections {
		g, err := s.gpu()
		if err != nil {
			return q, err
		}
		q.GPUs = append(q.GPUs, g)
	}
	return q, q.check(lines)
}

// setTop records the node-level keys printed before the GPU sections and
// reports whether the line was one of them.
func (q *Query) setTop(l line, t string) (bool, error) {
	k, v, ok := cutKV(t)
	if !ok {
		return false, nil // "==============NVSMI LOG==============" banner or noise
	}
	switch k {
	case "Timestamp":
		q.Timestamp = v
	case "Driver Version":
		q.DriverVersion = v
	case "CUDA Version":
		q.CUDAVersion = v
	case "Attached GPUs":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return false, malformed(qTool, l, "Attached GPUs %q is not a count", v)
		}
		q.AttachedGPUs = n
	default:
		return false, nil
	}
	return true, nil
}

// check catches output that stops early: more sections than attached GPUs is
// impossible, and attached GPUs without any section means the capture was cut
// after the header (-i N still prints one section).
func (q *Query) check(lines []line) error {
	if q.AttachedGPUs > 0 && len(q.GPUs) > q.AttachedGPUs {
		return fmt.Errorf("%s: %w: %d GPU sections but Attached GPUs is %d", qTool, ErrMalformed, len(q.GPUs), q.AttachedGPUs)
	}
	if q.AttachedGPUs > 0 && len(q.GPUs) == 0 {
		return fmt.Errorf("%s: %w: Attached GPUs is %d but no GPU section follows (output truncated?)", qTool, ErrMalformed, q.AttachedGPUs)
	}
	return nil
}

// add files one indented line of the section.
func (s *qSection) add(indent int, t string) {
	for len(s.stack) > 0 && s.stack[len(s.stack)-1].indent >= indent {
		s.stack = s.stack[:len(s.stack)-1]
	}
	k, v, ok := cutKV(t)
	if !ok {
		s.stack = append(s.stack, qFrame{indent: indent, name: t})
		return
	}
	path := k
	if len(s.stack) > 0 {
		names := make([]string, 0, len(s.stack)+1)
		for _, f := range s.stack {
			names = append(names, f.name)
		}
		path = strings.Join(append(names, k), ".")
	}
	key := path
	for n := 2; ; n++ {
		if _, dup := s.fields[key]; !dup {
			break
		}
		key = fmt.Sprintf("%s#%d", path, n)
	}
	s.fields[key] = v
	if _, dup := s.lower[strings.ToLower(path)]; !dup {
		s.lower[strings.ToLower(path)] = v
	}
}

// get returns the first of the given paths that is present and not N/A.
// Several spellings exist across drivers ("Ecc Mode" before R535, "ECC Mode"
// after; "Power Readings" vs "GPU Power Readings").
func (s *qSection) get(paths ...string) string {
	for _, p := range paths {
		if v, ok := s.lower[strings.ToLower(p)]; ok && !isNA(v) {
			return v
		}
	}
	return ""
}

// isNA reports values nvidia-smi prints when a reading does not exist.
func isNA(v string) bool {
	switch strings.Trim(strings.ToLower(v), "[]") {
	case "", "n/a", "not supported", "unknown", "unknown error", "requested functionality has been deprecated", "insufficient permissions":
		return true
	}
	return false
}

func (s *qSection) gpu() (QueryGPU, error) {
	if len(s.fields) == 0 {
		return QueryGPU{}, malformed(qTool, s.header, "GPU section has no fields (output truncated?)")
	}
	g := QueryGPU{
		BusID:        s.busID,
		ProductName:  s.get("Product Name"),
		ProductBrand: s.get("Product Brand"),
		Architecture: s.get("Product Architecture"),
		Serial:       s.get("Serial Number"),
		UUID:         s.get("GPU UUID"),
		VBIOS:        s.get("VBIOS Version"),
		PCIeGen:      s.get("PCI.GPU Link Info.PCIe Generation.Current"),
		PCIeWidth:    s.get("PCI.GPU Link Info.Link Width.Current"),
		ECCMode:      s.get("ECC Mode.Current"),
		MIGMode:      s.get("MIG Mode.Current"),
		Persistence:  s.get("Persistence Mode"),
		Fields:       s.fields,
	}
	mem, err := quantity(s.get("FB Memory Usage.Total"), "MiB")
	if err != nil {
		return g, malformed(qTool, s.header, "GPU %s: FB Memory Usage.Total: %v", s.busID, err)
	}
	g.MemoryTotalMiB = int(mem)
	// The limit the driver enforces: "Current Power Limit" since R535,
	// "Enforced Power Limit" before (when "Power Limit" was the requested one).
	g.PowerLimitW, err = quantity(s.get(
		"GPU Power Readings.Current Power Limit",
		"GPU Power Readings.Enforced Power Limit",
		"Power Readings.Enforced Power Limit",
		"Power Readings.Current Power Limit",
		"Power Readings.Power Limit",
	), "W")
	if err != nil {
		return g, malformed(qTool, s.header, "GPU %s: power limit: %v", s.busID, err)
	}
	return g, nil
}

// quantity parses "81559 MiB" / "700.00 W". An empty (N/A) value is 0.
func quantity(v, unit string) (float64, error) {
	if v == "" {
		return 0, nil
	}
	num, u, _ := strings.Cut(v, " ")
	if strings.TrimSpace(u) != unit {
		return 0, fmt.Errorf("value %q: want unit %s", v, unit)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f >= 0 && f <= 1e12) { // also rejects NaN
		return 0, fmt.Errorf("value %q is not a number", v)
	}
	return f, nil
}
