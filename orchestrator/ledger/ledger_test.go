package ledger

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func at(secs float64) time.Time { return t0.Add(time.Duration(secs * float64(time.Second))) }

func f(x float64) *float64 { return &x }

func result(phase string, index int, out record.Outcome, from, to float64) record.PhaseResult {
	node := ""
	if index >= 0 {
		node = []string{"gpu-01", "gpu-02", "gpu-03"}[index]
	}
	return record.PhaseResult{Phase: phase, Node: node, Index: index, Outcome: out, Started: at(from), Ended: at(to)}
}

// run is a window of `secs` seconds over n nodes, with the given results.
func run(secs float64, n int, phases ...record.PhaseResult) *record.Run {
	r := &record.Run{Started: t0, Ended: at(secs), Phases: phases}
	for i := range n {
		name := []string{"gpu-01", "gpu-02", "gpu-03"}[i]
		r.Nodes = append(r.Nodes, record.Node{Index: i, Name: name})
		r.Verdicts = append(r.Verdicts, record.Verdict{ID: "WIN-001", Node: name, Status: record.Pass})
	}
	return r
}

func inv(price float64, gpus int, billing string) *inventory.Inventory {
	return &inventory.Inventory{Quote: inventory.Quote{PricePerGPUHr: price, GPUsPerNode: gpus, Billing: billing, Currency: "USD"}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestRounding(t *testing.T) {
	for _, c := range []struct {
		name        string
		secs        float64
		billing     string
		wantBilled  float64
		wantGranule string
	}{
		{"1m rounds 61s up to 2 minutes", 61, "1m", 120, "1m"},
		{"an exact multiple stays", 120, "1m", 120, "1m"},
		{"1h rounds 61s up to an hour", 61, "1h", 3600, "1h"},
		{"1s rounds a fraction up", 60.2, "1s", 61, "1s"},
		{"empty is 1s", 60.2, "", 61, "1s"},
		{"90s steps", 100, "90s", 180, "90s"},
		{"an empty window bills nothing", 0, "1m", 0, "1m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := Compute(run(c.secs, 1), inv(3.6, 2, c.billing))
			if err != nil {
				t.Fatal(err)
			}
			n := l.Nodes[0]
			if n.BilledSecs != c.wantBilled || !near(n.Secs, c.secs) || l.Granularity != c.wantGranule {
				t.Fatalf("secs %v billed %v granularity %q, want %v, %v, %q", n.Secs, n.BilledSecs, l.Granularity, c.secs, c.wantBilled, c.wantGranule)
			}
			// 2 GPUs at 3.6 per GPU-hour: 0.002 per second.
			if want := c.wantBilled * 0.002; !near(n.Cost, want) || !near(l.ComputeCost, want) || !near(l.TotalCost, want) {
				t.Errorf("cost %v compute %v total %v, want %v", n.Cost, l.ComputeCost, l.TotalCost, want)
			}
			if want := c.wantBilled * 2 / 3600; !near(l.BilledGPUHours, want) {
				t.Errorf("billed GPU-hours %v, want %v", l.BilledGPUHours, want)
			}
		})
	}
}

// Idle and failed time are inside the billed time: a window full of failed
// or overlapping phases costs what an idle one does.
func TestNoDoubleCounting(t *testing.T) {
	quiet := run(1800, 2)
	busy := run(1800, 2,
		result("preflight", 0, record.OK, 0, 600), result("preflight", 0, record.OK, 300, 900), // overlapping
		result("diag", 1, record.Failed, 0, 1800),
		result("allreduce", -1, record.Failed, 900, 1800))
	var costs []float64
	for _, r := range []*record.Run{quiet, busy} {
		l, err := Compute(r, inv(2, 8, "1m"))
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, n := range l.Nodes {
			sum += n.Cost
			if n.IdleSecs+n.FailedSecs > 2*n.BilledSecs || n.IdleSecs > n.BilledSecs || n.FailedSecs > n.BilledSecs {
				t.Errorf("%s: idle %v failed %v outside billed %v", n.Name, n.IdleSecs, n.FailedSecs, n.BilledSecs)
			}
		}
		// 2 nodes × 0.5 h × 8 GPUs × 2 per GPU-hour.
		if !near(sum, 16) || !near(l.ComputeCost, 16) || !near(l.TotalCost, 16) || !near(l.BilledGPUHours, 8) {
			t.Errorf("nodes %v compute %v total %v GPU-hours %v, want 16, 16, 16, 8", sum, l.ComputeCost, l.TotalCost, l.BilledGPUHours)
		}
		costs = append(costs, l.TotalCost)
	}
	if costs[0] != costs[1] {
		t.Errorf("failed phases changed the cost: %v", costs)
	}
}

func TestIdleAndFailed(t *testing.T) {
	r := run(60, 2,
		result("connect", 0, record.OK, 0, 10),
		result("diag", 0, record.Failed, 10, 20),
		result("diag", 0, record.OK, 15, 25), // overlaps the failed one: busy once
		result("connect", 1, record.OK, 0, 5),
		result("skipped", 1, record.Skipped, 5, 50), // not run: idle
		result("allreduce", -1, record.OK, 30, 40),  // every active node
		result("bisect", -1, record.Failed, 40, 45), // a failed cluster phase fails every active node
		result("teardown", 1, record.OK, 55, 70),    // clipped at the window's end
	)
	l, err := Compute(r, inv(1, 1, "1s"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ idle, failed float64 }{
		{60 - 25 - 15, 10 + 5}, // busy 0-25 and 30-45
		{60 - 5 - 15 - 5, 5},   // busy 0-5, 30-45, 55-60
	}
	for i, n := range l.Nodes {
		if n.IdleSecs != want[i].idle || n.FailedSecs != want[i].failed {
			t.Errorf("%s: idle %v failed %v, want %v and %v", n.Name, n.IdleSecs, n.FailedSecs, want[i].idle, want[i].failed)
		}
		if n.BilledSecs != 60 || !n.Accepted {
			t.Errorf("%s: billed %v accepted %v", n.Name, n.BilledSecs, n.Accepted)
		}
	}
	// Rounding up bills time no phase ran in: it is idle.
	l, err = Compute(r, inv(1, 1, "1m"))
	if err != nil {
		t.Fatal(err)
	}
	if n := l.Nodes[0]; n.BilledSecs != 60 || n.IdleSecs != 20 {
		t.Errorf("1m: billed %v idle %v", n.BilledSecs, n.IdleSecs)
	}
	r.Ended = at(61)
	if l, err = Compute(r, inv(1, 1, "1m")); err != nil {
		t.Fatal(err)
	}
	if n := l.Nodes[0]; n.BilledSecs != 120 || n.IdleSecs != 120-40 {
		t.Errorf("61s at 1m: billed %v idle %v, want 120 and 80", n.BilledSecs, n.IdleSecs)
	}
}

// A quarantined node is rented to the end: billed like the others, not
// accepted, its time from the quarantine on failed, and cluster phases
// after it are not its own.
func TestQuarantinedNode(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		phases       []record.PhaseResult
		wantFailed   float64
		wantIdle     float64
		at           float64 // the recorded quarantine time (0: an older run without it)
	}{
		{"the recorded time wins", "lost",
			[]record.PhaseResult{result("diag", 1, record.OK, 10, 20)},
			60 - 40, 60 - 10, 40},
		{"a failed gating phase", "diag failed: dcgmi: 1 test failed",
			[]record.PhaseResult{result("diag", 1, record.Failed, 10, 20), result("allreduce", -1, record.OK, 30, 50), result("teardown", 1, record.OK, 55, 58)},
			60 - 10, 60 - 10 - 3, 0},
		{"a cluster phase", "allreduce: no answer within 1m",
			[]record.PhaseResult{result("diag", 1, record.OK, 10, 20), result("allreduce", -1, record.OK, 30, 50), result("checkpoint", -1, record.OK, 50, 55)},
			60 - 50, 60 - 10 - 20, 0},
		{"a reason naming no result", "lost",
			[]record.PhaseResult{result("diag", 1, record.OK, 10, 20)},
			60, 60 - 10, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(60, 2, c.phases...)
			r.Nodes[1].Quarantined, r.Nodes[1].Reason = true, c.reason
			if c.at > 0 {
				r.Nodes[1].QuarantinedAt = at(c.at)
			}
			l, err := Compute(r, inv(6, 1, "1s"))
			if err != nil {
				t.Fatal(err)
			}
			good, bad := l.Nodes[0], l.Nodes[1]
			if bad.BilledSecs != 60 || bad.Cost != good.Cost || !near(bad.Cost, 0.1) {
				t.Errorf("quarantined node billed %v for %v, the other %v", bad.BilledSecs, bad.Cost, good.Cost)
			}
			if bad.Accepted || !good.Accepted {
				t.Errorf("accepted: quarantined %v, other %v", bad.Accepted, good.Accepted)
			}
			if bad.FailedSecs != c.wantFailed || bad.IdleSecs != c.wantIdle {
				t.Errorf("failed %v idle %v, want %v and %v", bad.FailedSecs, bad.IdleSecs, c.wantFailed, c.wantIdle)
			}
			if l.AcceptedUnits != 1 || l.CostPerUnit == nil || !near(*l.CostPerUnit, 0.2) {
				t.Errorf("accepted units %v, cost per unit %v: want 1 and 0.2 (both nodes' cost)", l.AcceptedUnits, l.CostPerUnit)
			}
		})
	}
}

