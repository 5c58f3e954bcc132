package phases

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
)

// The workload's training job as a load of the burn-in's rounds
// (phases.burnin.workload): the training phase's job, as it runs there,
// once a round over the nodes still in the burn-in, its step time kept
// per round and its drift judged (BURN-005).

// burninJob is the training job the rounds run, and its bound.
type burninJob struct {
	t      *trainingJob
	within time.Duration
}

// burninTraining is the job the rounds run, nil when the inventory does
// not loop it; a *orchestrator.NotMeasured when the nodes lack what it
// launches with.
func burninTraining(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node) (*burninJob, error) {
	if !w.Inv.Phases.Burnin.Workload {
		return nil, nil
	}
	if err := trainingUnmeasured(ctx, w, nodes); err != nil {
		return nil, err
	}
	wl := w.Inv.Phases.Workload
	t := &trainingJob{w: w, tr: wl.Training, procs: trainingProcs(w.Inv)}
	if wl.Training.StepPattern != "" {
		p, err := compileStepPattern(wl.Training.StepPattern)
		if err != nil {
			return nil, err
		}
		t.pattern = p
	}
	return &burninJob{t: t, within: burninJobWithin(w)}, nil
}

// burninJobWithin bounds one round's job: phases.workload.timeout where
// set (it bounds the training phase's every job), else a job's built-in
// bound.
func burninJobWithin(w *orchestrator.Window) time.Duration {
	return cmp.Or(w.Inv.Phases.Workload.Timeout, trainingJobWithin)
}

// round runs the job once over nodes. Rounds run one at a time, so the
// job's nodes are the round's.
func (j *burninJob) round(ctx context.Context, nodes []*orchestrator.Node) *BurninWorkload {
	j.t.nodes = nodes
	start := time.Now()
	jctx, cancel := context.WithTimeout(orchestrator.WithLog(ctx, "burnin-workload"), j.within)
	figs, _, _, err := j.t.job(jctx, j.within)
	cancel()
	res := &BurninWorkload{Nodes: len(nodes), Secs: time.Since(start).Seconds()}
	var steps []float64
	var bad []string
	for _, f := range figs {
		if f.StepSecs.N > 0 && finite(f.StepSecs.P50) && f.StepSecs.P50 > 0 {
			steps = append(steps, f.StepSecs.P50)
		}
		if f.Errors > 0 || f.Restarts > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d error(s), %d restart(s)", f.Node, f.Errors, f.Restarts))
		}
	}
	if len(steps) > 0 {
		res.MedianStepSecs = median(steps)
	}
	switch {
	case err != nil:
		res.Error = clip(err.Error(), 300)
	case len(bad) > 0:
		res.Error = clip(strings.Join(firstFew(bad), "; "), 300)
	case len(steps) == 0:
		res.Error = "no node logged a steady step"
	}
	return res
}
