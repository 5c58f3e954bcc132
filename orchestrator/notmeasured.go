package orchestrator

import (
	"errors"
	"fmt"

	"gpuaccept/remote"
)

// NotMeasured is what a phase body returns when the node lacks a tool
// the phase needs (dcgmi, fio, mpirun, python3, ...): the runner records
// it as record.NotMeasured, does not quarantine the node (a tool a node
// lacks is not a broken node), and the phase's judge makes its
// requirements SKIP with the reason as their Incomplete (the window is
// INCOMPLETE, never FAIL, never PASS). Why says it without the node's
// name, so many nodes lacking the same tool share one line.
type NotMeasured struct {
	Tool string
	Why  string
}

func (e *NotMeasured) Error() string { return e.Why }

// Unmeasured is a *NotMeasured for tool, its reason formatted.
func Unmeasured(tool, format string, args ...any) error {
	return &NotMeasured{Tool: tool, Why: fmt.Sprintf(format, args...)}
}

// IsNotMeasured is err's *NotMeasured, when it holds one. A command Slurm
// never started on the node is one too: the scheduler's failure measured
// nothing of the node, and quarantines nothing.
func IsNotMeasured(err error) (*NotMeasured, bool) {
	var nm *NotMeasured
	if errors.As(err, &nm) {
		return nm, true
	}
	var ns *remote.StepNotStartedError
	if errors.As(err, &ns) {
		why := fmt.Sprintf("Slurm did not start the job step within %s", ns.After)
		if ns.Said != "" {
			why += ": " + ns.Said
		}
		return &NotMeasured{Tool: "slurm", Why: why}, true
	}
	var sa *remote.StepAbortedError
	if errors.As(err, &sa) {
		if sa.Reason != "" {
			return &NotMeasured{Tool: "slurm", Why: sa.Reason}, true
		}
		return &NotMeasured{Tool: "slurm", Why: "srun aborted the job step the command shared with other nodes' before its end"}, true
	}
	return nil, false
}
