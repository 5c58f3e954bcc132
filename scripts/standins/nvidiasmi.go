package standins

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// smiLog is an `nvidia-smi -q` text parsed just enough to derive -L and --query-gpu from it.
type smiLog struct {
	top  map[string]string // unindented "Key : Value" lines before the GPU sections
	gpus []smiGPU          // in -q order, which is nvidia-smi's index order
}

type smiGPU struct {
	vals map[string]string // "FB Memory Usage/Total" -> "81559 MiB"; first occurrence of a path wins
}

func (g *smiGPU) get(paths ...string) (string, bool) {
	for _, p := range paths {
		if v, ok := g.vals[p]; ok {
			return v, true
		}
	}
	return "", false
}

// parseSMILog reads the -q layout: "==== NVSMI LOG ====", unindented header keys, then one "GPU 0000xxxx:bb:dd.f"
// line per GPU followed by keys indented 4 spaces per level; a key without a value opens a section.
func parseSMILog(b []byte) (*smiLog, error) {
	l := &smiLog{top: map[string]string{}}
	type open struct {
		indent int
		key    string
	}
	var cur *smiGPU
	var stack []open
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\r\n")
		text := strings.TrimSpace(line)
		if text == "" || strings.HasPrefix(text, "====") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		key, value, hasValue := strings.Cut(text, ":")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if indent == 0 {
			if bus, ok := strings.CutPrefix(text, "GPU "); ok && strings.Count(bus, ":") == 2 {
				l.gpus = append(l.gpus, smiGPU{vals: map[string]string{"": bus}})
				cur, stack = &l.gpus[len(l.gpus)-1], stack[:0]
				continue
			}
			cur = nil
			if hasValue {
				l.top[key] = value
			}
			continue
		}
		if cur == nil {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		path := key
		if len(stack) > 0 {
			keys := make([]string, 0, len(stack)+1)
			for _, o := range stack {
				keys = append(keys, o.key)
			}
			path = strings.Join(append(keys, key), "/")
		}
		if _, seen := cur.vals[path]; hasValue && !seen {
			cur.vals[path] = value
		}
		stack = append(stack, open{indent, key})
	}
	if len(l.gpus) == 0 {
		return nil, fmt.Errorf("no GPU sections in the -q sample")
	}
	return l, nil
}

// nvmlWords are the -q values that --query-gpu prints in brackets ("N/A" -> "[N/A]").
var nvmlWords = []string{
	"N/A", "Not Supported", "Requested functionality has been deprecated", "Unknown Error",
	"Insufficient Permissions", "GPU requires reset", "GPU is lost", "Not Found",
}

// qField is one --query-gpu field derived from the -q text.
type qField struct {
	name  string
	unit  string   // shown in the header as "name [unit]"; stripped from values under nounits
	paths []string // -q paths tried in order
	strip string   // suffix the csv value drops ("36 C" -> "36", "16x" -> "16")
	// special computes the value from the whole log instead (index, count, driver_version).
	special func(l *smiLog, i int) string
}

