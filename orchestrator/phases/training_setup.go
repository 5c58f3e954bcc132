package phases

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// trainingUnmeasured asks every node at once, before the job starts,
// whether it has what the launch needs: the runtime when torchrun runs in
// the image, else the Python (phases.workload.training.python) and its
// torch.distributed.run (torchrun). A node without them would fail the
// job's start, which reads as a failed workload: it is a
// *orchestrator.NotMeasured naming the nodes, or nil.
func trainingUnmeasured(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node) error {
	wl := w.Inv.Phases.Workload
	if inventory.On(wl.Training.InImage) && firstNonEmpty(wl.Image, w.Inv.Image.Reference) != "" {
		return collectiveUnmeasured(ctx, w, nodes, "training load test", w.Inv.Image.Runtime)
	}
	python := wl.Training.Python
	py := remote.Quote(python)
	probe := "command -v -- " + py + " >/dev/null 2>&1 || { echo no-python; exit 0; }; " +
		py + " -c 'import torch.distributed.run' >/dev/null 2>&1 || echo no-torchrun; true"
	res := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		pctx, cancel := context.WithTimeout(ctx, torchProbeWithin)
		defer cancel()
		return runOn(pctx, w, nodes[i], probe)
	})
	var noPython, noTorch []string
	for i, r := range res {
		out, _ := r.Value.([]byte)
		if r.Err != nil {
			continue // not asked: the job's start says what is wrong there
		}
		switch strings.TrimSpace(string(out)) {
		case "no-python":
			noPython = append(noPython, nodes[i].Name)
		case "no-torchrun":
			noTorch = append(noTorch, nodes[i].Name)
		}
	}
	var parts []string
	if len(noPython) > 0 {
		parts = append(parts, fmt.Sprintf("%s not installed on %s", python, hostlist.Compress(noPython)))
	}
	if len(noTorch) > 0 {
		parts = append(parts, fmt.Sprintf("%s cannot import torch.distributed.run (torchrun) on %s", python, hostlist.Compress(noTorch)))
	}
	if len(parts) == 0 {
		return nil
	}
	return orchestrator.Unmeasured(python, "%s: training load test not measured", strings.Join(parts, "; "))
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
