package phases

import (
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// TestStagingThroughputRestsOnTheLastRun: a node whose staging ran more
// than once (its throughput failed the quote of 1 GB/s at 0.9) is judged
// on its last run with every run in its history; failed, passed, failed
// is unstable. The aggregate and the setup window are the nodes' first
// runs, the ones that staged at once.
func TestStagingThroughputRestsOnTheLastRun(t *testing.T) {
	slow, fast := func() Staged { return *stagedFixture(stSumA, 20e9, 40) }, func() Staged { return *stagedFixture(stSumA, 20e9, 10) }
	with := func(last Staged, earlier ...Staged) *Staged {
		last.Earlier = earlier
		return &last
	}
	st := inventory.Staging{Enabled: true, Dir: "/scratch", Window: 30 * time.Second}
	vs := judgeStagingWith(t, st, 1, map[string]stagingCanned{
		"h1": {res: with(fast(), slow())},
		"h2": {res: with(slow(), slow())},
		"h3": {res: with(slow(), slow(), fast())},
	})
	for _, c := range []struct {
		node     string
		want     record.Status
		runs     int
		unstable bool
	}{
		{"h1", record.Pass, 2, false},
		{"h2", record.Fail, 2, false},
		{"h3", record.Fail, 3, true},
	} {
		v := stageVerdict(vs, "STAGE-002", c.node)
		if v.Status != c.want || v.Retest == nil || len(v.Retest.Runs) != c.runs || v.Retest.Unstable != c.unstable {
			t.Errorf("STAGE-002 %s: %s, want %s; history %+v", c.node, v.Status, c.want, v.Retest)
			continue
		}
		if r := v.Retest.Runs[0]; r.Failed == "" || r.Value == nil || *r.Value != 0.5 || r.Unit != record.UnitGBs {
			t.Errorf("STAGE-002 %s: the first run %+v", c.node, r)
		}
	}
	// 60 GB in 40 s against 3 × 1 GB/s, every node's first run; h1's
	// retest of 10 s does not make the setup fit the window.
	if v := stageVerdict(vs, "STAGE-002", ""); v.Status != record.Fail || v.Retest != nil {
		t.Errorf("aggregate: %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-003", ""); v.Status != record.Fail {
		t.Errorf("window: %+v", v)
	}
	if got := stagingFailed(&Staged{Complete: true, GBs: 0.5}, 1, 0.9); got != "0.5 GB/s, less than 0.9 GB/s" {
		t.Errorf("stagingFailed: %q", got)
	}
	for _, s := range []*Staged{nil, {GBs: 0.1}, {Complete: true, GBs: 0.95}} {
		if got := stagingFailed(s, 1, 0.9); got != "" {
			t.Errorf("stagingFailed(%+v) = %q, want no retest", s, got)
		}
	}
	if got := stagingFailed(&Staged{Complete: true, GBs: 0.1}, 0, 0.9); got != "" {
		t.Errorf("no quote, no retest: %q", got)
	}
}
