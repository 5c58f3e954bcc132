package workload

import (
	"math"
	"slices"
)

// NewDist is the distribution of samples. Quantiles interpolate linearly
// between the two nearest ranks (numpy's default, which vLLM's bench serve
// reports), so gpuaccept's p99 and a buyer's own are the same figure over
// the same samples. NaN and infinite samples are left out: a figure that
// was not measured is not a sample. The samples are not modified.
func NewDist(samples []float64) Dist {
	s := make([]float64, 0, len(samples))
	sum := 0.0
	for _, x := range samples {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		s = append(s, x)
		sum += x
	}
	if len(s) == 0 {
		return Dist{}
	}
	slices.Sort(s)
	d := Dist{
		N:    len(s),
		Mean: sum / float64(len(s)),
		Min:  s[0],
		Max:  s[len(s)-1],
		P50:  quantile(s, 0.50),
		P90:  quantile(s, 0.90),
		P95:  quantile(s, 0.95),
		P99:  quantile(s, 0.99),
		CDF:  make([]float64, 21),
	}
	for i := range d.CDF {
		d.CDF[i] = quantile(s, float64(i)/20)
	}
	return d
}

// quantile of sorted s at q in [0, 1], interpolated between ranks.
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	frac := pos - float64(lo)
	if frac == 0 {
		return s[lo]
	}
	return s[lo] + (s[hi]-s[lo])*frac
}
