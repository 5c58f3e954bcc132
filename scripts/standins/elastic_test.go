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
	if n := strings.Count(out.String(), " step "); n != 3 || !strings.Contains(out.String(), "step=3 step_time=") {
		t.Errorf("%d step lines up to b's beat, 3 s after the round's start (steps 1..3 due at 1..3 s): %q", n, out.String())
	}
}

// TestElasticTrainingJobEnds: the training load test's launch (a fixed
// size, --steps, no checkpoints) ends on every node after its last step,
// each step line with ddp_train.py's figures, the slowed node's compute
// its factor of the others'.
func TestElasticTrainingJobEnds(t *testing.T) {
	dir := t.TempDir()
	type ended struct {
		node string
		code int
		out  string
	}
	done := make(chan ended, 2)
	for _, node := range []string{"a", "b"} {
		go func() {
			env := environ{"GPUACCEPT_NODE=" + node}
			if node == "b" {
				env = append(env, SimSlowEnv+"=2")
			}
			var out, errs strings.Builder
			code := runElastic([]string{"-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", "--rdzv_endpoint=a:29500",
				"--rdzv_id=run-training-g1", "--max_restarts=0", "/x/ddp_train.py", "--ckpt-dir", filepath.Join(dir, "ckpt-g1"),
				"--ckpt-every=0", "--steps=4", "--batch=8", "--step-time=0.05"}, env, &out, &errs)
			done <- ended{node, code, out.String() + errs.String()}
		}()
	}
	for range 2 {
		select {
		case e := <-done:
			if e.code != 0 || strings.Count(e.out, " step ") != 4 || strings.Contains(e.out, " checkpoint ") || strings.Contains(e.out, " error ") {
				t.Errorf("%s: exit %d:\n%s", e.node, e.code, e.out)
			}
			want := "compute=0.030000 wait=0.020000 samples=8"
			if e.node == "b" {
				want = "compute=0.050000 wait=0.000000 samples=8"
			}
			if !strings.Contains(e.out, "step=4 step_time=0.050000 "+want) {
				t.Errorf("%s: no step 4 with %s:\n%s", e.node, want, e.out)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the job did not end")
		}
	}
}
