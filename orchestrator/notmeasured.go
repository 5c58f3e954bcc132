package orchestrator

import (
	"errors"
	"fmt"
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

// IsNotMeasured is err's *NotMeasured, when it holds one.
func IsNotMeasured(err error) (*NotMeasured, bool) {
	var nm *NotMeasured
	if errors.As(err, &nm) {
		return nm, true
	}
	return nil, false
}
