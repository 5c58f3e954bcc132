// Package ledger prices a finished window, as the buyers' guides count it:
// cost of completed work = (billed accelerator time without overlap + host
// resources + storage + egress + support or licences) ÷ accepted outputs,
// and, when the inventory gives its inputs, the monthly total cost of
// ownership. It reads the run record and the inventory and nothing else.
package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// HoursPerMonth converts a monthly storage price to the window's time:
// 8760 hours a year over 12 months, as cloud bills count.
const HoursPerMonth = 730

// DefaultGranularity is the billing step when the quote states none.
const DefaultGranularity = "1s"

// Granularity parses quote.billing_granularity ("1s", "1m", "1h"); empty
// is DefaultGranularity.
func Granularity(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		t = DefaultGranularity
	}
	d, err := time.ParseDuration(t)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("quote.billing_granularity: expected the billing step as a duration such as \"1s\", \"1m\" or \"1h\", got %q", s)
	}
	return d, nil
}

// Compute fills the ledger of a finished run. Every rented node is billed
// for the whole window, from its start to its end (a node the idle guard
// released, to its release), rounded up to the
// quote's billing granularity; idle and failed time are diagnostics inside
// that, never added to it. The result is nil (and no error) when there is
// nothing to price: no GPU price, no extra component and no monthly TCO.
func Compute(run *record.Run, inv *inventory.Inventory) (*record.Ledger, error) {
	if run == nil || inv == nil {
		return nil, errors.New("ledger: no run or no inventory")
	}
	q, c := &inv.Quote, &inv.Cost
	tco := monthly(c.Monthly)
	extrasGiven := q.PriceHostPerNodeHour != nil || c.StorageTiB != nil || c.EgressGiB != nil ||
		c.Support != nil || c.Licences != nil
	if q.PricePerGPUHr <= 0 && !extrasGiven && tco == nil {
		return nil, nil
	}
	step, err := Granularity(q.Billing)
	if err != nil {
		return nil, err
	}
	if run.Started.IsZero() {
		return nil, errors.New("ledger: the run has no start time")
	}
	start, end := run.Started, WindowEnd(run)
	span := end.Sub(start)
	billed := RoundUp(span, step)
	billedEnd := start.Add(billed)

	l := &record.Ledger{
		Currency:        q.Currency,
		Granularity:     cmpOr(strings.TrimSpace(q.Billing), DefaultGranularity),
		PricePerGPUHour: q.PricePerGPUHr,
		Nodes:           []record.LedgerNode{},
		Unit:            cmpOr(c.Unit, inventory.DefaultCostUnit),
		TCO:             tco,
	}
	failedVerdict := map[string]bool{}
	for _, v := range run.Verdicts {
		if v.Status == record.Fail && v.Node != "" {
			failedVerdict[v.Node] = true
		}
	}
	var gpuSecs, nodeSecs float64
	accepted := 0
	for _, n := range run.Nodes {
		gpus := gpusOf(q, run.NodeFacts(n.Name))
		qAt := QuarantinedAt(run, n)
		// A node the idle guard released is billed to its release (its
		// teardown's end), as the provider bills one given back then.
		span, billed, billedEnd := span, billed, billedEnd
		if r := n.ReleasedAt; !r.IsZero() && r.After(start) && r.Before(end) {
			span = r.Sub(start)
			billed = RoundUp(span, step)
			billedEnd = start.Add(billed)
		}
		var busy, failed []interval
		for _, p := range run.Phases {
			if p.Outcome == record.Skipped || p.Started.IsZero() || p.Ended.Before(p.Started) {
				continue
			}
			mine := p.Index >= 0 && p.Index == n.Index
			// A cluster-wide phase ran on every node still in the window
			// when it started.
			cluster := p.Index < 0 && (qAt.IsZero() || p.Started.Before(qAt))
			if !mine && !cluster {
				continue
			}
			iv := clip(p.Started, p.Ended, start, billedEnd)
			busy = append(busy, iv)
			if p.Outcome == record.Failed {
				failed = append(failed, iv)
			}
		}
		if !qAt.IsZero() {
			// Quarantined, it is still rented: billed to the end for nothing.
			failed = append(failed, clip(qAt, billedEnd, start, billedEnd))
		}
		ln := record.LedgerNode{
			Name:       n.Name,
			GPUs:       gpus,
			Secs:       round(span.Seconds(), 3),
			BilledSecs: billed.Seconds(),
			IdleSecs:   round((billed - covered(busy)).Seconds(), 3),
			FailedSecs: round(covered(failed).Seconds(), 3),
			// Released early, it did not finish its acceptance.
			Accepted: !n.Quarantined && n.ReleasedAt.IsZero() && !failedVerdict[n.Name],
		}
		ln.Cost = round(billed.Hours()*float64(gpus)*q.PricePerGPUHr, 6)
		l.ComputeCost += billed.Hours() * float64(gpus) * q.PricePerGPUHr
		gpuSecs += billed.Seconds() * float64(gpus)
		nodeSecs += billed.Seconds()
		if ln.Accepted {
			accepted++
		}
		l.Nodes = append(l.Nodes, ln)
	}
	l.BilledGPUHours = round(gpuSecs/3600, 6)
	l.ComputeCost = round(l.ComputeCost, 6)

	extras := map[string]float64{}
	if p := q.PriceHostPerNodeHour; p != nil {
		extras["host"] = nodeSecs / 3600 * *p
	}
	if c.StorageTiB != nil {
		if q.PriceStoragePerTiBMonth == nil {
			return nil, errors.New("cost.storage_tib: needs quote.price_storage_per_tib_month to be priced")
		}
		extras["storage"] = *c.StorageTiB * *q.PriceStoragePerTiBMonth * billed.Hours() / HoursPerMonth
	}
	if c.EgressGiB != nil {
		if q.PriceEgressPerGiB == nil {
			return nil, errors.New("cost.egress_gib: needs quote.price_egress_per_gib to be priced")
		}
		extras["egress"] = *c.EgressGiB * *q.PriceEgressPerGiB
	}
	if c.Support != nil {
		extras["support"] = *c.Support
	}
	if c.Licences != nil {
		extras["licences"] = *c.Licences
	}
	total := l.ComputeCost
	for k, v := range extras {
		extras[k] = round(v, 6)
		total += extras[k]
	}
	if len(extras) > 0 {
		l.Extras = extras
	}
	l.TotalCost = round(total, 6)

	l.AcceptedUnits = float64(accepted)
	if c.AcceptedUnits != nil {
		l.AcceptedUnits = *c.AcceptedUnits
	}
	if l.AcceptedUnits > 0 {
		per := round(l.TotalCost/l.AcceptedUnits, 6)
		l.CostPerUnit = &per
	}
	return l, nil
}

