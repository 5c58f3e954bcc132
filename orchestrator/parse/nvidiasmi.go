package parse

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// nvidia-smi prints these instead of (or in the middle of) its normal output
// when the driver or a GPU is in trouble. They are findings, not noise: a
// node whose nvidia-smi cannot talk to the driver must not look like a node
// with a parse problem.
var nvsmiFailurePrefixes = []string{
	"NVIDIA-SMI has failed",
	"Failed to initialize NVML",
	"Unable to determine the device handle for",
	"Couldn't find libnvidia-ml.so",
	"NVML library version mismatch",
}

// nvsmiNoDevices is what nvidia-smi prints when the driver works but sees no
// GPU. It is a valid, empty answer rather than a failure.
const nvsmiNoDevices = "No devices were found"

// nvsmiFailures returns the tool-failure lines found in the output.
func nvsmiFailures(lines []line) []string {
	var msgs []string
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		if strings.Contains(t, "is not a valid field to query") {
			msgs = append(msgs, fmt.Sprintf("line %d: %s", l.no, t))
			continue
		}
		for _, p := range nvsmiFailurePrefixes {
			if strings.HasPrefix(t, p) {
				msgs = append(msgs, fmt.Sprintf("line %d: %s", l.no, t))
				break
			}
		}
	}
	return msgs
}

// nvsmiFailureError wraps failure lines into one ErrToolFailed error.
func nvsmiFailureError(tool string, msgs []string) error {
	return fmt.Errorf("%s: %w: %s", tool, ErrToolFailed, strings.Join(msgs, "; "))
}

// hasNoDevices reports whether nvidia-smi said it found no GPU.
func hasNoDevices(lines []line) bool {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l.text), nvsmiNoDevices) {
			return true
		}
	}
	return false
}

// GPU is one line of `nvidia-smi -L`, with the MIG devices listed under it.
type GPU struct {
	Index int         `json:"index"`
	Name  string      `json:"name"`
	UUID  string      `json:"uuid"`
	MIG   []MIGDevice `json:"mig,omitempty"`
}

// MIGDevice is an indented "MIG <profile> Device <n>: (UUID: ...)" line.
type MIGDevice struct {
	Index   int    `json:"index"`
	Profile string `json:"profile"`
	UUID    string `json:"uuid"`
}

var (
	// "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)". The colon must be
	// followed by a space: "GPU 00000000:18:00.0" (a -q section header) is
	// not a -L line.
	reListGPU = regexp.MustCompile(`^GPU\s+(\d+):\s+(.*)$`)
	// "MIG 3g.40gb     Device  0: (UUID: MIG-...)"; drivers before R470
	// printed "MIG 1g.5gb Device 0: (UUID: MIG-GPU-.../1/0)", same shape.
	reListMIG = regexp.MustCompile(`^MIG\s+(\S+)\s+Device\s+(\d+):\s*(.*)$`)
)

const listTool = "nvidia-smi -L"

// NvidiaSmiList parses `nvidia-smi -L`. MIG device lines are attached to the
// GPU line above them. "No devices were found" yields an empty list and no
// error; a driver failure message yields ErrToolFailed next to whatever GPUs
// were listed before it.
func NvidiaSmiList(text string) ([]GPU, error) {
	lines := splitLines(text)
	gpus := []GPU{}
	seen := map[int]bool{}
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		if m := reListGPU.FindStringSubmatch(t); m != nil {
			g, err := listGPU(l, m)
			if err != nil {
				return gpus, err
			}
			if seen[g.Index] {
				return gpus, malformed(listTool, l, "GPU index %d listed twice", g.Index)
			}
			seen[g.Index] = true
			gpus = append(gpus, g)
			continue
		}
		if m := reListMIG.FindStringSubmatch(t); m != nil {
			if len(gpus) == 0 {
				return gpus, malformed(listTool, l, "MIG device before any GPU line")
			}
			mig, err := listMIG(l, m)
			if err != nil {
				return gpus, err
			}
			last := &gpus[len(gpus)-1]
			last.MIG = append(last.MIG, mig)
		}
		// Anything else is noise: a prompt, "| head" cut marks, banners.
	}
	if msgs := nvsmiFailures(lines); len(msgs) > 0 {
		return gpus, nvsmiFailureError(listTool, msgs)
	}
	if len(gpus) == 0 && !hasNoDevices(lines) {
		return gpus, notRecognized(listTool, lines, `"GPU <n>: <name> (UUID: ...)" line`)
	}
	return gpus, nil
}

func listGPU(l line, m []string) (GPU, error) {
	idx, err := strconv.Atoi(m[1])
	if err != nil {
		return GPU{}, malformed(listTool, l, "GPU index %q is not a number", m[1])
	}
	name, uuid, err := splitUUID(m[2])
	if err != nil {
		return GPU{}, malformed(listTool, l, "%v", err)
	}
	if name == "" {
		return GPU{}, malformed(listTool, l, "GPU %d has no name", idx)
	}
	return GPU{Index: idx, Name: name, UUID: uuid}, nil
}

func listMIG(l line, m []string) (MIGDevice, error) {
	idx, err := strconv.Atoi(m[2])
	if err != nil {
		return MIGDevice{}, malformed(listTool, l, "MIG device index %q is not a number", m[2])
	}
	rest, uuid, err := splitUUID(m[3])
	if err != nil {
		return MIGDevice{}, malformed(listTool, l, "%v", err)
	}
	if rest != "" || uuid == "" {
		return MIGDevice{}, malformed(listTool, l, "MIG device %d: expected only \"(UUID: ...)\" after the colon", idx)
	}
	return MIGDevice{Index: idx, Profile: m[1], UUID: uuid}, nil
}

// splitUUID splits "<name> (UUID: <uuid>)" into its parts. The last
// "(UUID:" is used because a product name may itself contain parentheses.
// A line without a UUID (some virtualised drivers) gives an empty UUID.
func splitUUID(s string) (name, uuid string, err error) {
	i := strings.LastIndex(s, "(UUID:")
	if i < 0 {
		return strings.TrimSpace(s), "", nil
	}
	tail := s[i+len("(UUID:"):]
	j := strings.IndexByte(tail, ')')
	if j < 0 {
		return "", "", fmt.Errorf("unterminated \"(UUID:\"")
	}
	if strings.TrimSpace(tail[j+1:]) != "" {
		return "", "", fmt.Errorf("unexpected text after the UUID")
	}
	uuid = strings.TrimSpace(tail[:j])
	if uuid == "" || strings.ContainsAny(uuid, " \t") {
		return "", "", fmt.Errorf("UUID %q is empty or contains spaces", uuid)
	}
	return strings.TrimSpace(s[:i]), uuid, nil
}
