package billing

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
)

var t0 = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)

// window is a run of four 8-GPU nodes at 2.49 USD per GPU-hour, billed by
// the hour, 1 h 30 min long (2 h billed each, 39.84 USD); gpu-04 was
// quarantined 10 min in; the failure test killed gpu-03 20 min in for
// 30 s.
func window(terms string) *record.Run {
	q, _ := json.Marshal(map[string]any{"gpus_per_node": 8, "price_per_gpu_hour": 2.49, "currency": "USD",
		"billing_granularity": "1h", "terms": map[string]any{"failed_node": terms}})
	r := &record.Run{ID: "20261206T080000Z-trial", Started: t0, Ended: t0.Add(90 * time.Minute), Quote: q,
		Billing: &record.Billing{RequiredTags: []string{"team"}},
		Ledger:  &record.Ledger{Currency: "USD", Granularity: "1h", PricePerGPUHour: 2.49}}
	for i, name := range []string{"gpu-01", "gpu-02", "gpu-03", "gpu-04"} {
		n := record.Node{Index: i, Name: name, Address: fmt.Sprintf("10.0.0.%d", i+1)}
		if name == "gpu-04" {
			n.Quarantined, n.Reason, n.QuarantinedAt = true, "diag failed: ...", t0.Add(10*time.Minute)
		}
		r.Nodes = append(r.Nodes, n)
		r.Phases = append(r.Phases, record.PhaseResult{Phase: "connect", Node: name, Index: i, Outcome: record.OK,
			Started: t0, Ended: t0.Add(time.Second)})
		r.Ledger.Nodes = append(r.Ledger.Nodes, record.LedgerNode{Name: name, GPUs: 8, Secs: 5400, BilledSecs: 7200, Cost: 39.84})
		r.Ledger.TotalCost += 39.84
	}
	data, _ := json.Marshal(map[string]any{"victim": "gpu-03", "injected_at": 60.0, "victim_back_at": 90.0, "ended_at": 120.0})
	r.Phases = append(r.Phases, record.PhaseResult{Phase: "failure", Index: -1, Outcome: record.OK,
		Started: t0.Add(19 * time.Minute), Ended: t0.Add(22 * time.Minute), Data: data})
	return r
}

type bill struct {
	node          string
	from, hours   int // hours from t0
	cost          float64
	tags          string
	currency, rsc string
}

