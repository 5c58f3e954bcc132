package phases

import (
	"math"
	"slices"

	"gpuaccept/orchestrator/workload"
)

// figures is every node's part of one run, in nodes' order, and the unit
// of the throughput ("tokens/s" when the log gives tokens, "samples/s"
// when samples, "" when neither). sampled is the GPU memory nvidia-smi
// saw on each node while the job ran, for a log that does not say.
func (l *trainingLog) figures(nodes []string, sampled map[string]memFigure) ([]workload.TrainingNode, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	unit := ""
	for _, name := range nodes {
		if n := l.nodes[name]; n != nil {
			for _, recs := range n.streams {
				for _, r := range recs {
					switch {
					case !math.IsNaN(r.tokens):
						unit = "tokens/s"
					case !math.IsNaN(r.samples) && unit == "":
						unit = "samples/s"
					}
				}
			}
		}
	}
	out := make([]workload.TrainingNode, len(nodes))
	for i, name := range nodes {
		out[i] = workload.TrainingNode{Node: name}
		if n := l.nodes[name]; n != nil {
			out[i] = n.figures(name, l.warmup, unit, sampled[name])
		}
	}
	return out, unit
}

// figures is one node's part: its workers' streams pooled.
func (n *nodeLog) figures(name string, warmup int, unit string, sampled memFigure) workload.TrainingNode {
	tn := workload.TrainingNode{Node: name, Restarts: n.restarts, ErrorLines: n.errorLines}
	since := func(at float64) *float64 {
		if math.IsNaN(at) || math.IsNaN(n.launched) {
			return nil
		}
		d := max(at-n.launched, 0)
		return &d
	}
	if n.inImage {
		// The launcher's first line comes from inside the container.
		tn.ContainerSecs = since(n.firstLine)
	}
	tn.RendezvousSecs = since(n.rendezvous)
	if tn.RendezvousSecs == nil {
		// No launcher log at INFO: the workers' start comes after their
		// process group formed.
		tn.RendezvousSecs = since(n.started)
	}
	tn.Errors = n.contractErrors
	if tn.Errors == 0 {
		// A job that does not keep the contract says its errors as
		// tracebacks (ddp_train.py says both, once each).
		tn.Errors = n.tracebacks
	}
	var steps, compute, wait []float64
	var perSec float64
	measured := false
	first := math.NaN()
	memPeak, memTotal := math.NaN(), math.NaN()
	for _, recs := range n.streams {
		for i, r := range recs {
			tn.Steps = max(tn.Steps, r.step)
			if i == 0 && (math.IsNaN(first) || r.at < first) {
				first = r.at
			}
			if !math.IsNaN(r.memPeakMiB) {
				memPeak = nanMax(memPeak, r.memPeakMiB)
			}
			if !math.IsNaN(r.memTotalMiB) {
				memTotal = nanMax(memTotal, r.memTotalMiB)
			}
		}
		var secs, done float64
		for i := warmup; i < len(recs); i++ {
			r := recs[i]
			t := r.stepTime
			if math.IsNaN(t) && i > 0 && r.step > recs[i-1].step {
				t = (r.at - recs[i-1].at) / float64(r.step-recs[i-1].step)
			}
			if math.IsNaN(t) {
				continue
			}
			steps = append(steps, t)
			if !math.IsNaN(r.compute) {
				compute = append(compute, r.compute)
			}
			if !math.IsNaN(r.wait) {
				wait = append(wait, r.wait)
			}
			x := r.samples
			if unit == "tokens/s" {
				x = r.tokens
			}
			if !math.IsNaN(x) {
				secs += t
				done += x
			}
		}
		if secs > 0 {
			perSec += done / secs
			measured = true
		}
	}
	if len(n.streams) > 0 {
		tn.FirstStepSecs = since(first)
	}
	tn.StepSecs = workload.NewDist(steps)
	if len(compute) > 0 {
		d := workload.NewDist(compute)
		tn.ComputeSecs = &d
	}
	if len(wait) > 0 {
		d := workload.NewDist(wait)
		tn.WaitSecs = &d
	}
	if measured {
		tn.PerSec = &perSec
	}
	switch {
	case !math.IsNaN(memPeak):
		tn.GPUMemPeakMiB, tn.GPUMemFrom = &memPeak, "log"
		if !math.IsNaN(memTotal) {
			tn.GPUMemTotalMiB = &memTotal
		} else if sampled.TotalMiB != nil {
			tn.GPUMemTotalMiB = sampled.TotalMiB
		}
	case sampled.PeakMiB != nil:
		tn.GPUMemPeakMiB, tn.GPUMemTotalMiB, tn.GPUMemFrom = sampled.PeakMiB, sampled.TotalMiB, "nvidia-smi"
	}
	return tn
}

