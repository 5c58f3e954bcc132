package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
)

// vendorRuns: the same window on three providers' clusters, with one of
// everything the comparison tells apart.
//
//   - vendor-a: not accepted; gpu-02 quarantined (and failing GPU-001),
//     the all-reduce under the quote, gpu-03 the slowest node inside; a
//     failure test whose victim came back; a ledger.
//   - vendor-b: accepted, with a warning (the victim never came back);
//     another GPU model and currency quoted; a ledger.
//   - vendor-c: interrupted before the NCCL phases: no quote, the failure
//     test skipped, no ledger.
func vendorRuns() []*record.Run {
	a := &record.Run{Schema: record.Schema, ID: "20261130T054012Z-vendor-a", Tool: "gpuaccept v0.3.0", Provider: "vendor-a",
		Region: "eu-west-1", Window: "2026-11-30 05:30-09:30 UTC", Started: t0, Ended: t0.Add(time.Hour),
		Nodes: []record.Node{
			{Index: 0, Name: "gpu-01", Address: "10.0.0.11:22"},
			{Index: 1, Name: "gpu-02", Address: "10.0.0.12:22", Quarantined: true, Reason: "preflight: 7 of 8 GPUs visible"},
			{Index: 2, Name: "gpu-03", Address: "10.0.0.13:22"},
		},
		Phases: []record.PhaseResult{
			phase("allreduce", "", -1, record.OK, 600, 300, ""),
			withData(phase("failure", "", -1, record.OK, 900, 240, ""),
				`{"inject":"kill-node","recovery":"elastic","victim":"gpu-03","injected_at":61.5,"detected_at":63.6,`+
					`"detection_seconds":2.1,"resume_seconds":14.25,"steps_lost":3,"victim_back_at":92,`+
					`"billed_node_seconds":28.5,"timeline":"ignored"}`),
		},
		Verdicts: []record.Verdict{
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "gpu-01", Status: record.Pass, Measured: "NVIDIA H100 80GB HBM3", Quoted: "NVIDIA H100 80GB HBM3"},
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "gpu-02", Status: record.Fail, Measured: "7 × NVIDIA H100 80GB HBM3", Quoted: "NVIDIA H100 80GB HBM3"},
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "gpu-03", Status: record.Pass, Measured: "NVIDIA H100 80GB HBM3", Quoted: "NVIDIA H100 80GB HBM3"},
			{ID: "NCCL-002", Title: "inter-node all_reduce bus bandwidth matches the quote", Status: record.Fail,
				Measured: "296.1 GB/s median of 3 sweep(s) (290.2..301.7); wire rate 25.8 GB/s per GPU", Quoted: "370 GB/s",
				Ratio: num(0.8003), Tolerance: num(0.9), Value: num(296.1), Unit: record.UnitGBs},
			{ID: "NCCL-003", Title: "intra-node all_reduce bus bandwidth matches the quote", Node: "gpu-01", Status: record.Pass,
				Measured: "451.3 GB/s median of 3 sweep(s)", Quoted: "450 GB/s", Ratio: num(1.0029), Value: num(451.3), Unit: record.UnitGBs},
			{ID: "NCCL-003", Title: "intra-node all_reduce bus bandwidth matches the quote", Node: "gpu-02", Status: record.Skip,
				Detail: "quarantined"},
			{ID: "NCCL-003", Title: "intra-node all_reduce bus bandwidth matches the quote", Node: "gpu-03", Status: record.Pass,
				Measured: "449.2 GB/s median of 3 sweep(s)", Quoted: "450 GB/s", Ratio: num(0.9982), Value: num(449.2), Unit: record.UnitGBs},
			imageLoad("gpu-01", 0.9),
			imageLoad("gpu-03", 1.4),
			{ID: "RECOV-001", Title: "the job resumed after losing a node", Status: record.Pass,
				Measured: "resumed 14.25 s after the failure", Quoted: "within 1m0s", Value: num(14.25), Unit: record.UnitSeconds},
		},
		Quote: json.RawMessage(`{"gpu_model":"NVIDIA H100 80GB HBM3","gpus_per_node":8,"gpu_memory_gib":80,"form_factor":"SXM",` +
			`"fabric":"infiniband","nics_per_node":8,"nic_gbps":400,"inter_busbw_gbs":370,"price_per_gpu_hour":2.49,"currency":"USD","terms":{}}`),
		Ledger: &record.Ledger{Currency: "USD", Granularity: "1m", PricePerGPUHour: 2.49, TotalCost: 59.76, Unit: "accepted node",
			AcceptedUnits: 2, CostPerUnit: num(29.88)},
	}

	b := &record.Run{Schema: record.Schema, ID: "20261201T080000Z-vendor-b", Tool: "gpuaccept v0.3.0", Provider: "vendor-b",
		Region: "us-east", Window: "2026-12-01 08:00-12:00 UTC", Started: t0.Add(26 * time.Hour), Ended: t0.Add(27 * time.Hour),
		Nodes: []record.Node{{Index: 0, Name: "b1", Address: "192.0.2.1:22"}, {Index: 1, Name: "b2", Address: "192.0.2.2:22"}},
		Phases: []record.PhaseResult{
			withData(phase("failure", "", -1, record.OK, 900, 240, ""),
				`{"inject":"kill-worker","recovery":"relaunch","victim":"b2","injected_at":40,"detection_seconds":1.2,`+
					`"resume_seconds":31.7,"steps_lost":0,"billed_node_seconds":63.4}`),
		},
		Verdicts: []record.Verdict{
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "b1", Status: record.Pass, Measured: "NVIDIA H100 NVL", Quoted: "NVIDIA H100 NVL"},
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "b2", Status: record.Pass, Measured: "NVIDIA H100 NVL", Quoted: "NVIDIA H100 NVL"},
			// Every figure vendor-b's quote states is measured: an accepted
			// window holds the provider to each (record.Run.Result).
			{ID: "GPU-002", Node: "b1", Status: record.Pass}, {ID: "GPU-002", Node: "b2", Status: record.Pass},
			{ID: "GPU-003", Node: "b1", Status: record.Pass}, {ID: "GPU-003", Node: "b2", Status: record.Pass},
			{ID: "GPU-004", Node: "b1", Status: record.Pass}, {ID: "GPU-004", Node: "b2", Status: record.Pass},
			{ID: "NET-001", Node: "b1", Status: record.Pass}, {ID: "NET-001", Node: "b2", Status: record.Pass},
			{ID: "NCCL-002", Title: "inter-node all_reduce bus bandwidth matches the quote", Status: record.Pass,
				Measured: "372.4 GB/s median of 3 sweep(s)", Quoted: "360 GB/s", Ratio: num(1.0344), Value: num(372.4), Unit: record.UnitGBs},
			{ID: "NCCL-003", Title: "intra-node all_reduce bus bandwidth matches the quote", Node: "b1", Status: record.Pass,
				Measured: "391 GB/s", Quoted: "400 GB/s", Ratio: num(0.9775), Value: num(391), Unit: record.UnitGBs},
			{ID: "NCCL-003", Title: "intra-node all_reduce bus bandwidth matches the quote", Node: "b2", Status: record.Pass,
				Measured: "405 GB/s", Quoted: "400 GB/s", Ratio: num(1.0125), Value: num(405), Unit: record.UnitGBs},
			imageLoad("b1", 2.5),
			imageLoad("b2", 0.7),
			{ID: "RECOV-001", Title: "the job resumed after losing a node", Status: record.Pass,
				Measured: "resumed 31.7 s after the failure", Quoted: "within 1m0s", Value: num(31.7), Unit: record.UnitSeconds},
			{ID: "RECOV-003", Title: "the failed node came back into the job", Node: "b2", Status: record.Warn, Measured: "not back", Detail: "b2 never logged a step again"},
		},
		Quote: json.RawMessage(`{"gpu_model":"NVIDIA H100 NVL","gpus_per_node":4,"gpu_memory_gib":94,"form_factor":"PCIe",` +
			`"fabric":"roce","nics_per_node":2,"nic_gbps":200,"price_per_gpu_hour":2.1,"currency":"EUR"}`),
		Ledger: &record.Ledger{Currency: "EUR", Granularity: "1h", PricePerGPUHour: 2.1, TotalCost: 16.8, Unit: "accepted node",
			AcceptedUnits: 2, CostPerUnit: num(8.4)},
	}

	c := &record.Run{Schema: record.Schema, ID: "20261202T090000Z-vendor-c", Tool: "gpuaccept v0.3.0", Provider: "vendor-c",
		Region: "ap-south", Started: t0.Add(51 * time.Hour), Interrupted: true,
		Nodes: []record.Node{{Index: 0, Name: "c-1", Address: "198.51.100.1:22"}, {Index: 1, Name: "c-2", Address: "198.51.100.2:22"}},
		Phases: []record.PhaseResult{
			{Phase: "failure", Index: -1, Outcome: record.Skipped},
		},
		Verdicts: []record.Verdict{
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "c-1", Status: record.Pass, Measured: "NVIDIA H100 80GB HBM3"},
			{ID: "GPU-001", Title: "GPU model matches the quote", Node: "c-2", Status: record.Pass, Measured: "NVIDIA H100 80GB HBM3"},
			{ID: "NCCL-002", Title: "inter-node all_reduce bus bandwidth matches the quote", Status: record.Skip, Detail: "interrupted"},
		},
	}
	return []*record.Run{a, b, c}
}

