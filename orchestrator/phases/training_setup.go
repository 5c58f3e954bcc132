package phases

import (
	"context"
	"strings"
	"sync"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// trainingUnmeasured is torchUnmeasured for the training load test's
// job. A pod runs only the window's image: a workload image of its own
// (phases.workload.image) would need a pod of its own per node, which the
// Kubernetes transport does not start, so the test is NOT MEASURED there
// rather than run in another image than the one asked for.
func trainingUnmeasured(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node) error {
	wl := w.Inv.Phases.Workload
	image := firstNonEmpty(wl.Image, w.Inv.Image.Reference)
	inImage := inventory.On(wl.Training.InImage) && image != ""
	if inImage && image != w.Inv.Image.Reference {
		var pods []string
		for _, n := range nodes {
			if podImager(n) != nil {
				pods = append(pods, n.Name)
			}
		}
		if len(pods) > 0 {
			return orchestrator.Unmeasured("kubernetes", "the pods on %s run the window's image (image.reference), not phases.workload.image %s, and gpuaccept starts no pod of the workload's own: training load test not measured",
				hostlist.Compress(pods), wl.Image)
		}
	}
	return torchUnmeasured(ctx, w, nodes, torchNeeds{what: "training load test", python: wl.Training.Python,
		module: "torch.distributed.run", label: "torch.distributed.run (torchrun)", inImage: inImage})
}

// memFigure is the most GPU memory one node's GPUs had in use while the
// job ran, and the most any of them has, MiB.
type memFigure struct {
	PeakMiB, TotalMiB *float64
}

// jobMemSampler asks every node's nvidia-smi for its GPUs' memory while the
// job runs: the peak of a job whose log does not say it. A node without
// nvidia-smi, or whose answer is not numbers, has no figure.
type jobMemSampler struct {
	w     *orchestrator.Window
	nodes []*orchestrator.Node
	mu    sync.Mutex
	got   map[string]memFigure
}

func newJobMemSampler(w *orchestrator.Window, nodes []*orchestrator.Node) *jobMemSampler {
	return &jobMemSampler{w: w, nodes: nodes, got: map[string]memFigure{}}
}

// memEvery: often enough to catch a peak that lasts a few steps, rarely
// enough to cost nothing at 1,000 nodes.
const memEvery = 5 * time.Second

// jobMemQuery is memQuery (the inference phase's), its rows bounded.
const jobMemQuery = memQuery + " 2>/dev/null | head -n 64"

func (m *jobMemSampler) run(ctx context.Context) {
	tick := time.NewTicker(memEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		remote.Each(ctx, len(m.nodes), remote.FanOut{Limit: m.w.FanOut()}, func(ctx context.Context, i int) (struct{}, error) {
			n := m.nodes[i]
			e := n.Exec()
			if e == nil {
				return struct{}{}, nil
			}
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			var out capture
			if e.Run(sctx, remote.Cmd{Command: jobMemQuery, Stdout: &out}) != nil {
				return struct{}{}, nil
			}
			used, total, ok := parseMemQuery(string(out.Bytes()))
			if !ok {
				return struct{}{}, nil
			}
			m.mu.Lock()
			f := m.got[n.Name]
			if f.PeakMiB == nil || used > *f.PeakMiB {
				f.PeakMiB = &used
			}
			if f.TotalMiB == nil || total > *f.TotalMiB {
				f.TotalMiB = &total
			}
			m.got[n.Name] = f
			m.mu.Unlock()
			return struct{}{}, nil
		})
	}
}

// parseMemQuery reads memQuery's rows (MiB): the most any GPU used and
// what that kind of GPU has; not ok when a row is not numbers.
func parseMemQuery(s string) (used, total float64, ok bool) {
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		g := parseMemRow(line)
		if !g.ok {
			return 0, 0, false
		}
		if !ok || g.used > used {
			used, total = g.used, g.total
		}
		ok = true
	}
	return used, total, ok
}

func (m *jobMemSampler) peaks() map[string]memFigure {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]memFigure, len(m.got))
	for k, v := range m.got {
		out[k] = v
	}
	return out
}
