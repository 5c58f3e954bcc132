package standins

import (
	"embed"
	"fmt"
	"slices"
	"strings"
)

// samples holds byte-for-byte copies of genuine tool outputs (see samples/SOURCES.md).
//
//go:embed samples
var samples embed.FS

// Tool names the stand-ins answer to, in the order Install writes them.
const (
	NvidiaSMI  = "nvidia-smi"
	DCGMI      = "dcgmi"
	IBStat     = "ibstat"
	IBVDevinfo = "ibv_devinfo"
)

var allTools = []string{NvidiaSMI, DCGMI, IBStat, IBVDevinfo}

// profile is the set of genuine outputs one simulated node replays. An empty source means the node does not
// answer that command; a tool whose sources are all empty is not installed on the node at all.
type profile struct {
	name  string
	about string

	smiQuery string // nvidia-smi -q; -L and --query-gpu are derived from it
	// idle replays smiQuery with every GPU's clock event (throttle)
	// reasons as an idle GPU reports them ("Idle: Active", every other
	// "Not Active"): the capture was taken with one GPU under load, and
	// preflight reads an idle node. Only those values change; every line
	// keeps the capture's format.
	idle    bool
	smiTopo string // nvidia-smi topo -m
	// smiCSV is a genuine --query-gpu csv capture of the same GPU at the same moment as smiQuery (same capture
	// session). When set, --query-gpu answers every field in it from it, and fields outside it from smiQuery.
	smiCSV string

	dcgmDiscovery string // dcgmi discovery -l
	dcgmDiag      string // dcgmi diag -r N [-j]: replayed whatever the level, text even under -j

	ibstat     string // ibstat (no arguments)
	ibvDevinfo string // ibv_devinfo (no arguments)
}

const (
	qH100       = "nvidia-smi/gpud-q-8xH100-535.183.01-cuda12.2.txt"
	qH100Slow   = "nvidia-smi/gpud-q-8xH100-535.161.08-hw-slowdown-power-brake-active.txt"
	qH100Other  = "nvidia-smi/exporter-q-h100-590.48.01-cuda13.1-idle.txt"
	qA10        = "nvidia-smi/gpud-q-1xA10-535.129.03.txt"
	csvH100Othr = "nvidia-smi/exporter-query-gpu-csv-h100-590.48.01-idle.txt"
	topoH100    = "nvidia-smi/topo-m-8xH100-NV18-6xmlx5-tabs-empty-cpu-affinity.txt"
	topoH100One = "nvidia-smi/exporter-topo-m-1xH100-ansi-underline.txt"

	discoveryH800 = "dcgmi/discovery-l-8x-h800.txt"
	diagPass      = "dcgmi/awsome-diag-r2-3.3.3-8xA100-p4de-pass.txt"
	diagFail      = "dcgmi/deepops-diag-r1-dcgm1x-blacklist-fail-empty-sections.txt"
	diagDCGM4     = "dcgmi/dcgm124-diag-r2-i0-4.4.2-1xA10G-pass.txt"

	ibstatH100     = "ib/gpud-ibstat-h100-node-12ca-roce-ethernet-all-active.txt"
	ibstatH100Down = "ib/gpud-ibstat-h100-node-some-ports-down.txt"
	ibstatPanic    = "ib/gpud-ibstat-8xA100-mt4124-ibpanic-exit255.txt"
	ibvDevinfoCX3  = "ib/books-ibv_devinfo-2xConnectX3-mlx4-dualport-one-down.txt"
)

// h100 is the healthy reference node; the other profiles change one thing each.
var h100 = profile{
	name:          "h100",
	about:         "healthy reference node: 8x H100 80GB HBM3, driver 535.183.01 / CUDA 12.2 (idle clocks), diag passes, all IB/RoCE ports up, no ibv_devinfo",
	smiQuery:      qH100,
	idle:          true,
	smiTopo:       topoH100,
	dcgmDiscovery: discoveryH800,
	dcgmDiag:      diagPass,
	ibstat:        ibstatH100,
}

