package inventory

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxRetest bounds acceptance.retest: each retest is a whole measurement
// again, out of the window's time.
const MaxRetest = 5

// Workload defaults.
const (
	DefaultStragglerRatio = 1.1
	DefaultTrainingSteps  = 30
	DefaultTrainingWarmup = 5
	DefaultInferencePort  = 8000
	DefaultPercentile     = 95
)

// DefaultLevels is the inference sweep when the inventory gives none.
var DefaultLevels = []string{"concurrency:1", "concurrency:8", "concurrency:32"}

// workload checks phases.workload: what is common to both kinds here, each
// kind's own keys in validate_workload_<kind>.go.
func (v *validator) workload(w *Workload) {
	const k = "phases.workload."
	v.nonNegativeDuration(k+"timeout", w.Timeout)
	if w.Repeats < 0 {
		v.problem(k+"repeats", "must not be negative, got %d", w.Repeats)
	} else if w.Repeats == 0 {
		w.Repeats = 1
	}
	if w.Image != "" && !pinnedImage.MatchString(w.Image) {
		v.problem(k+"image", "%s", imageMessage(w.Image))
	}
	w.Kind = strings.ToLower(strings.TrimSpace(w.Kind))
	switch w.Kind {
	case "training":
		v.workloadTraining(&w.Training)
	case "inference":
		v.workloadInference(&w.Inference)
		// Each level's figures are already distributions over every
		// request of its duration; a repeat the phase would not run
		// must not read as a measurement done.
		if w.Repeats > 1 {
			v.problem(k+"repeats", "applies to kind: training (the whole job run again); an inference level's figures are over every request of its duration: lengthen phases.workload.inference.duration instead, got %d", w.Repeats)
		}
	case "":
		if w.Enabled {
			v.problem(k+"kind", "required with phases.workload.enabled: training (a multi-node job under torchrun) or inference (an OpenAI-compatible server on every node)")
		}
	default:
		v.problem(k+"kind", "must be training or inference, got %q", short(w.Kind))
	}
}

// workloadTargets checks acceptance.workload.
func (v *validator) workloadTargets(t *WorkloadTargets) {
	const k = "acceptance.workload."
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"ready_within", t.Ready}, {"ttft", t.TTFT}, {"tpot", t.TPOT}, {"itl", t.ITL}, {"e2el", t.E2EL}, {"step_time", t.StepTime}} {
		v.nonNegativeDuration(k+d.key, d.d)
	}
	for _, n := range []struct {
		key string
		x   float64
	}{{"output_tokens_per_s", t.OutputTokensPerSec}, {"requests_per_s", t.RequestsPerSec}, {"samples_per_s", t.SamplesPerSec}, {"tokens_per_s", t.TokensPerSec}} {
		v.nonNegativeNumber(k+n.key, n.x)
	}
	if t.ErrorRate != nil && (*t.ErrorRate < 0 || *t.ErrorRate >= 1) {
		v.problem(k+"error_rate", "must be a fraction 0 ≤ x < 1 of the requests (0.001 is 0.1%%), got %g", *t.ErrorRate)
	}
	for _, f := range []struct {
		key string
		x   float64
	}{{"goodput", t.Goodput}, {"memory_headroom", t.MemoryHeadroom}} {
		if f.x < 0 || f.x > 1 {
			v.problem(k+f.key, "must be a fraction 0..1 (0.9 is 90%%), got %g", f.x)
		}
	}
	if t.MaxErrors < 0 {
		v.problem(k+"max_errors", "must not be negative, got %d", t.MaxErrors)
	}
	switch t.Percentile {
	case 0:
		t.Percentile = DefaultPercentile
	case 50, 90, 95, 99:
	default:
		v.problem(k+"percentile", "must be 50, 90, 95 or 99, got %d", t.Percentile)
	}
	if t.At != "" {
		if _, err := ParseLevel(t.At); err != nil {
			v.problem(k+"at", "%v", err)
		}
	}
}

// Level is one load level of the inference sweep.
type Level struct {
	// Concurrency: a closed loop of this many streams; Rate: an open loop
	// of Poisson arrivals at this many requests/s. One is set.
	Concurrency int
	Rate        float64
}

// String is the level as the inventory writes it.
func (l Level) String() string {
	if l.Concurrency > 0 {
		return fmt.Sprintf("concurrency:%d", l.Concurrency)
	}
	return "rate:" + strconv.FormatFloat(l.Rate, 'g', -1, 64)
}

// ParseLevel reads "concurrency:N" or "rate:R".
func ParseLevel(s string) (Level, error) {
	kind, val, ok := strings.Cut(strings.TrimSpace(s), ":")
	bad := fmt.Errorf("%q: a level is concurrency:N (N streams at once) or rate:R (R requests/s, Poisson arrivals)", short(s))
	if !ok {
		return Level{}, bad
	}
	switch strings.TrimSpace(kind) {
	case "concurrency":
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 1 || n > 100000 {
			return Level{}, bad
		}
		return Level{Concurrency: n}, nil
	case "rate":
		r, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(r > 0) || r > 1e6 {
			return Level{}, bad
		}
		return Level{Rate: r}, nil
	}
	return Level{}, bad
}