// qFields is what the stand-in derives from -q. Every derivation that the 590.48.01 capture can check (the genuine
// -q and --query-gpu csv of the same GPU at the same moment) is checked by the tests.
var qFields = []qField{
	{name: "driver_version", special: func(l *smiLog, _ int) string { return l.top["Driver Version"] }},
	{name: "count", special: func(l *smiLog, _ int) string { return strconv.Itoa(len(l.gpus)) }},
	{name: "name", paths: []string{"Product Name"}},
	{name: "serial", paths: []string{"Serial Number"}},
	{name: "uuid", paths: []string{"GPU UUID"}},
	{name: "pci.bus_id", paths: []string{"PCI/Bus Id", ""}},
	{name: "pci.domain", paths: []string{"PCI/Domain"}},
	{name: "pci.bus", paths: []string{"PCI/Bus"}},
	{name: "pci.device", paths: []string{"PCI/Device"}},
	{name: "pci.device_id", paths: []string{"PCI/Device Id"}},
	{name: "pci.sub_device_id", paths: []string{"PCI/Sub System Id"}},
	{name: "pcie.link.gen.current", paths: []string{"PCI/GPU Link Info/PCIe Generation/Current"}},
	{name: "pcie.link.gen.gpucurrent", paths: []string{"PCI/GPU Link Info/PCIe Generation/Device Current"}},
	{name: "pcie.link.gen.max", paths: []string{"PCI/GPU Link Info/PCIe Generation/Max"}},
	{name: "pcie.link.gen.gpumax", paths: []string{"PCI/GPU Link Info/PCIe Generation/Device Max"}},
	{name: "pcie.link.gen.hostmax", paths: []string{"PCI/GPU Link Info/PCIe Generation/Host Max"}},
	{name: "pcie.link.width.current", paths: []string{"PCI/GPU Link Info/Link Width/Current"}, strip: "x"},
	{name: "pcie.link.width.max", paths: []string{"PCI/GPU Link Info/Link Width/Max"}, strip: "x"},
	{name: "index", special: func(_ *smiLog, i int) string { return strconv.Itoa(i) }},
	{name: "display_mode", paths: []string{"Display Mode"}},
	{name: "display_active", paths: []string{"Display Active"}},
	{name: "persistence_mode", paths: []string{"Persistence Mode"}},
	{name: "addressing_mode", paths: []string{"Addressing Mode"}},
	{name: "accounting.mode", paths: []string{"Accounting Mode"}},
	{name: "accounting.buffer_size", paths: []string{"Accounting Mode Buffer Size"}},
	{name: "driver_model.current", paths: []string{"Driver Model/Current"}},
	{name: "driver_model.pending", paths: []string{"Driver Model/Pending"}},
	{name: "vbios_version", paths: []string{"VBIOS Version"}},
	{name: "inforom.img", paths: []string{"Inforom Version/Image Version"}},
	{name: "inforom.oem", paths: []string{"Inforom Version/OEM Object"}},
	{name: "inforom.ecc", paths: []string{"Inforom Version/ECC Object"}},
	{name: "inforom.pwr", paths: []string{"Inforom Version/Power Management Object"}},
	{name: "gom.current", paths: []string{"GPU Operation Mode/Current"}},
	{name: "gom.pending", paths: []string{"GPU Operation Mode/Pending"}},
	{name: "fan.speed", unit: "%", paths: []string{"Fan Speed"}},
	{name: "pstate", paths: []string{"Performance State"}},
	{name: "memory.total", unit: "MiB", paths: []string{"FB Memory Usage/Total"}},
	{name: "memory.reserved", unit: "MiB", paths: []string{"FB Memory Usage/Reserved"}},
	{name: "memory.used", unit: "MiB", paths: []string{"FB Memory Usage/Used"}},
	{name: "memory.free", unit: "MiB", paths: []string{"FB Memory Usage/Free"}},
	{name: "compute_mode", paths: []string{"Compute Mode"}},
	{name: "utilization.gpu", unit: "%", paths: []string{"Utilization/Gpu", "Utilization/GPU"}},
	{name: "utilization.memory", unit: "%", paths: []string{"Utilization/Memory"}},
	{name: "utilization.encoder", unit: "%", paths: []string{"Utilization/Encoder"}},
	{name: "utilization.decoder", unit: "%", paths: []string{"Utilization/Decoder"}},
	{name: "utilization.jpeg", unit: "%", paths: []string{"Utilization/JPEG"}},
	{name: "utilization.ofa", unit: "%", paths: []string{"Utilization/OFA"}},
	{name: "ecc.mode.current", paths: []string{"ECC Mode/Current"}},
	{name: "ecc.mode.pending", paths: []string{"ECC Mode/Pending"}},
	{name: "retired_pages.single_bit_ecc.count", paths: []string{"Retired Pages/Single Bit ECC"}},
	{name: "retired_pages.double_bit.count", paths: []string{"Retired Pages/Double Bit ECC"}},
	{name: "retired_pages.pending", paths: []string{"Retired Pages/Pending Page Blacklist"}},
	{name: "remapped_rows.correctable", paths: []string{"Remapped Rows/Correctable Error"}},
	{name: "remapped_rows.uncorrectable", paths: []string{"Remapped Rows/Uncorrectable Error"}},
	{name: "remapped_rows.pending", paths: []string{"Remapped Rows/Pending"}},
	{name: "remapped_rows.failure", paths: []string{"Remapped Rows/Remapping Failure Occurred"}},
	{name: "remapped_rows.histogram.max", paths: []string{"Remapped Rows/Bank Remap Availability Histogram/Max"}, strip: " bank(s)"},
	{name: "remapped_rows.histogram.high", paths: []string{"Remapped Rows/Bank Remap Availability Histogram/High"}, strip: " bank(s)"},
	{name: "remapped_rows.histogram.partial", paths: []string{"Remapped Rows/Bank Remap Availability Histogram/Partial"}, strip: " bank(s)"},
	{name: "remapped_rows.histogram.low", paths: []string{"Remapped Rows/Bank Remap Availability Histogram/Low"}, strip: " bank(s)"},
	{name: "remapped_rows.histogram.none", paths: []string{"Remapped Rows/Bank Remap Availability Histogram/None"}, strip: " bank(s)"},
	{name: "temperature.gpu", paths: []string{"Temperature/GPU Current Temp"}, strip: " C"},
	{name: "temperature.gpu.tlimit", paths: []string{"Temperature/GPU T.Limit Temp"}, strip: " C"},
	{name: "temperature.memory", paths: []string{"Temperature/Memory Current Temp"}, strip: " C"},
	// 535 prints "Power Draw"; 590 prints "Average Power Draw", which is what its power.draw column holds.
	{name: "power.draw", unit: "W", paths: []string{"GPU Power Readings/Power Draw", "GPU Power Readings/Average Power Draw"}},
	{name: "power.limit", unit: "W", paths: []string{"GPU Power Readings/Current Power Limit"}},
	{name: "power.default_limit", unit: "W", paths: []string{"GPU Power Readings/Default Power Limit"}},
	{name: "power.min_limit", unit: "W", paths: []string{"GPU Power Readings/Min Power Limit"}},
	{name: "power.max_limit", unit: "W", paths: []string{"GPU Power Readings/Max Power Limit"}},
	{name: "clocks.current.graphics", unit: "MHz", paths: []string{"Clocks/Graphics"}},
	{name: "clocks.current.sm", unit: "MHz", paths: []string{"Clocks/SM"}},
	{name: "clocks.current.memory", unit: "MHz", paths: []string{"Clocks/Memory"}},
	{name: "clocks.current.video", unit: "MHz", paths: []string{"Clocks/Video"}},
	{name: "clocks.applications.graphics", unit: "MHz", paths: []string{"Applications Clocks/Graphics"}},
	{name: "clocks.applications.memory", unit: "MHz", paths: []string{"Applications Clocks/Memory"}},
	{name: "clocks.default_applications.graphics", unit: "MHz", paths: []string{"Default Applications Clocks/Graphics"}},
	{name: "clocks.default_applications.memory", unit: "MHz", paths: []string{"Default Applications Clocks/Memory"}},
	{name: "clocks.max.graphics", unit: "MHz", paths: []string{"Max Clocks/Graphics"}},
	{name: "clocks.max.sm", unit: "MHz", paths: []string{"Max Clocks/SM"}},
	{name: "clocks.max.memory", unit: "MHz", paths: []string{"Max Clocks/Memory"}},
	{name: "mig.mode.current", paths: []string{"MIG Mode/Current"}},
	{name: "mig.mode.pending", paths: []string{"MIG Mode/Pending"}},
	{name: "protected_memory.total", unit: "MiB", paths: []string{"Conf Compute Protected Memory Usage/Total"}},
	{name: "protected_memory.used", unit: "MiB", paths: []string{"Conf Compute Protected Memory Usage/Used"}},
	{name: "protected_memory.free", unit: "MiB", paths: []string{"Conf Compute Protected Memory Usage/Free"}},
	{name: "fabric.state", paths: []string{"Fabric/State"}},
	{name: "fabric.status", paths: []string{"Fabric/Status"}},
}

