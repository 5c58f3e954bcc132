// Package fabric judges collective benchmarks (nccl-tests output) against
// the provider's quote, by the measurement rules of DESIGN.md: gate on
// large messages only, report the distribution and the per-GPU wire rate,
// and fail any run that computed wrong results, whatever its speed.
package fabric

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
)

// DefaultGate is the smallest message size judged when the quote does not
// name one: below it latency, not bandwidth, dominates.
const DefaultGate int64 = 1 << 30

// Judgement is what one benchmark log says about the fabric.
type Judgement struct {
	Collective string  `json:"collective"`
	Ranks      int     `json:"ranks"`
	Hosts      int     `json:"hosts"`
	Scope      string  `json:"scope"` // "inter" (across nodes) or "intra" (inside one node)
	GateBytes  int64   `json:"gate_bytes"`
	GateRows   int     `json:"gate_rows"` // rows at or above the gate
	BusBW      Spread  `json:"busbw_gbs"` // out-of-place busbw over the gating window
	WireRate   float64 `json:"wire_rate_gbs,omitempty"`
	Quoted     float64 `json:"quoted_gbs,omitempty"`
	// Verdicts: NCCL-001 results correct; NCCL-002 (inter) or NCCL-003
	// (intra) bandwidth against the quote. A sweep's record keeps only
	// those that did not pass.
	Verdicts []record.Verdict `json:"verdicts,omitempty"`
}

// Spread is a distribution's summary.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Judge reads one nccl-tests result against inv's quote. node names the
// node for an intra-node run ("" for the cluster).
func Judge(r parse.NCCL, inv *inventory.Inventory, node string) Judgement {
	j := Judgement{Collective: r.Collective, Ranks: len(r.Ranks), Hosts: hosts(r), GateBytes: DefaultGate}
	if inv.Quote.BusBWSize > 0 {
		j.GateBytes = int64(inv.Quote.BusBWSize)
	}
	j.Scope, j.Quoted = "intra", inv.Quote.IntraBusBWGBs
	id := "NCCL-003"
	if j.Hosts > 1 {
		j.Scope, j.Quoted, id = "inter", inv.Quote.InterBusBWGBs, "NCCL-002"
	}
	j.Verdicts = append(j.Verdicts, correctness(r, node))

	rows, note := gateRows(r.Rows, j.GateBytes)
	j.GateRows = len(rows)
	var bw []float64
	for _, row := range rows {
		bw = append(bw, busBW(r, row))
	}
	v := record.NewVerdict(id, node)
	if c := orAll(r.Collective); c != "all_reduce" {
		// A provider's log of another collective (gpuaccept parse): the
		// requirement is the same, the title names what was measured.
		v.Title = strings.Replace(v.Title, "all_reduce", c, 1)
	}
	if len(bw) == 0 {
		v.Status, v.Detail = record.Fail, "no result rows in the log"
		j.Verdicts = append(j.Verdicts, v)
		return j
	}
	j.BusBW = SpreadOf(bw)
	j.WireRate = WireRate(j.BusBW.Median, j.Hosts, j.Ranks)
	v.Measure(j.BusBW.Median, record.UnitGBs)
	v.Measured = fmt.Sprintf("%.2f GB/s median (%.2f..%.2f) over %d size(s) ≥ %s", j.BusBW.Median, j.BusBW.Min, j.BusBW.Max, len(bw), size(j.GateBytes))
	if note != "" {
		v.Detail = note
	}
	if msg := busbwConsistency(r, rows); msg != "" {
		v.Detail = join(v.Detail, msg)
	}
	tol := inv.Acceptance.ToleranceFor(id)
	switch {
	case j.Quoted <= 0:
		v.Status, v.Detail = record.Skip, join(v.Detail, "not stated in the quote")
	default:
		ratio := j.BusBW.Median / j.Quoted
		v.Quoted, v.Ratio, v.Tolerance = fmt.Sprintf("%.2f GB/s", j.Quoted), &ratio, &tol
		v.Status = record.Pass
		if ratio < tol {
			v.Status = record.Fail
		} else if note != "" {
			v.Status = record.Warn
		}
	}
	j.Verdicts = append(j.Verdicts, v)
	return j
}

