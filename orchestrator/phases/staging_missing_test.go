package phases

import (
	"slices"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// TestStagingWithoutTheSourcesToolIsNotMeasured: h3 has no aws CLI for an
// s3:// source. Its STAGE-001/002 are SKIP with the reason as their
// Incomplete (not FAIL "staging failed"), it counts in no figure, and
// the cluster's figures are those of the nodes that staged.
func TestStagingWithoutTheSourcesToolIsNotMeasured(t *testing.T) {
	st := inventory.Staging{Enabled: true, Dir: "/scratch", Window: time.Minute}
	bare := &Staged{Dir: "/scratch/gpuaccept-x", Started: stageT0, Ended: stageT0, Sources: []StagedSource{{Name: "dataset", Kind: "s3", From: "s3://bucket/data",
		Missing: "the aws CLI is not installed on this node (needed for s3://)", Error: "the aws CLI is not installed on this node (needed for s3://)"}}}
	why := "dataset (s3://bucket/data): the aws CLI is not installed on this node (needed for s3://): staging not measured"
	if got := strings.Join(unstaged(bare.Sources), "; ") + ": staging not measured"; got != why {
		t.Fatalf("unstaged: %q", got)
	}
	vs := judgeStagingWith(t, st, 1, map[string]stagingCanned{
		"h1": {res: stagedFixture(stSumA, 2e9, 1)},
		"h2": {res: stagedFixture(stSumA, 2e9, 1)},
		"h3": {res: bare, err: orchestrator.Unmeasured("staging", "%s", why)},
	})
	for _, id := range []string{"STAGE-001", "STAGE-002"} {
		if v := stageVerdict(vs, id, "h3"); v.Status != record.Skip || v.Incomplete != why {
			t.Errorf("%s h3 = %+v", id, v)
		}
	}
	if v := stageVerdict(vs, "STAGE-002", ""); v.Status != record.Pass || !strings.Contains(v.Measured, "over 2 node(s)") {
		t.Errorf("aggregate = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-003", ""); v.Status != record.Pass {
		t.Errorf("STAGE-003 = %+v", v)
	}
	r := &record.Run{Verdicts: vs}
	if res := r.Result(); res.Outcome != record.OutcomeIncomplete || !slices.Contains(res.Incomplete, "h3: "+why) {
		t.Errorf("window %s: %q", res.Outcome, res.Incomplete)
	}
}

// TestStagingWithoutFioIsStillJudged: the fio disk baseline is context
// for the staging figures, and no quote figure needs it: a node without
// fio says so and leaves the window complete.
func TestStagingWithoutFioIsStillJudged(t *testing.T) {
	st := inventory.Staging{Enabled: true, Dir: "/scratch", Window: time.Minute}
	noFio := stagedFixture(stSumA, 2e9, 1)
	noFio.Disk, noFio.DiskNote = nil, "not measured: fio is not installed on the node"
	vs := judgeStagingWith(t, st, 1, map[string]stagingCanned{
		"h1": {res: stagedFixture(stSumA, 2e9, 1)}, "h2": {res: stagedFixture(stSumA, 2e9, 1)}, "h3": {res: noFio},
	})
	for _, v := range vs {
		if v.Incomplete != "" || v.Status != record.Pass {
			t.Errorf("%s %s: %+v", v.ID, v.Node, v)
		}
	}
	if v := stageVerdict(vs, "STAGE-002", "h3"); !strings.Contains(v.Detail, "fio is not installed") {
		t.Errorf("STAGE-002 h3 does not say fio is missing: %+v", v)
	}
}