// imageLoad is IMG-001 on node, loaded in secs.
func imageLoad(node string, secs float64) record.Verdict {
	return record.Verdict{ID: "IMG-001", Title: "the node's image is the pinned one", Node: node, Status: record.Pass,
		Measured: fmt.Sprintf("image ID sha256:1dbdf89e6124 (loaded in %g s)", secs), Quoted: "sha256:1dbdf89e6124",
		Value: num(secs), Unit: record.UnitSeconds}
}

func TestCompareRunsGolden(t *testing.T) {
	c := CompareRuns(vendorRuns())
	for _, r := range []struct {
		name   string
		render func(*bytes.Buffer) error
	}{
		{"compare.txt", func(b *bytes.Buffer) error { return CompareText(b, c, false, 1000) }},
		{"compare.md", func(b *bytes.Buffer) error { return CompareMarkdown(b, c) }},
	} {
		t.Run(r.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := r.render(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, r.name, b.Bytes())
		})
	}
}

// cellOf is run i's cell of criterion id.
func cellOf(t *testing.T, c *Comparison, id string, i int) *CriterionCell {
	t.Helper()
	for _, cr := range c.Criteria {
		if cr.ID == id {
			return cr.Runs[i]
		}
	}
	t.Fatalf("no criterion %s", id)
	return nil
}