func findQField(name string) *qField {
	for i := range qFields {
		if qFields[i].name == name {
			return &qFields[i]
		}
	}
	return nil
}

// value is the csv cell for GPU i with units ("81559 MiB", "[N/A]"); ok is false when the -q text lacks it.
func (f *qField) value(l *smiLog, i int) (string, bool) {
	if f.special != nil {
		return f.special(l, i), true
	}
	v, ok := l.gpus[i].get(f.paths...)
	if !ok {
		return "", false
	}
	if slices.Contains(nvmlWords, v) {
		return "[" + v + "]", true
	}
	if f.strip != "" {
		v = strings.TrimSuffix(v, f.strip)
	}
	return v, true
}

func (f *qField) header() string {
	if f.unit == "" {
		return f.name
	}
	return f.name + " [" + f.unit + "]"
}

// knownAliases are names real nvidia-smi accepts for fields this stand-in answers under their long name; the
// header nvidia-smi prints for them is not in any sample, so the stand-in says "not simulated" rather than guess.
var knownAliases = []string{
	"gpu_name", "gpu_serial", "gpu_uuid", "gpu_bus_id",
	"clocks.gr", "clocks.sm", "clocks.mem", "clocks.video",
	"clocks.applications.gr", "clocks.applications.mem",
	"clocks.default_applications.gr", "clocks.default_applications.mem",
	"clocks.max.gr", "clocks.max.mem",
}

