package phases

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// Bounds on what a node's gemm.py may claim: no GPU index past this, no
// rate past this (a B200 is ~2,250 dense bf16 TFLOP/s), nor more lines.
const (
	maxGemmGPU    = 1023
	maxGemmTFLOPS = 1e5
	maxGemmLines  = 1024
)

// parseGemm reads gemm.py's GPU lines (see its header for the contract):
// "GPUACCEPT gemm gpu=I tflops=X iters=N secs=S ... device=NAME" and
// "GPUACCEPT gemm error gpu=I msg=TEXT". A line whose figures are not
// numbers in range is left out: a hostile node cannot plant a rate.
func parseGemm(out string) []GemmGPU {
	var gs []GemmGPU
	for line := range strings.Lines(out) {
		_, rest, ok := strings.Cut(line, "GPUACCEPT gemm ")
		if !ok {
			continue
		}
		rest = strings.TrimRight(rest, "\r\n")
		isErr := false
		if r, ok := strings.CutPrefix(rest, "error "); ok {
			rest, isErr = r, true
		}
		kv, tail := gemmPairs(rest)
		g := GemmGPU{GPU: -1}
		if i, err := strconv.Atoi(kv["gpu"]); err == nil && i >= 0 && i <= maxGemmGPU {
			g.GPU = i
		}
		if g.GPU < 0 || slices.ContainsFunc(gs, func(o GemmGPU) bool { return o.GPU == g.GPU }) {
			continue
		}
		if isErr {
			g.Error = clip(firstNonEmpty(gemmText(tail["msg"]), "failed"), 200)
			gs = append(gs, g)
			continue
		}
		tf, err1 := strconv.ParseFloat(kv["tflops"], 64)
		it, err2 := strconv.ParseInt(kv["iters"], 10, 64)
		secs, err3 := strconv.ParseFloat(kv["secs"], 64)
		if err1 != nil || err2 != nil || err3 != nil || !finite(tf) || !finite(secs) ||
			tf < 0 || tf > maxGemmTFLOPS || it <= 0 || secs <= 0 {
			continue
		}
		g.TFLOPS, g.Iters, g.Secs = tf, it, secs
		if on := kv["on"]; on == "cuda" || on == "cpu" {
			g.On = on
		}
		g.Device = clip(gemmText(tail["device"]), 64)
		gs = append(gs, g)
		if len(gs) >= maxGemmLines {
			break
		}
	}
	slices.SortFunc(gs, func(a, b GemmGPU) int { return a.GPU - b.GPU })
	return gs
}

// gemmPairs splits "k=v k=v ... device=NAME WITH SPACES": the pairs, and
// the keys that run to the end of the line (device, msg) apart.
func gemmPairs(s string) (map[string]string, map[string]string) {
	kv, tail := map[string]string{}, map[string]string{}
	for s != "" {
		s = strings.TrimLeft(s, " ")
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsRune(k, ' ') {
			break
		}
		if k == "device" || k == "msg" {
			tail[k] = v
			break
		}
		v, s, _ = strings.Cut(v, " ")
		kv[k] = v
	}
	return kv, tail
}

// gemmText keeps what a node said printable: letters, digits, spaces and
// plain punctuation; anything else (a terminal's escapes) becomes '?'.
func gemmText(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// gemmDone says whether gemm.py got to its end.
func gemmDone(out string) bool {
	for line := range strings.Lines(out) {
		if strings.TrimSpace(line) == "GPUACCEPT gemm done" {
			return true
		}
	}
	return false
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// gemmSummary is each GPU's median over the runs that measured it.
func gemmSummary(runs []BurninRun) *GemmSummary {
	by := map[int][]float64{}
	last := map[int]GemmGPU{}
	for _, r := range runs {
		for _, g := range r.GPUs {
			if g.Error != "" {
				continue
			}
			by[g.GPU] = append(by[g.GPU], g.TFLOPS)
			last[g.GPU] = g
		}
	}
	if len(by) == 0 {
		return nil
	}
	s := &GemmSummary{}
	for gpu, xs := range by {
		g := last[gpu]
		g.TFLOPS = median(xs)
		g.Iters, g.Secs = 0, 0
		s.GPUs = append(s.GPUs, g)
	}
	slices.SortFunc(s.GPUs, func(a, b GemmGPU) int { return a.GPU - b.GPU })
	return s
}
