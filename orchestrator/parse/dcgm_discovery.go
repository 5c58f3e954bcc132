package parse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// DCGMDevice is one entity listed by `dcgmi discovery -l`.
type DCGMDevice struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	BusID string `json:"bus_id,omitempty"`
	UUID  string `json:"uuid,omitempty"`
	Kind  string `json:"kind"` // "gpu", "nvswitch", "cpu", ...
}

const discoveryTool = "dcgmi discovery -l"

var (
	// "8 GPUs found.", "1 GPU found.", "0 NvSwitches found.", "2 CPUs found."
	reDiscCount = regexp.MustCompile(`^(\d+)\s+([A-Za-z][A-Za-z ]*?)\s+found\.?$`)
	// "| GPU ID | Device Information |", "| Switch ID |", "| CPU ID | ... |"
	reDiscHeader = regexp.MustCompile(`^\|\s*([A-Za-z][A-Za-z ]*?)\s+ID\s*\|`)
)

// discSection tracks the entity kind being listed and how many the
// "N ... found." line announced, to catch tables that lost rows.
type discSection struct {
	kind     string
	want     int
	got      int
	countAt  line
	hasCount bool
}

// DCGMDiscovery parses `dcgmi discovery -l`: a "N GPUs found." line and a
// table per entity kind, each entity a numbered row followed by "Key: value"
// continuation rows (Name, PCI Bus ID, Device UUID). When a table holds fewer
// entities than its "found" line announced, the entities read so far are
// returned together with an ErrMalformed error.
func DCGMDiscovery(text string) ([]DCGMDevice, error) {
	lines := splitLines(text)
	devs := []DCGMDevice{}
	var sections []*discSection
	var sec *discSection
	var cur *DCGMDevice
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		if m := reDiscCount.FindStringSubmatch(t); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return devs, malformed(discoveryTool, l, "count %q is not a number", m[1])
			}
			sec = &discSection{kind: discKind(m[2]), want: n, countAt: l, hasCount: true}
			sections = append(sections, sec)
			cur = nil
			continue
		}
		if m := reDiscHeader.FindStringSubmatch(t); m != nil {
			if sec == nil || sec.got > 0 {
				sec = &discSection{kind: discKind(m[1])}
				sections = append(sections, sec)
			}
			cur = nil
			continue
		}
		if sec == nil || !strings.HasPrefix(t, "|") {
			continue // borders, noise, and anything before the first section
		}
		d, err := discRow(l, t, sec, cur)
		if err != nil {
			return devs, err
		}
		if d != nil {
			devs = append(devs, *d)
			cur = &devs[len(devs)-1]
			sec.got++
		}
	}
	if len(sections) == 0 {
		return devs, notRecognized(discoveryTool, lines, `"N GPUs found." line or "| GPU ID |" table`)
	}
	return devs, checkDiscCounts(sections)
}

// discRow handles one "| a | b |" row: a numbered first cell starts a new
// entity (returned), an empty first cell adds a "Key: value" to cur.
func discRow(l line, t string, sec *discSection, cur *DCGMDevice) (*DCGMDevice, error) {
	cells := strings.Split(strings.Trim(t, "|"), "|")
	id := strings.TrimSpace(cells[0])
	info := ""
	if len(cells) > 1 {
		info = strings.TrimSpace(strings.Join(cells[1:], "|"))
	}
	if id != "" {
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			return nil, malformed(discoveryTool, l, "entity id %q is not a number", id)
		}
		d := &DCGMDevice{ID: n, Kind: sec.kind}
		setDiscInfo(d, info)
		return d, nil
	}
	if info == "" {
		return nil, nil
	}
	if cur == nil {
		return nil, malformed(discoveryTool, l, "device information before any entity id")
	}
	setDiscInfo(cur, info)
	return nil, nil
}

func setDiscInfo(d *DCGMDevice, info string) {
	k, v, ok := cutKV(info)
	if !ok {
		return
	}
	switch strings.ToLower(k) {
	case "name":
		d.Name = v
	case "pci bus id":
		d.BusID = v
	case "device uuid", "uuid":
		d.UUID = v
	}
}

// discKind maps the words dcgmi uses ("GPUs", "NvSwitches", "Switch", "CPU
// Cores") onto short lower-case kinds.
func discKind(word string) string {
	w := strings.ToLower(strings.TrimSpace(word))
	switch {
	case w == "gpu" || w == "gpus":
		return "gpu"
	case strings.HasPrefix(w, "nvswitch") || w == "switch" || w == "switches":
		return "nvswitch"
	case w == "cpu" || w == "cpus":
		return "cpu"
	case strings.HasPrefix(w, "cpu core"):
		return "cpu_core"
	}
	w = strings.TrimSuffix(w, "s")
	return strings.ReplaceAll(w, " ", "_")
}

func checkDiscCounts(sections []*discSection) error {
	for _, s := range sections {
		if s.hasCount && s.got != s.want {
			return fmt.Errorf("%s: %w: line %d announces %d %s entities, the table lists %d (output truncated?)",
				discoveryTool, ErrMalformed, s.countAt.no, s.want, s.kind, s.got)
		}
	}
	return nil
}