var profiles = []profile{
	h100,
	with(h100, "h100-other-driver", "another driver: 1x H100 80GB HBM3, driver 590.48.01 / CUDA 13.1 (cloud VM capture)", func(p *profile) {
		p.smiQuery, p.smiTopo, p.smiCSV = qH100Other, topoH100One, csvH100Othr
	}),
	with(h100, "h100-throttled", "one GPU slowed on an idle node: the -q capture as taken (00000000:75:00.0 HW Power Brake and SW Thermal Slowdown Active)", func(p *profile) {
		p.idle = false
	}),
	with(h100, "h100-hw-slowdown", "every GPU in HW Slowdown and HW Power Brake Slowdown: 8x H100, driver 535.161.08", func(p *profile) {
		p.smiQuery, p.idle = qH100Slow, false
	}),
	with(h100, "h100-diag-fail", "dcgmi diag fails (five Deployment checks Fail, DCGM 1.x layout; exit 226)", func(p *profile) {
		p.dcgmDiag = diagFail
	}),
	with(h100, "h100-ib-down", "three IB ports Down/Disabled in ibstat", func(p *profile) {
		p.ibstat = ibstatH100Down
	}),
	with(h100, "h100-ib-panic", "ibstat prints 8 CAs then dies with ibpanic (exit 255)", func(p *profile) {
		p.ibstat = ibstatPanic
	}),
	with(h100, "h100-ibv-devinfo", "ibv_devinfo installed: two dual-port ConnectX-3 HCAs, port 2 PORT_DOWN on both", func(p *profile) {
		p.ibvDevinfo = ibvDevinfoCX3
	}),
	with(h100, "h100-dcgm4-diag", "dcgmi diag answers in the DCGM 4.x layout (4.4.2, per-GPU continuation rows)", func(p *profile) {
		p.dcgmDiag = diagDCGM4
	}),
	with(h100, "h100-no-dcgm", "DCGM not installed: no dcgmi on the node", func(p *profile) {
		p.dcgmDiscovery, p.dcgmDiag = "", ""
	}),
	{
		name:     "a10-wrong-model",
		about:    "wrong GPU model: 1x A10, driver 535.129.03; no topo -m, no dcgmi discovery, no IB tools; diag from a DCGM 4.4.2 A10G run",
		smiQuery: qA10,
		dcgmDiag: diagDCGM4,
	},
}

func with(base profile, name, about string, change func(*profile)) profile {
	p := base
	p.name, p.about = name, about
	change(&p)
	return p
}

// Profiles lists the profile names, the healthy reference node ("h100") first.
func Profiles() []string {
	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		names = append(names, p.name)
	}
	return names
}

// About says in one line what node a profile simulates.
func About(name string) (string, error) {
	p, err := lookup(name)
	if err != nil {
		return "", err
	}
	return p.about, nil
}

// Tools lists the tools a profile's node has (the wrappers Install writes), in a fixed order. A tool not listed
// is not installed on that node: the shell answers "command not found".
func Tools(name string) ([]string, error) {
	p, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return p.tools(), nil
}

func (p *profile) tools() []string {
	var t []string
	if p.smiQuery != "" {
		t = append(t, NvidiaSMI)
	}
	if p.dcgmDiscovery != "" || p.dcgmDiag != "" {
		t = append(t, DCGMI)
	}
	if p.ibstat != "" {
		t = append(t, IBStat)
	}
	if p.ibvDevinfo != "" {
		t = append(t, IBVDevinfo)
	}
	return t
}

func (p *profile) has(tool string) bool { return slices.Contains(p.tools(), tool) }

func lookup(name string) (*profile, error) {
	for i := range profiles {
		if profiles[i].name == name {
			return &profiles[i], nil
		}
	}
	return nil, fmt.Errorf("unknown stand-in profile %q (known: %v)", name, Profiles())
}

// queryText is the -q the profile answers.
func (p *profile) queryText() []byte {
	q := sample(p.smiQuery)
	if !p.idle {
		return q
	}
	return idleClocks(q)
}

// idleClocks sets every reason of the "Clocks Event Reasons" (or older
// "Clocks Throttle Reasons") blocks of a -q to what an idle GPU shows,
// keeping each line's indentation and alignment.
func idleClocks(q []byte) []byte {
	lines := strings.Split(string(q), "\n")
	in := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "Clocks Event Reasons" || t == "Clocks Throttle Reasons":
			in = true
			continue
		case in && !strings.HasPrefix(l, "        "):
			in = false
		}
		if !in {
			continue
		}
		name, _, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		value := " Not Active"
		if strings.TrimSpace(name) == "Idle" {
			value = " Active"
		}
		lines[i] = name + ":" + value
	}
	return []byte(strings.Join(lines, "\n"))
}

func sample(name string) []byte {
	b, err := samples.ReadFile("samples/" + name)
	if err != nil {
		panic("standins: embedded sample missing: " + name) // a typo in the table above; tests read every one
	}
	return b
}
