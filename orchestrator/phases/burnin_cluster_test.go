package phases

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
)

// TestClusterRoundsMeetWhoeverIsLeft: nodes loop at their own pace, each
// for its own number of iterations, and meet at the end of each. Round k
// spans exactly the nodes that run more than k iterations (a node whose
// loop ended left the rounds, and nobody waits for it), it runs once,
// and only with two nodes or more; no node is left waiting. Random
// paces and counts, many times over.
func TestClusterRoundsMeetWhoeverIsLeft(t *testing.T) {
	for trial := range 200 {
		rng := rand.New(rand.NewPCG(uint64(trial), 7))
		size := 1 + rng.IntN(6)
		var nodes []*orchestrator.Node
		iters := make([]int, size)
		for i := range size {
			nodes = append(nodes, &orchestrator.Node{Name: fmt.Sprintf("n%d", i), Index: i})
			iters[i] = rng.IntN(5)
		}
		var mu sync.Mutex
		var ran [][]string
		c := newClusterRounds(nodes, func(_ context.Context, ns []*orchestrator.Node) roundFigures {
			var names []string
			for _, n := range ns {
				names = append(names, n.Name)
			}
			mu.Lock()
			ran = append(ran, names)
			mu.Unlock()
			return roundFigures{Cluster: &BurninCollective{BusBW: 1}}
		})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		var wg sync.WaitGroup
		got := make([][]string, size) // the launcher each node heard, round by round
		for i, n := range nodes {
			pace := time.Duration(rng.IntN(300)) * time.Microsecond
			wg.Go(func() {
				defer c.leave(n)
				for range iters[i] {
					time.Sleep(pace)
					res, launcher, err := c.meet(ctx, n)
					if err != nil {
						t.Errorf("trial %d: %s: %v", trial, n.Name, err)
						return
					}
					if (res.Cluster != nil) != (launcher != "") {
						t.Errorf("trial %d: %s heard launcher %q with figures %+v", trial, n.Name, launcher, res)
					}
					got[i] = append(got[i], launcher)
				}
			})
		}
		wg.Wait()
		cancel()
		if t.Failed() {
			t.Fatalf("trial %d: iterations %v", trial, iters)
		}
		var want [][]string
		for k := 0; ; k++ {
			var in []string
			for i := range size {
				if iters[i] > k {
					in = append(in, nodes[i].Name)
				}
			}
			if len(in) < 2 {
				break
			}
			want = append(want, in)
		}
		if !slices.EqualFunc(ran, want, slices.Equal) {
			t.Fatalf("trial %d, iterations %v: rounds ran over %v, want %v", trial, iters, ran, want)
		}
		// Every node of a round hears the same launcher, one of them.
		for k := range want {
			heard := map[string]bool{}
			for i := range size {
				if k < len(got[i]) && iters[i] > k {
					heard[got[i][k]] = true
				}
			}
			if len(heard) != 1 {
				t.Fatalf("trial %d: round %d's nodes heard launchers %v", trial, k, heard)
			}
			for l := range heard {
				if !slices.Contains(want[k], l) {
					t.Fatalf("trial %d: round %d's figures on %q, not one of its nodes %v", trial, k, l, want[k])
				}
			}
		}
		for i := range size {
			for k := len(want); k < len(got[i]); k++ {
				if got[i][k] != "" {
					t.Fatalf("trial %d: %s alone in round %d heard a figure", trial, nodes[i].Name, k)
				}
			}
		}
	}
}

