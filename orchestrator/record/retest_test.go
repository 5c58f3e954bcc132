package record

import (
	"math/rand/v2"
	"testing"
)

func TestAgain(t *testing.T) {
	F, P := true, false
	for _, c := range []struct {
		runs    []bool
		retests int
		want    bool
	}{
		{nil, 0, true},
		{[]bool{P}, 1, false},
		{[]bool{F}, 0, false},
		{[]bool{F}, 1, true},
		{[]bool{F, P}, 1, true}, // confirm the pass, outside the budget
		{[]bool{F, F}, 1, false},
		{[]bool{F, P, P}, 1, false}, // confirmed
		{[]bool{F, P, F}, 1, false}, // unstable: no more
		{[]bool{F, P}, 2, true},
		{[]bool{F, P, P}, 3, false},
		{[]bool{F, P, F}, 3, false},
		{[]bool{F, F}, 2, true},
		{[]bool{F, F, F}, 2, false},
		{[]bool{F, F, P}, 2, true},
		{[]bool{F, F, P, P}, 2, false},
		{[]bool{F, P}, 0, false},
	} {
		if got := Again(c.runs, c.retests); got != c.want {
			t.Errorf("Again(%v, %d) = %v, want %v", c.runs, c.retests, got, c.want)
		}
	}
}

// Whatever the runs, the sequence Again allows ends, never passes with
// its last run failed, and is never longer than MaxRuns(retests).
func TestAgainProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		retests := r.IntN(4)
		var runs []bool
		for Again(runs, retests) {
			runs = append(runs, r.IntN(2) == 0)
			if len(runs) > MaxRuns(retests) {
				t.Fatalf("%v: more than MaxRuns(%d) runs", runs, retests)
			}
		}
		var rs []RetestRun
		for _, f := range runs {
			x := RetestRun{}
			if f {
				x.Failed = "below target"
			}
			rs = append(rs, x)
		}
		h := NewRetest(rs)
		if len(runs) == 1 {
			if h != nil {
				t.Fatalf("%v: one run has no history", runs)
			}
			continue
		}
		if runs[len(runs)-1] && !h.Failed() {
			t.Fatalf("%v: the last run failed but the history passes", runs)
		}
		if h.Unstable && !h.Failed() {
			t.Fatalf("%v: unstable but passed", runs)
		}
		if h.Note() == "" {
			t.Fatalf("%v: no note", runs)
		}
	}
}

func TestRetestNote(t *testing.T) {
	v1, v2, v3 := 210.0, 371.0, 200.0
	h := NewRetest([]RetestRun{{Value: &v1, Unit: UnitGBs, Failed: "below"}, {Value: &v2, Unit: UnitGBs}, {Value: &v3, Unit: UnitGBs, Failed: "below"}})
	if !h.Unstable || !h.Failed() {
		t.Fatalf("failed, passed, failed: %+v", h)
	}
	want := "unstable: run 1 failed (210 GB/s), run 2 passed (371 GB/s), run 3 failed (200 GB/s): a retest that passed between failures does not count"
	if got := h.Note(); got != want {
		t.Errorf("note:\n got %s\nwant %s", got, want)
	}
}

// A figure whose runs all passed was measured again only because another
// figure of the same job failed: it carries no retest history.
func TestNewRetestOfRunsThatAllPassed(t *testing.T) {
	v := 128.0
	if r := NewRetest([]RetestRun{{Value: &v}, {Value: &v}}); r != nil {
		t.Fatalf("NewRetest of two passes = %+v, want nil", r)
	}
	if r := NewRetest([]RetestRun{{Value: &v, Failed: "slow"}, {Value: &v}}); r == nil || r.Failed() {
		t.Fatalf("NewRetest of a failure then a pass = %+v, want a history that passes", r)
	}
}