// csvSample is a genuine --query-gpu csv capture: header cells and one row per GPU.
type csvSample struct {
	names []string // field names, units cut off
	units []string
	rows  [][]string
}

func parseCSVSample(b []byte) (*csvSample, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("csv sample has no data row")
	}
	c := &csvSample{}
	for _, h := range strings.Split(lines[0], ", ") {
		name, unit := splitHeader(h)
		c.names, c.units = append(c.names, name), append(c.units, unit)
	}
	for _, line := range lines[1:] {
		row := strings.Split(line, ", ")
		if len(row) != len(c.names) {
			return nil, fmt.Errorf("csv sample row has %d cells, header %d", len(row), len(c.names))
		}
		c.rows = append(c.rows, row)
	}
	return c, nil
}

// splitHeader splits "memory.total [MiB]" into "memory.total" and "MiB".
func splitHeader(h string) (name, unit string) {
	if i := strings.Index(h, " ["); i >= 0 && strings.HasSuffix(h, "]") {
		return h[:i], h[i+2 : len(h)-1]
	}
	return h, ""
}

// realFieldNames is every --query-gpu name real nvidia-smi is known (from the samples) to accept.
func realFieldNames() []string {
	names := slices.Clone(knownAliases)
	for _, f := range qFields {
		names = append(names, f.name)
	}
	c, err := parseCSVSample(sample(csvH100Othr))
	if err == nil {
		names = append(names, c.names...)
	}
	return names
}

const (
	smiExitInvalidArg = 2 // nvidia-smi's "a supplied argument or flag is invalid"
)

type smiCall struct {
	list, query, topo bool
	topoArgs          []string
	queryGPU          string
	hasQueryGPU       bool
	computeApps       bool // --query-compute-apps
	format            string
	hasFormat         bool
	loop              time.Duration // -l/--loop, -lms/--loop-ms: 0 without
	badLoop           bool          // a loop option without a valid interval
}

