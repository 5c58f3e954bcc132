package billing

import (
	"strconv"
	"strings"
)

// TimeUnit reads a billing unit as time: the seconds one unit stands for,
// and whether it counts one GPU's time rather than the node's. Azure
// writes a multiplier into the unit ("10 Hours"). ok is false for a unit
// that is not time (GB, requests): such a line has a cost but no billed
// time.
func TimeUnit(unit string) (secs float64, perGPU, ok bool) {
	u := strings.ToLower(strings.TrimSpace(unit))
	mult := 1.0
	if num, rest, cut := strings.Cut(u, " "); cut {
		if m, err := strconv.ParseFloat(num, 64); err == nil && m > 0 && m < 1e6 {
			mult, u = m, strings.TrimSpace(rest)
		}
	}
	if strings.Contains(u, "gpu") {
		perGPU = true
		u = strings.NewReplacer("gpu-", "", "gpu ", "", "gpu", "").Replace(u)
		u = strings.TrimSpace(u)
	}
	switch u {
	case "s", "sec", "secs", "second", "seconds":
		secs = 1
	case "min", "mins", "minute", "minutes":
		secs = 60
	case "h", "hr", "hrs", "hour", "hours":
		secs = 3600
	case "d", "day", "days":
		secs = 86400
	default:
		return 0, false, false
	}
	return secs * mult, perGPU, true
}

// NodeSeconds is the node time a line bills on a node of gpus GPUs; ok is
// false when its unit is not time. Google bills a GPU attached to an
// instance by its own SKU, in seconds of one GPU ("Nvidia H100 80GB GPU
// running in Americas"), so a Google line whose SKU names a GPU counts
// per GPU.
//
// A line without a unit (a generic export that maps none) bills its own
// span: its start to its end, unless it only names its day.
func (l Line) NodeSeconds(f Format, gpus int) (float64, bool) {
	if strings.TrimSpace(l.Unit) == "" {
		if l.Daily || !l.End.After(l.Start) {
			return 0, false
		}
		return l.End.Sub(l.Start).Seconds(), true
	}
	secs, perGPU, ok := TimeUnit(l.Unit)
	if !ok {
		return 0, false
	}
	if gpuSKU(f, l.Item) {
		perGPU = true
	}
	s := l.Quantity * secs
	if perGPU && gpus > 0 {
		s /= float64(gpus)
	}
	return s, true
}

// gpuSKU: a Google line whose SKU names a GPU bills one GPU's time.
func gpuSKU(f Format, item string) bool {
	return f == GCP && strings.Contains(strings.ToLower(item), "gpu")
}
