package standins

import (
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