// realSMIOptions are options real nvidia-smi has that the stand-in does not simulate (told apart from unknown
// options, which get nvidia-smi's own "not recognized" answer).
var realSMIOptions = []string{
	"-h", "--help", "--version", "-B", "--list-excluded-gpus", "-x", "--xml-format", "--dtd", "-u", "--unit",
	"-i", "--id", "-f", "--filename", "-d", "--display", "-l", "--loop", "-lms", "--loop-ms",
	"--query-supported-clocks", "--query-compute-apps", "--query-accounted-apps", "--query-retired-pages",
	"--query-remapped-rows", "--help-query-gpu", "-pm", "--persistence-mode", "-e", "--ecc-config", "-p",
	"--reset-ecc-errors", "-c", "--compute-mode", "-r", "--gpu-reset", "-vm", "--virt-mode", "-lgc",
	"--lock-gpu-clocks", "-rgc", "--reset-gpu-clocks", "-lmc", "--lock-memory-clocks", "-rmc", "--reset-memory-clocks",
	"-ac", "--applications-clocks", "-rac", "--reset-applications-clocks", "-pl", "--power-limit", "-mig",
	"--multi-instance-gpu", "-am", "--accounting-mode", "-caa", "--clear-accounted-apps",
	"dmon", "daemon", "replay", "pmon", "nvlink", "clocks", "encodersessions", "fbcsessions", "conf-compute",
	"mig", "boost-slider", "power-hint", "vgpu", "drain", "c2c",
}

func runNvidiaSMI(p *profile, args []string, stdout, stderr io.Writer) int {
	var c smiCall
	opts := args
	if len(args) > 0 && args[0] == "topo" {
		c.topo, c.topoArgs, opts = true, args[1:], nil
	}
	for i := 0; i < len(opts); i++ {
		a := opts[i]
		name, val, hasVal := strings.Cut(a, "=")
		takeValue := func() (string, bool) {
			if hasVal {
				return val, true
			}
			if i+1 < len(opts) {
				i++
				return opts[i], true
			}
			return "", false
		}
		switch {
		case a == "-L" || a == "--list-gpus":
			c.list = true
		case a == "-q" || a == "--query":
			c.query = true
		case name == "--query-compute-apps":
			if _, c.computeApps = takeValue(); !c.computeApps {
				return notSimulated(p, NvidiaSMI, args, stderr)
			}
		case name == "--query-gpu":
			if c.queryGPU, c.hasQueryGPU = takeValue(); !c.hasQueryGPU {
				return notSimulated(p, NvidiaSMI, args, stderr)
			}
		case name == "--format":
			if c.format, c.hasFormat = takeValue(); !c.hasFormat {
				return notSimulated(p, NvidiaSMI, args, stderr)
			}
		case name == "-l" || name == "--loop" || name == "-lms" || name == "--loop-ms":
			unit := time.Second
			if strings.Contains(name, "ms") {
				unit = time.Millisecond
			}
			v, ok := takeValue()
			if c.loop, ok = parseLoopInterval(v, unit); !ok {
				c.badLoop = true
			}
		case slices.Contains(realSMIOptions, name) || slices.Contains(realSMIOptions, a) || a == "topo":
			return notSimulated(p, NvidiaSMI, args, stderr)
		default:
			// Genuine: `ERROR: Option -format=csv is not recognized. Please run 'nvidia-smi -h' for help.` then
			// a blank line, on stdout, non-zero exit.
			fmt.Fprintf(stdout, "ERROR: Option %s is not recognized. Please run 'nvidia-smi -h' for help.\n\n", a)
			return smiExitInvalidArg
		}
	}
	if c.badLoop || (c.loop > 0 && (!c.hasQueryGPU || c.list || c.query || c.topo || c.computeApps)) {
		// Loops of the other modes, and what nvidia-smi says to a bad interval, are in no sample.
		return notSimulated(p, NvidiaSMI, args, stderr)
	}
	if c.computeApps {
		// The node is idle: no process on its GPUs. With noheader that is
		// no output at all; a header is in no sample, so it is not made up.
		if !c.hasFormat || !strings.Contains(c.format, "noheader") || c.list || c.query || c.topo || c.hasQueryGPU {
			return notSimulated(p, NvidiaSMI, args, stderr)
		}
		return 0
	}
	modes := 0
	for _, m := range []bool{c.list, c.query, c.topo, c.hasQueryGPU} {
		if m {
			modes++
		}
	}
	// No mode is the plain summary table (no sample of it); what nvidia-smi says to two modes at once, or to
	// --format without --query-gpu, is in no sample either.
	if modes != 1 || (c.hasFormat && !c.hasQueryGPU) {
		return notSimulated(p, NvidiaSMI, args, stderr)
	}
	switch {
	case c.topo:
		if len(c.topoArgs) != 1 || (c.topoArgs[0] != "-m" && c.topoArgs[0] != "--matrix") || p.smiTopo == "" {
			return notSimulated(p, NvidiaSMI, args, stderr)
		}
		stdout.Write(sample(p.smiTopo))
		return 0
	case c.query:
		stdout.Write(p.queryText())
		return 0
	}
	l, err := parseSMILog(p.queryText())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", standinLabel(p), p.smiQuery, err)
		return 1
	}
	if c.list {
		var b bytes.Buffer
		for i := range l.gpus {
			name, _ := l.gpus[i].get("Product Name")
			uuid, _ := l.gpus[i].get("GPU UUID")
			fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", i, name, uuid)
		}
		stdout.Write(b.Bytes())
		return 0
	}
	if c.loop > 0 {
		return runSMILoop(p, l, c, c.loop, args, stdout, stderr, nil)
	}
	return smiQueryGPU(p, l, c, args, stdout, stderr)
}

