package phases

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
)

// fewNodesInventory quotes an inter-node bandwidth (low enough for the fake
// fabric to meet) and turns on the bisection.
var fewNodesInventory = strings.Replace(strings.Replace(propertyInventory,
	"  form_factor: SXM\n", "  form_factor: SXM\n  inter_busbw_gbs: 1\n", 1),
	"    timeout: 1m\n", "    timeout: 1m\n    bisection: {enabled: true}\n", 1)

// Every cluster-wide judge with 0, 1, 2 and 3 nodes left in the window,
// whichever nodes a failed preflight quarantined: a requirement that needs
// more nodes than are left is never a FAIL; NCCL-002, whose figure the
// quote states, is NOT MEASURED (the window INCOMPLETE), NCCL-004 not
// applicable; with enough nodes they are judged.
func TestClusterJudgesWithTooFewNodesLeft(t *testing.T) {
	need := map[string]int{"NCCL-001": 2, "NCCL-002": 2, "NCCL-004": 3}
	for nodes := 1; nodes <= 3; nodes++ {
		for mask := range 1 << nodes {
			var faults []fault
			for i := range nodes {
				if mask&(1<<i) != 0 {
					faults = append(faults, fault{fmt.Sprintf("h%d", i+1), "preflight", exitFault})
				}
			}
			left := nodes - len(faults)
			t.Run(fmt.Sprintf("%d nodes, %d left", nodes, left), func(t *testing.T) {
				inv := fakeInventory(t, nodes, fewNodesInventory)
				f := soundFleet(inv)
				s := schedule{nodes: nodes, faults: faults}
				inject(f, s)
				rec, _, err := orchestrator.Start(t.Context(), inv, quick(s), orchestrator.Options{RunsDir: fastDir(t), Dial: f.Dial})
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for _, v := range rec.Verdicts {
					n, cluster := need[v.ID]
					if !cluster || strings.Contains(v.Measured, "intra-node") {
						continue // intranode's NCCL-001 is a node's own
					}
					seen[v.ID] = true
					switch {
					case left < n && v.Status != record.Skip:
						t.Errorf("%s with %d left: %s %s %s", v.ID, left, v.Status, v.Measured, v.Detail)
					case left < n && v.ID == "NCCL-002" && !strings.Contains(v.Incomplete, "NOT MEASURED"):
						t.Errorf("NCCL-002 with %d left is not NOT MEASURED: %+v", left, v)
					case left < n && v.ID == "NCCL-004" && v.Incomplete != "":
						t.Errorf("NCCL-004 with %d left is not merely not applicable: %+v", left, v)
					case left >= n && v.Status != record.Pass:
						t.Errorf("%s with %d left: %s %s %s", v.ID, left, v.Status, v.Measured, v.Detail)
					}
				}
				for id := range need {
					if !seen[id] {
						t.Errorf("no %s verdict", id)
					}
				}
				res := rec.Result()
				if left < 2 && slices.ContainsFunc(res.Failed, func(id string) bool { return strings.HasPrefix(id, "NCCL") }) {
					t.Errorf("failed %v with %d left", res.Failed, left)
				}
				if nodes == 1 && left == 1 && (res.Outcome != record.OutcomeIncomplete ||
					!slices.ContainsFunc(res.Incomplete, func(s string) bool {
						return strings.Contains(s, "NOT MEASURED: a cluster-wide all-reduce needs at least 2 nodes, 1 left")
					})) {
					t.Errorf("a sound one-node window: %+v", res)
				}
			})
		}
	}
}

// The failure test with one node left (the other quarantined): not run,
// its requirements not applicable (nothing the quote states), never a
// FAIL.
func TestTheFailureTestOnOneNodeLeftFailsNothing(t *testing.T) {
	inv := fakeInventory(t, 2, killTest)
	f := soundFleet(inv)
	inject(f, schedule{nodes: 2, faults: []fault{{"h2", "preflight", exitFault}}})
	var ps []orchestrator.Phase
	for _, p := range All() {
		if slices.Contains([]string{"connect", "tools", "preflight", "failure", "teardown"}, p.Name) {
			ps = append(ps, p)
		}
	}
	rec, _, err := orchestrator.Start(t.Context(), inv, ps, orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range rec.Verdicts {
		if strings.HasPrefix(v.ID, "RECOV-") {
			n++
			if v.Status != record.Skip || !strings.Contains(v.Detail, "needs at least 2 nodes, 1 left") {
				t.Errorf("%s: %s %s", v.ID, v.Status, v.Detail)
			}
		}
	}
	if n != 4 {
		t.Errorf("%d RECOV verdicts, want 4", n)
	}
}
