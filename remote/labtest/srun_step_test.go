package labtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/remote"
)

// The commands the nodes of a job start together are one job step, not
// one each: twelve nodes' commands at once (past ten, where srun pads the
// task numbers it marks lines with) are one step of the job (squeue shows
// it while they run) and one srun on the login node. Each node's
// output is its own to the byte (every byte value; a last line without a
// newline). One of them cancelled ends on its node within its grace, its
// command ignoring TERM, while the others run on, and leaves nothing.
func TestSrunNodesShareOneStep(t *testing.T) {
	l := needLab(t)
	var hosts []string
	for i := 2; i <= 13; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d", i))
	}
	job := allocate(t, l, hosts...)
	logins := remote.NewLogins(config(t, l, "h1"))
	var execs []remote.Executor
	for _, h := range hosts {
		execs = append(execs, srunTo(t, l, logins, job, h))
	}
	defer remote.CloseExecutors(execs)
	before, _ := logins.Steps()

	sleep, pattern := marker()
	type result struct {
		out, errout string
		err         error
		took        time.Duration
	}
	results := make([]result, len(hosts))
	cancelled, cancel := context.WithCancel(t.Context())
	var cancelledAt time.Time
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cmd, grace := t.Context(), `sleep 3; hostname; printf 'bytes:\000\001\377'; printf 'no newline' >&2`, 5*time.Second
			if i == 1 {
				ctx, cmd, grace = cancelled, "trap '' TERM; "+sleep, time.Second
			}
			var so, se bytes.Buffer
			err := e.Run(ctx, remote.Cmd{Command: cmd, Stdout: &so, Stderr: &se, Grace: grace})
			results[i] = result{so.String(), se.String(), err, time.Since(cancelledAt)}
		}()
	}
	login := dial(t, l, "h1")
	time.Sleep(1500 * time.Millisecond)
	steps, err := login.Output(t.Context(), "squeue -h -s -j "+job+" -o '%j %N'")
	if err != nil {
		t.Fatal(err)
	}
	cancelledAt = time.Now()
	cancel()
	wg.Wait()

	var ours []string
	for _, s := range strings.Split(strings.TrimSpace(string(steps)), "\n") {
		if s != "" && !strings.HasPrefix(s, "extern ") {
			ours = append(ours, s)
		}
	}
	t.Logf("the job's steps while the commands ran: %q", ours)
	if len(ours) != 1 || ours[0] != "gpuaccept-step h[2-13]" {
		t.Errorf("the job's steps while twelve nodes' commands ran: %q; want one, over h[2-13]", ours)
	}
	if n, own := logins.Steps(); n-before != 1 || own != 0 {
		t.Errorf("twelve nodes' commands started together took %d shared steps and %d of their own, want 1 and 0", n-before, own)
	}
	for i, r := range results {
		if i == 1 {
			continue
		}
		if r.err != nil || r.out != hosts[i]+"\nbytes:\x00\x01\xff" || r.errout != "no newline" {
			t.Errorf("%s: stdout %q, stderr %q, %v", hosts[i], r.out, r.errout, r.err)
		}
	}
	c := results[1]
	t.Logf("h3 cancelled: %v, %s after the cancel", c.err, c.took.Round(10*time.Millisecond))
	if !errors.Is(c.err, context.Canceled) || !strings.HasPrefix(c.err.Error(), "h3: ") {
		t.Errorf("h3's cancelled command: %v; want h3's context canceled", c.err)
	}
	if c.took > 10*time.Second {
		t.Errorf("h3's cancelled command returned %s after the cancel, its grace 1s", c.took)
	}
	if out, _ := l.Exec(t.Context(), "h3", "pgrep", "-f", pattern); strings.TrimSpace(out) != "" {
		t.Errorf("the cancelled command still runs on h3: %s", out)
	}
}

// A node without perl (the step's runner) cannot take its command in a
// shared step: it says so, and runs it as a step of its own, now and
// after; the job's other nodes are not held up.
func TestSrunNodeWithoutPerlRunsItsOwnStep(t *testing.T) {
	l := needLab(t)
	hosts := []string{"h6", "h7"}
	job := allocate(t, l, hosts...)
	if out, err := l.Exec(t.Context(), "h7", "mount", "--bind", "/dev/null", "/usr/bin/perl"); err != nil {
		t.Fatalf("hide perl on h7: %s %v", out, err)
	}
	t.Cleanup(func() { _, _ = l.Exec(context.Background(), "h7", "umount", "/usr/bin/perl") })
	logins := remote.NewLogins(config(t, l, "h1"))
	var execs []remote.Executor
	for _, h := range hosts {
		execs = append(execs, srunTo(t, l, logins, job, h))
	}
	defer remote.CloseExecutors(execs)
	for round := range 2 {
		before, ownBefore := logins.Steps()
		var wg sync.WaitGroup
		for _, e := range execs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				err := e.Run(t.Context(), remote.Cmd{Command: `hostname; perl -e 'print "perl\n"' 2>/dev/null || echo no perl`, Stdout: &out})
				want := e.Name() + "\nperl\n"
				if e.Name() == "h7" {
					want = "h7\nno perl\n"
				}
				if err != nil || out.String() != want {
					t.Errorf("round %d, %s: %q %v; want %q", round, e.Name(), out.String(), err, want)
				}
			}()
		}
		wg.Wait()
		// Both nodes in the first shared step; then only h6. h7's
		// command goes alone each time.
		if n, own := logins.Steps(); n-before != 1 || own-ownBefore != 1 {
			t.Errorf("round %d: %d shared steps and %d of their own, want 1 and 1", round, n-before, own-ownBefore)
		}
	}
}

// A node that fails under a shared step is lost, in Slurm's words, as
// soon as Slurm says so, not when the step ends; and it ends no other
// node's command: h8's runs to its end and succeeds.
func TestSrunNodeFailureInASharedStep(t *testing.T) {
	l := needLab(t)
	job := allocate(t, l, "h7", "h8")
	logins := remote.NewLogins(config(t, l, "h1"))
	h7, h8 := srunTo(t, l, logins, job, "h7"), srunTo(t, l, logins, job, "h8")
	defer remote.CloseExecutors([]remote.Executor{h7, h8})
	lost := make(chan error, 1)
	go func() { lost <- h7.Run(t.Context(), remote.Cmd{Command: "sleep 300"}) }()
	var out bytes.Buffer
	ran := make(chan error, 1)
	go func() { ran <- h8.Run(t.Context(), remote.Cmd{Command: "sleep 100; echo ok", Stdout: &out}) }()
	time.Sleep(2 * time.Second)
	if n, _ := logins.Steps(); n != 1 {
		t.Fatalf("%d shared steps for two nodes' commands started together, want 1", n)
	}
	if err := l.Cut(t.Context(), "h7"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Restore(context.Background(), "h7") })
	select {
	case err := <-lost:
		var cl *remote.ConnectionLostError
		if !errors.As(err, &cl) || cl.Node != "h7" {
			t.Errorf("h7 failed under the step: %T %v; want it lost", err, err)
		}
		t.Logf("h7: %v", err)
	case err := <-ran:
		t.Fatalf("h8's command ended (%v) before h7's was lost: the loss waited for the step's end", err)
	case <-time.After(150 * time.Second):
		t.Fatal("h7's command did not end 150 s after the node failed")
	}
	select {
	case err := <-ran:
		if err != nil || out.String() != "ok\n" {
			t.Errorf("h8's command beside the failed node: %q %v; want ok", out.String(), err)
		}
	case <-time.After(150 * time.Second):
		t.Fatal("h8's command did not end")
	}
}
