package phases

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gpuaccept/orchestrator/parse"
)

// Facts are what preflight learns about a node.
type Facts struct {
	Hostname     string    `json:"hostname"`
	MachineID    string    `json:"machine_id,omitempty"`
	Kernel       string    `json:"kernel,omitempty"`
	OS           string    `json:"os,omitempty"`
	CPU          string    `json:"cpu,omitempty"`
	CPUs         int       `json:"cpus,omitempty"`
	MemoryGiB    float64   `json:"memory_gib,omitempty"`
	Driver       string    `json:"driver,omitempty"`
	CUDA         string    `json:"cuda,omitempty"`
	GPUModel     string    `json:"gpu_model,omitempty"` // "mixed: a, b" when the node's GPUs differ
	GPUCount     int       `json:"gpu_count"`
	GPUMemoryMiB int       `json:"gpu_memory_mib,omitempty"` // the smallest GPU's
	FormFactor   string    `json:"form_factor,omitempty"`    // SXM | PCIe | "" (cannot tell)
	FormWhy      string    `json:"form_factor_evidence,omitempty"`
	NVLink       bool      `json:"nvlink"`
	GPUs         []GPUFact `json:"gpus,omitempty"`
	NICs         []NICFact `json:"nics,omitempty"`
	DCGMDevices  int       `json:"dcgm_devices,omitempty"`
	// Health is what the idle node says of its GPUs' health, read once:
	// nil in records made before it existed.
	Health *Health `json:"health,omitempty"`
	// Neighbours is the IPv4 neighbour table's limit and whether the
	// kernel logged it full: nil in records made before it existed.
	Neighbours *Neighbours `json:"neighbours,omitempty"`
	// Missing tools and Problems (sections that failed or did not parse)
	// are kept, never hidden: they are part of what the provider delivered.
	Missing  []string `json:"missing,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// Health is the one-shot health check of preflight: the GPUs' state as
// nvidia-smi -q gives it, and the kernel log since boot.
type Health struct {
	GPUs   []parse.GPUHealth `json:"gpus,omitempty"`
	Kernel *parse.KernelLog  `json:"kernel,omitempty"`
	// KernelUnread says why the kernel log could not be read (dmesg
	// restricted and no journal access): its verdict is SKIP, not PASS.
	KernelUnread string `json:"kernel_unread,omitempty"`
}

// Neighbours: the kernel makes no neighbour (ARP) entry past gc_thresh3
// (the connect fails, "neighbor table overflow!" in the log), and above
// gc_thresh2 it collects entries still in use. A flat network needs one
// entry per peer on every network the node reaches it on.
type Neighbours struct {
	GCThresh2 int `json:"gc_thresh2,omitempty"`
	GCThresh3 int `json:"gc_thresh3,omitempty"`
	// Unread says why the limits could not be read (inside a network
	// namespace the host's limit applies, and it is not visible). The
	// overflows the kernel logged are in Health.Kernel.
	Unread string `json:"unread,omitempty"`
}

// GPUFact is one GPU.
type GPUFact struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	UUID      string `json:"uuid"`
	Serial    string `json:"serial,omitempty"`
	BusID     string `json:"bus_id,omitempty"`
	MemoryMiB int    `json:"memory_mib,omitempty"`
	VBIOS     string `json:"vbios,omitempty"`
	// BoardPart and MaxPowerW tell SKUs of one product name apart (the
	// form factor, GPU-004): nvidia-smi -q's Board Part Number and Max
	// Power Limit.
	BoardPart string  `json:"board_part,omitempty"`
	MaxPowerW float64 `json:"max_power_w,omitempty"`
}

// NICFact is one port of a host channel adapter.
type NICFact struct {
	Device    string  `json:"device"`
	Port      int     `json:"port"`
	State     string  `json:"state"`
	RateGbps  float64 `json:"rate_gbps,omitempty"`
	LinkLayer string  `json:"link_layer,omitempty"`
	Firmware  string  `json:"firmware,omitempty"` // the adapter's, as ibstat or ibv_devinfo reports it
}

// section is one command's output from preflight.sh.
type section struct {
	out string
	rc  int
}

// The end marker may share a line with output that had no final newline
// (some tools print none).
var endLine = regexp.MustCompile(`^(.*)@@gpuaccept@@ end (\S+) rc=(\d+)$`)

// splitSections cuts preflight.sh's output into its commands' outputs.
func splitSections(out string) map[string]section {
	sections := map[string]section{}
	var name string
	var body []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if n, ok := strings.CutPrefix(line, "@@gpuaccept@@ begin "); ok {
			name, body = n, nil
			continue
		}
		if m := endLine.FindStringSubmatch(line); m != nil && m[2] == name {
			if m[1] != "" {
				body = append(body, m[1])
			}
			rc, _ := strconv.Atoi(m[3])
			sections[name] = section{out: strings.Join(body, "\n"), rc: rc}
			name = ""
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	return sections
}

// factsFrom reads what each section says; every failure is noted, none is
// fatal here (usable decides).
func factsFrom(s map[string]section) *Facts {
	f := &Facts{}
	text := func(name string) (string, bool) {
		sec, ok := s[name]
		switch {
		case !ok:
			f.Problems = append(f.Problems, name+": no output (preflight cut short?)")
			return "", false
		case sec.rc == 127:
			return "", false // listed in Missing below
		case sec.rc != 0:
			f.Problems = append(f.Problems, fmt.Sprintf("%s: exit %d: %s", name, sec.rc, lastLine(sec.out)))
			return sec.out, false
		}
		return sec.out, true
	}
	if t, ok := text("hostname"); ok {
		f.Hostname = strings.TrimSpace(t)
	}
	if t, ok := text("machine-id"); ok {
		f.MachineID = strings.TrimSpace(t)
	}
	if t, ok := text("kernel"); ok {
		f.Kernel = strings.TrimSpace(t)
	}
	if t, ok := text("os-release"); ok {
		f.OS = osName(t)
	}
	if t, ok := text("cpu"); ok {
		f.CPU, f.CPUs = cpuInfo(t)
	}
	if t, ok := text("meminfo"); ok {
		var kb float64
		if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(t, "MemTotal:")), "%f", &kb); err == nil {
			f.MemoryGiB = round1(kb / (1 << 20))
		}
	}
	for name, sec := range s {
		if sec.rc == 127 {
			f.Missing = append(f.Missing, name)
		}
	}
	slices.Sort(f.Missing)
	f.gpus(text)
	f.nics(text)
	if t, ok := text("dcgmi-discovery"); ok {
		if devs, err := parse.DCGMDiscovery(t); err == nil {
			f.DCGMDevices = len(devs)
		} else {
			f.Problems = append(f.Problems, err.Error())
		}
	}
	if sec, ok := s["kernel-log"]; ok {
		if sec.rc == 0 {
			k := parse.ParseKernelLog(sec.out)
			f.health().Kernel = &k
		} else {
			f.health().KernelUnread = fmt.Sprintf("exit %d: %s", sec.rc, lastLine(sec.out))
		}
	}
	f.neighbours(s)
	return f
}

// neighbours reads the neigh-limit section (grep -H's "PATH:VALUE" lines).
// A script from before the section existed leaves Neighbours nil.
func (f *Facts) neighbours(s map[string]section) {
	sec, ok := s["neigh-limit"]
	if !ok {
		return
	}
	n := &Neighbours{}
	f.Neighbours = n
	if sec.rc != 0 {
		n.Unread = fmt.Sprintf("exit %d: %s", sec.rc, lastLine(sec.out))
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(sec.out), "\n") {
		path, value, ok := cutLast(line, ':')
		v, err := strconv.Atoi(strings.TrimSpace(value))
		switch {
		case !ok || err != nil || v < 0:
			n.Unread = "unreadable line " + strconv.Quote(clip(line, 80))
		case strings.HasSuffix(path, "/gc_thresh2"):
			n.GCThresh2 = v
		case strings.HasSuffix(path, "/gc_thresh3"):
			n.GCThresh3 = v
		}
	}
	if n.Unread == "" && n.GCThresh3 == 0 {
		n.Unread = "no gc_thresh3 in the output"
	}
}

// cutLast is strings.Cut at the last sep (a path may hold the separator).
func cutLast(s string, sep byte) (before, after string, found bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

func (f *Facts) health() *Health {
	if f.Health == nil {
		f.Health = &Health{}
	}
	return f.Health
}

// Parser errors name their tool already ("nvidia-smi -q: ...").

// gpus takes -q as the authority (versions, memory, serials) and checks -L
// against it: a node whose two answers disagree is suspect.
func (f *Facts) gpus(text func(string) (string, bool)) {
	if t, ok := text("nvidia-smi-q"); ok {
		q, err := parse.NvidiaSmiQ(t)
		if err != nil {
			f.Problems = append(f.Problems, err.Error())
		} else {
			f.Driver, f.CUDA = q.DriverVersion, q.CUDAVersion
			f.health().GPUs = parse.QHealth(q)
			for i, g := range q.GPUs {
				maxW, err := parse.MaxPowerLimitW(g)
				if err != nil {
					f.Problems = append(f.Problems, fmt.Sprintf("nvidia-smi -q: GPU %s: Max Power Limit: %v", g.BusID, err))
				}
				f.GPUs = append(f.GPUs, GPUFact{Index: i, Name: g.ProductName, UUID: g.UUID, Serial: g.Serial,
					BusID: g.BusID, MemoryMiB: g.MemoryTotalMiB, VBIOS: g.VBIOS,
					BoardPart: parse.BoardPartNumber(g), MaxPowerW: maxW})
			}
		}
	}
	if t, ok := text("nvidia-smi-L"); ok {
		list, err := parse.NvidiaSmiList(t)
		switch {
		case err != nil:
			f.Problems = append(f.Problems, err.Error())
		case len(f.GPUs) == 0:
			for _, g := range list {
				f.GPUs = append(f.GPUs, GPUFact{Index: g.Index, Name: g.Name, UUID: g.UUID})
			}
		case len(list) != len(f.GPUs):
			f.Problems = append(f.Problems, fmt.Sprintf("nvidia-smi -L lists %d GPUs, -q %d", len(list), len(f.GPUs)))
		}
	}
	if t, ok := text("nvidia-smi-query"); ok {
		if c, err := parse.NvidiaSmiQueryCSV(t); err != nil {
			f.Problems = append(f.Problems, err.Error())
		} else {
			f.maxPowerFromCSV(c)
		}
	}
	f.GPUCount = len(f.GPUs)
	var names []string
	for _, g := range f.GPUs {
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
		if g.MemoryMiB > 0 && (f.GPUMemoryMiB == 0 || g.MemoryMiB < f.GPUMemoryMiB) {
			f.GPUMemoryMiB = g.MemoryMiB
		}
	}
	switch len(names) {
	case 0:
	case 1:
		f.GPUModel = names[0]
	default:
		f.GPUModel = "mixed: " + strings.Join(names, ", ")
	}
	if t, ok := text("nvidia-smi-topo"); ok {
		if topo, err := parse.NvidiaSmiTopo(t); err == nil {
			f.NVLink = topo.NVLinked()
		} else {
			f.Problems = append(f.Problems, err.Error())
		}
	}
	f.FormFactor, f.FormWhy = formFactor(f)
}

func (f *Facts) nics(text func(string) (string, bool)) {
	add := func(devs []parse.IBDevice) {
		for _, d := range devs {
			for _, p := range d.Ports {
				f.NICs = append(f.NICs, NICFact{Device: d.CA, Port: p.Port, State: p.State, RateGbps: p.RateGbps, LinkLayer: p.LinkLayer, Firmware: d.Firmware})
			}
		}
	}
	// A tool that failed part-way (ibstat panicking on one CA) still
	// reports the ports it read: keep them, and the failure.
	if t, ok := text("ibstat"); ok || t != "" {
		devs, err := parse.IBStat(t)
		add(devs)
		if err != nil {
			f.Problems = append(f.Problems, err.Error())
		}
		if len(devs) > 0 {
			return
		}
	}
	if t, ok := text("ibv_devinfo"); ok || t != "" {
		devs, err := parse.IBVDevinfo(t)
		add(devs)
		if err != nil {
			f.Problems = append(f.Problems, err.Error())
		}
	}
}

// usable says whether the node can take part in GPU tests at all.
func (f *Facts) usable() error {
	if f.GPUCount == 0 {
		why := "no GPU found"
		for _, p := range f.Problems {
			if strings.HasPrefix(p, "nvidia-smi") {
				return errors.New(why + ": " + p)
			}
		}
		if slices.Contains(f.Missing, "nvidia-smi-q") {
			why += ": nvidia-smi is not installed"
		}
		return errors.New(why)
	}
	return nil
}

func osName(release string) string {
	for _, line := range strings.Split(release, "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func cpuInfo(t string) (string, int) {
	var model string
	var n int
	for _, line := range strings.Split(t, "\n") {
		if _, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(line, "model name") {
			model = strings.TrimSpace(v)
		} else if c, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			n = c
		}
	}
	return model, n
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func round1(x float64) float64 { return float64(int(x*10+0.5)) / 10 }
