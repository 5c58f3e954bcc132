package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
)

func num(f float64) *float64 { return &f }

// diffNode is what a fixture records of one node.
type diffNode struct {
	name, driver, cuda, kernel, nccl, imageID string
	serials, vbios                            []string // per GPU
	firmware                                  string   // every adapter's; "" not recorded
}

func (n diffNode) facts() string {
	type gpu struct {
		Index  int    `json:"index"`
		Serial string `json:"serial,omitempty"`
		VBIOS  string `json:"vbios,omitempty"`
	}
	type nic struct {
		Device   string `json:"device"`
		Port     int    `json:"port"`
		Firmware string `json:"firmware,omitempty"`
	}
	f := struct {
		Driver string `json:"driver,omitempty"`
		CUDA   string `json:"cuda,omitempty"`
		Kernel string `json:"kernel,omitempty"`
		GPUs   []gpu  `json:"gpus"`
		NICs   []nic  `json:"nics"`
	}{Driver: n.driver, CUDA: n.cuda, Kernel: n.kernel}
	for i := range n.serials {
		f.GPUs = append(f.GPUs, gpu{i, n.serials[i], n.vbios[i]})
	}
	// Two ports of mlx5_0 and one of mlx5_10: one firmware per adapter.
	for _, p := range []nic{{"mlx5_0", 1, ""}, {"mlx5_0", 2, ""}, {"mlx5_10", 1, ""}} {
		p.Firmware = n.firmware
		f.NICs = append(f.NICs, p)
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// diffFixture is a run of three nodes with what preflight, the image and
// the NCCL phases record, and the given verdicts.
func diffFixture(id string, start time.Time, nodes []diffNode, clusterNCCL, pin string, vs []record.Verdict) *record.Run {
	r := &record.Run{Schema: record.Schema, ID: id, Tool: "gpuaccept v0.2.0", Provider: "vendor-a", Region: "eu-west-1",
		Started: start, Ended: start.Add(time.Hour), Verdicts: vs}
	images := map[string]any{}
	for i, n := range nodes {
		r.Nodes = append(r.Nodes, record.Node{Index: i, Name: n.name, Address: fmt.Sprintf("10.0.0.%d:22", 11+i)})
		r.Phases = append(r.Phases, withData(phase("preflight", n.name, i, record.OK, 0, 40, ""), n.facts()))
		if n.nccl != "" {
			r.Phases = append(r.Phases, withData(phase("intranode", n.name, i, record.OK, 100, 60, ""),
				`{"command":"all_reduce_perf -g 8","repeats":[{"seconds":20},{"seconds":20,"nccl_version":"`+n.nccl+`"}]}`))
		}
		if n.imageID != "" {
			images[n.name] = map[string]any{"image_id": n.imageID, "repo_digests": []string{"registry.example/train@sha256:" + n.imageID[:8] + "d1"}}
		}
	}
	img, _ := json.Marshal(map[string]any{"reference": "registry.example/train@sha256:" + pin, "pin": pin, "nodes": images})
	r.Phases = append(r.Phases, withData(phase("image", "", -1, record.OK, 50, 30, ""), string(img)))
	ar := `{"repeats":[{"seconds":30}]}`
	if clusterNCCL != "" {
		ar = `{"repeats":[{"seconds":30,"nccl_version":"` + clusterNCCL + `"}]}`
	}
	r.Phases = append(r.Phases, withData(phase("allreduce", "", -1, record.OK, 200, 90, ""), ar))
	return r
}

func gbs(id, node string, st record.Status, x float64) record.Verdict {
	return record.Verdict{ID: id, Title: id + " throughput", Node: node, Status: st, Value: num(x), Unit: record.UnitGBs,
		Measured: fmt.Sprintf("%g GB/s", x)}
}

func secs(id, node string, st record.Status, x float64) record.Verdict {
	return record.Verdict{ID: id, Title: id + " time", Node: node, Status: st, Value: num(x), Unit: record.UnitSeconds,
		Measured: fmt.Sprintf("%g s", x)}
}

func plain(id, node string, st record.Status) record.Verdict {
	return record.Verdict{ID: id, Title: id, Node: node, Status: st}
}

// diffPair: the baseline before a driver upgrade and the candidate after
// it, with one of everything the diff tells apart.
func diffPair() (base, cand *record.Run) {
	serials := []string{"1655022005478", "1654522012780"}
	vb := []string{"96.00.74.00.01", "96.00.74.00.01"}
	pin := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	baseNodes := []diffNode{
		{name: "gpu-01", driver: "535.183.01", cuda: "12.2", kernel: "5.15.0-105-generic", imageID: pin, serials: serials, vbios: vb},
		{name: "gpu-02", driver: "535.183.01", cuda: "12.2", kernel: "5.15.0-105-generic", imageID: pin,
			serials: []string{"1654922018857", "1654522012479"}, vbios: vb},
		{name: "gpu-03", driver: "535.183.01", cuda: "12.2", kernel: "5.15.0-105-generic", imageID: pin,
			serials: []string{"1654922016523", "1655022006092"}, vbios: vb},
	}
	base = diffFixture("20261130T054012Z-vendor-a", t0, baseNodes, "", pin, []record.Verdict{
		gbs("NCCL-002", "", record.Pass, 370.2),
		gbs("NCCL-003", "gpu-01", record.Pass, 451.3),
		gbs("NCCL-003", "gpu-02", record.Pass, 452.3),
		gbs("NCCL-003", "gpu-03", record.Pass, 449.2),
		{ID: "NCCL-004", Title: "no slow node or link", Status: record.Pass, Value: num(0.98)},
		gbs("STAGE-002", "gpu-01", record.Skip, 2.1),
		gbs("STAGE-002", "gpu-02", record.Skip, 2.0),
		secs("CKPT-004", "", record.Pass, 41.5),
		{ID: "RECOV-002", Title: "steps lost", Status: record.Pass, Value: num(0), Unit: record.UnitSteps},
		secs("IMG-001", "gpu-01", record.Pass, 12.0),
		plain("GPU-005", "gpu-01", record.Pass),
		plain("DIAG-001", "gpu-02", record.Fail),
		plain("DIAG-001", "gpu-03", record.Pass),
		plain("NET-001", "gpu-03", record.Pass),
	})
	base.Nodes = append(base.Nodes, record.Node{Index: 3, Name: "gpu-04", Address: "10.0.0.14:22"})
	base.Regression = &record.Regression{Threshold: 0.1}

	// After: a new driver and CUDA everywhere, gpu-02's GPU 1 replaced,
	// gpu-03's VBIOS updated on GPU 1, the IB firmware recorded now, NCCL's
	// version printed; gpu-04 gone, gpu-05 new.
	candNodes := []diffNode{
		{name: "gpu-01", driver: "550.90.07", cuda: "12.4", kernel: "5.15.0-105-generic", imageID: pin, serials: serials, vbios: vb,
			firmware: "28.39.1002", nccl: "2.21.5"},
		{name: "gpu-02", driver: "550.90.07", cuda: "12.4", kernel: "5.15.0-105-generic", imageID: pin,
			serials: []string{"1654922018857", "1656022000001"}, vbios: vb, firmware: "28.39.1002", nccl: "2.21.5"},
		{name: "gpu-03", driver: "550.90.07", cuda: "12.4", kernel: "5.15.0-105-generic", imageID: pin,
			serials: []string{"1654922016523", "1655022006092"}, vbios: []string{"96.00.74.00.01", "96.00.89.00.01"},
			firmware: "28.39.1002", nccl: "2.21.5"},
		{name: "gpu-05", driver: "550.90.07", cuda: "12.4", kernel: "5.15.0-105-generic", imageID: pin, serials: serials, vbios: vb},
	}
	cand = diffFixture("20261207T054012Z-vendor-a", t0.Add(7*24*time.Hour), candNodes, "2.21.5", pin, []record.Verdict{
		gbs("NCCL-002", "", record.Fail, 296.1), // 20% down, and under the quote now
		gbs("NCCL-003", "gpu-01", record.Pass, 460.3),
		gbs("NCCL-003", "gpu-02", record.Pass, 443.3),  // 2% down: noise
		gbs("NCCL-003", "gpu-03", record.Pass, 404.28), // 10% down, gpu-03 allowed 15% below
		{ID: "NCCL-004", Title: "no slow node or link", Node: "gpu-03", Status: record.Fail, Value: num(0.52)},
		{ID: "STAGE-002", Title: "STAGE-002 throughput", Node: "gpu-01", Status: record.Skip, Value: num(2100), Unit: "MB/s"},
		gbs("STAGE-002", "gpu-03", record.Skip, 1.9),
		secs("CKPT-004", "", record.Pass, 47.0), // 13% slower
		{ID: "RECOV-002", Title: "steps lost", Status: record.Pass, Value: num(3), Unit: record.UnitSteps},
		plain("IMG-001", "gpu-01", record.Fail),
		plain("GPU-005", "gpu-01", record.Pass),
		plain("DIAG-001", "gpu-02", record.Pass),
		plain("DIAG-001", "gpu-03", record.Warn),
		plain("NET-001", "gpu-03", record.Fail),
		plain("NET-001", "gpu-05", record.Fail),
	})
	cand.Regression = &record.Regression{Threshold: 0.05, ByID: map[string]float64{"CKPT-004": 0.2, "NCCL-003": 0.15}}
	return base, cand
}

func TestDiffGolden(t *testing.T) {
	base, cand := diffPair()
	d := Compare(base, cand)
	for _, r := range []struct {
		ext    string
		render func(*bytes.Buffer) error
	}{
		{"txt", func(b *bytes.Buffer) error { return DiffText(b, d, false) }},
		{"md", func(b *bytes.Buffer) error { return DiffMarkdown(b, d) }},
		{"json", func(b *bytes.Buffer) error { return DiffJSON(b, d) }},
	} {
		t.Run(r.ext, func(t *testing.T) {
			var b bytes.Buffer
			if err := r.render(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, "diff."+r.ext, b.Bytes())
			if r.ext == "json" {
				var back Diff
				if err := json.Unmarshal(b.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, d) {
					t.Errorf("the JSON does not read back as the diff (%v)", err)
				}
			}
		})
	}
}

func TestDiffChanges(t *testing.T) {
	base, cand := diffPair()
	before, _ := json.Marshal([]*record.Run{base, cand})
	d := Compare(base, cand)
	if after, _ := json.Marshal([]*record.Run{base, cand}); !bytes.Equal(before, after) {
		t.Error("Compare modified its runs")
	}
	got := map[string]Change{}
	for _, c := range d.Changed {
		got[c.Node+" "+c.Item] = c
	}
	want := map[string]Change{
		"gpu-01 driver":      {Node: "gpu-01", Item: "driver", Baseline: "535.183.01", Candidate: "550.90.07"},
		"gpu-02 driver":      {Node: "gpu-02", Item: "driver", Baseline: "535.183.01", Candidate: "550.90.07"},
		"gpu-03 driver":      {Node: "gpu-03", Item: "driver", Baseline: "535.183.01", Candidate: "550.90.07"},
		"gpu-01 CUDA":        {Node: "gpu-01", Item: "CUDA", Baseline: "12.2", Candidate: "12.4"},
		"gpu-02 CUDA":        {Node: "gpu-02", Item: "CUDA", Baseline: "12.2", Candidate: "12.4"},
		"gpu-03 CUDA":        {Node: "gpu-03", Item: "CUDA", Baseline: "12.2", Candidate: "12.4"},
		"gpu-02 GPU serials": {Node: "gpu-02", Item: "GPU serials", Baseline: "1654522012479", Candidate: "1656022000001"},
		"gpu-03 VBIOS":       {Node: "gpu-03", Item: "VBIOS", Baseline: "GPU 1: 96.00.74.00.01", Candidate: "GPU 1: 96.00.89.00.01"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changed:\n got %+v\nwant %+v", got, want)
	}
	// What only the candidate recorded is not a change of version, and
	// what neither recorded says so.
	var one []string
	for _, c := range d.OneSided {
		one = append(one, c.Node+" "+c.Item+" "+recorded(c.Baseline)+" -> "+recorded(c.Candidate))
	}
	wantOne := []string{"cluster NCCL (all-reduce) not recorded -> 2.21.5"}
	for _, n := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		wantOne = append(wantOne, n+" NCCL (intra-node) not recorded -> 2.21.5", n+" IB firmware not recorded -> 28.39.1002")
	}
	slices.Sort(one)
	slices.Sort(wantOne)
	if !slices.Equal(one, wantOne) {
		t.Errorf("recorded in one run:\n got %q\nwant %q", one, wantOne)
	}
	if len(d.NotRecorded) != 0 {
		t.Errorf("not recorded: %+v", d.NotRecorded)
	}
	if !slices.Equal(d.NodesOnlyInBaseline, []string{"gpu-04"}) || !slices.Equal(d.NodesOnlyInCandidate, []string{"gpu-05"}) {
		t.Errorf("nodes only in one run: %v, %v", d.NodesOnlyInBaseline, d.NodesOnlyInCandidate)
	}
	// A version change alone is not a regression.
	for _, r := range d.Regressions {
		if strings.Contains(r, "driver") || strings.Contains(r, "CUDA") {
			t.Errorf("a change of version counted as a regression: %s", r)
		}
	}
}

func TestDiffVersionChangeAloneIsNoRegression(t *testing.T) {
	base, _ := diffPair()
	cand, _ := diffPair()
	cand.ID = "after"
	for i, p := range cand.Phases {
		if p.Phase == "preflight" {
			cand.Phases[i].Data = bytes.ReplaceAll(p.Data, []byte("535.183.01"), []byte("550.90.07"))
		}
	}
	d := Compare(base, cand)
	if d.Regressed || len(d.Regressions) != 0 || len(d.Changed) != 3 {
		t.Fatalf("regressed %v %q, %d changes: %+v", d.Regressed, d.Regressions, len(d.Changed), d.Changed)
	}
	for _, c := range d.Changed {
		if c.Item != "driver" || c.Baseline != "535.183.01" || c.Candidate != "550.90.07" {
			t.Errorf("change %+v", c)
		}
	}
	var out bytes.Buffer
	if err := DiffText(&out, d, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "NO REGRESSION: 10 figure(s) compared, 3 change(s) on the nodes\n") {
		t.Errorf("last line:\n%s", out.String())
	}
}

func TestDiffNotRecorded(t *testing.T) {
	base, cand := diffPair()
	// Facts only on the node (no preflight result), no NCCL version and
	// no image anywhere.
	strip := func(r *record.Run) {
		var keep []record.PhaseResult
		for _, p := range r.Phases {
			if p.Phase == "preflight" {
				r.Nodes[p.Index].Facts = p.Data
				continue
			}
			if p.Phase != "image" && p.Phase != "intranode" && p.Phase != "allreduce" {
				keep = append(keep, p)
			}
		}
		r.Phases = keep
	}
	strip(base)
	strip(cand)
	d := Compare(base, cand)
	got := map[string]string{}
	for _, n := range d.NotRecorded {
		got[n.Item] = fmt.Sprint(n.Every, n.Nodes)
	}
	want := map[string]string{
		"NCCL (all-reduce)": "true [cluster]", "image reference": "true [cluster]", "image pin": "true [cluster]",
		"NCCL (intra-node)": "true [gpu-01 gpu-02 gpu-03]", "image ID": "true [gpu-01 gpu-02 gpu-03]",
		"image digest": "true [gpu-01 gpu-02 gpu-03]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("not recorded:\n got %v\nwant %v", got, want)
	}
	if len(d.Changed) != 8 {
		t.Errorf("facts on the node not read: %d changes", len(d.Changed))
	}
	var out bytes.Buffer
	if err := DiffText(&out, d, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"  NCCL (all-reduce) (run.json: the allreduce phase's data.repeats[].nccl_version): on the cluster\n",
		"  NCCL (intra-node) (run.json: the intranode phase's data.repeats[].nccl_version): on every node\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("text lacks %q", line)
		}
	}
}

func TestDiffMetrics(t *testing.T) {
	base, cand := diffPair()
	d := Compare(base, cand)
	got := map[string]string{}
	for _, m := range d.Metrics {
		got[m.ID+" "+nodeLabel(m.Node)] = fmt.Sprintf("%s %s %g", m.Change, deltaText(m.DeltaPct), m.Threshold)
	}
	want := map[string]string{
		"NCCL-002 cluster":  "regression -20.0% 0.05",
		"NCCL-003 gpu-01":   "better +2.0% 0.15",
		"NCCL-003 gpu-02":   "worse -2.0% 0.15",
		"NCCL-003 gpu-03":   "worse -10.0% 0.15",
		"CKPT-004 cluster":  "worse +13.3% 0.2",
		"RECOV-002 cluster": "regression from 0 0.05",
		// The baseline's NCCL-004 is the cluster's, the candidate's names
		// gpu-03: one verdict in each run, so the same one.
		"NCCL-004 gpu-03": "regression -46.9% 0.05",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics:\n got %v\nwant %v", got, want)
	}
	var missing []string
	for _, m := range d.Missing {
		missing = append(missing, m.ID+" "+nodeLabel(m.Node)+": "+m.Why)
	}
	wantMissing := []string{
		"IMG-001 gpu-01: not measured in the candidate",
		"STAGE-002 gpu-01: not comparable: measured in other units",
		"STAGE-002 gpu-02: not measured in the candidate",
		"STAGE-002 gpu-03: not measured in the baseline",
	}
	if !slices.Equal(missing, wantMissing) {
		t.Errorf("missing:\n got %q\nwant %q", missing, wantMissing)
	}
	for _, r := range d.Regressions {
		for _, id := range []string{"STAGE-002", "CKPT-004", "NCCL-003"} {
			if strings.HasPrefix(r, id) {
				t.Errorf("not a regression: %s", r)
			}
		}
	}
}

func TestDiffStatuses(t *testing.T) {
	base, cand := diffPair()
	d := Compare(base, cand)
	var got []string
	for _, s := range d.Statuses {
		got = append(got, fmt.Sprintf("%s %s %s>%s %v", s.ID, nodeLabel(s.Node), s.Baseline, s.Candidate, s.Regression))
	}
	want := []string{
		"DIAG-001 gpu-02 FAIL>PASS false",
		"DIAG-001 gpu-03 PASS>WARN false",
		"IMG-001 gpu-01 PASS>FAIL true",
		"NCCL-002 cluster PASS>FAIL true",
		// The baseline judged NCCL-004 on the cluster and passed; the
		// candidate names gpu-03.
		"NCCL-004 gpu-03 PASS>FAIL true",
		"NET-001 gpu-03 PASS>FAIL true",
		// gpu-05 is new: nothing of it passed before.
	}
	if !slices.Equal(got, want) {
		t.Errorf("statuses:\n got %q\nwant %q", got, want)
	}
	wantRegs := []string{
		"NCCL-002 cluster: 370.2 → 296.1 GB/s (-20.0%; more than 5% worse)",
		// The cluster's score in the baseline, gpu-03's in the candidate:
		// the same verdict, compared.
		"NCCL-004 gpu-03: 0.98 → 0.52 (-46.9%; more than 5% worse)",
		"RECOV-002 cluster: 0 → 3 steps (from 0; more than 5% worse)",
		"IMG-001 gpu-01: PASS → FAIL",
		"NCCL-002 cluster: PASS → FAIL",
		"NCCL-004 gpu-03: PASS → FAIL",
		"NET-001 gpu-03: PASS → FAIL",
	}
	if !d.Regressed || !slices.Equal(d.Regressions, wantRegs) {
		t.Errorf("regressions:\n got %q\nwant %q", d.Regressions, wantRegs)
	}
}

func TestCompareMetric(t *testing.T) {
	for _, c := range []struct {
		name            string
		unit            string
		base, cand, thr float64
		change          string
	}{
		{"busbw 20% down", record.UnitGBs, 370, 296, 0.05, ChangeRegression},
		{"busbw 2% down", record.UnitGBs, 370, 362.6, 0.05, ChangeWorse},
		{"busbw exactly at the threshold", record.UnitGBs, 400, 380, 0.05, ChangeWorse},
		{"busbw up", record.UnitGBs, 370, 400, 0.05, ChangeBetter},
		{"busbw the same", record.UnitGBs, 370, 370, 0.05, ChangeSame},
		{"score down", record.UnitScore, 0.98, 0.5, 0.05, ChangeRegression},
		{"seconds 10% up", record.UnitSeconds, 40, 44, 0.05, ChangeRegression},
		{"seconds 10% down", record.UnitSeconds, 40, 36, 0.05, ChangeBetter},
		{"seconds 10% up within 20%", record.UnitSeconds, 40, 44, 0.2, ChangeWorse},
		{"steps from 0", record.UnitSteps, 0, 1, 0.5, ChangeRegression},
		{"steps to 0", record.UnitSteps, 4, 0, 0.05, ChangeBetter},
		{"GB/s from 0", record.UnitGBs, 0, 1, 0.05, ChangeBetter},
		{"threshold 0: any worsening", record.UnitGBs, 370, 369.9, 0, ChangeRegression},
	} {
		m := compareMetric(record.Verdict{ID: "X-001", Unit: c.unit}, c.base, c.cand, c.thr)
		if m.Change != c.change || m.Regression != (c.change == ChangeRegression) {
			t.Errorf("%s: %s (regression %v), want %s", c.name, m.Change, m.Regression, c.change)
		}
		if (m.DeltaPct == nil) != (c.base == 0) {
			t.Errorf("%s: delta %v", c.name, m.DeltaPct)
		}
		if m.DeltaPct != nil && math.Abs(*m.DeltaPct-(c.cand-c.base)/c.base*100) > 1e-9 {
			t.Errorf("%s: delta %v%%", c.name, *m.DeltaPct)
		}
	}
}

func TestDiffThresholds(t *testing.T) {
	base, cand := diffPair()
	for _, c := range []struct {
		name     string
		b, c     *record.Regression
		from     string
		nccl002  float64
		overNCCL bool
	}{
		{"the candidate's", base.Regression, &record.Regression{Threshold: 0.3}, "candidate", 0.3, false},
		{"the baseline's when the candidate has none", &record.Regression{Threshold: 0.25, ByID: map[string]float64{"NCCL-002": 0.1}}, nil, "baseline", 0.1, true},
		{"the default", nil, nil, "default", 0.05, true},
	} {
		base.Regression, cand.Regression = c.b, c.c
		d := Compare(base, cand)
		var m Metric
		for _, x := range d.Metrics {
			if x.ID == "NCCL-002" {
				m = x
			}
		}
		if d.ThresholdFrom != c.from || m.Threshold != c.nccl002 || m.Regression != c.overNCCL {
			t.Errorf("%s: from %s, NCCL-002 threshold %v regression %v", c.name, d.ThresholdFrom, m.Threshold, m.Regression)
		}
	}
}

func TestDiffTextColor(t *testing.T) {
	base, cand := diffPair()
	d := Compare(base, cand)
	var plainOut, colored bytes.Buffer
	if err := DiffText(&plainOut, d, false); err != nil {
		t.Fatal(err)
	}
	if err := DiffText(&colored, d, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plainOut.String(), "\x1b[") || !strings.Contains(colored.String(), "\x1b[") {
		t.Fatal("colour given unasked, or not given when asked")
	}
	if s := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colored.String(), ""); s != plainOut.String() {
		t.Errorf("coloured text differs from plain beyond escape codes:\n%s\n---\n%s", s, plainOut.String())
	}
}