func TestAcceptedUnits(t *testing.T) {
	failed := func(nodes ...int) *record.Run {
		r := run(3600, 3)
		for _, i := range nodes {
			r.Verdicts = append(r.Verdicts, record.Verdict{ID: "NCCL-004", Node: r.Nodes[i].Name, Status: record.Fail})
		}
		// A cluster verdict's FAIL is no node's.
		r.Verdicts = append(r.Verdicts, record.Verdict{ID: "NCCL-002", Status: record.Fail})
		return r
	}
	for _, c := range []struct {
		name      string
		r         *record.Run
		cost      inventory.Cost
		wantUnit  string
		wantUnits float64
		wantPer   *float64 // total 3 nodes × 1 h × 1 GPU × 3 = 9
	}{
		{"every node accepted", failed(), inventory.Cost{}, "accepted node", 3, f(3)},
		{"a FAIL verdict", failed(2), inventory.Cost{}, "accepted node", 2, f(4.5)},
		{"nothing accepted", failed(0, 1, 2), inventory.Cost{}, "accepted node", 0, nil},
		{"stated units", failed(2), inventory.Cost{Unit: "training step", AcceptedUnits: f(1000)}, "training step", 1000, f(0.009)},
		{"stated zero", failed(), inventory.Cost{Unit: "training step", AcceptedUnits: f(0)}, "training step", 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := inv(3, 1, "1h")
			in.Cost = c.cost
			l, err := Compute(c.r, in)
			if err != nil {
				t.Fatal(err)
			}
			if l.Unit != c.wantUnit || l.AcceptedUnits != c.wantUnits || !near(l.TotalCost, 9) {
				t.Errorf("unit %q × %v, total %v; want %q × %v, 9", l.Unit, l.AcceptedUnits, l.TotalCost, c.wantUnit, c.wantUnits)
			}
			switch {
			case c.wantPer == nil && l.CostPerUnit != nil:
				t.Errorf("cost per unit %v, want none", *l.CostPerUnit)
			case c.wantPer != nil && (l.CostPerUnit == nil || !near(*l.CostPerUnit, *c.wantPer)):
				t.Errorf("cost per unit %v, want %v", l.CostPerUnit, *c.wantPer)
			}
		})
	}
}

