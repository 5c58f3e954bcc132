package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// TestCheckpointThroughputRestsOnTheLastRun: a save retested after it
// missed the quote (1 GB/s at 0.9) passes on a good retest, fails on a
// second slow one, and fails unstable on failed, passed, failed; a read
// the same; the cluster's idle time (CKPT-004) is the first runs', made
// at once. A miss the node's CPU explains (inconclusive) is no failure,
// so its single run has no history.
func TestCheckpointThroughputRestsOnTheLastRun(t *testing.T) {
	q := ckptQuote{GBs: 1, TolWrite: 0.9, TolRead: 0.9, TolIO: 0.9}
	save := func(node string, gbs float64) CkptSave {
		w := *ckptWrote(node, sumA, sumB)
		w.GBs, w.Seconds = gbs, float64(w.Bytes)/1e9/gbs
		return w
	}
	with := func(last CkptSave, earlier ...CkptSave) *CkptSave {
		last.Earlier = earlier
		return &last
	}
	w1 := with(save("n1", 2), save("n1", 0.25))
	w2 := with(save("n2", 0.25), save("n2", 0.25))
	w3 := with(save("n3", 0.25), save("n3", 0.25), save("n3", 2))
	r1 := ckptRead(w1, "n1", "drop_caches", sumA, sumB)
	slowRead := *r1
	slowRead.GBs, slowRead.Seconds = 0.25, 2
	r1.Earlier = []CkptRestore{slowRead}
	nodes := []ckptNode{
		{Name: "n1", Write: w1, Restore: r1},
		{Name: "n2", Write: w2},
		{Name: "n3", Write: w3},
	}
	vs := checkpointVerdicts(nodes, q)
	get := func(id, node string) record.Verdict {
		for _, v := range vs {
			if v.ID == id && v.Node == node {
				return v
			}
		}
		t.Fatalf("no %s for %q", id, node)
		return record.Verdict{}
	}
	for _, c := range []struct {
		id, node string
		want     record.Status
		runs     int
		unstable bool
	}{
		{"CKPT-002", "n1", record.Pass, 2, false},
		{"CKPT-002", "n2", record.Fail, 2, false},
		{"CKPT-002", "n3", record.Fail, 3, true},
		{"CKPT-003", "n1", record.Pass, 2, false},
	} {
		v := get(c.id, c.node)
		if v.Status != c.want || v.Retest == nil || len(v.Retest.Runs) != c.runs || v.Retest.Unstable != c.unstable ||
			v.Retest.Runs[0].Failed == "" || *v.Retest.Runs[0].Value != 0.25 {
			t.Errorf("%s %s: %s, want %s; history %+v", c.id, c.node, v.Status, c.want, v.Retest)
		}
	}
	// n1's first save took 2 s and its first read 2 s: the cluster's idle
	// time is theirs, not the retests'.
	vs = checkpointVerdicts(nodes[:1], q)
	if c := get("CKPT-004", ""); !strings.HasPrefix(c.Measured, "4 s idle: save 2 s (slowest n1) + restore 2 s") || c.Retest != nil {
		t.Errorf("cluster: %+v", c)
	}
	if got := ckptRateFailed(0.25, 0, 1, 0.9); got != "0.25 GB/s, less than 0.9 GB/s" {
		t.Errorf("ckptRateFailed: %q", got)
	}
	for _, c := range [][4]float64{{0.95, 0, 1, 0.9}, {0.25, 0, 0, 0.9}, {0.25, 0.5, 1, 0.9}} {
		if got := ckptRateFailed(c[0], c[1], c[2], c[3]); got != "" {
			t.Errorf("ckptRateFailed%v = %q, want no retest", c, got)
		}
	}
}
