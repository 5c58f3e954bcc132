package telemetry

import (
	"slices"
	"time"
)

// Stat is a figure's distribution over a phase: N samples.
type Stat struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// GPUPhase is one GPU's figures over one phase.
type GPUPhase struct {
	Phase   string `json:"phase"`
	GPU     int    `json:"gpu"`
	Temp    Stat   `json:"temp_c"`
	Power   Stat   `json:"power_w"`
	SMClock Stat   `json:"sm_clock_mhz"`
	Util    Stat   `json:"util_pct"`
}

// Summarise gives each GPU's min / median / max per phase, in the order of
// spans and then of GPU index; a phase no sample fell in has no entry.
func Summarise(s *Series, spans []Span) []GPUPhase {
	if s == nil {
		return nil
	}
	var out []GPUPhase
	for _, sp := range spans {
		by := map[int]*[4][]float64{}
		for i := range s.GPUs {
			g := &s.GPUs[i]
			if !sp.contains(g.At) {
				continue
			}
			v := by[g.Index]
			if v == nil {
				v = &[4][]float64{}
				by[g.Index] = v
			}
			for k, p := range []*float64{g.TempC, g.PowerW, g.SMClockMHz, g.UtilPct} {
				if p != nil {
					v[k] = append(v[k], *p)
				}
			}
		}
		idx := make([]int, 0, len(by))
		for i := range by {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			v := by[i]
			out = append(out, GPUPhase{Phase: sp.Phase, GPU: i,
				Temp: stat(v[0]), Power: stat(v[1]), SMClock: stat(v[2]), Util: stat(v[3])})
		}
	}
	return out
}

func (sp Span) contains(t time.Time) bool {
	return !t.Before(sp.Start) && t.Before(sp.End)
}

// stat sorts xs in place.
func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	slices.Sort(xs)
	n := len(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return Stat{Min: xs[0], Median: med, Max: xs[n-1], N: n}
}
