package phases

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/scripts/standins"
)

// burninLoadsInventory is a burn-in of duration with 1 s gemm.py runs on
// nodes, the stress tools as given.
func burninLoadsInventory(t *testing.T, nodes int, duration time.Duration, extra string) *inventory.Inventory {
	t.Helper()
	inv := fakeInventory(t, nodes, "quote:\n  gpus_per_node: 8\nphases:\n  burnin:\n    enabled: true\n    duration: 1m\n"+
		"    compute: {seconds: 5, size: 1024}\n"+extra)
	inv.Phases.Burnin.Duration, inv.Phases.Burnin.Compute.Seconds = duration, 1
	return inv
}

// steadyGemm answers h's gemm.py runs with one GPU at rate after a second.
func steadyGemm(h *fake.Host, rate float64) {
	onGemm(h, func(*fake.Call) fake.Reply {
		return fake.Reply{Stdout: gemmOut("cpu", "cpu", 1, 1024, rate), Delay: time.Second}
	})
}

// answerIntra makes h answer the burn-in's all_reduce_perf (one process,
// -g 8) from the fabric model, its intra-node busbw given by rate for the
// k-th call (1, 2, ...): the stand-in's own output, nccl-tests' format.
func answerIntra(h *fake.Host, addr string, rate func(k int) float64) {
	onIntra(h, func(k int, c *fake.Call) fake.Reply {
		model := standins.FormatFabric([]standins.FabricHost{{Name: addr, InterGBs: 370, IntraGBs: rate(k), GPUs: 8}})
		return fabricReply(c, model, addr)
	})
	h.Reply(`(?s)^bash -c .* endranks `, fake.Reply{Stdout: "0\n"})
	h.Reply(`_perf -h 2>&1 \| grep -c -e --output_file$`, fake.Reply{Stdout: "0\n"})
}

// onIntra answers the k-th all_reduce_perf run on h (1, 2, ...) with
// reply; a later onIntra replaces an earlier one's answer.
func onIntra(h *fake.Host, reply func(k int, c *fake.Call) fake.Reply) {
	var mu sync.Mutex
	calls := 0
	h.On(`_perf -b `, func(c *fake.Call) fake.Reply {
		mu.Lock()
		calls++
		k := calls
		mu.Unlock()
		return reply(k, c)
	})
}