func TestExtras(t *testing.T) {
	in := inv(2, 4, "1m")
	in.Quote.PriceHostPerNodeHour = f(0.5)
	in.Quote.PriceStoragePerTiBMonth = f(73)
	in.Quote.PriceEgressPerGiB = f(0.05)
	in.Cost = inventory.Cost{StorageTiB: f(10), EgressGiB: f(100), Support: f(20), Licences: f(3)}
	// Two nodes, 59m30s billed as one hour each.
	l, err := Compute(run(3570, 2), in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"host":     2 * 0.5,           // once per billed node-hour
		"storage":  10 * 73 * 1 / 730, // TiB × price × the window's share of a month, once
		"egress":   100 * 0.05,
		"support":  20,
		"licences": 3,
	}
	if len(l.Extras) != len(want) {
		t.Errorf("extras %v, want %v", l.Extras, want)
	}
	sum := 0.0
	for k, v := range want {
		if !near(l.Extras[k], v) {
			t.Errorf("%s = %v, want %v", k, l.Extras[k], v)
		}
		sum += v
	}
	if compute := 2 * 4 * 2.0; !near(l.ComputeCost, compute) || !near(l.TotalCost, compute+sum) {
		t.Errorf("compute %v total %v, want %v and %v", l.ComputeCost, l.TotalCost, compute, compute+sum)
	}

	// Extras alone make a ledger; a free GPU costs nothing.
	in.Quote.PricePerGPUHr = 0
	in.Quote.PriceHostPerNodeHour = nil
	in.Cost = inventory.Cost{Support: f(20)}
	if l, err = Compute(run(3570, 2), in); err != nil || l == nil {
		t.Fatalf("extras alone: %v, %v", l, err)
	}
	if l.ComputeCost != 0 || l.TotalCost != 20 || len(l.Extras) != 1 || l.Nodes[0].BilledSecs != 3600 {
		t.Errorf("extras alone: compute %v total %v extras %v billed %v", l.ComputeCost, l.TotalCost, l.Extras, l.Nodes[0].BilledSecs)
	}

	// A usage without its price is no cost that can be counted.
	in.Cost = inventory.Cost{EgressGiB: f(5)}
	in.Quote.PriceEgressPerGiB = nil
	if _, err := Compute(run(60, 1), in); err == nil || !strings.Contains(err.Error(), "quote.price_egress_per_gib") {
		t.Errorf("egress without a price: %v", err)
	}
}

