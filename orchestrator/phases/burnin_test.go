package phases

import (
	"context"
	"fmt"
	"gpuaccept/orchestrator/inventory"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// gemmOut is gemm.py's output for rates (one per GPU), in its format.
func gemmOut(on, device string, secs float64, size int, rates ...float64) string {
	var b strings.Builder
	for i, r := range rates {
		iters := int64(r * 1e12 * secs / (2 * float64(size) * float64(size) * float64(size)))
		fmt.Fprintf(&b, "GPUACCEPT gemm gpu=%d tflops=%.3f iters=%d secs=%.3f size=%d on=%s device=%s\n", i, r, iters, secs, size, on, device)
	}
	b.WriteString("GPUACCEPT gemm done\n")
	return b.String()
}

func TestParseGemmKeepsOnlyWellFormedFigures(t *testing.T) {
	out := "warning: torch says hello\n" +
		gemmOut("cuda", "NVIDIA H200", 60.004, 8192, 668.7, 661.2) +
		"GPUACCEPT gemm gpu=2 tflops=NaN iters=5 secs=1 device=x\n" +
		"GPUACCEPT gemm gpu=3 tflops=1e9 iters=5 secs=1 device=x\n" +
		"GPUACCEPT gemm gpu=0 tflops=999 iters=5 secs=1 device=again\n" +
		"GPUACCEPT gemm gpu=4 tflops=600 iters=5 secs=1 on=cuda device=\x1b[31mred\x1b[0m\n" +
		"GPUACCEPT gemm error gpu=5 msg=CUDA error: an illegal memory access was encountered\n" +
		"GPUACCEPT gemm gpu=99999 tflops=1 iters=1 secs=1 device=x\n"
	gs := parseGemm(out)
	if len(gs) != 4 {
		t.Fatalf("%d figures, want 4 (GPUs 0, 1, 4, 5): %+v", len(gs), gs)
	}
	if g := gs[0]; g.GPU != 0 || g.TFLOPS != 668.7 || g.Device != "NVIDIA H200" || g.On != "cuda" || g.Iters <= 0 {
		t.Errorf("GPU 0: %+v", g)
	}
	if g := gs[2]; g.GPU != 4 || strings.ContainsRune(g.Device, 0x1b) {
		t.Errorf("GPU 4's device must lose its escapes: %+v", g)
	}
	if g := gs[3]; g.GPU != 5 || !strings.Contains(g.Error, "illegal memory access") {
		t.Errorf("GPU 5: %+v", g)
	}
	if !gemmDone(out) || gemmDone("GPUACCEPT gemm gpu=0 tflops=1 iters=1 secs=1 device=x\n") {
		t.Error("gemmDone")
	}
}

func TestGemmDriftAndSummaryUseEveryRun(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	runs := []BurninRun{
		{At: t0, GPUs: parseGemm(gemmOut("cuda", "H", 60, 8192, 670, 660))},
		{At: t0.Add(time.Minute), GPUs: parseGemm(gemmOut("cuda", "H", 60, 8192, 668, 640))},
		{At: t0.Add(2 * time.Minute), GPUs: parseGemm(gemmOut("cuda", "H", 60, 8192, 669, 594))},
	}
	// 3 minutes: a quarter (45 s) at each end, the first run and the last.
	window, d, coll := burninDrift(runs, 3*time.Minute)
	if window != 45*time.Second || len(d) != 2 || d[1].First != 660 || d[1].Last != 594 || d[1].Pct > -9.9 || d[1].Pct < -10.1 {
		t.Errorf("drift over %s: %+v, want GPU 1 660 -> 594 (-10%%)", window, d)
	}
	if coll != nil {
		t.Errorf("no collective ran, yet a drift: %+v", coll)
	}
	s := gemmSummary(runs)
	if len(s.GPUs) != 2 || s.GPUs[0].TFLOPS != 669 || s.GPUs[1].TFLOPS != 640 {
		t.Errorf("summary %+v, want each GPU's median (669, 640)", s.GPUs)
	}
	if _, d, _ := burninDrift(runs[:1], time.Hour); d != nil {
		t.Error("one run has no drift")
	}
}

// TestDriftIsTheFirstHourAgainstTheLast: 3 h of 10-minute iterations;
// the medians of the six runs that started in the first hour and of the
// six in the last, not the first run against the last; the collective's
// busbw too. Shorter than 2 h: quarters.
func TestDriftIsTheFirstHourAgainstTheLast(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	var runs []BurninRun
	for i := range 18 {
		rate, bw := 660.0, 450.0
		if i == 0 {
			rate, bw = 700, 480 // a cold first run: not the figure
		}
		if i >= 12 {
			rate, bw = 600, 400
		}
		runs = append(runs, BurninRun{At: t0.Add(time.Duration(i) * 10 * time.Minute),
			GPUs: []GemmGPU{{GPU: 0, TFLOPS: rate}}, Collective: &BurninCollective{BusBW: bw}})
	}
	window, d, coll := burninDrift(runs, 3*time.Hour)
	if window != time.Hour || len(d) != 1 || d[0].First != 660 || d[0].Last != 600 || d[0].FirstRuns != 6 || d[0].LastRuns != 6 {
		t.Errorf("over %s: %+v, want 660 (median of 6) -> 600 (6)", window, d)
	}
	if coll == nil || coll.First != 450 || coll.Last != 400 || coll.FirstRuns != 6 {
		t.Errorf("collective drift %+v, want 450 -> 400", coll)
	}
	if w := driftWindow(90 * time.Minute); w != 22*time.Minute+30*time.Second {
		t.Errorf("90 min: window %s, want a quarter", w)
	}
	// A failed collective is no figure; too few figures, no drift.
	runs[17].Collective = &BurninCollective{Error: "exit 1"}
	if _, _, coll := burninDrift(runs[15:], 3*time.Hour); coll != nil {
		t.Errorf("a failed last collective: drift %+v", coll)
	}
	v := driftVerdict("h1", BurninNode{Runs: runs[:1], DriftWindowS: 3600})
	if v.Status != record.Skip || !strings.Contains(v.Detail, "too few") {
		t.Errorf("one run: %s %s", v.Status, v.Detail)
	}
}

func TestBurninLoopFillsTheDurationAndRefusesAnEarlyEnd(t *testing.T) {
	var now time.Time
	clock := func() time.Time { return now }
	n := 0
	once := func(took time.Duration) func(context.Context) (BurninRun, error) {
		return func(context.Context) (BurninRun, error) {
			n++
			now = now.Add(took)
			return BurninRun{GPUs: []GemmGPU{{GPU: 0, TFLOPS: 1}}}, nil
		}
	}
	// 10 minutes of 60 s runs that take 70 s with the start: 8 fit.
	runs, err := burninLoop(t.Context(), 10*time.Minute, time.Minute, clock, nil, 0, once(70*time.Second), nil)
	if err != nil || len(runs) != 8 {
		t.Errorf("%d runs, %v; want 8", len(runs), err)
	}
	// Shorter than one run: one all the same.
	n = 0
	runs, err = burninLoop(t.Context(), time.Minute, 2*time.Minute, clock, nil, 0, once(130*time.Second), nil)
	if err != nil || len(runs) != 1 {
		t.Errorf("%d runs, %v; want 1", len(runs), err)
	}
	// A node that answers at once did not multiply: no spinning.
	n = 0
	runs, err = burninLoop(t.Context(), time.Hour, time.Minute, clock, nil, 0, once(time.Millisecond), nil)
	if err == nil || len(runs) != 1 || n != 1 {
		t.Errorf("%d runs of %d, %v; want one run and an error", len(runs), n, err)
	}
	// Resumed after 3 runs and 210 s of 10 minutes: 5 more fit, and each
	// kept run is heard with its index and the time spent.
	n = 0
	earlier := make([]BurninRun, 3)
	var heard []string
	runs, err = burninLoop(t.Context(), 10*time.Minute, time.Minute, clock, earlier, 210*time.Second, once(70*time.Second),
		func(i int, _ BurninRun, spent time.Duration) { heard = append(heard, fmt.Sprintf("%d@%s", i, spent)) })
	if err != nil || len(runs) != 8 || n != 5 {
		t.Errorf("resumed: %d runs, %d new, %v; want 8 and 5", len(runs), n, err)
	}
	if fmt.Sprint(heard) != "[3@4m40s 4@5m50s 5@7m0s 6@8m10s 7@9m20s]" {
		t.Errorf("heard %v", heard)
	}
	// Resumed with less left than a run: nothing more.
	n = 0
	runs, err = burninLoop(t.Context(), 10*time.Minute, time.Minute, clock, earlier, 9*time.Minute+30*time.Second, once(70*time.Second), nil)
	if err != nil || len(runs) != 3 || n != 0 {
		t.Errorf("nothing left: %d runs, %d new, %v", len(runs), n, err)
	}
}

func TestBurnVerdicts(t *testing.T) {
	gpus := func(on string, rates ...float64) []GemmGPU { return parseGemm(gemmOut(on, "H", 60, 8192, rates...)) }
	// Unquoted: held to the fleet's median; h3's GPU 1 at 0.8× is named.
	nodes := []burnNode{
		{Name: "h1", GPUs: gpus("cuda", 668, 670)},
		{Name: "h2", GPUs: gpus("cuda", 669, 667)},
		{Name: "h3", GPUs: gpus("cuda", 666, 535)},
		{Name: "h4", Unmeasured: "python3 cannot import torch: compute rate not measured"},
		{Name: "h5", Absent: "quarantined: preflight failed"},
		{Name: "h6", Err: "gemm.py: exit 1"},
	}
	vs := burnVerdicts(nodes, 0, 0.9)
	want := []record.Status{record.Pass, record.Pass, record.Fail, record.Skip, record.Skip, record.Fail}
	for i, v := range vs {
		if v.Status != want[i] {
			t.Errorf("%s: %s (%s), want %s", v.Node, v.Status, v.Detail, want[i])
		}
		if utf8.RuneCountInString(v.Detail) > 100 {
			t.Errorf("%s: detail of %d columns: %s", v.Node, len(v.Detail), v.Detail)
		}
	}
	if d := vs[2].Detail; !strings.Contains(d, "GPU 1 535") || !strings.Contains(vs[2].Measured, "slowest GPU 1") {
		t.Errorf("h3 must name GPU 1: %s / %s", vs[2].Measured, d)
	}
	if vs[3].Incomplete == "" {
		t.Error("no torch is NOT MEASURED: the window is INCOMPLETE")
	}
	// Quoted: each GPU against 989 × 0.9; one at 0.8× the fleet but above
	// the quote is a WARN.
	vs = burnVerdicts([]burnNode{
		{Name: "a", GPUs: gpus("cuda", 960, 995)},
		{Name: "b", GPUs: gpus("cuda", 1200, 1210)},
		{Name: "c", GPUs: gpus("cuda", 700, 1205)},
	}, 989, 0.9)
	if vs[0].Status != record.Warn || vs[1].Status != record.Pass || vs[2].Status != record.Fail {
		t.Errorf("quoted: %s %s %s, want WARN PASS FAIL (%s)", vs[0].Status, vs[1].Status, vs[2].Status, vs[2].Detail)
	}
	if vs[2].Ratio == nil || *vs[2].Ratio > 0.71 || vs[2].Quoted == "" {
		t.Errorf("c: ratio %v quoted %q", vs[2].Ratio, vs[2].Quoted)
	}
	// A node whose eight GPUs are all slow: named in a line that fits.
	vs = burnVerdicts([]burnNode{
		{Name: "gpu-0001", GPUs: gpus("cuda", 668, 668, 668, 668, 668, 668, 668, 668)},
		{Name: "gpu-0002", GPUs: gpus("cuda", 668, 668, 668, 668, 668, 668, 668, 668)},
		{Name: "gpu-0003", GPUs: gpus("cuda", 501.1, 502.2, 503.3, 504.4, 505.5, 506.6, 507.7, 508.8)},
	}, 0, 0.9)
	if d := vs[2].Detail; vs[2].Status != record.Fail || utf8.RuneCountInString(d) > 100 || !strings.Contains(d, "6 more") {
		t.Errorf("eight slow GPUs: %s %q (%d)", vs[2].Status, d, len(d))
	}
	// CPU figures (the lab) are never held to a GPU's quote; one GPU in
	// the fleet and no quote: nothing to judge.
	vs = burnVerdicts([]burnNode{{Name: "lab", GPUs: gpus("cpu", 0.02)}}, 989, 0.9)
	if vs[0].Status != record.Skip || vs[0].Incomplete != "" {
		t.Errorf("one CPU figure: %s %q", vs[0].Status, vs[0].Detail)
	}
}

func TestBurninDeadlineIsItsDurationNotPhasesDeadline(t *testing.T) {
	inv := fakeInventory(t, 1, "phases:\n  deadline: 30m\n  burnin:\n    enabled: true\n    duration: 24h\n")
	// One iteration past the duration: gemm.py's run and its start, the
	// collective's timeout (15 m), gpu-burn's and DCGM's (auto: each its
	// seconds and start).
	stress := time.Minute + stressStartWithin
	if got, want := orchestrator.PhaseDeadline(&Burnin, inv), 24*time.Hour+time.Minute+gemmStartWithin+15*time.Minute+2*stress; got != want {
		t.Errorf("deadline %s, want %s (the duration, one iteration and its start)", got, want)
	}
	if p := BurninPlan(inv); !strings.Contains(p, "60 s a run") || !strings.Contains(p, "all-reduce") {
		t.Errorf("plan note %q", p)
	}
}

// TestBurninRunsGemmOnEveryNodeAndNamesTheSlowGPU: the body over fake
// nodes answering as gemm.py does: h3 computes 20% slower and is named,
// h4 has no torch and is NOT MEASURED.
func TestBurninRunsGemmOnEveryNodeAndNamesTheSlowGPU(t *testing.T) {
	inv := fakeInventory(t, 4, "phases:\n  burnin:\n    enabled: true\n    duration: 1m\n    compute: {seconds: 5, size: 1024}\n")
	// A second's runs for 2.5 s: two runs a node.
	inv.Phases.Burnin.Duration, inv.Phases.Burnin.Compute.Seconds = 2500*time.Millisecond, 1
	f := fakeFleet(inv)
	rates := map[string][]float64{"h1": {0.021, 0.020}, "h2": {0.020, 0.021}, "h3": {0.016, 0.021}}
	var mu sync.Mutex
	var args []string
	for _, h := range f.Hosts() {
		h := h
		onGemm(h, func(c *fake.Call) fake.Reply {
			mu.Lock()
			defer mu.Unlock()
			args = shellWords(c.Command[strings.LastIndex(c.Command, `"$f"`):])
			r, ok := rates[h.Name()]
			if !ok {
				return fake.Reply{Stdout: "no torch: No module named 'torch'\n", Exit: 3}
			}
			return fake.Reply{Stdout: gemmOut("cpu", "cpu", 1, 1024, r...), Delay: time.Second}
		})
	}
	rec := runFake(t, inv, f, Burnin)
	if fmt.Sprint(args) != "[$f --seconds=1 --size=1024 --allow-cpu 2>&1]" {
		t.Errorf("gemm.py's arguments %q", args)
	}
	var res BurninNode
	if err := jsonOf(resultOf(t, rec, "burnin", 2), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || res.Compute == nil || res.Compute.GPUs[0].TFLOPS != 0.016 || res.Compute.GPUs[0].On != "cpu" {
		t.Errorf("h3: %+v", res)
	}
	for node, want := range map[string]record.Status{"h1": record.Pass, "h2": record.Pass, "h3": record.Fail, "h4": record.Skip} {
		v := verdictOf(t, rec, "BURN-001", node)
		if v.Status != want {
			t.Errorf("%s: %s %s (%s), want %s", node, v.Status, v.Measured, v.Detail, want)
		}
	}
	if v := verdictOf(t, rec, "BURN-001", "h4"); !strings.Contains(v.Incomplete, "cannot import torch") {
		t.Errorf("h4: %+v", v)
	}
	if r := resultOf(t, rec, "burnin", 3); r.Outcome != record.NotMeasured {
		t.Errorf("h4's outcome %s, want not measured", r.Outcome)
	}
}

// TestBurninResumesTheTimeLeft: a coordinator lost in the second run of a
// 2.9 s burn-in of 1 s runs; the resumed window keeps the finished run
// (journaled) and runs only what is left: one more run, not two (the first
// run may take up to 1.9 s on a loaded machine and still leave room).
func TestBurninResumesTheTimeLeft(t *testing.T) {
	inv := fakeInventory(t, 2, "quote:\n  gpus_per_node: 8\nphases:\n  burnin:\n    enabled: true\n    duration: 1m\n    compute: {seconds: 5, size: 1024}\n")
	inv.Phases.Burnin.Duration, inv.Phases.Burnin.Compute.Seconds = 2900*time.Millisecond, 1
	f := fakeFleet(inv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	calls := 0
	onGemm(f.Host("h1"), func(*fake.Call) fake.Reply {
		mu.Lock()
		calls++
		k := calls
		mu.Unlock()
		if k == 2 {
			// The coordinator is lost during the second run, which is
			// killed before it prints a figure.
			cancel()
			return fake.Reply{Delay: time.Second}
		}
		return fake.Reply{Stdout: gemmOut("cpu", "cpu", 1, 1024, 0.020+float64(k)/1000), Delay: time.Second}
	})
	// Each iteration's collective after it: 400 GB/s the lost window's,
	// 300 the resumed one's.
	answerIntra(f.Host("h1"), "192.0.2.11", func(k int) float64 { return 500 - 100*float64(k) })
	// h2's burn-in fails in its first run (a GPU's error): a resume must
	// keep that failure, not run h2 again for the time left.
	h2calls := 0
	onGemm(f.Host("h2"), func(*fake.Call) fake.Reply {
		mu.Lock()
		h2calls++
		mu.Unlock()
		return fake.Reply{Stdout: gemmOut("cpu", "cpu", 1, 1024, 0.020) + "GPU 0 error: CUDA error: an illegal memory access\n", Exit: 1}
	})
	ps := []orchestrator.Phase{Connect, Tools, Burnin, Teardown}
	lost, dir, _ := orchestrator.Start(ctx, inv, ps, orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test"})
	if dir == "" || lost == nil {
		t.Fatal("no run directory")
	}
	// Cut short (as by Ctrl-C): INTERRUPTED, with the figures so far.
	var cut BurninNode
	if r := resultOf(t, lost, "burnin", 0); r.Outcome != record.Interrupted || jsonOf(r, &cut) != nil || len(cut.Runs) != 1 {
		t.Errorf("the cut window's burn-in: %s, %d run(s); want interrupted with 1", r.Outcome, len(cut.Runs))
	}
	mu.Lock()
	before := calls
	mu.Unlock()
	if before != 2 {
		t.Fatalf("gemm.py ran %d times before the coordinator was lost, want 2", before)
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
	mu.Lock()
	after := calls - before
	mu.Unlock()
	if after != 1 || len(res.Runs) != 2 || res.Resumed != 1 {
		t.Fatalf("resumed: %d new run(s), %d runs recorded (%d carried over); want 1, 2, 1", after, len(res.Runs), res.Resumed)
	}
	// The first run is the lost window's (its figure, 0.021), the second the resumed one's (0.023).
	if g := res.Runs[0].GPUs; len(g) != 1 || g[0].TFLOPS != 0.021 {
		t.Errorf("the carried-over run: %+v", res.Runs[0])
	}
	if g := res.Runs[1].GPUs; len(g) != 1 || g[0].TFLOPS != 0.023 {
		t.Errorf("the resumed run: %+v", res.Runs[1])
	}
	// Whole iterations: the carried-over one keeps its collective's figure.
	if c0, c1 := res.Runs[0].Collective, res.Runs[1].Collective; c0 == nil || c1 == nil || c0.BusBW < 350 || c0.BusBW > 400 || c1.BusBW > 300 {
		t.Errorf("the iterations' collectives: %+v then %+v; want ~400 (carried over) then ~300", c0, c1)
	}
	if res.ElapsedS < 2 || res.ElapsedS > 3.5 {
		t.Errorf("elapsed %.2f s, want the two runs' load time (about 2 s), not the lost one's too", res.ElapsedS)
	}
	mu.Lock()
	defer mu.Unlock()
	if r := resultOf(t, rec, "burnin", 1); h2calls != 1 || r.Outcome != record.Failed || !strings.Contains(r.Error, "exit 1") {
		t.Errorf("h2 after the resume: gemm.py ran %d time(s), %s %q; want once, and its failure kept", h2calls, r.Outcome, r.Error)
	}
}

// onGemm answers h's runs of the pushed gemm.py with reply, once the
// check of the copy the tools phase pushed passes (toolCheck's).
func onGemm(h *fake.Host, reply func(c *fake.Call) fake.Reply) {
	h.On(`/bin/[^/]+/gemm\.py"`, func(c *fake.Call) fake.Reply {
		m := toolPath.FindStringSubmatch(c.Command)
		if m == nil {
			return fake.Reply{Exit: 127, Stderr: "unscripted"}
		}
		if r, ok := pushedCheck(c, m[1], m[3]); !ok {
			return r
		}
		return reply(c)
	})
}
