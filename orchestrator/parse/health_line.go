package parse

import (
	"strconv"
	"strings"
)

// KernelLineEvents reads one kernel log line as it arrives from a stream
// (the window's sampler reads the log line by line): its Xid, SXid or
// off-bus events, as ParseKernelLog would find them in a whole log. before
// holds the lines that came just before it, oldest first: the driver names
// a GPU that fell off the bus up to two lines ahead of the line that says
// so. A line the NVIDIA drivers did not write has no event.
func KernelLineEvents(line string, before ...string) []KernelEvent {
	line = strings.TrimRight(normalize(line), "\n")
	if !kernelLine(line) {
		return nil
	}
	text := clipLine(strings.TrimSpace(line))
	if m := reXid.FindStringSubmatch(line); m != nil {
		code, _ := strconv.Atoi(m[2])
		out := []KernelEvent{{Kind: "xid", Device: m[1], Code: code, Text: text}}
		if code == 79 {
			out = append(out, KernelEvent{Kind: "off-bus", Device: m[1], Text: text})
		}
		return out
	}
	if m := reSXid.FindStringSubmatch(line); m != nil {
		code, _ := strconv.Atoi(m[2])
		return []KernelEvent{{Kind: "sxid", Device: m[1], Code: code, Text: text}}
	}
	if !reOffBus.MatchString(line) {
		return nil
	}
	dev := ""
	ctx := append(before[max(0, len(before)-2):len(before):len(before)], line)
	for j := len(ctx) - 1; j >= 0 && dev == ""; j-- {
		if m := reGPUPCI.FindStringSubmatch(ctx[j]); m != nil {
			dev = m[1]
		}
	}
	return []KernelEvent{{Kind: "off-bus", Device: dev, Text: text}}
}
