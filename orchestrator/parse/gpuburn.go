package parse

import (
	"regexp"
	"strconv"
	"strings"
)

// GPUBurn is what the record reads of gpu-burn's (wilicc/gpu-burn) output:
// its closing summary, "Tested N GPUs:" then a line "GPU n: OK" or
// "GPU n: FAULTY" per GPU (tab-indented; ../shared/samples/gpu-burn).
// Summary is false when no summary was printed (an older build, a run cut
// short): then the exit status is all there is. gpu-burn exits 0 with
// FAULTY GPUs (issue #12's sample), so the summary is read, not trusted to
// the exit.
type GPUBurn struct {
	Summary bool
	Tested  int
	Faulty  []int
}

var (
	gpuBurnTested = regexp.MustCompile(`^Tested (\d{1,4}) GPUs:\s*$`)
	gpuBurnGPU    = regexp.MustCompile(`^\s+GPU (\d{1,4}): (OK|FAULTY)\s*$`)
)

// maxGPUBurnGPUs bounds what a node's output may claim.
const maxGPUBurnGPUs = 1024

// ParseGPUBurn reads the last summary in out. Progress lines are joined
// by carriage returns on one physical line; they are split there too.
func ParseGPUBurn(out string) GPUBurn {
	var g GPUBurn
	in := false
	for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if m := gpuBurnTested.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			g, in = GPUBurn{Summary: true, Tested: min(n, maxGPUBurnGPUs)}, true
			continue
		}
		m := gpuBurnGPU.FindStringSubmatch(line)
		if !in || m == nil {
			in = in && m != nil
			continue
		}
		if i, _ := strconv.Atoi(m[1]); m[2] == "FAULTY" && len(g.Faulty) < maxGPUBurnGPUs {
			g.Faulty = append(g.Faulty, i)
		}
	}
	return g
}
