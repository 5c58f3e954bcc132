package reports

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// checkpointRun is the field report's checkpoint row at four nodes: one
// node quarantined, CKPT-001 passed on the three others, CKPT-002..004
// skipped as not stated in the quote.
func checkpointRun() *record.Run {
	run := &record.Run{ID: "ckpt", Provider: "p"}
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("gpu-%02d", i)
		run.Nodes = append(run.Nodes, record.Node{Name: n, Quarantined: i == 4, Reason: "diag failed"})
		one := record.Verdict{ID: "CKPT-001", Node: n, Status: record.Pass, Measured: "sha256 match"}
		if i == 4 {
			one = record.Verdict{ID: "CKPT-001", Node: n, Status: record.Skip, Detail: "diag failed"}
		}
		run.Verdicts = append(run.Verdicts, one,
			record.Verdict{ID: "CKPT-002", Node: n, Status: record.Skip, Detail: "not stated in the quote"},
			record.Verdict{ID: "CKPT-003", Node: n, Status: record.Skip, Detail: "not stated in the quote"})
	}
	run.Verdicts = append(run.Verdicts, record.Verdict{ID: "CKPT-004", Status: record.Skip, Detail: "not stated in the quote"})
	return run
}

func cardRowOf(t *testing.T, run *record.Run, name string) cardRow {
	t.Helper()
	for _, r := range card(run) {
		if r.Test == name {
			return r
		}
	}
	t.Fatalf("no card row %q", name)
	return cardRow{}
}

// The checkpoint row said PASS "all 13 verdicts passed" over 10 skipped.
func TestCardRowCountsOnlyWhatWasJudged(t *testing.T) {
	row := cardRowOf(t, checkpointRun(), record.CardCheckpoint)
	if row.Status != cardPartly {
		t.Errorf("status %s, want %s", row.Status, cardPartly)
	}
	for _, want := range []string{"3 passed, 10 not judged", "CKPT-[002-004]", "not stated in the quote"} {
		if !strings.Contains(row.Figure, want) {
			t.Errorf("figure %q does not say %q", row.Figure, want)
		}
	}
	var b strings.Builder
	if err := Summary(&b, checkpointRun(), SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"CKPT-001 PASS 3/3, 1 not judged", "CKPT-002 SKIP 4 not judged"} {
		if !strings.Contains(plain, want) {
			t.Errorf("summary does not say %q:\n%s", want, b.String())
		}
	}
}

// CKPT-004, which the row's pass condition names ("without long GPU
// idle"), absent from the run: the row is not passed over it.
func TestCardRowNamedRequirementMissing(t *testing.T) {
	run := &record.Run{Nodes: []record.Node{{Name: "a"}}, Verdicts: []record.Verdict{
		{ID: "CKPT-001", Node: "a", Status: record.Pass},
		{ID: "CKPT-002", Node: "a", Status: record.Pass},
	}}
	row := cardRowOf(t, run, record.CardCheckpoint)
	if row.Status != cardPartly || !strings.Contains(row.Figure, "CKPT-004, the run has no verdict of it") {
		t.Errorf("row %s %q, want %s naming CKPT-004", row.Status, row.Figure, cardPartly)
	}
	run.Verdicts = append(run.Verdicts, record.Verdict{ID: "CKPT-004", Status: record.Pass})
	if row := cardRowOf(t, run, record.CardCheckpoint); row.Status != string(record.Pass) {
		t.Errorf("every requirement judged and passed: row %s %q, want PASS", row.Status, row.Figure)
	}
}

