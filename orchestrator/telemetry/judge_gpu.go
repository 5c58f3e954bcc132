package telemetry

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gpuaccept/orchestrator/record"
)

const noLoad = "no phase loaded the GPUs"

// busyPct: a sample at or above it shows the GPU under load (HEALTH-014);
// stallBusyPct: a stalled GPU reads busy all the time (HEALTH-016).
const (
	busyPct      = 50
	stallBusyPct = 90
)

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
	var faults []perGPU
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
				faults = append(faults, perGPU{i, "from " + j.moment(g.At) + ": " + strings.Join(ReasonNames(f), ", ")})
			}
		}
	}
	if stated == 0 {
		return notMeasured(id, j.node, "the GPUs reported no clock event reasons")
	}
	if len(faults) > 0 {
		v.Status = record.Fail
		v.Detail = list(plural(len(faults), "GPU")+" slowed under load", grouped(faults))
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
	var slow, capped []perGPU
	lowest, lowGPU := math.Inf(1), -1
	for _, i := range j.gpus {
		var xs []float64
		nCap := 0
		first := ""
		for _, g := range j.byGPU[i] {
			// A GPU between two collectives drops to its idle clock: only
			// a busy sample says what the GPU holds under load.
			if !j.load[g] || g.SMClockMHz == nil || g.UtilPct != nil && *g.UtilPct < busyPct {
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
			capped = append(capped, perGPU{i, "at its power limit (SW Power Cap), " + rng + " MHz"})
			continue
		}
		slow = append(slow, perGPU{i, fmt.Sprintf("median %s MHz, no power cap, from %s",
			thousands(st.Median), first)})
	}
	if lowGPU < 0 {
		v := skip(id, j.node, fmt.Sprintf("no GPU was busy (%d%% or more) with its SM clock in a sample of a load phase", busyPct))
		v.Incomplete = v.Detail
		return v
	}
	v.Measured = fmt.Sprintf("%s MHz (GPU %d, median under load)", thousands(lowest), lowGPU)
	v.Measure(lowest, record.UnitMHz)
	r := lowest / base
	v.Ratio = &r
	switch {
	case len(slow) > 0:
		v.Status = record.Fail
		v.Detail = list(plural(len(slow), "GPU")+" below the base clock", grouped(slow))
	case len(capped) > 0:
		v.Status = record.Pass
		v.Detail = list(plural(len(capped), "GPU")+" below the base clock", grouped(capped))
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
		if g.PowerW != nil && (g.UtilPct == nil || *g.UtilPct < stallBusyPct) {
			idle = min(idle, *g.PowerW)
		}
	}
	if math.IsInf(idle, 1) {
		return notMeasured(id, j.node, "no idle power sample to compare the load with")
	}
	v := record.NewVerdict(id, j.node)
	var stalled []perGPU
	busy := 0
	for _, i := range j.gpus {
		run := 0
		for _, g := range j.byGPU[i] {
			on := j.load[g] && g.UtilPct != nil && *g.UtilPct >= stallBusyPct && g.PowerW != nil
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
				stalled = append(stalled, perGPU{i, fmt.Sprintf("%s%% busy at %s W from %s",
					thousands(*gs[k-2].UtilPct), thousands(*gs[k-2].PowerW), j.moment(gs[k-2].At))})
				break
			}
		}
	}
	if busy == 0 {
		// Nothing to judge a stall by: not a PASS.
		return skip(id, j.node, fmt.Sprintf("no GPU was busy (%d%% or more) in a sample of a load phase", stallBusyPct))
	}
	if len(stalled) > 0 {
		v.Status = record.Fail
		v.Detail = list(plural(len(stalled), "GPU")+fmt.Sprintf(" stalled (idle %s W)", thousands(idle)),
			grouped(stalled))
		return v
	}
	v.Status = record.Pass
	v.Detail = fit(fmt.Sprintf("%s, %s busy load samples, none near idle power (%s W)",
		plural(len(j.gpus), "GPU"), thousands(float64(busy)), thousands(idle)))
	return v
}