func TestCompareRunsCriteria(t *testing.T) {
	runs := vendorRuns()
	before, _ := json.Marshal(runs)
	c := CompareRuns(runs)
	if after, _ := json.Marshal(runs); !bytes.Equal(before, after) {
		t.Error("CompareRuns modified its runs")
	}
	var ids []string
	for _, cr := range c.Criteria {
		ids = append(ids, cr.ID)
		if len(cr.Runs) != 3 {
			t.Errorf("%s: %d cells, want one per run", cr.ID, len(cr.Runs))
		}
	}
	if got := strings.Join(ids, " "); got != "GPU-001 GPU-002 GPU-003 GPU-004 IMG-001 NCCL-002 NCCL-003 NET-001 RECOV-001 RECOV-003" {
		t.Errorf("criteria %s", got)
	}

	for _, x := range []struct {
		id     string
		run    int
		want   string // criterionText
		status record.Status
		node   string
		value  float64 // 0: none
	}{
		// The worst status; the node that had it.
		{"GPU-001", 0, "FAIL (1 of 3) 7 × NVIDIA H100 80GB HBM3 vs NVIDIA H100 80GB HBM3 on gpu-02", record.Fail, "gpu-02", 0},
		{"GPU-001", 1, "PASS NVIDIA H100 NVL vs NVIDIA H100 NVL", record.Pass, "b1", 0},
		{"GPU-001", 2, "PASS NVIDIA H100 80GB HBM3", record.Pass, "c-1", 0},
		// The cluster's figure, as the figure against the quote.
		{"NCCL-002", 0, "FAIL 296.1 GB/s vs 370 GB/s (0.80)", record.Fail, "", 296.1},
		{"NCCL-002", 1, "PASS 372.4 GB/s vs 360 GB/s (1.03)", record.Pass, "", 372.4},
		{"NCCL-002", 2, "SKIP interrupted", record.Skip, "", 0},
		// The worst node's figure: a skipped node counts as judged
		// nothing, the lowest GB/s is the worst...
		{"NCCL-003", 0, "PASS (1 not judged) 449.2 GB/s vs 450 GB/s (1.00) on gpu-03", record.Pass, "gpu-03", 449.2},
		{"NCCL-003", 1, "PASS 391 GB/s vs 400 GB/s (0.98) on b1", record.Pass, "b1", 391},
		// ... and the longest time.
		{"IMG-001", 0, "PASS image ID sha256:1dbdf89e6124 (loaded in 1.4 s) vs sha256:1dbdf89e6124 on gpu-03", record.Pass, "gpu-03", 1.4},
		{"IMG-001", 1, "PASS image ID sha256:1dbdf89e6124 (loaded in 2.5 s) vs sha256:1dbdf89e6124 on b1", record.Pass, "b1", 2.5},
		{"RECOV-001", 0, "PASS resumed 14.25 s after the failure vs within 1m0s", record.Pass, "", 14.25},
		{"RECOV-003", 1, "WARN not back", record.Warn, "b2", 0},
	} {
		cell := cellOf(t, c, x.id, x.run)
		if cell == nil {
			t.Errorf("%s run %d: no cell", x.id, x.run)
			continue
		}
		if got := criterionText(cell); got != x.want {
			t.Errorf("%s run %d:\n got %q\nwant %q", x.id, x.run, got, x.want)
		}
		if cell.Status != x.status || cell.Node != x.node {
			t.Errorf("%s run %d: status %s node %q, want %s %q", x.id, x.run, cell.Status, cell.Node, x.status, x.node)
		}
		switch {
		case x.value == 0 && cell.Value != nil:
			t.Errorf("%s run %d: value %v, want none", x.id, x.run, *cell.Value)
		case x.value != 0 && (cell.Value == nil || *cell.Value != x.value):
			t.Errorf("%s run %d: value %v, want %v", x.id, x.run, cell.Value, x.value)
		}
	}
	if got := cellOf(t, c, "NCCL-003", 0).Counts; !reflect.DeepEqual(got, map[record.Status]int{record.Pass: 2, record.Skip: 1}) {
		t.Errorf("NCCL-003 counts %v", got)
	}
	// A criterion a run did not judge is nil, and shown as —.
	for _, x := range []struct {
		id  string
		run int
	}{{"NCCL-003", 2}, {"IMG-001", 2}, {"RECOV-003", 0}, {"RECOV-003", 2}} {
		if cell := cellOf(t, c, x.id, x.run); cell != nil || criterionText(cell) != "—" {
			t.Errorf("%s run %d: %+v, want none", x.id, x.run, cell)
		}
	}
}

