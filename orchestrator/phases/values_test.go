package phases

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// Every judge that measures a figure records it as a number with its unit
// (what `gpuaccept diff` compares); one that measured nothing records none.

func valuesInventory(t *testing.T) *inventory.Inventory {
	inv := &inventory.Inventory{Path: filepath.Join(t.TempDir(), "inv.yaml"), Digest: "x", Provider: "test"}
	for _, n := range []string{"h1", "h2", "h3"} {
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: n, Address: "192.0.2.1"})
	}
	inv.Acceptance.Tolerance = 0.9
	return inv
}

// judgeCanned runs a window of one phase whose result is canned: data for
// a cluster phase, perNode[name] for a per-node one.
func judgeCanned(t *testing.T, inv *inventory.Inventory, p orchestrator.Phase, data any, perNode map[string]any) []record.Verdict {
	t.Helper()
	if p.Cluster != nil {
		p.Cluster = func(context.Context, *orchestrator.Window) (any, error) { return data, nil }
	} else {
		p.PerNode = func(_ context.Context, _ *orchestrator.Window, n *orchestrator.Node) (any, error) {
			return perNode[n.Name], nil
		}
	}
	rec, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{p}, orchestrator.Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return rec.Verdicts
}

type wantValue struct {
	id, node string
	value    float64 // NaN: no value
	unit     string
}

func checkValues(t *testing.T, vs []record.Verdict, want []wantValue) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, v := range vs {
			if v.ID != w.id || v.Node != w.node {
				continue
			}
			found = true
			switch {
			case math.IsNaN(w.value) && v.Value != nil:
				t.Errorf("%s %s: value %v %s, want none", w.id, w.node, *v.Value, v.Unit)
			case math.IsNaN(w.value):
			case v.Value == nil:
				t.Errorf("%s %s: no value, want %v %s (%+v)", w.id, w.node, w.value, w.unit, v)
			case math.Abs(*v.Value-w.value) > 1e-9 || v.Unit != w.unit:
				t.Errorf("%s %s: %v %q, want %v %q", w.id, w.node, *v.Value, v.Unit, w.value, w.unit)
			}
		}
		if !found {
			t.Errorf("no %s verdict for %q in %+v", w.id, w.node, vs)
		}
	}
}

func sweepOf(median float64, hosts int) Sweep {
	return Sweep{Judgement: &fabric.Judgement{Hosts: hosts, Ranks: 8 * hosts, BusBW: fabric.Spread{Min: median, Median: median, Max: median}}}
}

