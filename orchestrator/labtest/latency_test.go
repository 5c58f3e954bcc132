package labtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

// liftAfterFirstSweep makes each host's all_reduce_perf a wrapper of the
// MPI stand-in that, after the window's first sweep whose arguments hold
// first (" -b 2097152 ", say), says so in marks (the lab hosts share
// /tmp) and waits for the test to lift the shaping before it exits: the
// retest that follows runs on a link the transient has left.
func liftAfterFirstSweep(t *testing.T, l *lab.Lab, hosts []string, first, marks string) {
	t.Helper()
	for _, h := range hosts {
		wrapper := fmt.Sprintf(`#!/bin/sh
%s "$@"
rc=$?
case " $* " in
*"%s"*)
  if mkdir %s/first-%s 2>/dev/null; then
    touch %s/shaped-%s
    i=0
    while [ ! -e %s/lifted ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  fi
  ;;
esac
exit $rc
`, filepath.Join(buildOnce.dir, "all_reduce_perf"), first, marks, h, marks, h, marks)
		link := filepath.Join(l.BinDir(h), "all_reduce_perf")
		os.Remove(link)
		if err := os.WriteFile(link, []byte(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestARetestAfterAShapedLinkPasses: two hosts whose links are capped at
// 20 Mbit/s for the window's first all-reduce sweep fail the quoted busbw
// (12 MB/s, what 100 Mbit/s carries); the cap is lifted before the
// retest, which passes: NCCL-002 passes resting on the retest, both runs
// in its history and in the phase's record. The small-message latency
// runs after, unshaped, and is recorded (NCCL-006, quoted generously so that the small-message run is made).
//
// Why bandwidth and not latency: the lab's tc has tbf but no netem (LAB.md),
// so it cannot add delay, and on this 2-core machine under load an
// unshaped MPI all-reduce of a few bytes reads about 10 ms (measured: 9.9
// ms unshaped against 10.6 ms at 10 Mbit/s), so no cap the sweep can pass
// through in minutes makes a latency fail that the lifted link then
// passes. The retest is the same code for every fabric figure
// (phases.retested); the unit tests hold latency's pass after a fail, fail
// twice and unstable against the fabric model.
func TestARetestAfterAShapedLinkPasses(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	hosts := []string{"h1", "h2"}
	standinBenchmarks(t, l, hosts)
	marks := t.TempDir()
	os.Chmod(marks, 0o777)
	liftAfterFirstSweep(t, l, hosts, " -b 2097152 ", marks)
	capHosts(t, l, map[string]string{"h1": "20mbit", "h2": "20mbit"})
	lifted := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			_, e1 := os.Stat(filepath.Join(marks, "shaped-h1"))
			_, e2 := os.Stat(filepath.Join(marks, "shaped-h2"))
			if e1 == nil && e2 == nil {
				for _, h := range hosts {
					if err := l.Uncap(t.Context(), h); err != nil {
						lifted <- err
						return
					}
				}
				lifted <- os.WriteFile(filepath.Join(marks, "lifted"), nil, 0o644)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		lifted <- fmt.Errorf("no first sweep ended on both hosts in 5 minutes")
	}()
	// 100 Mbit/s of TCP payload (LAB.md: 95.5 % of the cap), in GB/s.
	const quoted = 0.1 / 8 * 0.955
	inv := writeInventory(t, l, hosts, fmt.Sprintf("  inter_busbw_gbs: %g\n  busbw_size: 2MiB\n  inter_latency_us: 1000000\n", quoted), `  allreduce:
    enabled: true
    intra_node: false
    min_bytes: 2MiB
    max_bytes: 2MiB
    iters: 3
    warmup: 1
    repeats: 1
    ranks_per_node: 1
    timeout: 3m
`+mpiArgs)
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	if err := <-lifted; err != nil {
		t.Fatalf("lifting the cap: %v\n%s", err, res.stderr)
	}
	r := readRun(t, runDir(t, runs))
	v := verdict(r, "NCCL-002", "")
	// The capped run, the retest after the cap was lifted, and the run
	// that confirms the retest's pass.
	if v.Retest == nil || len(v.Retest.Runs) != 3 {
		t.Fatalf("exit %d; NCCL-002 %+v, history %+v\n%s", res.code, v, v.Retest, res.stderr)
	}
	first, second, third := v.Retest.Runs[0], v.Retest.Runs[1], v.Retest.Runs[2]
	t.Logf("NCCL-002 %s, %s; capped run %s, lifted run %s", v.Status, v.Measured, fig(first.Value, first.Unit), fig(second.Value, second.Unit))
	if v.Status != record.Pass || first.Failed == "" || second.Failed != "" || third.Failed != "" {
		t.Errorf("NCCL-002 %s: want a pass resting on the retest after a capped first run: %+v", v.Status, v.Retest)
	}
	var s phases.Sweeps
	phaseData(t, r, "allreduce", -1, &s)
	if len(s.Earlier) != 2 || len(s.Repeats) != 1 {
		t.Errorf("runs recorded: %d earlier, %d sweeps in the last; want 2 and 1", len(s.Earlier), len(s.Repeats))
	}
	lat := verdict(r, "NCCL-006", "")
	t.Logf("NCCL-006 (quoted 1 s, only to have it measured) %s: %s", lat.Status, lat.Measured)
	if lat.Status != record.Pass || lat.Value == nil || lat.Unit != record.UnitMicroseconds || len(s.Latency) != 1 {
		t.Errorf("the latency was not measured and recorded: %+v (%d runs)", lat, len(s.Latency))
	}
	nothingLeft(t, l)
}

func fig(v *float64, unit string) string {
	if v == nil {
		return "none"
	}
	return record.Figure(*v, unit)
}