// A failed verdict that measured nothing decides the cell even when other
// nodes measured a figure: the figure shown is never a passing node's.
func TestCompareRunsWorstStatusDecidesTheFigure(t *testing.T) {
	r := vendorRuns()[0]
	r.Verdicts = []record.Verdict{
		gbs("NCCL-003", "gpu-01", record.Pass, 400),
		{ID: "NCCL-003", Node: "gpu-02", Status: record.Fail, Measured: "no result: all_reduce_perf exit 1"},
		gbs("NCCL-003", "gpu-03", record.Pass, 380),
	}
	c := CompareRuns([]*record.Run{r, vendorRuns()[1]})
	cell := cellOf(t, c, "NCCL-003", 0)
	if cell.Status != record.Fail || cell.Node != "gpu-02" || cell.Value != nil ||
		criterionText(cell) != "FAIL (1 of 3) no result: all_reduce_perf exit 1 on gpu-02" {
		t.Errorf("%+v: %q", cell, criterionText(cell))
	}
}

func TestCompareRunsColumns(t *testing.T) {
	c := CompareRuns(vendorRuns())
	a, b, x := c.Runs[0], c.Runs[1], c.Runs[2]
	if a.Label != "vendor-a" || b.Label != "vendor-b" || x.Label != "vendor-c" {
		t.Errorf("labels %q %q %q", a.Label, b.Label, x.Label)
	}
	// Nodes: gpu-02 is out twice over; gpu-03 is in (NCCL-003 only singles
	// it out as the slowest, which passed).
	if !reflect.DeepEqual(a.NodesAccepted, []string{"gpu-01", "gpu-03"}) || a.NodesTested != 3 ||
		!reflect.DeepEqual(a.NodesNotAccepted, []RejectedNode{{"gpu-02", "quarantined: preflight: 7 of 8 GPUs visible; FAIL GPU-001"}}) {
		t.Errorf("vendor-a nodes: tested %d, accepted %v, not %v", a.NodesTested, a.NodesAccepted, a.NodesNotAccepted)
	}
	// A WARN does not reject a node.
	if len(b.NodesAccepted) != 2 || len(b.NodesNotAccepted) != 0 {
		t.Errorf("vendor-b nodes: %v, not %v", b.NodesAccepted, b.NodesNotAccepted)
	}
	if a.Quote == nil || *a.Quote != (ComparedQuote{GPUModel: "NVIDIA H100 80GB HBM3", GPUsPerNode: 8, GPUMemoryGiB: 80, FormFactor: "SXM",
		Fabric: "infiniband", NICsPerNode: 8, NICGbps: 400, PricePerGPUHour: 2.49, Currency: "USD"}) || x.Quote != nil {
		t.Errorf("quotes %+v, %+v", a.Quote, x.Quote)
	}
	want := &ComparedFailure{Outcome: "ok", Inject: "kill-node", Recovery: "elastic", Victim: "gpu-03", InjectedAt: 61.5,
		DetectionSecs: num(2.1), ResumeSecs: num(14.25), StepsLost: new(3), VictimBackAt: num(92), BilledNodeSecs: 28.5}
	if !reflect.DeepEqual(a.Failure, want) {
		t.Errorf("vendor-a failure %+v", a.Failure)
	}
	if b.Failure == nil || b.Failure.VictimBackAt != nil || x.Failure != nil {
		t.Errorf("failure: vendor-b %+v, vendor-c %+v", b.Failure, x.Failure)
	}
	if a.Cost == nil || a.Cost.TotalCost != 59.76 || *a.Cost.CostPerUnit != 29.88 || x.Cost != nil {
		t.Errorf("cost: %+v, %+v", a.Cost, x.Cost)
	}
	if a.Accepted || !b.Accepted || x.Accepted || x.Result != "INTERRUPTED" {
		t.Errorf("verdicts %v %v %v (%s)", a.Accepted, b.Accepted, x.Accepted, x.Result)
	}
	for _, n := range []string{
		"the quotes name different GPU models (NVIDIA H100 80GB HBM3; NVIDIA H100 NVL): the figures are not like for like",
		"the prices are in different currencies (USD, EUR): convert them before comparing costs",
		"vendor-c did not run to its end (INTERRUPTED): what it did not measure is missing",
		"vendor-c has no ledger (no price in its quote, or made before gpuaccept kept one): no cost per accepted unit",
	} {
		if !strings.Contains(strings.Join(c.Notes, "\n"), n) {
			t.Errorf("notes lack %q: %q", n, c.Notes)
		}
	}
	if len(c.Notes) != 4 {
		t.Errorf("%d notes: %q", len(c.Notes), c.Notes)
	}

	// The same provider twice: told apart by window, then by position;
	// a label given wins.
	runs := vendorRuns()
	runs[2].Provider = "vendor-a"
	if c := CompareRuns(runs); c.Runs[0].Label != "vendor-a (2026-11-30 05:30-09:30 UTC)" || c.Runs[1].Label != "vendor-b" || c.Runs[2].Label != "vendor-a" {
		t.Errorf("labels %q %q %q", c.Runs[0].Label, c.Runs[1].Label, c.Runs[2].Label)
	}
	runs[2].Window = runs[0].Window
	if c := CompareRuns(runs, "", "Vendor B"); c.Runs[0].Label != "vendor-a (2026-11-30 05:30-09:30 UTC) #1" || c.Runs[1].Label != "Vendor B" || c.Runs[2].Label != "vendor-a (2026-11-30 05:30-09:30 UTC) #3" {
		t.Errorf("labels %q %q %q", c.Runs[0].Label, c.Runs[1].Label, c.Runs[2].Label)
	}
}

