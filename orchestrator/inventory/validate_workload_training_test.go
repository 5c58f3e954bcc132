package inventory

import (
	"strings"
	"testing"
)

// TestStepPattern: a buyer's step_pattern is a Go regexp with the step
// group and only the groups the phase reads; anything else is an error
// naming the key and the line, never a job that measures nothing.
func TestStepPattern(t *testing.T) {
	head := minimal + "phases:\n  workload:\n    enabled: true\n    kind: training\n    training:\n      command: [python3, train.py]\n"
	inv, err := parse("a.yaml", []byte(head+"      step_pattern: 'iter (?P<step>\\d+) (?P<step_time>[0-9.]+)s (?P<tokens>\\d+) tok'\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if tr := inv.Phases.Workload.Training; tr.Steps != DefaultTrainingSteps || tr.StragglerRatio != DefaultStragglerRatio || tr.Python != "python3" {
		t.Errorf("defaults: %+v", tr)
	}
	for pattern, want := range map[string]string{
		`'iter (?P<step>\d+'`:                      "not a Go regexp",
		`'iter (\d+) (?P<step_time>\S+)'`:          "needs a named group (?P<step>...)",
		`'iter (?P<step>\d+) (?P<step_times>\S+)'`: "unknown named group(s) step_times",
	} {
		_, err := parse("a.yaml", []byte(head+"      step_pattern: "+pattern+"\n"), noEnv)
		if err == nil || !strings.Contains(err.Error(), "a.yaml:13: phases.workload.training.step_pattern: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a.yaml:13: phases.workload.training.step_pattern: ...%s...", pattern, err, want)
		}
	}
	if _, err := parse("a.yaml", []byte(head), noEnv); err == nil || !strings.Contains(err.Error(), "step_pattern: required") {
		t.Errorf("a command without a pattern: %v", err)
	}
}

// repeats is the training job's: with kind inference, where the phase would
// not repeat anything, it is an error naming the key, never a silent no-op.
func TestWorkloadRepeatsIsTrainings(t *testing.T) {
	head := minimal + "phases:\n  workload:\n    enabled: true\n    kind: inference\n    inference:\n      model: m\n"
	if _, err := parse("a.yaml", []byte(head+"    repeats: 1\n"), noEnv); err != nil {
		t.Errorf("repeats 1 with inference: %v", err)
	}
	_, err := parse("a.yaml", []byte(head+"    repeats: 3\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "phases.workload.repeats: applies to kind: training") {
		t.Errorf("repeats 3 with inference: %v", err)
	}
}