// TestBurninWithoutAllReducePerfGoesOnWithTheGemm: h2 has none of the
// loads: each is said once as not measured, its gemm.py runs go on, and
// only the collective (on by default) leaves the window INCOMPLETE; h1's
// gpu-burn exits 0 with FAULTY GPUs (a genuine summary) and is failed by
// BURN-003.
func TestBurninWithoutAllReducePerfGoesOnWithTheGemm(t *testing.T) {
	inv := burninLoadsInventory(t, 2, 2500*time.Millisecond, "    dcgm_stress: false\n")
	f := fakeFleet(inv)
	steadyGemm(f.Host("h1"), 0.020)
	steadyGemm(f.Host("h2"), 0.020)
	answerIntra(f.Host("h1"), "192.0.2.11", func(int) float64 { return 450 })
	faulty, err := os.ReadFile(filepath.Join("../../../shared/samples/gpu-burn", "gpuburn12-16gpu-faulty-negative-error-counts-warning-summary-excerpt.txt"))
	if err != nil {
		t.Fatalf("the shared gpu-burn samples: %v", err)
	}
	f.Host("h1").Reply(`command -v -- gpu_burn\) && cd -- "\$\(dirname -- "\$p"\)" && exec "\$p" 1 2>&1$`, fake.Reply{Stdout: string(faulty)})
	answerTools(f.Host("h2"), "python3")
	rec := runFake(t, inv, f, Burnin)

	var h1, h2 BurninNode
	if r := resultOf(t, rec, "burnin", 1); r.Outcome != record.OK || jsonOf(r, &h2) != nil {
		t.Fatalf("h2: %s %s, want its gemm figures kept", r.Outcome, r.Error)
	}
	if len(h2.Runs) < 2 || len(h2.NotMeasured) != 2 || h2.Runs[0].Collective != nil {
		t.Errorf("h2: %d run(s), not measured %+v, collective %+v; want 2 runs and 2 loads (dcgm_stress is off) said once", len(h2.Runs), h2.NotMeasured, h2.Runs[0].Collective)
	}
	if m := h2.NotMeasured[0]; m.Load != "collectives" || !m.Asked || !strings.Contains(m.Reason, "all_reduce_perf not installed") {
		t.Errorf("h2's collective: %+v", m)
	}
	v := verdictOf(t, rec, "BURN-002", "h2")
	if v.Status == record.Fail || !strings.Contains(v.Incomplete, "all_reduce_perf not installed") {
		t.Errorf("BURN-002 h2: %s %q incomplete %q; want not failed, and INCOMPLETE naming all_reduce_perf", v.Status, v.Detail, v.Incomplete)
	}
	if v := verdictOf(t, rec, "BURN-003", "h2"); v.Status != record.Skip || v.Incomplete != "" || !strings.Contains(v.Detail, "gpu_burn (or gpu-burn) not installed") {
		t.Errorf("BURN-003 h2 (gpu_burn auto, not installed): %s %q %q; want SKIP, not INCOMPLETE", v.Status, v.Detail, v.Incomplete)
	}
	if v := verdictOf(t, rec, "BURN-001", "h2"); v.Status == record.Fail || v.Status == record.Skip && v.Incomplete != "" {
		t.Errorf("BURN-001 h2: %s %q", v.Status, v.Detail)
	}

	if err := jsonOf(resultOf(t, rec, "burnin", 0), &h1); err != nil || len(h1.Runs) < 2 {
		t.Fatalf("h1: %v %+v", err, h1)
	}
	for i, r := range h1.Runs {
		if r.Collective == nil || r.Collective.Error != "" || r.Collective.BusBW < 400 || r.Collective.Ranks != 8 {
			t.Errorf("h1 iteration %d: collective %+v, want the model's ~450 GB/s over 8 ranks", i, r.Collective)
		}
		if len(r.Loads) != 1 || r.Loads[0].Exit != 0 || len(r.Loads[0].Faulty) != 16 {
			t.Errorf("h1 iteration %d: loads %+v, want gpu_burn exit 0 with 16 FAULTY", i, r.Loads)
		}
	}
	if v := verdictOf(t, rec, "BURN-003", "h1"); v.Status != record.Fail || !strings.Contains(v.Detail, "16 GPU(s) FAULTY (GPU 0, 1, 2, 3 and 12 more)") {
		t.Errorf("BURN-003 h1: %s %q", v.Status, v.Detail)
	}
	if v := verdictOf(t, rec, "BURN-002", "h1"); v.Status != record.Pass || v.Incomplete != "" {
		t.Errorf("BURN-002 h1 (steady): %s %s %q", v.Status, v.Measured, v.Incomplete)
	}
}

