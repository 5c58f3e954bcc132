package parse

import (
	"fmt"
	"regexp"
	"strings"
)

// Topology is `nvidia-smi topo -m`: the link matrix between GPUs and NICs.
type Topology struct {
	// Devices is the header's column order: GPU0.., then NIC0.. (current
	// drivers) or mlx5_0.. (older drivers name NIC columns after the HCA).
	Devices []string `json:"devices"`
	// Links[row][column] is the matrix cell as printed: "X" (self), "NV18",
	// "PIX", "PXB", "PHB", "NODE", "SYS", ...
	Links map[string]map[string]string `json:"links"`
	// CPUAffinity and NUMAAffinity hold the GPU rows' affinity cells. An
	// entry may be "" when nvidia-smi printed the cell empty (cgroup-limited
	// jobs); a GPU missing from the map had no cell at all.
	CPUAffinity  map[string]string `json:"cpu_affinity,omitempty"`
	NUMAAffinity map[string]string `json:"numa_affinity,omitempty"`
	// NICNames maps NIC0 -> mlx5_0 from the "NIC Legend:" block.
	NICNames map[string]string `json:"nic_names,omitempty"`
}

const topoTool = "nvidia-smi topo -m"

var (
	reTopoGPU    = regexp.MustCompile(`^GPU\d+$`)
	reTopoNV     = regexp.MustCompile(`^NV\d+$`)
	reTopoLegend = regexp.MustCompile(`^(NIC\d+)\s*:\s*(\S+)$`)
	// A device column: GPU0, NIC3, mlx5_0, bnxt_re1 - one word ending in a
	// digit. Attribute columns ("CPU Affinity", "GPU NUMA ID") do not match.
	reTopoDevice = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*[0-9]$`)
)

// GPUs returns the GPU columns in header order.
func (t Topology) GPUs() []string {
	var out []string
	for _, d := range t.Devices {
		if reTopoGPU.MatchString(d) {
			out = append(out, d)
		}
	}
	return out
}

// NICs returns the non-GPU columns (NIC0.. or mlx5_0..) in header order.
func (t Topology) NICs() []string {
	var out []string
	for _, d := range t.Devices {
		if !reTopoGPU.MatchString(d) {
			out = append(out, d)
		}
	}
	return out
}

// NVLinked reports whether any GPU-to-GPU cell is an NVLink bond (NV<n>).
func (t Topology) NVLinked() bool {
	gpus := t.GPUs()
	for _, a := range gpus {
		for _, b := range gpus {
			if a != b && reTopoNV.MatchString(t.Links[a][b]) {
				return true
			}
		}
	}
	return false
}

// cell is one table cell and the column it starts at (used only when tabs
// were turned into spaces and positions are all that is left to align by).
type cell struct {
	text string
	pos  int
}

// topoHeader is the parsed header row.
type topoHeader struct {
	tabs    bool   // cells are tab-separated (as nvidia-smi prints them)
	devices []cell // device columns
	attrs   []cell // attribute columns after the devices
}

// NvidiaSmiTopo parses `nvidia-smi topo -m` (also `topo --matrix`), in both
// the tab-separated form nvidia-smi prints and the space-aligned form that
// copy-paste leaves. The matrix ends at the first blank line or "Legend:".
func NvidiaSmiTopo(text string) (Topology, error) {
	lines := splitLines(text)
	if msgs := nvsmiFailures(lines); len(msgs) > 0 {
		return Topology{}, nvsmiFailureError(topoTool, msgs)
	}
	h := topoHeaderIndex(lines)
	if h < 0 {
		return Topology{}, notRecognized(topoTool, lines, "matrix header row starting with GPU0")
	}
	hdr, err := parseTopoHeader(lines[h])
	if err != nil {
		return Topology{}, err
	}
	t := Topology{Links: map[string]map[string]string{}}
	for _, d := range hdr.devices {
		t.Devices = append(t.Devices, d.text)
	}
	end, err := t.parseRows(hdr, lines[h+1:])
	if err != nil {
		return t, err
	}
	t.NICNames = parseNICLegend(lines[h+1+end:])
	return t, t.checkComplete(lines[h])
}

// topoHeaderIndex finds the header row: its first word is GPU0. The row
// label column is blank in the header, so the line starts with whitespace;
// a dedented capture is still told apart from the GPU0 row because that
// row's next cell is "X" (the GPU itself).
func topoHeaderIndex(lines []line) int {
	for i, l := range lines {
		f := strings.Fields(l.text)
		if len(f) == 0 || f[0] != "GPU0" {
			continue
		}
		if l.text[0] == ' ' || l.text[0] == '\t' || len(f) == 1 || f[1] != "X" {
			return i
		}
	}
	return -1
}

func parseTopoHeader(l line) (topoHeader, error) {
	hdr := topoHeader{tabs: strings.Contains(l.text, "\t")}
	var cells []cell
	if hdr.tabs {
		for _, c := range splitTabs(l.text) {
			if c.text != "" {
				cells = append(cells, c)
			}
		}
	} else {
		cells = joinPhrases(splitWords(l.text))
	}
	i := 0
	for i < len(cells) && reTopoDevice.MatchString(cells[i].text) {
		i++
	}
	hdr.devices, hdr.attrs = cells[:i], cells[i:]
	seen := map[string]bool{}
	for _, d := range hdr.devices {
		if seen[d.text] {
			return hdr, malformed(topoTool, l, "column %s appears twice", d.text)
		}
		seen[d.text] = true
	}
	return hdr, nil
}

// parseRows reads matrix rows until a blank line or the legend and returns
// how many lines it consumed.
func (t *Topology) parseRows(hdr topoHeader, lines []line) (int, error) {
	for i, l := range lines {
		trimmed := strings.TrimSpace(l.text)
		if trimmed == "" || strings.HasPrefix(trimmed, "Legend") {
			return i, nil
		}
		// A row without tabs under a tab header was re-spaced by hand;
		// words are all that is left to split it by.
		var cells []cell
		if hdr.tabs && strings.Contains(l.text, "\t") {
			cells = splitTabs(strings.TrimLeft(l.text, " "))
		} else {
			cells = splitWords(l.text)
		}
		if err := t.addRow(hdr, l, cells); err != nil {
			return i, err
		}
	}
	return len(lines), nil
}

func (t *Topology) addRow(hdr topoHeader, l line, cells []cell) error {
	label := cells[0].text
	if _, dup := t.Links[label]; dup {
		return malformed(topoTool, l, "row %s appears twice", label)
	}
	if !contains(t.Devices, label) {
		return malformed(topoTool, l, "row %q is not a column of the header", label)
	}
	nd := len(hdr.devices)
	if len(cells)-1 < nd {
		return malformed(topoTool, l, "row %s has %d link cells, header has %d devices", label, len(cells)-1, nd)
	}
	row := make(map[string]string, nd)
	for j, d := range t.Devices {
		v := cells[1+j].text
		if v == "" {
			return malformed(topoTool, l, "row %s: empty cell under %s", label, d)
		}
		row[d] = v
	}
	t.Links[label] = row
	if !reTopoGPU.MatchString(label) {
		return nil // only GPU rows carry affinities
	}
	attrs, err := alignAttrs(hdr, cells[1+nd:])
	if err != nil {
		return malformed(topoTool, l, "row %s: %v", label, err)
	}
	t.setAffinities(hdr, label, attrs)
	return nil
}

// alignAttrs lines the cells after the link cells up with the header's
// attribute columns, returning one value per attribute column (missing
// trailing cells become "").
func alignAttrs(hdr topoHeader, cells []cell) ([]string, error) {
	out := make([]string, len(hdr.attrs))
	if hdr.tabs {
		// nvidia-smi prints an extra tab before "GPU NUMA ID", so GPU rows
		// carry one empty cell more than the header has columns. Drop empty
		// cells from the right (never the last cell) until the counts match.
		cells = append([]cell(nil), cells...)
		for len(cells) > len(out) {
			k := lastEmpty(cells)
			if k < 0 {
				return nil, fmt.Errorf("%d cells after the links, header has %d attribute columns", len(cells), len(out))
			}
			cells = append(cells[:k], cells[k+1:]...)
		}
		for i, c := range cells {
			out[i] = c.text
		}
		return out, nil
	}
	// Spaces only: empty cells vanished without a trace, so the values are
	// placed from the right. The one GPU-row cell nvidia-smi leaves empty is
	// CPU Affinity (cgroup-limited jobs); NUMA Affinity and GPU NUMA ID print
	// "N/A" instead, so the missing cells are the leftmost ones.
	if len(cells) > len(out) {
		return nil, fmt.Errorf("%d cells after the links, header has %d attribute columns", len(cells), len(out))
	}
	off := len(out) - len(cells)
	for i, c := range cells {
		out[off+i] = c.text
	}
	return out, nil
}

func lastEmpty(cells []cell) int {
	for k := len(cells) - 2; k >= 0; k-- {
		if cells[k].text == "" {
			return k
		}
	}
	return -1
}

func (t *Topology) setAffinities(hdr topoHeader, gpu string, values []string) {
	for i, a := range hdr.attrs {
		switch strings.ToLower(a.text) {
		case "cpu affinity":
			if t.CPUAffinity == nil {
				t.CPUAffinity = map[string]string{}
			}
			t.CPUAffinity[gpu] = values[i]
		case "numa affinity":
			if t.NUMAAffinity == nil {
				t.NUMAAffinity = map[string]string{}
			}
			t.NUMAAffinity[gpu] = values[i]
		}
	}
}

// checkComplete reports a matrix that lost rows (a truncated capture): every
// header column must also have a row.
func (t *Topology) checkComplete(header line) error {
	for _, d := range t.Devices {
		if _, ok := t.Links[d]; !ok {
			return malformed(topoTool, header, "no matrix row for column %s (output truncated?)", d)
		}
	}
	return nil
}

// parseNICLegend reads "NIC0: mlx5_0" lines after a "NIC Legend:" line.
func parseNICLegend(lines []line) map[string]string {
	var names map[string]string
	in := false
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		if strings.HasPrefix(t, "NIC Legend") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if m := reTopoLegend.FindStringSubmatch(t); m != nil {
			if names == nil {
				names = map[string]string{}
			}
			names[m[1]] = m[2]
		}
	}
	return names
}

// splitTabs splits on tabs, trimming each cell (nvidia-smi pads "X" as " X ").
func splitTabs(s string) []cell {
	parts := strings.Split(s, "\t")
	out := make([]cell, len(parts))
	for i, p := range parts {
		out[i] = cell{text: strings.TrimSpace(p)}
	}
	return out
}

// splitWords splits on runs of whitespace, remembering where each word starts.
func splitWords(s string) []cell {
	var out []cell
	start := -1
	for i := 0; i <= len(s); i++ {
		space := i == len(s) || s[i] == ' ' || s[i] == '\t'
		switch {
		case !space && start < 0:
			start = i
		case space && start >= 0:
			out = append(out, cell{text: s[start:i], pos: start})
			start = -1
		}
	}
	return out
}

// joinPhrases rejoins header words separated by a single space into one
// column name ("CPU Affinity"), once past the device columns; columns are
// separated by wider gaps.
func joinPhrases(words []cell) []cell {
	var out []cell
	for _, w := range words {
		if n := len(out); n > 0 && !reTopoDevice.MatchString(w.text) &&
			!reTopoDevice.MatchString(out[n-1].text) && w.pos == out[n-1].pos+len(out[n-1].text)+1 {
			out[n-1].text += " " + w.text
			continue
		}
		out = append(out, w)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