func export(t *testing.T, lines ...bill) *Export {
	t.Helper()
	var b strings.Builder
	b.WriteString("resource,start,end,quantity,unit,cost,currency,tags\n")
	for _, l := range lines {
		cur := l.currency
		if cur == "" {
			cur = "USD"
		}
		rsc := l.rsc
		if rsc == "" {
			rsc = l.node
		}
		tags := l.tags
		if tags == "" {
			tags = "team=ml"
		}
		if tags == "-" {
			tags = ""
		}
		fmt.Fprintf(&b, "%s,%s,%s,%d,h,%.2f,%s,%s\n", rsc, t0.Add(time.Duration(l.from)*time.Hour).Format(time.RFC3339),
			t0.Add(time.Duration(l.from+l.hours)*time.Hour).Format(time.RFC3339), l.hours, l.cost, cur, tags)
	}
	ex, err := Read(strings.NewReader(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// clean is what the provider should bill window("credited ..."): 2 h a
// node, gpu-04 credited after its first hour.
func clean() []bill {
	return []bill{{node: "gpu-01", hours: 2, cost: 39.84}, {node: "gpu-02", hours: 2, cost: 39.84},
		{node: "gpu-03", hours: 2, cost: 39.84}, {node: "gpu-04", hours: 1, cost: 19.92}}
}

func fails(res *Result) []string {
	var out []string
	for _, v := range res.Verdicts {
		if v.Status == record.Fail {
			out = append(out, v.ID+" "+v.Node+": "+v.Measured+" "+v.Detail)
		}
	}
	return out
}

func verdict(t *testing.T, res *Result, id, node string) record.Verdict {
	t.Helper()
	for _, v := range res.Verdicts {
		if v.ID == id && v.Node == node {
			return v
		}
	}
	t.Fatalf("no %s for %q in %+v", id, node, res.Verdicts)
	return record.Verdict{}
}

func TestReconcileClean(t *testing.T) {
	res, err := Reconcile([]*record.Run{window("failed node time is credited from the failure")}, export(t, clean()...))
	if err != nil {
		t.Fatal(err)
	}
	if f := fails(res); len(f) > 0 {
		t.Fatalf("a clean bill fails: %q", f)
	}
	for _, id := range []string{"BILL-001", "BILL-004", "BILL-005", "BILL-006", "BILL-007"} {
		if v := verdict(t, res, id, ""); v.Status != record.Pass {
			t.Errorf("%s %s: %s %s", id, v.Status, v.Measured, v.Detail)
		}
	}
	if v := verdict(t, res, "BILL-003", "gpu-04"); v.Status != record.Pass {
		t.Errorf("gpu-04: %+v", v)
	}
	if v := verdict(t, res, "BILL-008", "gpu-03"); v.Status != record.Pass || !strings.Contains(v.Measured, "out of the job 30s") {
		t.Errorf("victim: %+v", v)
	}
	if res.Billed != 139.44 || res.Ledger != 159.36 || len(res.Rows) != 4 || res.Rows[3].BilledSecs != 3600 {
		t.Errorf("billed %v, ledger %v, rows %+v", res.Billed, res.Ledger, res.Rows)
	}
}

// Each planted fault fails, naming the node.
func TestReconcilePlantedFaults(t *testing.T) {
	terms := "failed node time is credited from the failure"
	for _, c := range []struct {
		name  string
		lines []bill
		id    string
		node  string
		want  string
	}{
		{"overbilled 2 h", replace(clean(), 1, bill{node: "gpu-02", hours: 4, cost: 79.68}), "BILL-002", "gpu-02",
			"2h00m beyond the window's time: 39.84 USD overbilled"},
		{"billed after quarantine", replace(clean(), 3, bill{node: "gpu-04", hours: 2, cost: 39.84}), "BILL-003", "gpu-04",
			"billed 1h00m past the terms: 19.92 USD to be credited"},
		{"overbilled 2 h, in the total", replace(clean(), 1, bill{node: "gpu-02", hours: 4, cost: 79.68}), "BILL-007", "",
			"gpu-02 +39.84; gpu-04 -19.92 (39.84 USD beyond the ledger"},
		// One granule more is no slack: the ledger and the window's time
		// are already rounded up to it.
		{"overbilled one granule", replace(clean(), 1, bill{node: "gpu-02", hours: 3, cost: 59.76}), "BILL-002", "gpu-02",
			"1h00m beyond the window's time: 19.92 USD overbilled"},
		{"overbilled one granule, in the total", replace(clean(), 1, bill{node: "gpu-02", hours: 3, cost: 59.76}), "BILL-007", "",
			"(19.92 USD beyond the ledger"},
		{"duplicate", append(clean(), bill{node: "gpu-01", hours: 2, cost: 39.84}), "BILL-004", "gpu-01", "line 6 repeats line 2"},
		{"overlap", append(clean(), bill{node: "gpu-01", from: 1, hours: 1, cost: 19.92}), "BILL-004", "gpu-01", "lines 2 and 6 overlap 1h00m"},
		{"duplicate naming the node in upper case", append(clean(), bill{node: "gpu-02", rsc: "GPU-02", hours: 2, cost: 39.84}),
			"BILL-004", "gpu-02", "line 6 repeats line 3"},
		{"missing tag", replace(clean(), 2, bill{node: "gpu-03", hours: 2, cost: 39.84, tags: "-"}), "BILL-006", "gpu-03", "line 4 lacks team"},
		{"rate", replace(clean(), 0, bill{node: "gpu-01", hours: 2, cost: 45.00}), "BILL-005", "gpu-01", "22.50 on line 2"},
		{"untagged line of no node", append(clean(), bill{node: "disk-7", hours: 2, cost: 3, tags: "-"}), "BILL-006", "",
			"1 line(s), 3.00 USD, name no node of the window: 6 (disk-7)"},
		{"total", append(clean(), bill{node: "nat-gw", hours: 2, cost: 90}), "BILL-007", "", "line 6 (no node) +90.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Reconcile([]*record.Run{window(terms)}, export(t, c.lines...))
			if err != nil {
				t.Fatal(err)
			}
			v := verdict(t, res, c.id, c.node)
			if v.Status != record.Fail || !strings.Contains(v.Measured+" "+v.Detail, c.want) {
				t.Errorf("%s %s: %s | %s | %s; want FAIL with %q", v.ID, v.Status, v.Measured, v.Quoted, v.Detail, c.want)
			}
		})
	}
}

func replace(ls []bill, i int, b bill) []bill {
	ls[i] = b
	return ls
}

func TestReconcileFailedNodeTerms(t *testing.T) {
	// gpu-04 quarantined at 08:10, billed to 11:00.
	lines := replace(clean(), 3, bill{node: "gpu-04", hours: 3, cost: 59.76})
	for _, c := range []struct {
		terms  string
		status record.Status
	}{
		{"", record.Warn},
		{"billed until replaced (4 h SLA)", record.Pass},
		{"the failed hour is billed as a whole hour, then nothing", record.Fail},
		{"ask support", record.Warn},
		// Negated, credit means the time is billed: read as credited,
		// each of these failed gpu-04's 3 h.
		{"no credit", record.Pass},
		{"not credited", record.Pass},
		{"billed until replaced; no credit", record.Pass},
		{"credit is not given for a failed node", record.Pass},
		{"credited; no credit", record.Warn},
	} {
		res, err := Reconcile([]*record.Run{window(c.terms)}, export(t, lines...))
		if err != nil {
			t.Fatal(err)
		}
		if v := verdict(t, res, "BILL-003", "gpu-04"); v.Status != c.status {
			t.Errorf("%q: %s %s %s", c.terms, v.Status, v.Quoted, v.Detail)
		}
	}
}

// The granule is applied once, as the window's time is rounded up to it:
// a failed node billed as a whole granule is billed to the end of the
// granule it fell in, not a granule past its failure; the victim is held
// to its time rounded up, not a granule more.
func TestReconcileNoSecondGranule(t *testing.T) {
	lines := replace(clean(), 3, bill{node: "gpu-04", hours: 2, cost: 39.84})
	res, err := Reconcile([]*record.Run{window("billed as a whole granule")}, export(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, res, "BILL-003", "gpu-04"); v.Status != record.Fail || !strings.Contains(v.Measured, "1h00m of it after 09:00:00Z") {
		t.Errorf("gpu-04 billed to 10:00, quarantined at 08:10: %s %s | %s | %s", v.Status, v.Measured, v.Quoted, v.Detail)
	}
	lines = replace(clean(), 2, bill{node: "gpu-03", hours: 3, cost: 59.76})
	res, err = Reconcile([]*record.Run{window("credited")}, export(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, res, "BILL-008", "gpu-03"); v.Status != record.Fail || !strings.Contains(v.Detail, "1h00m beyond the terms") {
		t.Errorf("the victim billed 3 h of a 1h30m window: %s %s | %s | %s", v.Status, v.Measured, v.Quoted, v.Detail)
	}
}

// An export whose lines bill no time checks no rate and no failed node's
// time: those are SKIP (not measured), never a PASS on nothing.
func TestReconcileNoTimeIsNotMeasured(t *testing.T) {
	var b strings.Builder
	b.WriteString("resource,start,end,quantity,unit,cost,currency,tags\n")
	for _, node := range []string{"gpu-01", "gpu-02", "gpu-03", "gpu-04"} {
		fmt.Fprintf(&b, "%s,2026-12-06T08:00:00Z,2026-12-06T10:00:00Z,100,GB,9,USD,team=ml\n", node)
	}
	ex, err := Read(strings.NewReader(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Reconcile([]*record.Run{window("credited")}, ex)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, node, want string }{
		{"BILL-005", "", "not measured: none of the 4 line(s) of the nodes bills time"},
		{"BILL-003", "gpu-04", "not measured: its 1 line(s) bill no time"},
		{"BILL-008", "gpu-03", "not measured: its 1 line(s) bill no time"},
	} {
		if v := verdict(t, res, c.id, c.node); v.Status != record.Skip || !strings.Contains(v.Measured+" "+v.Detail, c.want) {
			t.Errorf("%s %s: %s %s | %s; want SKIP with %q", c.id, c.node, v.Status, v.Measured, v.Detail, c.want)
		}
	}
}

func TestFailedTerms(t *testing.T) {
	for words, want := range map[string]string{
		"":                                 termsNone,
		"credited from the failure":        termsCredited,
		"failed nodes are not billed":      termsCredited,
		"free of charge":                   termsCredited,
		"no charge after the failure":      termsCredited,
		"credited, and not billed":         termsCredited,
		"no credit":                        termsNotCredited,
		"not credited":                     termsNotCredited,
		"non-credited":                     termsNotCredited,
		"credits won't be issued":          termsNotCredited,
		"billed until replaced; no credit": termsUntil,
		"not credited: the failed hour is billed as a whole hour": termsGranule,
		"billed until replaced (4 h SLA)":                         termsUntil,
		"credited; no credit":                                     termsUnreadable,
		"ask support":                                             termsUnreadable,
	} {
		if got := failedTerms(words); got != want {
			t.Errorf("%q: %q, want %q", words, got, want)
		}
	}
}

func TestReconcileMatching(t *testing.T) {
	r := window("credited")
	r.Nodes[0].BillingID = "i-0a1b2c3d4e5f60001"
	r.Nodes[2].Address = r.Nodes[1].Address // shared: names neither
	lines := []bill{
		{node: "gpu-01", rsc: "i-0a1b2c3d4e5f60001", hours: 2, cost: 39.84},
		{node: "gpu-02", rsc: "/subscriptions/x/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/gpu-02", hours: 2, cost: 39.84},
		{node: "?", rsc: r.Nodes[1].Address, hours: 2, cost: 39.84},
		{node: "gpu-04", rsc: r.Nodes[3].Address, hours: 1, cost: 19.92},
		{node: "gpu-03", rsc: "gpu-03", from: 72, hours: 1, cost: 19.92}, // three days later: another renter's
	}
	res, err := Reconcile([]*record.Run{r}, export(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range res.Rows {
		got[row.Node] = rows(row.Lines)
	}
	want := map[string]string{"gpu-01": "2", "gpu-02": "3", "gpu-03": "", "gpu-04": "5"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s billed on %q, want %q", k, got[k], v)
		}
	}
	if len(res.Unmatched) != 1 || res.Unmatched[0].Row != 4 || res.Outside != 1 {
		t.Errorf("unmatched %+v, outside %d", res.Unmatched, res.Outside)
	}
}

// A line is billed twice whatever its copy calls the node or the item:
// lines are compared by the node they matched.
func TestReconcileTwiceByNode(t *testing.T) {
	r := window("credited")
	r.Nodes[0].BillingID = "i-0a1b2c3d4e5f60001"
	azure := "/subscriptions/x/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/gpu-03"
	in := "resource,start,end,quantity,unit,cost,currency,item,tags\n" +
		"gpu-01,2026-12-06T08:00:00Z,2026-12-06T10:00:00Z,2,h,39.84,USD,p5.48xlarge,team=ml\n" + // 2
		"gpu-02,2026-12-06T08:00:00Z,2026-12-06T10:00:00Z,2,h,39.84,USD,p5.48xlarge,team=ml\n" + // 3
		"gpu-03,2026-12-06T08:00:00Z,2026-12-06T10:00:00Z,2,h,39.84,USD,p5.48xlarge,team=ml\n" + // 4
		"gpu-04,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,h,19.92,USD,p5.48xlarge,team=ml\n" + // 5
		"i-0a1b2c3d4e5f60001,2026-12-06T08:00:00Z,2026-12-06T10:00:00Z,2,h,39.84,USD,BoxUsage,team=ml\n" + // 6: gpu-01 again
		"gpu-02,2026-12-06T09:00:00Z,2026-12-06T10:00:00Z,1,h,19.92,USD,GPU hour,team=ml\n" + // 7: gpu-02's second hour again
		azure + ",2026-12-06T08:00:00Z,2026-12-06T10:00:00Z,2,h,39.84,USD,p5.48xlarge,team=ml\n" + // 8: gpu-03 again
		"gpu-04,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,3,GB,0.27,USD,DataTransfer-Out,team=ml\n" + // 9: traffic beside its time
		"gpu-04,2026-12-06T08:00:00Z,2026-12-06T09:00:00Z,1,GB-Mo,0.10,USD,EBS volume,team=ml\n" // 10: storage beside both
	ex, err := Read(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Reconcile([]*record.Run{r}, ex)
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"gpu-01": "line 6 repeats line 2", "gpu-02": "lines 3 and 7 overlap 1h00m",
		"gpu-03": "line 8 repeats line 4"} {
		if v := verdict(t, res, "BILL-004", node); v.Status != record.Fail || !strings.Contains(v.Measured, want) {
			t.Errorf("%s: %s %s, want FAIL with %q", node, v.Status, v.Measured, want)
		}
	}
	for _, v := range res.Verdicts {
		if v.ID == "BILL-004" && v.Node == "gpu-04" {
			t.Errorf("gpu-04's traffic and storage beside its time are no repeat: %s", v.Measured)
		}
	}
}

func TestReconcileTwoRuns(t *testing.T) {
	a, b := window(""), window("")
	b.ID = "20261207T080000Z-trial"
	b.Started, b.Ended = t0.Add(48*time.Hour), t0.Add(49*time.Hour+30*time.Minute)
	lines := append(clean(), bill{node: "gpu-01", from: 48, hours: 2, cost: 39.84})
	res, err := Reconcile([]*record.Run{a, b}, export(t, lines...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0].Label != a.ID+":gpu-01" || rows(res.Rows[0].Lines) != "2" || rows(res.Rows[4].Lines) != "6" {
		t.Errorf("rows %+v", res.Rows)
	}
}

func TestReconcileRefusesAnotherCurrency(t *testing.T) {
	lines := clean()
	for i := range lines {
		lines[i].currency = "EUR"
	}
	_, err := Reconcile([]*record.Run{window("")}, export(t, lines...))
	if err == nil || !strings.Contains(err.Error(), "the export bills in EUR, the quote prices in USD") {
		t.Fatal(err)
	}
	// The run's quote is a file too: its code reaches the terminal
	// escaped.
	r := window("")
	r.Quote = []byte(`{"currency": "\u001b[2J"}`)
	if _, err := Reconcile([]*record.Run{r}, export(t, lines...)); err == nil || strings.ContainsRune(err.Error(), 0x1b) {
		t.Fatalf("%q", err)
	}
}

func TestDur(t *testing.T) {
	for secs, want := range map[float64]string{7200: "2h00m", 6605: "1h50m05s", 845: "14m05s", 41: "41s", -60: "-1m00s"} {
		if got := dur(secs); got != want {
			t.Errorf("%v: %q", secs, got)
		}
	}
}

// Each provider's format, on its genuine header (testdata/README.md),
// reconciles with a window of gpu-01 and gpu-02 on 2026-12-06 at the
// price its rows bill: matched by instance ID, by an Azure resource ID's
// last part, by Google's resource.name.
func TestReconcileEachFormat(t *testing.T) {
	for _, c := range []struct {
		file     string
		price    float64 // per GPU-hour, 8 GPUs a node
		window   time.Duration
		ids      [2]string
		opts     Options
		currency string
	}{
		{"aws-cur.csv", 12.29, 50 * time.Minute, [2]string{"i-0a1b2c3d4e5f60001", "i-0a1b2c3d4e5f60002"}, Options{}, "USD"},
		{"aws-cur2.csv", 12.29, 50 * time.Minute, [2]string{"i-0a1b2c3d4e5f60001", "i-0a1b2c3d4e5f60002"}, Options{}, "USD"},
		{"gcp.csv", 88.49 / 8, 50 * time.Minute, [2]string{}, Options{}, "USD"},
		{"azure-ea.csv", 12.29, 90 * time.Minute, [2]string{}, Options{}, "USD"},
		{"azure-usage-bom.csv", 12.29, 90 * time.Minute, [2]string{}, Options{}, "USD"},
		{"azure-usage-german.csv", 12.29, 90 * time.Minute, [2]string{}, Options{}, "USD"},
		{"generic.csv", 2.49, 50 * time.Minute, [2]string{}, Options{}, "EUR"},
	} {
		t.Run(c.file, func(t *testing.T) {
			q, _ := json.Marshal(map[string]any{"gpus_per_node": 8, "price_per_gpu_hour": c.price, "currency": c.currency,
				"billing_granularity": "1h"})
			r := &record.Run{ID: "r", Started: t0, Ended: t0.Add(c.window), Quote: q}
			for i, name := range []string{"gpu-01", "gpu-02"} {
				r.Nodes = append(r.Nodes, record.Node{Index: i, Name: name, Address: fmt.Sprintf("10.0.0.%d", i+1), BillingID: c.ids[i]})
				r.Phases = append(r.Phases, record.PhaseResult{Phase: "connect", Node: name, Index: i, Outcome: record.OK, Started: t0, Ended: t0})
			}
			res, err := Reconcile([]*record.Run{r}, readFile(t, c.file, c.opts))
			if err != nil {
				t.Fatal(err)
			}
			if f := fails(res); len(f) > 0 {
				t.Errorf("fails: %q", f)
			}
			for _, row := range res.Rows {
				if len(row.Lines) != 1 || row.BilledSecs <= 0 {
					t.Errorf("%s: lines %v, billed %v s", row.Node, row.Lines, row.BilledSecs)
				}
			}
		})
	}
}

// FuzzReconcile: whatever an export that reads holds, the reconciliation
// neither panics nor judges without a status.
func FuzzReconcile(f *testing.F) {
	var b strings.Builder
	b.WriteString("resource,start,end,quantity,unit,cost,currency,tags\n")
	for _, l := range clean() {
		fmt.Fprintf(&b, "%s,%s,%s,%d,h,%.2f,USD,team=ml\n", l.node, t0.Format(time.RFC3339),
			t0.Add(time.Duration(l.hours)*time.Hour).Format(time.RFC3339), l.hours, l.cost)
	}
	f.Add([]byte(b.String()))
	f.Add([]byte("resource,start,end,quantity,unit,cost\ngpu-01,2026-12-06T08:00:00Z,2026-12-06T08:00:00Z,1e308,GPU-hours,-1e308\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ex, err := Read(strings.NewReader(string(data)), Options{MaxBytes: 1 << 16, MaxLines: 200})
		if err != nil {
			return
		}
		// Another currency than the quote's is refused before judging
		// (TestReconcileRefusesAnotherCurrency); here every line is judged.
		ex.Currency = ""
		res, err := Reconcile([]*record.Run{window("credited")}, ex)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Verdicts {
			if v.Status == "" || !strings.HasPrefix(v.ID, "BILL-") {
				t.Fatalf("verdict %+v", v)
			}
		}
		// run.json and -o json keep it: no +Inf or NaN in a figure.
		if _, err := json.Marshal(struct {
			R *record.Reconciliation
			V []record.Verdict
		}{res.Record("x"), res.Verdicts}); err != nil {
			t.Fatal(err)
		}
	})
}