// correctness: a collective that computed wrong results is a failed run,
// however fast it was.
func correctness(r parse.NCCL, node string) record.Verdict {
	v := record.NewVerdict("NCCL-001", node)
	v.Status, v.Measured = record.Pass, "0 wrong"
	var wrong int64
	for _, row := range r.Rows {
		for _, res := range []parse.NCCLResult{row.OOP, row.IP} {
			if res.Wrong != nil {
				wrong += *res.Wrong
			}
		}
	}
	var msgs []string
	for _, e := range r.Errors {
		msgs = append(msgs, join(e.Host, e.Message))
	}
	switch {
	case wrong > 0:
		v.Status, v.Measured = record.Fail, fmt.Sprintf("%d wrong", wrong)
	case r.OutOfBounds > 0:
		v.Status, v.Measured = record.Fail, fmt.Sprintf("%d out of bounds", r.OutOfBounds)
	case !r.OK:
		v.Status, v.Measured = record.Fail, "the run reported a failure"
	}
	for _, m := range msgs {
		v.Detail = join(v.Detail, m)
	}
	return v
}

// gateRows are the rows at or above the gate; when the sweep stopped below
// it, the largest size stands in, with a note.
func gateRows(rows []parse.NCCLRow, gate int64) ([]parse.NCCLRow, string) {
	var out []parse.NCCLRow
	var largest int64
	for _, r := range rows {
		largest = max(largest, r.Size)
		if r.Size >= gate {
			out = append(out, r)
		}
	}
	if len(out) > 0 || len(rows) == 0 {
		return out, ""
	}
	for _, r := range rows {
		if r.Size == largest {
			out = append(out, r)
		}
	}
	return out, fmt.Sprintf("the sweep stops at %s, below the %s the quote applies to: judged on the largest size", size(largest), size(gate))
}

// busBW is the row's out-of-place bus bandwidth, recomputed from size and
// time as nccl-tests computes it: the printed column has two decimals,
// which on slow links (0.02 GB/s) is a coarse instrument.
func busBW(r parse.NCCL, row parse.NCCLRow) float64 {
	f := factor(r.Collective, len(r.Ranks))
	if f == 0 || row.OOP.TimeUS <= 0 {
		return row.OOP.BusBW
	}
	algbw := float64(row.Size) / row.OOP.TimeUS / 1e3 // bytes/µs → GB/s
	return algbw * f
}

// factor is nccl-tests' busbw/algbw ratio for n ranks; 0 when unknown.
func factor(collective string, ranks int) float64 {
	n := float64(ranks)
	if n < 2 {
		return 0
	}
	switch collective {
	case "all_reduce":
		return 2 * (n - 1) / n
	case "all_gather", "reduce_scatter", "alltoall":
		return (n - 1) / n
	}
	return 0
}

// busbwConsistency checks the printed busbw against algbw × the
// collective's factor: a log whose numbers do not add up was not produced
// by nccl-tests as we know it.
func busbwConsistency(r parse.NCCL, rows []parse.NCCLRow) string {
	n := len(r.Ranks)
	f := factor(r.Collective, n)
	if f == 0 {
		return ""
	}
	for _, row := range rows {
		want := row.OOP.AlgBW * f
		// Both columns are printed with two decimals: below 1 GB/s the
		// rounding alone exceeds 2%.
		if want >= 1 && math.Abs(row.OOP.BusBW-want)/want > 0.02 {
			return fmt.Sprintf("busbw %.2f at %s is not algbw × %.3f (%.2f) for %d ranks", row.OOP.BusBW, size(row.Size), f, want, n)
		}
	}
	return ""
}

func hosts(r parse.NCCL) int {
	var hs []string
	for _, rk := range r.Ranks {
		if !slices.Contains(hs, rk.Host) {
			hs = append(hs, rk.Host)
		}
	}
	return len(hs)
}

// WireRate is what each GPU's share of the fabric carried: busbw ×
// (k−1)/(n−1) for k nodes and n ranks; 0 inside one node.
func WireRate(busbw float64, hosts, ranks int) float64 {
	if hosts < 2 || ranks < 2 {
		return 0
	}
	return busbw * float64(hosts-1) / float64(ranks-1)
}

// SpreadOf summarises measurements; xs must not be empty.
func SpreadOf(xs []float64) Spread {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Min: s[0], Median: med, Max: s[len(s)-1]}
}

func size(b int64) string { return inventory.Bytes(b).String() }

func orAll(c string) string {
	if c == "" {
		return "collective"
	}
	return c
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
