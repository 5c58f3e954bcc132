package telemetry

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gpuaccept/orchestrator/record"
)

const noLoad = "no phase loaded the GPUs"

// throttle: HEALTH-011. A fault reason active in a Load span fails the GPU
// at the first such sample; SW Power Cap is the GPU at its power limit,
// recorded as a share of the load samples.
func (j *judge) throttle() record.Verdict {
	const id = "HEALTH-011"
	if len(j.s.GPUs) == 0 {
		return j.noGPUs(id)
	}
	if j.nLoad == 0 {
		return skip(id, j.node, noLoad)
	}
	v := record.NewVerdict(id, j.node)
	var faults []string
	stated, capped := 0, 0
	for _, i := range j.gpus {
		found := false
		for _, g := range j.byGPU[i] {
			if !j.load[g] || g.Reasons == nil {
				continue
			}
			stated++
			if *g.Reasons&ReasonSWPowerCap != 0 {
				capped++
			}
			if f := *g.Reasons & FaultReasons; f != 0 && !found {
				found = true
				faults = append(faults, fmt.Sprintf("GPU %d %s at %s", i,
					strings.Join(ReasonNames(f), ", "), j.moment(g.At)))
			}
		}
	}
	if stated == 0 {
		return notMeasured(id, j.node, "the GPUs reported no clock event reasons")
	}
	if len(faults) > 0 {
		v.Status = record.Fail
		v.Detail = list(plural(len(faults), "GPU")+" slowed under load", faults)
		return v
	}
	v.Status = record.Pass
	v.Detail = fit(fmt.Sprintf("%s, %s load samples; at the power limit (SW Power Cap) in %s",
		plural(len(j.gpus), "GPU"), thousands(float64(stated)), pct(capped, stated)))
	return v
}

// clocks: HEALTH-014. Each GPU's median SM clock over its load samples
// against the quoted base clock; below it at the power limit is the GPU's
// normal state (PASS, recorded), below it otherwise FAIL.
func (j *judge) clocks(base float64) record.Verdict {
	const id = "HEALTH-014"
	if base <= 0 {
		return skip(id, j.node, "the base clock is not stated in the quote")
	}
	if len(j.s.GPUs) == 0 {
		return j.noGPUs(id)
	}
	if j.nLoad == 0 {
		v := skip(id, j.node, noLoad)
		v.Incomplete = noLoad
		return v
	}
	v := record.NewVerdict(id, j.node)
	v.Quoted = thousands(base) + " MHz"
	var slow, capped []string
	lowest, lowGPU := math.Inf(1), -1
	for _, i := range j.gpus {
		var xs []float64
		nCap := 0
		first := ""
		for _, g := range j.byGPU[i] {
			if !j.load[g] || g.SMClockMHz == nil {
				continue
			}
			xs = append(xs, *g.SMClockMHz)
			if g.Reasons != nil && *g.Reasons&ReasonSWPowerCap != 0 {
				nCap++
			}
			if first == "" && *g.SMClockMHz < base {
				first = j.moment(g.At)
			}
		}
		if len(xs) == 0 {
			continue
		}
		st := stat(xs)
		if st.Median < lowest {
			lowest, lowGPU = st.Median, i
		}
		if st.Median >= base {
			continue
		}
		rng := thousands(st.Min) + "-" + thousands(st.Max)
		if st.Min == st.Max {
			rng = thousands(st.Min)
		}
		// At the power limit: the cap held in most of the GPU's load samples.
		if 2*nCap >= len(xs) {
			capped = append(capped, fmt.Sprintf("GPU %d at its power limit (SW Power Cap), %s MHz", i, rng))
			continue
		}
		slow = append(slow, fmt.Sprintf("GPU %d median %s MHz, no power cap, from %s", i,
			thousands(st.Median), first))
	}
	if lowGPU < 0 {
		return notMeasured(id, j.node, "the GPUs reported no SM clock under load")
	}
	v.Measured = fmt.Sprintf("%s MHz (GPU %d, median under load)", thousands(lowest), lowGPU)
	v.Measure(lowest, record.UnitMHz)
	r := lowest / base
	v.Ratio = &r
	switch {
	case len(slow) > 0:
		v.Status = record.Fail
		v.Detail = list(plural(len(slow), "GPU")+" below the base clock", slow)
	case len(capped) > 0:
		v.Status = record.Pass
		v.Detail = list(plural(len(capped), "GPU")+" below the base clock", capped)
	default:
		v.Status = record.Pass
		v.Detail = fit(fmt.Sprintf("%s at or above %s MHz under load (lowest GPU %d: %s MHz)",
			plural(len(j.gpus), "GPU"), thousands(base), lowGPU, thousands(lowest)))
	}
	return v
}

// stall: HEALTH-016. A GPU busy (>= 90%) whose power stays within 10% of
// the node's idle power three samples in a row under load computes
// nothing: a stalled kernel, a hung collective.
func (j *judge) stall() record.Verdict {
	const id = "HEALTH-016"
	if len(j.s.GPUs) == 0 {
		return j.noGPUs(id)
	}
	if j.nLoad == 0 {
		return skip(id, j.node, noLoad)
	}
	// Idle power: the node's lowest power sample of a GPU not busy (a node
	// sampled only under load has no idle figure to compare with).
	idle := math.Inf(1)
	for _, g := range j.s.GPUs {
		if g.PowerW != nil && (g.UtilPct == nil || *g.UtilPct < 90) {
			idle = min(idle, *g.PowerW)
		}
	}
	if math.IsInf(idle, 1) {
		return notMeasured(id, j.node, "no idle power sample to compare the load with")
	}
	v := record.NewVerdict(id, j.node)
	var stalled []string
	busy := 0
	for _, i := range j.gpus {
		run := 0
		for _, g := range j.byGPU[i] {
			on := j.load[g] && g.UtilPct != nil && *g.UtilPct >= 90 && g.PowerW != nil
			if on {
				busy++
			}
			if !on || *g.PowerW > idle*1.1 {
				run = 0
				continue
			}
			if run++; run == 3 {
				// Named at the first of the three.
				gs := j.byGPU[i]
				k := slices.Index(gs, g)
				stalled = append(stalled, fmt.Sprintf("GPU %d %s%% busy at %s W from %s", i,
					thousands(*gs[k-2].UtilPct), thousands(*gs[k-2].PowerW), j.moment(gs[k-2].At)))
				break
			}
		}
	}
	if len(stalled) > 0 {
		v.Status = record.Fail
		v.Detail = list(plural(len(stalled), "GPU")+fmt.Sprintf(" stalled (idle %s W)", thousands(idle)), stalled)
		return v
	}
	v.Status = record.Pass
	v.Detail = fit(fmt.Sprintf("%s, %s busy load samples, none near idle power (%s W)",
		plural(len(j.gpus), "GPU"), thousands(float64(busy)), thousands(idle)))
	return v
}