// The rows the brief asks for, in the text table: the run, the quote,
// the nodes, every criterion, the failure test (why not, where it did
// not run), the cost (why not, without a ledger) and the verdict.
func TestCompareTextRows(t *testing.T) {
	var b bytes.Buffer
	if err := CompareText(&b, CompareRuns(vendorRuns()), false, 1000); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, re := range []string{
		`\n\|\s+\|\s+vendor-a\s+\|\s+vendor-b\s+\|\s+vendor-c\s+\|\n`,
		`\| run ID\s+\| 20261130T054012Z-vendor-a\s+\| 20261201T080000Z-vendor-b\s+\| 20261202T090000Z-vendor-c\s+\|`,
		`\| quote: price per GPU-hour\s+\| 2\.49 USD\s+\| 2\.10 EUR\s+\| —\s+\|`,
		`\| quote: NICs per node\s+\| 8 × 400 Gb/s\s+\| 2 × 200 Gb/s\s+\| —\s+\|`,
		`\| nodes accepted\s+\| 2 of 3 \(not: gpu-02\)\s+\| 2 of 2\s+\| 2 of 2\s+\|`,
		`\| NCCL-002\s+\| FAIL 296\.1 GB/s vs 370 GB/s \(0\.80\)\s+\| PASS 372\.4 GB/s vs 360 GB/s \(1\.03\)\s+\| SKIP interrupted\s+\|`,
		`\| failure: test\s+\| kill-node on gpu-03, elastic recovery\s+\| kill-worker on b2, relaunch recovery\s+\| not run: the run has no failure phase\s+\|`,
		`\| failure: time to detection\s+\| 2\.1 s\s+\| 1\.2 s\s+\| —\s+\|`,
		`\| failure: time to resumed progress\s+\| 14\.25 s\s+\| 31\.7 s\s+\| —\s+\|`,
		`\| failure: steps lost\s+\| 3\s+\| 0\s+\| —\s+\|`,
		`\| failure: victim back\s+\| 30\.5 s after the failure\s+\| never\s+\| —\s+\|`,
		`\| failure: stall billed\s+\| 28\.5 node-s\s+\| 63\.4 node-s\s+\| —\s+\|`,
		`\| cost of the window\s+\| 59\.76 USD\s+\| 16\.80 EUR\s+\| no price: the quote states no price_per_gpu_hour\s+\|`,
		`\| cost per accepted unit\s+\| 29\.88 USD per accepted node from the ledger \(2 accepted\)\s+\| 8\.40 EUR per accepted node from the ledger \(2 accepted\)\s+\| —\s+\|`,
		`\| verdict\s+\| NOT ACCEPTED: GPU-001, NCCL-002 failed \(2 FAIL, 0 WARN, 1 SKIP\)\s+\| ACCEPTED\s+\| NOT ACCEPTED: INTERRUPTED\s+\|`,
		`\n3 runs compared: ACCEPTED vendor-b; NOT ACCEPTED vendor-a, vendor-c\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no match for %s in\n%s", re, out)
		}
	}
	if strings.Contains(out, "SIMULATED") {
		t.Error("SIMULATED, and no run was")
	}
}

func TestCompareSimulated(t *testing.T) {
	runs := vendorRuns()
	runs[1].Simulated = true
	c := CompareRuns(runs)
	var text, md, page bytes.Buffer
	if CompareText(&text, c, false, 1000) != nil || CompareMarkdown(&md, c) != nil || CompareHTML(&page, c) != nil {
		t.Fatal("render")
	}
	if !strings.HasPrefix(text.String(), "SIMULATED | ") || !strings.HasSuffix(text.String(), "(SIMULATED)\n") ||
		!strings.HasPrefix(md.String(), "> **SIMULATED**") || !strings.Contains(page.String(), `id="simulated"`) {
		t.Errorf("not marked SIMULATED:\n%s\n%s", text.String(), md.String())
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "vendor-b ran on SIMULATED nodes") {
		t.Errorf("notes %q", c.Notes)
	}
}

// Colour only adds escape codes, so the table stays aligned.
func TestCompareTextColor(t *testing.T) {
	c := CompareRuns(vendorRuns())
	var plain, colored bytes.Buffer
	if CompareText(&plain, c, false, 1000) != nil || CompareText(&colored, c, true, 1000) != nil {
		t.Fatal("render")
	}
	if !strings.Contains(colored.String(), ansiRed+"FAIL"+ansiReset+" 296.1") || !strings.Contains(colored.String(), ansiGreen+"ACCEPTED"+ansiReset) {
		t.Errorf("statuses not coloured:\n%s", colored.String())
	}
	stripped := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colored.String(), "")
	if stripped != plain.String() {
		t.Errorf("coloured output differs from plain beyond escape codes:\n%s\n---\n%s", stripped, plain.String())
	}
}

func TestCompareHTML(t *testing.T) {
	runs := vendorRuns()
	runs[0].Provider = `<b>vendor-a</b>`
	var b bytes.Buffer
	if err := CompareHTML(&b, CompareRuns(runs)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<table id="compare">`,
		`<th scope="col">&lt;b&gt;vendor-a&lt;/b&gt;</th><th scope="col">vendor-b</th><th scope="col">vendor-c</th>`,
		`<th colspan="4" scope="rowgroup">Acceptance criteria</th>`,
		`<th scope="row">NCCL-002<span class="title">inter-node all_reduce bus bandwidth matches the quote</span></th><td class="fail">FAIL 296.1 GB/s vs 370 GB/s (0.80)</td><td class="pass">PASS 372.4 GB/s vs 360 GB/s (1.03)</td><td class="skip">SKIP interrupted</td>`,
		`<th scope="row">cost per accepted unit</th><td>29.88 USD per accepted node from the ledger (2 accepted)</td>`,
		`<td class="pass">ACCEPTED</td>`,
		`</html>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// Self-contained: nothing runs, nothing is fetched.
	for _, bad := range []string{"<script", "<b>vendor-a", "src=", "href=", "@import", "url("} {
		if strings.Contains(strings.ToLower(page), strings.ToLower(bad)) {
			t.Errorf("page has %q", bad)
		}
	}
}

func TestCompareJSON(t *testing.T) {
	c := CompareRuns(vendorRuns())
	var b bytes.Buffer
	if err := CompareJSON(&b, c); err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, c) {
		t.Errorf("the JSON does not read back as the comparison (%v)", err)
	}
	// What a reader relies on: the schema, one entry per run in every
	// criterion, null where a run has no verdict, lists never null.
	var raw struct {
		Schema   string
		Runs     []map[string]any
		Criteria []struct {
			ID   string
			Runs []map[string]any
		}
		Notes []string
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Schema != "gpuaccept.compare/v1" || len(raw.Runs) != 3 {
		t.Fatalf("schema %q, %d runs", raw.Schema, len(raw.Runs))
	}
	for _, cr := range raw.Criteria {
		if cr.ID == "NCCL-003" && (len(cr.Runs) != 3 || cr.Runs[2] != nil || cr.Runs[0]["status"] != "PASS" || cr.Runs[0]["value"] != 449.2) {
			t.Errorf("NCCL-003: %v", cr.Runs)
		}
	}
	if raw.Runs[2]["failure"] != nil || raw.Runs[2]["cost"] != nil || raw.Runs[2]["quote"] != nil {
		t.Errorf("vendor-c: %v", raw.Runs[2])
	}
	if f := raw.Runs[0]["failure"].(map[string]any); f["detection_seconds"] != 2.1 || f["steps_lost"] != 3.0 || f["victim_back_at"] != 92.0 {
		t.Errorf("vendor-a failure: %v", f)
	}
	if na, ok := raw.Runs[1]["nodes_not_accepted"].([]any); !ok || len(na) != 0 {
		t.Errorf("vendor-b nodes_not_accepted: %#v, want []", raw.Runs[1]["nodes_not_accepted"])
	}
}

func TestLoadRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r *record.Run) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(p, "run.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	runs := vendorRuns()
	a, b := write("a", runs[0]), write("b", runs[1])
	copyOfA := write("a-copy", runs[0])
	if err := os.Symlink(a, filepath.Join(dir, "a-link")); err != nil {
		t.Fatal(err)
	}

	got, files, err := LoadRuns([]string{a, filepath.Join(b, "run.json")})
	if err != nil || len(got) != 2 || got[1].ID != runs[1].ID || files[0] != filepath.Join(a, "run.json") || files[1] != filepath.Join(b, "run.json") {
		t.Fatalf("LoadRuns: %v, %v", err, files)
	}
	missing := filepath.Join(dir, "nowhere")
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{nil, "compare needs 2 or more runs (run directories or run.json files), got none"},
		{[]string{a}, "compare needs 2 or more runs (run directories or run.json files), got 1: " + a},
		{[]string{a, missing}, missing + ": no such file or directory"},
		{[]string{a, b, filepath.Join(a, "run.json")}, filepath.Join(a, "run.json") + ": the same run.json as " + a},
		{[]string{a, filepath.Join(dir, "a-link")}, filepath.Join(dir, "a-link") + ": the same run.json as " + a},
		{[]string{a, copyOfA}, copyOfA + ": the same run as " + a + " (20261130T054012Z-vendor-a, a copy?)"},
	} {
		if _, _, err := LoadRuns(c.paths); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.paths, err, c.want)
		}
	}
}

// Side by side at any width a run's column can be read in, its cells
// wrapped (they were only at 400 columns); past that a block per row,
// the runs one under the other, and a line that says how to read it.
func TestCompareTextFitsTheWidth(t *testing.T) {
	for _, x := range []struct {
		runs       int
		width      int
		sideBySide bool
	}{{3, 100, false}, {3, 160, true}, {2, 100, true}, {3, 60, false}, {2, 1000, true}} {
		var b bytes.Buffer
		if err := CompareText(&b, CompareRuns(vendorRuns()[:x.runs]), false, x.width); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for i, l := range strings.Split(out, "\n") {
			if n := len([]rune(l)); n > x.width {
				t.Errorf("%d runs at %d: line %d is %d columns:\n%s", x.runs, x.width, i+1, n, l)
			}
		}
		header := regexp.MustCompile(`(?m)^\|\s+\|\s+vendor-a\s+\|\s+vendor-b\s+\|`)
		blocks := fmt.Sprintf("%d runs do not fit side by side in %d columns", x.runs, x.width)
		if got := header.MatchString(out); got != x.sideBySide {
			t.Errorf("%d runs at %d: side by side %v, want %v:\n%s", x.runs, x.width, got, x.sideBySide, out)
		}
		if x.sideBySide {
			continue
		}
		for _, want := range []string{blocks, "\nNCCL-002\n  vendor-a  FAIL 296.1 GB/s", "\n  vendor-c  SKIP interrupted\n",
			"\nquote: lint\n  all 3     not recorded"} {
			if !strings.Contains(out, want) {
				t.Errorf("%d runs at %d: no %q in\n%s", x.runs, x.width, want, out)
			}
		}
	}
}

// A quote the lint found nothing in reads "no warnings", as a run's that
// recorded it (lint [], or a run that kept its build, which kept the lint
// too): not "not recorded" like a run made before gpuaccept kept it.
func TestCompareLintRecorded(t *testing.T) {
	runs := vendorRuns()
	runs[0].Lint = []record.Finding{}
	runs[1].Build = &record.Build{Version: "v0.3.0"}
	runs = append(runs, &record.Run{ID: "d", Provider: "vendor-d", Lint: []record.Finding{{ID: "QUOTE-004"}}})
	c := CompareRuns(runs)
	var lint []string
	for _, sec := range compareSections(c) {
		for _, r := range sec.Rows {
			if r.Label == "lint" {
				for _, x := range r.Cells {
					lint = append(lint, x.Text)
				}
			}
		}
	}
	want := []string{"no warnings", "no warnings", "not recorded (a run made before gpuaccept kept it)", "1 warning(s): QUOTE-004"}
	if !reflect.DeepEqual(lint, want) {
		t.Errorf("lint row %q, want %q", lint, want)
	}
	var b bytes.Buffer
	if err := CompareJSON(&b, c); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs []struct {
			LintRecorded *bool `json:"lint_recorded"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Runs {
		if r.LintRecorded == nil || *r.LintRecorded != (i != 2) {
			t.Errorf("run %d: lint_recorded %v, want %v", i, r.LintRecorded, i != 2)
		}
	}
}

// One directory of runs is the runs in it.
func TestLoadRunsOneDirectoryOfRuns(t *testing.T) {
	dir := t.TempDir()
	for i, r := range vendorRuns()[:2] {
		sub := filepath.Join(dir, fmt.Sprint("run", i))
		js, _ := json.Marshal(r)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "run.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, _, err := LoadRuns([]string{dir})
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs, %v; want the 2 in %s", len(runs), err, dir)
	}
}
