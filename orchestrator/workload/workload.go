// Package workload is the load test's evidence: what the representative
// workload (the buyer's training job or inference server) measured on
// every node, as run.json keeps it. The load generator writes it on the
// node, the workload phase records it, judges and reports read it; it
// imports nothing of the window so that all three can.
package workload

// Dist is a distribution of one figure over many samples (requests,
// steps, repeats): never "best of". Quantiles are in the figure's unit.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// CDF is the value at every 5th percentile, 0 to 100 (21 points): the
	// report's CDF per node without the samples.
	CDF []float64 `json:"cdf,omitempty"`
}

// Percentile is the Dist's p50, p90, p95 or p99 (and 0 or 100 its min
// or max); ok is false for any other p or an empty Dist.
func (d Dist) Percentile(p int) (float64, bool) {
	if d.N == 0 {
		return 0, false
	}
	switch p {
	case 0:
		return d.Min, true
	case 50:
		return d.P50, true
	case 90:
		return d.P90, true
	case 95:
		return d.P95, true
	case 99:
		return d.P99, true
	case 100:
		return d.Max, true
	}
	return 0, false
}
