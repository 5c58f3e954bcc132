package phases

import (
	"context"
	"fmt"

	"gpuaccept/orchestrator"
)

// stageNode stages, and stages again while the throughput fails the
// quote and acceptance.retest allows: the node's record is the last run,
// the earlier ones kept in it.
func stageNode(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
	q, tol := w.Inv.Quote.StagingGBs, w.Inv.Acceptance.ToleranceFor("STAGE-002")
	runs, err := retested(ctx, w, n.Name, "staging throughput", func(ctx context.Context, run int) (*Staged, error) {
		return stageOnce(ctx, w, n)
	}, func(res *Staged) string { return stagingFailed(res, q, tol) })
	if len(runs) == 0 || runs[len(runs)-1] == nil {
		return nil, err
	}
	res := runs[len(runs)-1]
	for _, r := range runs[:len(runs)-1] {
		res.Earlier = append(res.Earlier, *r)
	}
	return res, err
}

// stagingFailed says why a run's throughput fails the quote at tolerance
// tol, "" when it passes or nothing is quoted: the judge's rule. A run
// that did not complete is no figure: it ends with an error, which ends
// the retests.
func stagingFailed(res *Staged, quoted, tol float64) string {
	if res == nil || !res.Complete || quoted <= 0 || res.GBs/quoted >= tol {
		return ""
	}
	return fmt.Sprintf("%s, less than %s", gbsText(res.GBs), gbsText(tol*quoted))
}