func smiQueryGPU(p *profile, l *smiLog, c smiCall, args []string, stdout, stderr io.Writer) int {
	csvOK, header, units := false, true, true
	for _, opt := range strings.Split(c.format, ",") {
		switch opt {
		case "csv":
			csvOK = true
		case "noheader":
			header = false
		case "nounits":
			units = false
		default:
			return notSimulated(p, NvidiaSMI, args, stderr)
		}
	}
	if !csvOK || c.queryGPU == "" {
		return notSimulated(p, NvidiaSMI, args, stderr)
	}
	fields := strings.Split(c.queryGPU, ",")
	real := realFieldNames()
	for _, f := range fields {
		if !slices.Contains(real, f) {
			// Genuine: `Field "cuda_version" is not a valid field to query.` then a blank line, on stdout.
			fmt.Fprintf(stdout, "Field \"%s\" is not a valid field to query.\n\n", f)
			return smiExitInvalidArg
		}
	}
	var genuine *csvSample
	if p.smiCSV != "" {
		var err error
		if genuine, err = parseCSVSample(sample(p.smiCSV)); err != nil || len(genuine.rows) != len(l.gpus) {
			fmt.Fprintf(stderr, "%s: %s does not match %s (%v)\n", standinLabel(p), p.smiCSV, p.smiQuery, err)
			return 1
		}
	}
	heads := make([]string, len(fields))
	cells := make([][]string, len(l.gpus))
	for j, f := range fields {
		for i := range l.gpus {
			v, unit, ok := csvCell(l, genuine, f, i)
			if !ok {
				return notSimulated(p, NvidiaSMI, args, stderr)
			}
			if !units && unit != "" {
				v = strings.TrimSuffix(v, " "+unit)
			}
			cells[i] = append(cells[i], v)
			heads[j] = f
			if unit != "" {
				heads[j] = f + " [" + unit + "]"
			}
		}
	}
	var b bytes.Buffer
	if header {
		b.WriteString(strings.Join(heads, ", ") + "\n")
	}
	for _, row := range cells {
		b.WriteString(strings.Join(row, ", ") + "\n")
	}
	stdout.Write(b.Bytes())
	return 0
}

// csvCell is field f of GPU i: from the genuine csv capture when the profile has one and it holds the field,
// otherwise derived from -q.
func csvCell(l *smiLog, genuine *csvSample, f string, i int) (value, unit string, ok bool) {
	if genuine != nil {
		if j := slices.Index(genuine.names, f); j >= 0 {
			return genuine.rows[i][j], genuine.units[j], true
		}
	}
	qf := findQField(f)
	if qf == nil {
		return "", "", false
	}
	v, ok := qf.value(l, i)
	return v, qf.unit, ok
}