func TestVerdictValues(t *testing.T) {
	nan := math.NaN()
	t.Run("allreduce", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Phases.AllReduce.Enabled = true
		inv.Quote.InterBusBWGBs = 370
		vs := judgeCanned(t, inv, AllReduce, Sweeps{Repeats: []Sweep{sweepOf(300, 3), sweepOf(360, 3), sweepOf(350, 3)}}, nil)
		checkValues(t, vs, []wantValue{{"NCCL-002", "", 350, "GB/s"}, {"NCCL-001", "", nan, ""}})
	})
	t.Run("allreduce unquoted", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Phases.AllReduce.Enabled = true
		vs := judgeCanned(t, inv, AllReduce, Sweeps{Repeats: []Sweep{sweepOf(123.5, 3)}}, nil)
		checkValues(t, vs, []wantValue{{"NCCL-002", "", 123.5, "GB/s"}})
	})
	t.Run("allreduce failed", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Phases.AllReduce.Enabled = true
		vs := judgeCanned(t, inv, AllReduce, Sweeps{Repeats: []Sweep{{Error: "mpirun: exit 1"}}}, nil)
		checkValues(t, vs, []wantValue{{"NCCL-002", "", nan, ""}})
	})
	t.Run("intranode", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Phases.AllReduce.Enabled = true
		inv.Phases.AllReduce.Repeats = 1
		vs := judgeCanned(t, inv, IntraNode, nil, map[string]any{
			"h1": Intra{Repeats: []Sweep{sweepOf(450, 1)}}, "h2": Intra{Repeats: []Sweep{sweepOf(440, 1)}}, "h3": Intra{}})
		checkValues(t, vs, []wantValue{{"NCCL-003", "h1", 450, "GB/s"}, {"NCCL-003", "h2", 440, "GB/s"}, {"NCCL-003", "h3", nan, ""}})
	})
	t.Run("bisection", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Phases.AllReduce.Enabled = true
		b := Bisected{Bisection: fabric.Bisection{Rounds: 2, Pairs: []fabric.PairResult{{A: "h1", B: "h2", BusBW: 370}},
			Scores: map[string]float64{"h1": 0.99, "h2": 1, "h3": 0.5}, SlowNodes: []string{"h3"}}}
		checkValues(t, judgeCanned(t, inv, Bisection, b, nil), []wantValue{{"NCCL-004", "h3", 0.5, ""}})
	})
	t.Run("staging", func(t *testing.T) {
		vs := judgeStagingWith(t, inventory.Staging{Enabled: true, Dir: "/scratch", Window: time.Minute}, 0, map[string]stagingCanned{
			"h1": {res: stagedFixture(stSumA, 20e9, 10)},
			"h2": {res: stagedFixture(stSumA, 24e9, 16)},
			"h3": {res: &Staged{Dir: "/scratch/x", Bytes: 1e9, Seconds: 1, GBs: 1}}, // did not complete
		})
		checkValues(t, vs, []wantValue{{"STAGE-002", "h1", 2, "GB/s"}, {"STAGE-002", "h2", 1.5, "GB/s"}, {"STAGE-002", "h3", nan, ""},
			{"STAGE-002", "", 44e9 / 1e9 / 16, "GB/s"}, {"STAGE-003", "", 16, "s"}})
	})
	t.Run("checkpoint", func(t *testing.T) {
		w1, w2 := ckptWrote("n1", sumA, sumB), ckptWrote("n2", sumB, sumC)
		vs := checkpointVerdicts([]ckptNode{
			{Name: "n1", Write: w1, Restore: ckptRead(w2, "n2", "drop_caches", sumB, sumC)},
			{Name: "n2", Write: w2, Restore: ckptRead(w1, "n1", "drop_caches", sumA, sumB)},
			{Name: "n3", Absent: "quarantined"},
		}, ckptQuote{GBs: 1, TolWrite: 0.9, TolRead: 0.9, TolIO: 0.9})
		checkValues(t, vs, []wantValue{{"CKPT-002", "n1", 1, "GB/s"}, {"CKPT-003", "n1", 2, "GB/s"}, {"CKPT-002", "n3", nan, ""},
			{"CKPT-004", "", 0.75, "s"}, {"CKPT-001", "n1", nan, ""}})
	})
	t.Run("image", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Image.Reference = "registry.example/x@sha256:" + sumA
		res := Imaged{Mode: "push", Pin: sumA, Archive: &Archive{Bytes: 1 << 30}, DistributionSecs: 42, Nodes: map[string]*NodeImage{
			"h1": {Via: "chain", ID: sumA, Match: true, LoadSecs: 12.5, Smoke: &Smoke{Secs: 3.25, Output: "GPU 0"}},
			"h2": {Via: "chain", ID: sumB, Match: false, LoadSecs: 11},
			"h3": {Via: "chain", ID: sumA, Match: true, LoadSecs: 13, Smoke: &Smoke{Secs: 9, Error: "exit 125"}},
		}}
		checkValues(t, judgeCanned(t, inv, Image, res, nil), []wantValue{{"IMG-003", "", 42, "s"}, {"IMG-001", "h1", 12.5, "s"},
			{"IMG-002", "h1", 3.25, "s"}, {"IMG-001", "h2", nan, ""}, {"IMG-002", "h3", nan, ""}})
	})
	t.Run("failure", func(t *testing.T) {
		inv := valuesInventory(t)
		inv.Phases.Failure.Enabled = true
		inv.Phases.Failure.ResumeWithin = 5 * time.Minute
		maxLost := 5
		inv.Phases.Failure.MaxStepsLost = &maxLost
		resume, from, lost, back := 61.5, 20, 3, 190.0
		f := Failed{Victim: "h3", Nodes: []string{"h1", "h2", "h3"}, Left: map[string]int{"h1": 0, "h2": 0, "h3": 0}, ResumeSecs: &resume}
		f.InjectedAt, f.Resumed, f.ResumedFrom, f.LastStep, f.LastCheckpoint, f.StepsLost, f.VictimBackAt = 100, true, &from, 23, 20, &lost, &back
		checkValues(t, judgeCanned(t, inv, FailurePhase, f, nil), []wantValue{{"RECOV-001", "", 61.5, "s"}, {"RECOV-002", "", 3, "steps"},
			{"RECOV-003", "h3", 90, "s"}, {"RECOV-004", "", nan, ""}})
	})
}