// TestJudgedProperty: for random verdict sets, a card row, a summary line
// and a compare cell are PASS only if every verdict they count was judged
// and passed and no requirement of theirs went unjudged; their counts add
// up to the verdicts there are.
func TestJudgedProperty(t *testing.T) {
	ids := []string{"CKPT-001", "CKPT-002", "CKPT-003", "CKPT-004", "STAGE-001", "STAGE-002", "STAGE-003", "DIAG-001", "HEALTH-001"}
	rows := []string{record.CardCheckpoint, record.CardStaging, record.CardHealth}
	rng := rand.New(rand.NewPCG(25, 2))
	for trial := range 3000 {
		run := &record.Run{ID: "p"}
		nodes := 1 + rng.IntN(4)
		for i := range nodes {
			run.Nodes = append(run.Nodes, record.Node{Name: fmt.Sprintf("n%d", i)})
		}
		for _, id := range ids {
			if rng.IntN(5) == 0 {
				continue // absent from the run
			}
			var on []string
			switch rng.IntN(3) {
			case 0:
				on = []string{""}
			case 1:
				for _, n := range run.Nodes {
					on = append(on, n.Name)
				}
			default:
				on = []string{""}
				for _, n := range run.Nodes {
					on = append(on, n.Name)
				}
			}
			for _, n := range on {
				v := record.Verdict{ID: id, Node: n, Detail: fmt.Sprint("d", rng.IntN(2))}
				switch rng.IntN(6) {
				case 0, 1:
					v.Status = record.Pass
				case 2:
					v.Status = record.Fail
				case 3:
					v.Status = record.Warn
				case 4:
					v.Status = record.Skip
				default:
					v.Status, v.Incomplete = record.Skip, "not reached"
				}
				run.Verdicts = append(run.Verdicts, v)
			}
		}
		where := fmt.Sprintf("trial %d: %+v", trial, run.Verdicts)

		byID := map[string][]record.Verdict{}
		for _, v := range run.Verdicts {
			byID[v.ID] = append(byID[v.ID], v)
		}
		// counted is what a summary line counts: the nodes' verdicts when
		// it has any, else the cluster's.
		counted := func(vs []record.Verdict) []record.Verdict {
			if !hasNodeVerdict(vs) {
				return vs
			}
			return slices.DeleteFunc(slices.Clone(vs), func(v record.Verdict) bool { return v.Node == "" })
		}
		allPassed := func(vs []record.Verdict) (ok bool, anyJudged bool) {
			ok = true
			for _, v := range vs {
				if judged(v) {
					anyJudged = true
					ok = ok && v.Status == record.Pass
				}
			}
			return ok, anyJudged
		}

		for _, r := range requirements(run) {
			vs := counted(byID[r.ID])
			var passed, failed, not int
			for _, v := range vs {
				switch {
				case !judged(v):
					not++
				case v.Status == record.Fail:
					failed++
				default:
					passed++
				}
			}
			if r.Passed != passed || r.NotJudged != not || r.Total != len(vs) || passed+failed+not != r.Total {
				t.Fatalf("%s: line %s counts %d passed, %d not judged of %d; want %d, %d (and %d failed) of %d",
					where, r.ID, r.Passed, r.NotJudged, r.Total, passed, not, failed, len(vs))
			}
			// The status is of every verdict, the cluster's included.
			ok, any := allPassed(byID[r.ID])
			if r.Status == string(record.Pass) && (!ok || !any) {
				t.Fatalf("%s: line %s is PASS over %+v", where, r.ID, byID[r.ID])
			}
			if not > 0 && !r.Cluster && !strings.Contains(r.passedText(), "not judged") {
				t.Fatalf("%s: line %s says %q, not what was not judged", where, r.ID, r.passedText())
			}
		}

		for _, name := range rows {
			row := cardRowOf(t, run, name)
			if row.Status != string(record.Pass) {
				continue
			}
			for _, id := range row.IDs {
				ok, any := allPassed(byID[id])
				if !ok || !any {
					t.Fatalf("%s: row %q is PASS (%s) over %s: %+v", where, name, row.Figure, id, byID[id])
				}
			}
			for _, id := range cardNamed[name] {
				if !slices.Contains(row.IDs, id) {
					t.Fatalf("%s: row %q is PASS (%s) without %s, which its condition names", where, name, row.Figure, id)
				}
			}
			if c := countVerdicts(requirementsOf(run, row.IDs)); c.failed > 0 || c.notJudged > 0 && !strings.Contains(row.Figure, "not judged") {
				t.Fatalf("%s: row %q is PASS with %+v, saying %q", where, name, c, row.Figure)
			}
		}

		other := &record.Run{ID: "q", Verdicts: []record.Verdict{{ID: "CKPT-001", Status: record.Pass}}}
		c := CompareRuns([]*record.Run{run, other})
		for _, cr := range c.Criteria {
			cell := cr.Runs[0]
			if cell == nil {
				continue
			}
			vs := byID[cr.ID]
			n, not := 0, 0
			for _, k := range cell.Counts {
				n += k
			}
			for _, v := range vs {
				if !judged(v) {
					not++
				}
			}
			if n != cell.Verdicts || cell.Verdicts != len(vs) || cell.NotJudged != not {
				t.Fatalf("%s: cell %s counts %v (%d verdicts, %d not judged), want %d verdicts, %d not judged",
					where, cr.ID, cell.Counts, cell.Verdicts, cell.NotJudged, len(vs), not)
			}
			ok, any := allPassed(vs)
			if cell.Status == record.Pass && (!ok || !any) {
				t.Fatalf("%s: cell %s is PASS over %+v", where, cr.ID, vs)
			}
			if text := criterionText(cell); not > 0 && any && !strings.Contains(text, "not judged") {
				t.Fatalf("%s: cell %s says %q, not what was not judged", where, cr.ID, text)
			}
		}
	}
}

// requirementsOf are run's requirements of ids.
func requirementsOf(run *record.Run, ids []string) []requirement {
	var out []requirement
	for _, r := range requirements(run) {
		if slices.Contains(ids, r.ID) {
			out = append(out, r)
		}
	}
	return out
}
