package standins

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestElasticTimingScalesWithLaunchers(t *testing.T) {
	for _, c := range []struct {
		launchers           int
		tick, stale, settle time.Duration
	}{
		{1, 100 * time.Millisecond, 1500 * time.Millisecond, 800 * time.Millisecond},
		{4, 100 * time.Millisecond, 1500 * time.Millisecond, 800 * time.Millisecond},
		{100, 100 * time.Millisecond, 1500 * time.Millisecond, 800 * time.Millisecond},
		{256, 256 * time.Millisecond, 3840 * time.Millisecond, 2048 * time.Millisecond},
		{999, 999 * time.Millisecond, 14985 * time.Millisecond, 7992 * time.Millisecond},
	} {
		tick, stale, settle := elasticTiming(c.launchers)
		if tick != c.tick || stale != c.stale || settle != c.settle {
			t.Errorf("elasticTiming(%d) = %v, %v, %v; want %v, %v, %v",
				c.launchers, tick, stale, settle, c.tick, c.stale, c.settle)
		}
		// The whole job's heartbeats a second: one per launcher per tick.
		if rate := float64(c.launchers) / tick.Seconds(); rate > elasticBeats+1e-9 {
			t.Errorf("%d launchers beat %.0f times a second, more than %d", c.launchers, rate, elasticBeats)
		}
		// A launcher must miss several beats before it is gone, and a round
		// must not form before a beat of every launcher has been seen.
		if stale < 10*tick || settle < 5*tick || settle >= stale {
			t.Errorf("elasticTiming(%d): stale %v settle %v against tick %v", c.launchers, stale, settle, tick)
		}
	}
}

// TestElasticStepsStopAtTheOldestHeartbeat: a round's steps go no further
// than its least recently heard member, as a collective blocks when a
// member dies, and a heard moment of another round permits none.
func TestElasticStepsStopAtTheOldestHeartbeat(t *testing.T) {
	dir := t.TempDir()
	j := &elasticJob{dir: dir}
	round := elasticRound{n: 2, start: time.Unix(100, 0), members: []string{"a", "b"}}
	now := time.Now().Truncate(time.Second)
	if _, beats := j.live(now); len(beats) != 0 {
		t.Fatalf("beats of an empty job: %v", beats)
	}
	for name, at := range map[string]time.Time{"a": now, "b": now.Add(-7 * time.Second), "gone": now.Add(-time.Hour)} {
		p := filepath.Join(dir, name+".alive")
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	j.stale = 10 * time.Second
	live, beats := j.live(now)
	if !slices.Equal(live, []string{"a", "b"}) || len(beats) != 3 {
		t.Fatalf("live %v, beats %v", live, beats)
	}
	j.hear(round, beats)
	if got := readHeard(dir, 2); !got.Equal(now.Add(-7 * time.Second)) {
		t.Errorf("heard %v, want b's beat %v", got, now.Add(-7*time.Second))
	}
	if got := readHeard(dir, 3); !got.IsZero() {
		t.Errorf("round 3 heard %v from round 2's file", got)
	}
	// A member with no heartbeat at all: nothing is published.
	j.hear(elasticRound{n: 3, start: time.Unix(100, 0), members: []string{"a", "c"}}, beats)
	if got := readHeard(dir, 3); !got.IsZero() {
		t.Errorf("round 3 heard %v without c ever beating", got)
	}
	// The steps logged stop at the heard moment, 7 s before now.
	j.hear(round, beats)
	var out strings.Builder
	j = &elasticJob{dir: dir, procs: 1, every: 100, stepTime: time.Second, out: &out,
		round: elasticRound{n: 2, start: now.Add(-10 * time.Second)}, next: 1, wrld: 2}
	j.stepHeard(now)
	if n := strings.Count(out.String(), " step "); n != 3 || !strings.Contains(out.String(), "step=3\n") {
		t.Errorf("%d step lines up to b's beat, 3 s after the round's start (steps 1..3 due at 1..3 s): %q", n, out.String())
	}
}