func TestNoLedger(t *testing.T) {
	for _, in := range []*inventory.Inventory{inv(0, 8, "1m"), {}} {
		l, err := Compute(run(60, 2), in)
		if l != nil || err != nil {
			t.Errorf("no price: %+v, %v; want no ledger", l, err)
		}
	}
	if _, err := Compute(nil, inv(1, 1, "")); err == nil {
		t.Error("nil run: no error")
	}
}

func TestTCO(t *testing.T) {
	in := inv(2, 8, "1h")
	in.Cost.Monthly = inventory.Monthly{CommittedCompute: f(50000), Burst: f(4000), PersistentStorage: f(1200),
		Snapshots: f(300), Egress: f(0), Support: f(2000), IdleWaste: f(2500), RetryWaste: f(800), EngineeringOverhead: f(9000)}
	l, err := Compute(run(60, 1), in)
	if err != nil {
		t.Fatal(err)
	}
	if l.TCO == nil || len(l.TCO.Components) != 9 || l.TCO.Monthly != 69800 {
		t.Fatalf("TCO %+v, want 9 components summing to 69800", l.TCO)
	}
	for _, name := range record.TCOComponents {
		if _, ok := l.TCO.Components[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	// Only what is given; and a TCO alone makes a ledger.
	in = inv(0, 8, "1h")
	in.Cost.Monthly = inventory.Monthly{Burst: f(10.5), RetryWaste: f(0.25)}
	if l, err = Compute(run(60, 1), in); err != nil || l == nil {
		t.Fatalf("TCO alone: %v, %v", l, err)
	}
	if len(l.TCO.Components) != 2 || l.TCO.Monthly != 10.75 || l.TotalCost != 0 {
		t.Errorf("TCO %+v total %v", l.TCO, l.TotalCost)
	}
	// Without it, none.
	if l, _ = Compute(run(60, 1), inv(1, 1, "")); l.TCO != nil {
		t.Errorf("TCO %+v without inputs", l.TCO)
	}
}

func TestBadGranularity(t *testing.T) {
	for _, g := range []string{"minute", "0s", "-1m", "1"} {
		_, err := Compute(run(60, 1), inv(1, 1, g))
		if err == nil || !strings.Contains(err.Error(), "quote.billing_granularity") || !strings.Contains(err.Error(), g) {
			t.Errorf("%q: %v", g, err)
		}
	}
	for g, want := range map[string]time.Duration{"": time.Second, "1s": time.Second, "1m": time.Minute, " 1h ": time.Hour} {
		if d, err := Granularity(g); err != nil || d != want {
			t.Errorf("Granularity(%q) = %v, %v", g, d, err)
		}
	}
}

// The quote's GPUs per node, else what preflight found, else 1.
func TestGPUsPerNode(t *testing.T) {
	r := run(3600, 2)
	r.Nodes[0].Facts = json.RawMessage(`{"gpu_count":4}`)
	l, err := Compute(r, inv(1, 0, "1h"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Nodes[0].GPUs != 4 || l.Nodes[1].GPUs != 1 || l.ComputeCost != 5 {
		t.Errorf("GPUs %d and %d, compute %v", l.Nodes[0].GPUs, l.Nodes[1].GPUs, l.ComputeCost)
	}
	if l, _ = Compute(r, inv(1, 8, "1h")); l.Nodes[0].GPUs != 8 || l.ComputeCost != 16 {
		t.Errorf("quoted: GPUs %d, compute %v", l.Nodes[0].GPUs, l.ComputeCost)
	}
}

// A run without an end (cut short before it was recorded) ends with its
// last phase result.
func TestWindowWithoutEnd(t *testing.T) {
	r := run(0, 1, result("connect", 0, record.OK, 0, 30), result("diag", 0, record.OK, 30, 95))
	r.Ended = time.Time{}
	l, err := Compute(r, inv(1, 1, "1m"))
	if err != nil {
		t.Fatal(err)
	}
	if n := l.Nodes[0]; n.Secs != 95 || n.BilledSecs != 120 || n.IdleSecs != 25 {
		t.Errorf("secs %v billed %v idle %v", n.Secs, n.BilledSecs, n.IdleSecs)
	}
}
