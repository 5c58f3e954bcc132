package phases

import (
	"context"
	"testing"
	"time"
)

// A day's burn-in of 60-second runs (1,440 of them) keeps at most
// burninKeep runs, the first and the last hour's well sampled, the first
// and last run always; it journals about burninNotes of them past the
// first hour, not 1,440; drift still compares the two hours. With 5-second
// runs (17,280) the same bounds hold.
func TestBurninKeepsADayBounded(t *testing.T) {
	for _, run := range []time.Duration{time.Minute, 5 * time.Second} {
		t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
		now := t0
		clock := func() time.Time { return now }
		k := 0
		once := func(context.Context) (BurninRun, error) {
			at := now
			now = now.Add(run)
			k++
			rate := 600.0
			if now.Sub(t0) > 23*time.Hour {
				rate = 500 // the last hour sags
			}
			return BurninRun{At: at, GPUs: []GemmGPU{{GPU: 0, TFLOPS: rate, On: "cuda"}}}, nil
		}
		const day = 24 * time.Hour
		window := driftWindow(day)
		var first time.Time
		notes, lastNote := 0, time.Duration(0)
		runs, total, err := burninLoopFrom(t.Context(), day, run, clock, nil, 0, 0, once, func(i int, r BurninRun, elapsed time.Duration) {
			if first.IsZero() {
				first = r.At
			}
			if burninNoteDue(r, first, window, elapsed, lastNote, day) {
				notes, lastNote = notes+1, elapsed
			}
		})
		if err != nil || total != k || total < 1000 {
			t.Fatalf("run %s: %d runs in all (%d called), %v", run, total, k, err)
		}
		if len(runs) > burninKeep || runs[0].At != t0 || !runs[len(runs)-1].At.Equal(now.Add(-run)) {
			t.Errorf("run %s: kept %d of %d (first at %s, last at %s)", run, len(runs), total, runs[0].At, runs[len(runs)-1].At)
		}
		firstHour, lastHour := driftSplit(runs, window)
		if len(firstHour) < 30 || len(lastHour) < 30 {
			t.Errorf("run %s: %d runs of the first hour kept, %d of the last", run, len(firstHour), len(lastHour))
		}
		if most := min(int(window/run), burninFirstNotes) + burninNotes + 2; notes > most {
			t.Errorf("run %s: %d notes journaled for %d runs, want at most %d", run, notes, total, most)
		}
		_, gpus, _ := burninDrift(runs, day)
		if len(gpus) != 1 || gpus[0].First != 600 || gpus[0].Last != 500 {
			t.Errorf("run %s: drift %+v, want 600 → 500", run, gpus)
		}
		t.Logf("run %s: %d runs, %d kept, %d noted", run, total, len(runs), notes)
	}
}