func nanMax(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	return max(a, b)
}

// quantile of sorted s at q in [0, 1].
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// median of xs (NaN for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, 0.5)
}

// nodeFigure is one node's figures over a measurement's runs: each the
// median of the runs that measured it (never the best), with the runs'
// spread.
type nodeFigure struct {
	Node string
	// Step: the median step the straggler is judged on (compute time when
	// the log gives it, else the whole step), Basis says which.
	Step, StepMin, StepMax float64
	Basis                  string
	// StepAll: the whole step's median (WORK-008's step_time target).
	StepAll                float64
	PerSec, PerMin, PerMax float64
	FirstStep, Peak, Total float64
	Errors, Restarts, Runs int
	ErrorLines             []string
	Failed                 bool // the node logged errors or restarts in some run
}

// trialNodes is each node's figures over trial's runs, in the last run's
// order of nodes.
func trialNodes(trial trainingTrial) []nodeFigure {
	if len(trial) == 0 {
		return nil
	}
	last := trial[len(trial)-1]
	// One basis for every node, so that their ratios compare: compute
	// time when every node's log gives it.
	compute := true
	for _, run := range trial {
		for _, tn := range run {
			if tn.ComputeSecs == nil && tn.StepSecs.N > 0 {
				compute = false
			}
		}
	}
	out := make([]nodeFigure, 0, len(last))
	for _, ln := range last {
		f := nodeFigure{Node: ln.Node, Peak: math.NaN(), Total: math.NaN()}
		var step, all, per, first []float64
		for _, run := range trial {
			for _, tn := range run {
				if tn.Node != ln.Node {
					continue
				}
				f.Runs++
				if tn.StepSecs.N > 0 {
					all = append(all, tn.StepSecs.P50)
					if compute && tn.ComputeSecs != nil {
						step = append(step, tn.ComputeSecs.P50)
					} else if !compute {
						step = append(step, tn.StepSecs.P50)
					}
				}
				if tn.PerSec != nil {
					per = append(per, *tn.PerSec)
				}
				if tn.FirstStepSecs != nil {
					first = append(first, *tn.FirstStepSecs)
				}
				if tn.GPUMemPeakMiB != nil {
					f.Peak = nanMax(f.Peak, *tn.GPUMemPeakMiB)
				}
				if tn.GPUMemTotalMiB != nil {
					f.Total = nanMax(f.Total, *tn.GPUMemTotalMiB)
				}
				f.Errors += tn.Errors
				f.Restarts += tn.Restarts
				if len(f.ErrorLines) == 0 {
					f.ErrorLines = tn.ErrorLines
				}
			}
		}
		f.Basis = "step"
		if compute {
			f.Basis = "compute"
		}
		f.Step, f.StepMin, f.StepMax = spread(step)
		f.StepAll = median(all)
		f.PerSec, f.PerMin, f.PerMax = spread(per)
		f.FirstStep = median(first)
		f.Failed = f.Errors+f.Restarts > 0
		out = append(out, f)
	}
	return out
}

// spread is the median, min and max of xs (NaN for none).
func spread(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	return median(xs), slices.Min(xs), slices.Max(xs)
}

// straggler is the median over nodes of their median step, the slowest
// node whose step exceeds it by more than ratio ("" for none), and every
// node's step over that median.
func straggler(nodes []nodeFigure, ratio float64) (float64, string, map[string]float64) {
	var steps []float64
	for _, n := range nodes {
		if !math.IsNaN(n.Step) {
			steps = append(steps, n.Step)
		}
	}
	med := median(steps)
	ratios := map[string]float64{}
	if math.IsNaN(med) || med <= 0 {
		return 0, "", ratios
	}
	worst, name := 0.0, ""
	for _, n := range nodes {
		if math.IsNaN(n.Step) {
			continue
		}
		r := n.Step / med
		ratios[n.Node] = r
		if r > ratio && r > worst {
			worst, name = r, n.Node
		}
	}
	return med, name, ratios
}