// TestClusterRoundsLetAWaitGoWhenTheOtherIsCancelled: a node waiting at
// a meeting is not held by one that was cancelled before it came.
func TestClusterRoundsLetAWaitGoWhenTheOtherIsCancelled(t *testing.T) {
	a, b, d := &orchestrator.Node{Name: "a"}, &orchestrator.Node{Name: "b", Index: 1}, &orchestrator.Node{Name: "d", Index: 2}
	runs := 0
	c := newClusterRounds([]*orchestrator.Node{a, b, d}, func(context.Context, []*orchestrator.Node) roundFigures {
		runs++
		return roundFigures{Cluster: &BurninCollective{}}
	})
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error)
	go func() {
		_, _, err := c.meet(ctx, b)
		waited <- err
	}()
	go func() {
		_, _, err := c.meet(t.Context(), a)
		waited <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel() // b gives up, and leaves as its loop ends
	if err := <-waited; err == nil {
		t.Fatal("b's meeting ended without its cancel")
	}
	c.leave(b)
	c.leave(d) // d never came
	select {
	case err := <-waited:
		if err != nil || runs != 0 {
			t.Fatalf("a: %v after %d run(s); want it to go on alone, with no round", err, runs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a still waits for nodes that left")
	}
}

// TestBurninLoopsTheClusterAllReduce: with cluster_allreduce, each
// iteration ends with mpirun from h1 over every node (the window's key
// installed for it), the figure on one run a round (the node that ran
// it); h3 fails its gemm.py after its first run and leaves, and the
// rounds go on over h1 and h2, their drift not held to the first.
// BURN-004 passes on the steady model.
func TestBurninLoopsTheClusterAllReduce(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 3, "", fabricQuote+`  burnin:
    enabled: true
    duration: 1m
    compute: {seconds: 5, size: 1024}
    collectives: false
    gpu_burn: false
    dcgm_stress: false
    cluster_allreduce: true
`)
	inv.Phases.Burnin.Duration, inv.Phases.Burnin.Compute.Seconds = 4*time.Second, 1
	steadyGemm(f.Host("h1"), 0.020)
	steadyGemm(f.Host("h2"), 0.020)
	var mu sync.Mutex
	h3runs := 0
	onGemm(f.Host("h3"), func(*fake.Call) fake.Reply {
		mu.Lock()
		defer mu.Unlock()
		h3runs++
		if h3runs > 1 {
			return fake.Reply{Stdout: "GPUACCEPT gemm error gpu=0 msg=CUDA error: an illegal memory access was encountered\n", Exit: 1, Delay: time.Second}
		}
		return fake.Reply{Stdout: gemmOut("cpu", "cpu", 1, 1024, 0.020), Delay: time.Second}
	})
	rec := runFake(t, inv, f, WindowKey, Burnin)
	if r := resultOf(t, rec, "windowkey", 0); r.Outcome != record.OK {
		t.Fatalf("windowkey on h1: %s %s; the rounds' mpirun needs it", r.Outcome, r.Error)
	}
	var h1, h2, h3 BurninNode
	for i, res := range []*BurninNode{&h1, &h2, &h3} {
		if err := jsonOf(resultOf(t, rec, "burnin", i), res); err != nil {
			t.Fatalf("h%d: %v", i+1, err)
		}
	}
	if len(h1.Runs) < 3 {
		t.Fatalf("h1: %d run(s), want 3 or more in 4 s of 1 s runs", len(h1.Runs))
	}
	// Each round's figure is on one run, of the node that ran it: one a
	// round of h1's, which was in every one.
	rounds := roundsOf(h1, h2, h3)
	if len(rounds) != len(h1.Runs) {
		t.Fatalf("%d round figure(s) for h1's %d iterations", len(rounds), len(h1.Runs))
	}
	for i, c := range rounds {
		if c == nil || c.Error != "" || c.BusBW < 300 || c.Ranks == 0 {
			t.Fatalf("round %d: %+v, want the model's figure", i+1, c)
		}
		if want := 2; i == 0 {
			if c.Nodes != 3 {
				t.Errorf("round 1 over %d nodes, want 3", c.Nodes)
			}
		} else if c.Nodes != want {
			t.Errorf("round %d over %d nodes, want %d (h3 left)", i+1, c.Nodes, want)
		}
	}
	if got, want := f.Host("h1").Ran(`mpirun \$ROOT -np 24 -H 192\.0\.2\.11:8,192\.0\.2\.12:8,192\.0\.2\.13:8 `), 1; got != want {
		t.Errorf("%d mpirun over three nodes from h1, want %d", got, want)
	}
	if f.Host("h2").Ran(`mpirun`) != 0 || f.Host("h3").Ran(`mpirun`) != 0 {
		t.Error("mpirun ran on a node other than the round's first")
	}
	v := verdictOf(t, rec, "BURN-004", "")
	if v.Status != record.Pass || !strings.Contains(v.Measured, fmt.Sprintf("%d round(s) of up to 3 nodes", len(h1.Runs))) ||
		!strings.Contains(v.Detail, "from round 2 on, 2 of 3 nodes") {
		t.Errorf("BURN-004: %s %q %q", v.Status, v.Measured, v.Detail)
	}
}

// roundsOf is the cluster rounds' figures on the nodes' runs, in time.
func roundsOf(nodes ...BurninNode) []*BurninCollective {
	var runs []BurninRun
	for _, n := range nodes {
		for _, r := range n.Runs {
			if r.Cluster != nil {
				runs = append(runs, r)
			}
		}
	}
	slices.SortFunc(runs, func(a, b BurninRun) int { return a.At.Compare(b.At) })
	var out []*BurninCollective
	for _, r := range runs {
		out = append(out, r.Cluster)
	}
	return out
}

// TestBurnin004 judges the rounds as recorded: one that failed fails it,
// a drop of more than 10 % fails it, a tool missing is not measured, one
// node is no round at all.
func TestBurnin004(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	rounds := func(bw ...float64) []BurninRun {
		var out []BurninRun
		for i, x := range bw {
			c := &BurninCollective{BusBW: x, Nodes: 4, Ranks: 32}
			if x == 0 {
				c.Error = "mpirun exited 1"
			}
			out = append(out, BurninRun{At: t0.Add(time.Duration(i) * time.Minute), GPUs: []GemmGPU{{TFLOPS: 1}}, Cluster: c})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		h1     BurninNode
		status record.Status
		has    string
	}{
		{"steady", BurninNode{Runs: rounds(370, 368, 371, 369)}, record.Pass, "4 round(s) of up to 4 nodes"},
		{"a failed round", BurninNode{Runs: rounds(370, 0, 371, 369)}, record.Fail, "round 2 (00:01:00, 4 nodes): mpirun exited 1"},
		{"a drop", BurninNode{Runs: rounds(370, 370, 300, 300)}, record.Fail, "busbw worse by more than 10 %"},
		{"no mpirun", BurninNode{NotMeasured: []LoadUnmeasured{{Load: loadClusterAllReduce, Asked: true,
			Reason: "mpirun not installed on h[1-4]"}}}, record.Skip, "not measured"},
		{"one node", BurninNode{NotMeasured: []LoadUnmeasured{{Load: loadClusterAllReduce,
			Reason: "one node in the burn-in: no cluster-wide all-reduce to loop"}}}, record.Skip, "not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := fakeInventory(t, 1, "phases:\n  allreduce: {enabled: true}\n  burnin: {enabled: true, duration: 4m, cluster_allreduce: true}\n")
			p := Burnin
			p.PerNode = func(context.Context, *orchestrator.Window, *orchestrator.Node) (any, error) { return tc.h1, nil }
			v := verdictOf(t, runFake(t, inv, fakeFleet(inv), p), "BURN-004", "")
			if v.Status != tc.status || !strings.Contains(v.Measured+" "+v.Detail, tc.has) {
				t.Errorf("%s: %s %q %q, want %s with %q", tc.name, v.Status, v.Measured, v.Detail, tc.status, tc.has)
			}
			if tc.name == "no mpirun" && v.Incomplete == "" {
				t.Error("a missing launcher must leave the window INCOMPLETE")
			}
		})
	}
}

// TestBurninLoopsTheTrainingJob: with phases.burnin.workload, each round
// runs the training phase's job over every node (its launch on each),
// its median step kept on the run of the node that ran the round;
// BURN-005 passes on a steady job.
func TestBurninLoopsTheTrainingJob(t *testing.T) {
	inv := fakeInventory(t, 2, `phases:
  workload:
    enabled: true
    kind: training
    training: {steps: 6, warmup: 2, procs_per_node: 1}
  burnin:
    enabled: true
    duration: 1m
    compute: {seconds: 5, size: 1024}
    collectives: false
    gpu_burn: false
    dcgm_stress: false
    workload: true
`)
	inv.Phases.Burnin.Duration, inv.Phases.Burnin.Compute.Seconds = 3*time.Second, 1
	f := fakeFleet(inv)
	ft := &fakeTrainer{steps: 6, compute: map[string]time.Duration{"h1": 10 * time.Millisecond, "h2": 10 * time.Millisecond}}
	for _, h := range f.Hosts() {
		ft.answer(h)
		steadyGemm(h, 0.020)
	}
	rec := runFake(t, inv, f, Burnin)
	var h1, h2 BurninNode
	if err := jsonOf(resultOf(t, rec, "burnin", 0), &h1); err != nil || len(h1.Runs) < 2 {
		t.Fatalf("h1: %v, %d run(s)", err, len(h1.Runs))
	}
	if err := jsonOf(resultOf(t, rec, "burnin", 1), &h2); err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for i, r := range slices.Concat(h1.Runs, h2.Runs) {
		if j := r.Workload; j != nil {
			jobs++
			if j.Error != "" || j.Nodes != 2 || j.MedianStepSecs < 0.005 || j.MedianStepSecs > 1 {
				t.Errorf("run %d: workload %+v, want the job's ~10 ms step over 2 nodes", i, j)
			}
		}
	}
	if jobs != len(h1.Runs) {
		t.Errorf("%d round figure(s) for %d iterations", jobs, len(h1.Runs))
	}
	if ft.launches != 2*len(h1.Runs) {
		t.Errorf("%d launches, want one per node a round (%d rounds)", ft.launches, len(h1.Runs))
	}
	if v := verdictOf(t, rec, "BURN-005", ""); v.Status != record.Pass || !strings.Contains(v.Measured, "median step") {
		t.Errorf("BURN-005: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if len(rec.Verdicts) > 0 && slices.ContainsFunc(rec.Verdicts, func(v record.Verdict) bool { return v.ID == "BURN-004" }) {
		t.Error("BURN-004 without cluster_allreduce")
	}
}

// TestBurnin005HoldsAStepThatGrewLonger: the job's step 20 % longer in
// the last window than in the first is a drop of its rate: FAIL.
func TestBurnin005HoldsAStepThatGrewLonger(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	var rounds []roundFigure
	for i, s := range []float64{0.100, 0.101, 0.120, 0.121} {
		rounds = append(rounds, roundFigure{At: t0.Add(time.Duration(i) * time.Minute), Nodes: 2, Value: s})
	}
	v := roundsVerdict("BURN-005", rounds, nil, 4*time.Minute, "median step", "s", false)
	if v.Status != record.Fail || v.Value == nil || *v.Value > 0.9 || !strings.Contains(v.Measured, "(0.1 to 0.121 s)") {
		t.Errorf("BURN-005: %s %v %q %q", v.Status, v.Value, v.Measured, v.Detail)
	}
	steady := roundsVerdict("BURN-005", rounds[:2], nil, 4*time.Minute, "median step", "s", false)
	if steady.Status != record.Pass {
		t.Errorf("steady: %s %q", steady.Status, steady.Detail)
	}
}

// TestClusterRoundCutShortIsNoFigure: a round whose nodes are cancelled
// while it runs (Ctrl-C, the phase's deadline) gives no figure to
// record, so no "context canceled" is judged a failed round.
func TestClusterRoundCutShortIsNoFigure(t *testing.T) {
	a, b := &orchestrator.Node{Name: "a"}, &orchestrator.Node{Name: "b", Index: 1}
	started := make(chan struct{})
	c := newClusterRounds([]*orchestrator.Node{a, b}, func(ctx context.Context, _ []*orchestrator.Node) roundFigures {
		close(started)
		<-ctx.Done()
		return roundFigures{Cluster: &BurninCollective{Error: ctx.Err().Error()}}
	})
	ctx, cancel := context.WithCancel(t.Context())
	type heard struct {
		f   roundFigures
		l   string
		err error
	}
	out := make(chan heard, 2)
	for _, n := range []*orchestrator.Node{a, b} {
		go func() {
			f, l, err := c.meet(ctx, n)
			out <- heard{f, l, err}
		}()
	}
	<-started
	cancel()
	for range 2 {
		h := <-out
		if h.err == nil || h.f.Cluster != nil || h.l != "" {
			t.Errorf("a round cut short: %+v %q %v, want ctx's error and no figure", h.f, h.l, h.err)
		}
	}
}

// TestBurnin004ComparesRoundsOfOneSize: a node left after round 2, and
// the rounds over the two left move less: the drift compares the
// three-node rounds only, and says so.
func TestBurnin004ComparesRoundsOfOneSize(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	var rounds []roundFigure
	for i, x := range []struct {
		nodes int
		bw    float64
	}{{3, 370}, {3, 369}, {3, 371}, {2, 250}, {2, 251}} {
		rounds = append(rounds, roundFigure{At: t0.Add(time.Duration(i) * time.Minute), Nodes: x.nodes, Value: x.bw})
	}
	v := roundsVerdict("BURN-004", rounds, nil, 5*time.Minute, "busbw", "GB/s", true)
	if v.Status != record.Pass || !strings.Contains(v.Detail, "from round 4 on, 2 of 3 nodes") || !strings.Contains(v.Detail, "3-node rounds only") {
		t.Errorf("BURN-004: %s %q %q", v.Status, v.Measured, v.Detail)
	}
}