func TestDiffNotes(t *testing.T) {
	base, cand := diffPair()
	base.Simulated = true
	cand.Provider = "vendor-b"
	cand.Interrupted = true
	cand.Started = base.Started.Add(-time.Hour)
	for i := range cand.Verdicts {
		cand.Verdicts[i].Value = nil
	}
	d := Compare(base, cand)
	want := []string{
		"the baseline ran on SIMULATED nodes, the other did not: its figures are not evidence about real hardware",
		"the candidate did not run to its end (INTERRUPTED): what it did not measure is missing",
		"the candidate recorded no measured values (made before gpuaccept recorded them?): no figure of it is compared",
		"different providers: vendor-a and vendor-b",
		"the candidate started before the baseline: are the two the right way round?",
	}
	if !slices.Equal(d.Notes, want) {
		t.Errorf("notes:\n got %q\nwant %q", d.Notes, want)
	}
	var out bytes.Buffer
	if err := DiffText(&out, d, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "SIMULATED | ") || !strings.Contains(out.String(), "(SIMULATED)\n") {
		t.Errorf("a diff with a simulated run does not say so:\n%s", out.String())
	}
}

func TestNatural(t *testing.T) {
	xs := []string{"mlx5_10", "mlx5_2", "GPU 10", "GPU 9", "mlx5_1", "a", "GPU 09x", ""}
	slices.SortFunc(xs, natural)
	if want := []string{"", "GPU 9", "GPU 09x", "GPU 10", "a", "mlx5_1", "mlx5_2", "mlx5_10"}; !slices.Equal(xs, want) {
		t.Errorf("natural order %q, want %q", xs, want)
	}
}