// TestBurninNamesACollectiveThatSlowsInTheLastQuarter: h1's all-reduce
// reads 450 GB/s in the first iteration and 300 after; its GPUs hold
// their rate. BURN-002 fails h1 naming the collective with both figures;
// h2, steady, passes.
func TestBurninNamesACollectiveThatSlowsInTheLastQuarter(t *testing.T) {
	inv := burninLoadsInventory(t, 2, 4*time.Second, "    gpu_burn: false\n    dcgm_stress: false\n")
	f := fakeFleet(inv)
	for _, h := range f.Hosts() {
		steadyGemm(h, 0.020)
	}
	answerIntra(f.Host("h1"), "192.0.2.11", func(k int) float64 {
		if k >= 2 {
			return 300
		}
		return 450
	})
	answerIntra(f.Host("h2"), "192.0.2.12", func(int) float64 { return 450 })
	rec := runFake(t, inv, f, Burnin)
	var h1 BurninNode
	if err := jsonOf(resultOf(t, rec, "burnin", 0), &h1); err != nil {
		t.Fatal(err)
	}
	if h1.DriftWindowS != 1 || h1.CollectiveDrift == nil || h1.CollectiveDrift.Pct > -30 {
		t.Fatalf("h1: window %.2f s, collective drift %+v over %d run(s); want a quarter (1 s) and ~-33 %%", h1.DriftWindowS, h1.CollectiveDrift, len(h1.Runs))
	}
	v := verdictOf(t, rec, "BURN-002", "h1")
	if v.Status != record.Fail || !strings.Contains(v.Measured, "intra-node all-reduce") ||
		!strings.Contains(v.Measured, " to ") || v.Value == nil || *v.Value > 0.7 {
		t.Errorf("BURN-002 h1: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	first, last := h1.CollectiveDrift.First, h1.CollectiveDrift.Last
	if first < 400 || last > 350 {
		t.Errorf("h1's figures %.4g → %.4g, want ~450 → ~300", first, last)
	}
	if v := verdictOf(t, rec, "BURN-002", "h2"); v.Status != record.Pass {
		t.Errorf("BURN-002 h2 (steady): %s %q %q", v.Status, v.Measured, v.Detail)
	}
}

// TestBurninBoundsAHostileAllReduce: an all_reduce_perf that prints
// megabytes of garbage (the first iteration), then a well-formed table
// claiming a bus bandwidth past any GPU's (after): no figure is kept, the
// reasons and the record stay small, and the gemm.py runs go on.
func TestBurninBoundsAHostileAllReduce(t *testing.T) {
	inv := burninLoadsInventory(t, 1, 12*time.Second, "    gpu_burn: false\n    dcgm_stress: false\n") // room for a slow first iteration under load
	f := fakeFleet(inv)
	h := f.Host("h1")
	steadyGemm(h, 0.020)
	answerIntra(h, "192.0.2.11", func(int) float64 { return 450 })
	garbage := strings.Repeat("\x1b[31m#wrong 1e308 NaN \xff\xfe garbage | 8589934592 0.01 1e300\n", 100000)
	huge := standins.FormatFabric([]standins.FabricHost{{Name: "192.0.2.11", InterGBs: 370, IntraGBs: 5e8, GPUs: 8}})
	onIntra(h, func(k int, c *fake.Call) fake.Reply {
		if k == 1 {
			return fake.Reply{Stdout: garbage}
		}
		return fabricReply(c, huge, "192.0.2.11")
	})
	rec := runFake(t, inv, f, Burnin)
	r := resultOf(t, rec, "burnin", 0)
	var res BurninNode
	if err := jsonOf(r, &res); err != nil || len(res.Runs) < 2 {
		t.Fatalf("%s %s: %v, %d run(s); want the gemm.py runs to go on", r.Outcome, r.Error, err, len(res.Runs))
	}
	for i, run := range res.Runs {
		if c := run.Collective; c == nil || c.BusBW != 0 || c.Error == "" || len(c.Error) > 404 {
			t.Errorf("iteration %d: %+v; want no figure, and a bounded reason", i, c)
		} else {
			t.Logf("iteration %d: %s", i, c.Error)
		}
	}
	if c := res.Runs[1].Collective; c == nil || !strings.Contains(c.Error, "past any GPU's") {
		t.Errorf("the table claiming %g GB/s: %+v", 5e8, c)
	}
	if len(r.Data) > 16<<10 {
		t.Errorf("the node's burn-in record is %d bytes", len(r.Data))
	}
	if res.CollectiveDrift != nil {
		t.Errorf("a drift from no figure: %+v", res.CollectiveDrift)
	}
}

// TestBurninCutInItsCollectiveIsNotCarriedOver: the coordinator is lost
// while the first iteration's all-reduce runs. That iteration is not
// whole: the resume does not carry it over (no collective that "failed"
// because it was ended), and runs it again with its figure.
func TestBurninCutInItsCollectiveIsNotCarriedOver(t *testing.T) {
	inv := burninLoadsInventory(t, 1, 1500*time.Millisecond, "    gpu_burn: false\n    dcgm_stress: false\n")
	f := fakeFleet(inv)
	h := f.Host("h1")
	steadyGemm(h, 0.020)
	answerIntra(h, "192.0.2.11", func(int) float64 { return 450 })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	model := standins.FormatFabric([]standins.FabricHost{{Name: "192.0.2.11", InterGBs: 370, IntraGBs: 450, GPUs: 8}})
	onIntra(h, func(k int, c *fake.Call) fake.Reply {
		if k == 1 {
			cancel()
			return fake.Reply{Delay: time.Second}
		}
		return fabricReply(c, model, "192.0.2.11")
	})
	ps := []orchestrator.Phase{Connect, Tools, Burnin, Teardown}
	lost, dir, _ := orchestrator.Start(ctx, inv, ps, orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test"})
	if dir == "" || lost == nil {
		t.Fatal("no run directory")
	}
	if r := resultOf(t, lost, "burnin", 0); r.Outcome != record.Interrupted {
		t.Errorf("the cut window's burn-in: %s", r.Outcome)
	}
	load := func(string) (*inventory.Inventory, error) { return inv, nil }
	rec, _, err := orchestrator.Resume(t.Context(), dir, load, ps, orchestrator.Options{Dial: f.Dial, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var res BurninNode
	if err := jsonOf(resultOf(t, rec, "burnin", 0), &res); err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 0 || len(res.Runs) == 0 {
		t.Fatalf("resumed %d of %d run(s); want none carried over", res.Resumed, len(res.Runs))
	}
	for i, r := range res.Runs {
		if c := r.Collective; c == nil || c.Error != "" || c.BusBW < 400 {
			t.Errorf("iteration %d after the resume: %+v", i, c)
		}
	}
}
