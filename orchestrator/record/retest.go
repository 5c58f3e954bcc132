package record

import (
	"fmt"
	"slices"
	"strings"
)

// Retest is the history of a figure measured more than once because a
// run failed (acceptance.retest): published suites learned that a
// transient failure must not decide a contract, and that a flaky node
// must not hide behind a retest either.
type Retest struct {
	// Runs in order; the verdict rests on the last one unless Unstable.
	Runs []RetestRun `json:"runs"`
	// Unstable: a run failed after a later one had passed (failed, passed,
	// failed): the node is named unstable and the figure fails.
	Unstable bool `json:"unstable,omitempty"`
}

// RetestRun is one run of a retested figure.
type RetestRun struct {
	Value *float64 `json:"value,omitempty"`
	Unit  string   `json:"unit,omitempty"`
	// Failed says why the run failed its target; "" when it passed.
	Failed string `json:"failed,omitempty"`
}

// Again says whether a figure whose runs so far failed (true) or passed
// (false) in this order is measured once more, when retests runs may
// follow failures: a failure is retested while the failures so far are no
// more than retests; a pass that directly follows a failure is confirmed
// by one more run, outside that budget (with the default of one retest,
// fail, pass, fail must still be seen to be named unstable); a figure
// that already failed, passed and failed is not run again.
func Again(failed []bool, retests int) bool {
	n := len(failed)
	switch {
	case n == 0:
		return true
	case retests <= 0 || unstable(failed):
		return false
	case failed[n-1]:
		failures := 0
		for _, f := range failed {
			if f {
				failures++
			}
		}
		return failures <= retests
	}
	return n > 1 && failed[n-2]
}

// MaxRuns is the most runs Again allows a figure with retests: the
// first, a run per allowed failure, and the confirmation of a pass. The
// phases' deadlines are sized by it.
func MaxRuns(retests int) int {
	if retests <= 0 {
		return 1
	}
	return retests + 2
}

// unstable: a failure, a later pass, and a failure after that.
func unstable(failed []bool) bool {
	stage := 0 // 0: looking for a failure, 1: for a pass after it, 2: for a failure after that
	for _, f := range failed {
		switch {
		case stage == 0 && f, stage == 2 && f:
			stage++
		case stage == 1 && !f:
			stage++
		}
		if stage == 3 {
			return true
		}
	}
	return false
}

// NewRetest is the history of runs; nil for a figure measured once, and
// for one whose every run passed (measured again only because another
// figure of the same job failed: nothing of it was retested).
func NewRetest(runs []RetestRun) *Retest {
	if len(runs) < 2 {
		return nil
	}
	failed := make([]bool, len(runs))
	for i, r := range runs {
		failed[i] = r.Failed != ""
	}
	if !slices.Contains(failed, true) {
		return nil
	}
	return &Retest{Runs: runs, Unstable: unstable(failed)}
}

// Failed says whether the figure fails on its history: the last run
// failed, or the runs were unstable.
func (r *Retest) Failed() bool {
	if r == nil || len(r.Runs) == 0 {
		return false
	}
	return r.Unstable || r.Runs[len(r.Runs)-1].Failed != ""
}

// Note is one line on the history for a verdict's detail: "run 1 failed
// (210 GB/s); retest passed (371 GB/s): the verdict rests on the retest",
// or "unstable: failed, passed, failed (...)". "" for nil.
func (r *Retest) Note() string {
	if r == nil || len(r.Runs) < 2 {
		return ""
	}
	var runs []string
	for i, x := range r.Runs {
		s := "passed"
		if x.Failed != "" {
			s = "failed"
		}
		if x.Value != nil {
			s += " (" + Figure(*x.Value, x.Unit) + ")"
		}
		runs = append(runs, fmt.Sprintf("run %d %s", i+1, s))
	}
	h := strings.Join(runs, ", ")
	switch {
	case r.Unstable:
		return "unstable: " + h + ": a retest that passed between failures does not count"
	case r.Runs[len(r.Runs)-1].Failed != "":
		return h + ": failed on every retest"
	}
	return h + ": the verdict rests on the last run; an earlier one failed"
}