func TestLoadRun(t *testing.T) {
	dir := t.TempDir()
	base, _ := diffPair()
	data, _ := json.Marshal(base)
	os.WriteFile(filepath.Join(dir, "run.json"), data, 0o644)
	for _, p := range []string{dir, filepath.Join(dir, "run.json")} {
		r, file, err := LoadRun(p)
		if err != nil || r.ID != base.ID || file != filepath.Join(dir, "run.json") {
			t.Errorf("%s: %v %v %s", p, r, err, file)
		}
	}
	// A schema 1 run is still read.
	old := *base
	old.Schema = 1
	data, _ = json.Marshal(&old)
	oldDir := t.TempDir()
	os.WriteFile(filepath.Join(oldDir, "run.json"), data, 0o644)
	if r, _, err := LoadRun(oldDir); err != nil || r.Schema != 1 {
		t.Errorf("a schema 1 run: %v %v", r, err)
	}
	bad := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	for path, want := range map[string]string{
		t.TempDir():                                  ": no run.json: not a run directory",
		filepath.Join(dir, "nothing"):                "nothing: no such file or directory",
		bad("run.json", "{not json"):                 "run.json: not a gpuaccept run.json: ",
		bad("other.json", `{"hello": 1}`):            "other.json: not a gpuaccept run.json (no schema, no id)",
		bad("run.json", `{"schema": 9, "id": "x"}`):  "run.json: run.json schema 9; this gpuaccept reads schemas 1 to 2",
		bad("run.json", `{"schema": -1, "id": "x"}`): "run.json: run.json schema -1; this gpuaccept reads schemas 1 to 2",
	} {
		_, _, err := LoadRun(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), path) {
			t.Errorf("%s: %v, want %q naming the path", path, err, want)
		}
	}
}

