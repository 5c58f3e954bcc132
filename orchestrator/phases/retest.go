package phases

import (
	"context"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// retested measures once, and again while acceptance.retest allows
// (record.Again): after a run that failed its target, and once more to
// confirm a pass that followed a failure. fails says why a run fails its
// target ("" when it passes) with the same rule the judge applies, so
// the phase retests exactly what the verdict would fail. who names the
// node (or "" for the cluster) in the progress line. A run that could not
// measure (err) ends the retests: the runs so far and the error return.
func retested[T any](ctx context.Context, w *orchestrator.Window, who, what string, measure func(ctx context.Context, run int) (T, error), fails func(T) string) ([]T, error) {
	var runs []T
	var failed []bool
	retests := w.Inv.Acceptance.RetestOr()
	for record.Again(failed, retests) {
		if ctx.Err() != nil {
			return runs, ctx.Err()
		}
		x, err := measure(ctx, len(runs)+1)
		if err != nil {
			return append(runs, x), err
		}
		runs = append(runs, x)
		why := fails(x)
		failed = append(failed, why != "")
		if record.Again(failed, retests) {
			msg := "%s failed (%s): retesting (run %d)"
			arg := []any{what, why, len(runs) + 1}
			if why == "" {
				msg, arg = "%s passed after a failure: confirming (run %d)", []any{what, len(runs) + 1}
			}
			if who != "" {
				w.Progress.Node(who, msg, arg...)
			} else {
				w.Progress.Line(msg, arg...)
			}
		}
	}
	return runs, nil
}

// retestOf is the history a verdict carries of runs measured by
// retested, figure judging each run as the verdict does (its value in
// unit and why it failed); nil for a figure measured once.
func retestOf[T any](runs []T, unit string, figure func(T) (value *float64, failed string)) *record.Retest {
	if len(runs) < 2 {
		return nil
	}
	rs := make([]record.RetestRun, len(runs))
	for i, x := range runs {
		v, why := figure(x)
		rs[i] = record.RetestRun{Value: v, Unit: unit, Failed: why}
	}
	return record.NewRetest(rs)
}
