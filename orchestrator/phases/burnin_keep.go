package phases

import (
	"time"
)

// What a burn-in keeps of its iterations, whatever its length: a day of
// 60-second runs is 1,440 iterations of about 1 KB each per node, which
// 1,000 nodes held in the coordinator's memory, in run.json and in the
// journal (a note each).
const (
	// burninKeep bounds the runs kept per node: each of the three regions
	// (the first drift window, the runs between, the last window) is
	// halved, every other run dropped, when it passes a third of it.
	burninKeep = 240
	// burninNotes is about how many iterations a node journals over the
	// burn-in past its first drift window: a resume runs again at most
	// duration/burninNotes of load.
	burninNotes = 200
	// burninFirstNotes: about how many of the first drift window.
	burninFirstNotes = 120
)

// thinRuns keeps runs within burninKeep: while they pass it, the region
// holding the most runs (the first drift window, the middle, the last
// window, counted as driftSplit does) loses every other run, its first
// and last kept. The first and last runs always stay.
func thinRuns(runs []BurninRun, window time.Duration) []BurninRun {
	for len(runs) > burninKeep {
		first, last := driftSplit(runs, window)
		inFirst := map[int]bool{}
		for _, i := range first {
			inFirst[i] = true
		}
		inLast := map[int]bool{}
		for _, i := range last {
			inLast[i] = true
		}
		var middle []int
		for i := range runs {
			if !inFirst[i] && !inLast[i] {
				middle = append(middle, i)
			}
		}
		region := first
		if len(middle) > len(region) {
			region = middle
		}
		if len(last) > len(region) {
			region = last
		}
		if len(region) < 3 {
			return runs
		}
		drop := map[int]bool{}
		for k := 1; k < len(region)-1; k += 2 {
			drop[region[k]] = true
		}
		kept := runs[:0:0]
		for i, r := range runs {
			if !drop[i] {
				kept = append(kept, r)
			}
		}
		runs = kept
	}
	return runs
}

// burninNoteDue says whether iteration r, ended after elapsed of load,
// is journaled: in the first drift window (what drift compares first) one
// each window/burninFirstNotes, after it one each duration/burninNotes,
// and always the last one of a burn-in that ended.
func burninNoteDue(r BurninRun, first time.Time, window time.Duration, elapsed, lastNote, duration time.Duration) bool {
	since := elapsed - lastNote
	return r.At.Sub(first) < window && since >= window/burninFirstNotes || since >= duration/burninNotes || elapsed >= duration
}