// One run keys a requirement by the node it named, the other by the
// cluster: still one verdict, compared.
func TestDiffMatchesANodeVerdictWithTheClusters(t *testing.T) {
	b, c := failedRun(), failedRun()
	score := func(node string, x float64) record.Verdict {
		v := record.Verdict{ID: "NCCL-004", Node: node, Status: record.Pass}
		v.Measure(x, record.UnitScore)
		return v
	}
	b.Verdicts = append(b.Verdicts, score("", 1.0))
	c.Verdicts = append(c.Verdicts, score("gpu-03", 0.5))
	c.Verdicts[len(c.Verdicts)-1].Status = record.Fail
	d := Compare(b, c)
	found := false
	for _, m := range d.Metrics {
		found = found || m.ID == "NCCL-004" && m.Regression
	}
	if !found {
		t.Errorf("NCCL-004 not compared: metrics %+v, missing %+v", d.Metrics, d.Missing)
	}
	for _, m := range d.Missing {
		if m.ID == "NCCL-004" {
			t.Errorf("NCCL-004 listed as measured in one run only: %+v", m)
		}
	}
}

// A change within what the runs' own repeats spread over is noise: not a
// regression, and said so; past the spread it is one.
func TestDiffHoldsAChangeToTheRunsSpread(t *testing.T) {
	m := compareMetric(record.Verdict{ID: "CKPT-002", Unit: record.UnitGBs}, 1.0, 0.6, 0.05)
	m.withSpread(0.5, [2]float64{})
	if m.Regression || !strings.Contains(m.Note, "within the 50% the runs' own repeats spread over") {
		t.Errorf("40%% worse within a 50%% spread: %+v", m)
	}
	m = compareMetric(record.Verdict{ID: "CKPT-002", Unit: record.UnitGBs}, 1.0, 0.4, 0.05)
	m.withSpread(0.5, [2]float64{})
	if !m.Regression || !strings.Contains(metricLine(m), "the runs' own spread of 50%") {
		t.Errorf("60%% worse past a 50%% spread: %+v %s", m, metricLine(m))
	}
	// Half the throughput over a twentieth of a second more is SSH's
	// jitter; over 2 s more it is a slower disk.
	m = compareMetric(record.Verdict{ID: "CKPT-003", Unit: record.UnitGBs}, 0.31, 0.14, 0.5)
	m.withSpread(0, [2]float64{0.054, 0.117})
	if m.Regression || !strings.Contains(m.Note, "less than the 0.25 s a timing over SSH resolves") {
		t.Errorf("0.06 s more: %+v", m)
	}
	m = compareMetric(record.Verdict{ID: "CKPT-003", Unit: record.UnitGBs}, 0.31, 0.14, 0.5)
	m.withSpread(0, [2]float64{2, 4.4})
	if !m.Regression {
		t.Errorf("2.4 s more: %+v", m)
	}
}

