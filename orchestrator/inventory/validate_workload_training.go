package inventory

import (
	"regexp"
	"strings"
)

// stepGroups are the named groups a step_pattern may have.
var stepGroups = map[string]bool{"step": true, "step_time": true, "samples": true, "tokens": true}

// workloadTraining checks phases.workload.training and fills its defaults.
func (v *validator) workloadTraining(t *WorkloadTraining) {
	const k = "phases.workload.training."
	if v.inv.Image.Runtime == RuntimePyxis && v.inv.Phases.Workload.Image == "" {
		// torchrun in the image runs with docker or podman on the node;
		// under Pyxis it would need srun's container, which its launch
		// does not take yet: it runs on the nodes themselves.
		if v.given(k+"in_image") && On(t.InImage) {
			v.problem(k+"in_image", "the job runs in the image with docker or podman; under image.runtime pyxis torchrun runs on the nodes themselves: set this false")
		}
		off := false
		t.InImage = &off
	}
	if t.StepPattern != "" {
		re, err := regexp.Compile(t.StepPattern)
		switch {
		case err != nil:
			v.problem(k+"step_pattern", "not a Go regexp: %v", err)
		case re.SubexpIndex("step") < 0:
			v.problem(k+"step_pattern", "needs a named group (?P<step>...) for the step number, and any of step_time, samples, tokens")
		default:
			// A misspelt group would measure nothing, silently.
			var unknown []string
			for _, name := range re.SubexpNames() {
				if name != "" && !stepGroups[name] {
					unknown = append(unknown, name)
				}
			}
			if len(unknown) > 0 {
				v.problem(k+"step_pattern", "unknown named group(s) %s: the groups read are step, step_time (seconds), samples and tokens (per step)", strings.Join(unknown, ", "))
			}
		}
	} else if len(t.Command) > 0 {
		v.problem(k+"step_pattern", "required with phases.workload.training.command: a regexp that reads a step line of your job's log, with named groups step and any of step_time (seconds), samples, tokens")
	}
	for _, n := range []struct {
		key string
		x   int
	}{{"procs_per_node", t.ProcsPerNode}, {"steps", t.Steps}, {"warmup", t.Warmup}, {"hidden", t.Hidden}, {"batch", t.Batch}} {
		v.nonNegativeInt(k+n.key, n.x)
	}
	v.nonNegativeDuration(k+"duration", t.Duration)
	if t.Steps == 0 {
		t.Steps = DefaultTrainingSteps
	}
	if !v.given(k + "warmup") {
		t.Warmup = min(DefaultTrainingWarmup, t.Steps/2)
	}
	if t.Warmup >= t.Steps {
		v.problem(k+"warmup", "must be less than steps (%d): the steady figures need steps after the warm-up", t.Steps)
	}
	if t.StragglerRatio == 0 {
		t.StragglerRatio = DefaultStragglerRatio
	} else if t.StragglerRatio <= 1 {
		v.problem(k+"straggler_ratio", "must be more than 1 (1.1: a node whose step takes 10%% longer than the median), got %g", t.StragglerRatio)
	}
	if t.Python == "" {
		t.Python = "python3"
	}
	if t.Port < 0 || t.Port > 65535 {
		v.problem(k+"port", "must be a TCP port 1..65535, got %d", t.Port)
	}
}