// WindowEnd is when the window ended: its recorded end, else the end of its
// last phase result (a record cut short), never before its start.
func WindowEnd(run *record.Run) time.Time {
	end := run.Ended
	if end.IsZero() {
		for _, p := range run.Phases {
			if p.Ended.After(end) {
				end = p.Ended
			}
		}
	}
	if end.Before(run.Started) {
		return run.Started
	}
	return end
}

// RoundUp rounds d up to a whole number of steps.
func RoundUp(d, step time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n := d / step
	if d%step != 0 {
		n++
	}
	return n * step
}

// gpusOf is the GPUs billed on a node: the quote's, else those preflight
// found (facts), else 1 (as the failure test bills its stall).
func gpusOf(q *inventory.Quote, facts json.RawMessage) int {
	if q.GPUsPerNode > 0 {
		return q.GPUsPerNode
	}
	var f struct {
		GPUCount int `json:"gpu_count"`
	}
	if len(facts) > 0 && json.Unmarshal(facts, &f) == nil && f.GPUCount > 0 {
		return f.GPUCount
	}
	return 1
}

// QuarantinedAt is when node n was quarantined (zero when it was not): as
// recorded, or for runs recorded before that, the end of the phase its
// reason names ("<phase> failed: ..." for a node's
// gating phase, "<phase>: ..." for a cluster-wide one), else the end of its
// first failed result, else the window's start.
func QuarantinedAt(run *record.Run, n record.Node) time.Time {
	if !n.Quarantined {
		return time.Time{}
	}
	if !n.QuarantinedAt.IsZero() {
		return n.QuarantinedAt
	}
	for _, p := range run.Phases {
		if p.Index >= 0 && p.Index == n.Index && p.Outcome == record.Failed && strings.HasPrefix(n.Reason, p.Phase+" failed: ") {
			return p.Ended
		}
		if p.Index < 0 && strings.HasPrefix(n.Reason, p.Phase+": ") {
			return p.Ended
		}
	}
	for _, p := range run.Phases {
		if p.Index >= 0 && p.Index == n.Index && p.Outcome == record.Failed {
			return p.Ended
		}
	}
	return run.Started
}

type interval struct{ from, to time.Time }

// clip limits [from, to] to [lo, hi]; an empty interval when they do not
// meet.
func clip(from, to, lo, hi time.Time) interval {
	if from.Before(lo) {
		from = lo
	}
	if to.After(hi) {
		to = hi
	}
	if to.Before(from) {
		to = from
	}
	return interval{from, to}
}

// covered is the time the intervals cover, overlaps counted once.
func covered(ivs []interval) time.Duration {
	ivs = slices.Clone(ivs)
	slices.SortFunc(ivs, func(a, b interval) int { return a.from.Compare(b.from) })
	var total time.Duration
	var cur interval
	open := false
	for _, iv := range ivs {
		switch {
		case !open:
			cur, open = iv, true
		case iv.from.After(cur.to):
			total += cur.to.Sub(cur.from)
			cur = iv
		case iv.to.After(cur.to):
			cur.to = iv.to
		}
	}
	if open {
		total += cur.to.Sub(cur.from)
	}
	return total
}

// monthly is the TCO of the given components; nil when none is given.
func monthly(m inventory.Monthly) *record.TCO {
	given := m.Components()
	if len(given) == 0 {
		return nil
	}
	t := &record.TCO{Components: map[string]float64{}}
	for _, c := range given {
		t.Components[c.Name] = *c.Value
		t.Monthly += *c.Value
	}
	t.Monthly = round(t.Monthly, 6)
	return t
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

func cmpOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return strings.TrimSpace(s)
}