// A node's staging throughput is timed over its whole staging, as a
// checkpoint's over its save: CI saw two demos stage 4 MiB at 0.07 GB/s,
// then at 0.03 GB/s, a tenth of a second apart. The cluster's aggregate has
// no one timing.
func TestDiffTimesStagingOverTheNodesStaging(t *testing.T) {
	r := &record.Run{Phases: []record.PhaseResult{
		withData(phase("staging", "gpu-01", 0, record.OK, 10, 1, ""), `{"dir":"/d","bytes":4194304,"seconds":0.06,"gbs":0.07}`),
		withData(phase("checkpoint-write", "gpu-01", 0, record.OK, 12, 1, ""), `{"seconds":0.5}`),
	}}
	for _, c := range []struct {
		id, node string
		want     float64
	}{{"STAGE-002", "gpu-01", 0.06}, {"STAGE-002", "", 0}, {"STAGE-002", "gpu-02", 0}, {"CKPT-002", "gpu-01", 0.5}, {"STAGE-003", "gpu-01", 0}} {
		if got := timedOver(r, record.Verdict{ID: c.id, Node: c.node}); got != c.want {
			t.Errorf("%s %q timed over %g s, want %g", c.id, c.node, got, c.want)
		}
	}
}

// Steps lost are where the failure fell after the last checkpoint: 1 then
// 2 with a checkpoint every 3 steps is chance (CI saw two demos of one seed
// differ so); past the interval, or with no interval known, it counts.
func TestDiffHoldsStepsLostToTheCheckpointInterval(t *testing.T) {
	lost := record.Verdict{ID: "RECOV-002", Unit: record.UnitSteps}
	m := compareMetric(lost, 1, 2, 0.05)
	m.withinInterval(3)
	if m.Regression || !strings.Contains(m.Note, "both within the checkpoint interval of 3") {
		t.Errorf("1 then 2 steps, every 3: %+v", m)
	}
	m = compareMetric(lost, 1, 4, 0.05)
	m.withinInterval(3)
	if !m.Regression {
		t.Errorf("1 then 4 steps, every 3: %+v", m)
	}
	m = compareMetric(lost, 1, 2, 0.05)
	m.withinInterval(0)
	if !m.Regression {
		t.Errorf("1 then 2 steps, interval unknown: %+v", m)
	}
}
