package labtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
	"gpuaccept/scripts/lab"
)

// allocate holds a job on the lab's Slurm over hosts for the test,
// through h1 (slurmctld's host, the login node), and gives it back after.
// The job survives a failed node (--no-kill), as a window's allocation
// does.
func allocate(t *testing.T, l *lab.Lab, hosts ...string) (job string) {
	t.Helper()
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	login := dial(t, l, "h1")
	list := strings.Join(hosts, ",")
	name := "contract-" + hosts[0]
	var out bytes.Buffer
	err := login.Run(t.Context(), remote.Cmd{Stdout: &out, Command: fmt.Sprintf(
		"salloc --no-shell --no-kill --wait-all-nodes=1 -N%d -w %s --job-name=%s >/dev/null 2>&1; squeue -h -o %%i -n %s",
		len(hosts), list, name, name)})
	job = strings.TrimSpace(out.String())
	if err != nil || job == "" || strings.ContainsAny(job, " \n") {
		t.Fatalf("salloc on %s: %q, %v", list, out.String(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := remote.Dial(ctx, config(t, l, "h1")); err == nil {
			_ = c.Run(ctx, remote.Cmd{Command: "scancel " + job + "; for h in " + strings.Join(hosts, " ") +
				"; do scontrol update nodename=$h state=resume 2>/dev/null; done; true"})
			c.Close()
		}
	})
	return job
}

// srunTo reaches host as a step of job from h1.
func srunTo(t *testing.T, l *lab.Lab, logins *remote.Logins, job, host string) remote.Executor {
	t.Helper()
	e, err := remote.DialNode(t.Context(), remote.Config{Name: host, Srun: &remote.SrunConfig{
		Login: config(t, l, "h1"), Logins: logins, Job: job, Node: host, Addr: l.Host(host).Addr}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The srun executor keeps the executor contract on the lab's real Slurm:
// every command runs on h2 in a job step, a shared one (of one node here)
// unless it has stdin, started from the login node h1, the only host it
// reaches over SSH. Its way to the node goes away by a cut link
// to the login node, which neither node hears of: the guard on h2 ends
// the command when the heartbeats stop.
func TestContractSrun(t *testing.T) {
	l := needLab(t)
	job := allocate(t, l, "h2")
	contract.Run(t, contract.Target{
		New: func(t *testing.T) remote.Executor { return srunTo(t, l, nil, job, "h2") },
		// srun gives a shared step up for a slurmstepd's I/O error, now and
		// then under 16 MiB of output on a loaded lab (once in a make test;
		// 0 of 6 beside two busy loops): NOT MEASURED, never short output.
		GaveUp: func(err error) bool {
			var sa *remote.StepAbortedError
			return errors.As(err, &sa)
		},
		Cut: func(t *testing.T, _ remote.Executor) func() {
			if err := l.Cut(t.Context(), "h1"); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := l.Restore(context.Background(), "h1"); err != nil {
					t.Errorf("restore h1: %v", err)
				}
			}
		},
	})
}

// The executor contract holds as well with every command a job step of
// its own (slurm.steps: each), the way commands with stdin always go.
func TestContractSrunStepEach(t *testing.T) {
	l := needLab(t)
	job := allocate(t, l, "h2")
	contract.Run(t, contract.Target{
		New: func(t *testing.T) remote.Executor {
			e, err := remote.DialNode(t.Context(), remote.Config{Name: "h2", Srun: &remote.SrunConfig{
				Login: config(t, l, "h1"), Job: job, Node: "h2", Addr: l.Host("h2").Addr, StepEach: true}})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Cut: func(t *testing.T, _ remote.Executor) func() {
			if err := l.Cut(t.Context(), "h1"); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := l.Restore(context.Background(), "h1"); err != nil {
					t.Errorf("restore h1: %v", err)
				}
			}
		},
	})
}

// Nodes reached through one login node share its connections: sixteen
// commands at once on four nodes hold no more connections than sshd's
// sessions per connection need, and every connection goes with the last
// node's Close.
func TestSrunSharesTheLoginConnections(t *testing.T) {
	l := needLab(t)
	hosts := []string{"h3", "h4", "h5", "h6"}
	job := allocate(t, l, hosts...)
	logins := remote.NewLogins(config(t, l, "h1"))
	var execs []remote.Executor
	for _, h := range hosts {
		execs = append(execs, srunTo(t, l, logins, job, h))
	}
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			e := execs[i%len(execs)]
			var out bytes.Buffer
			err := e.Run(t.Context(), remote.Cmd{Command: "sleep 1; hostname", Stdout: &out})
			if err == nil && strings.TrimSpace(out.String()) != e.Name() {
				err = errors.New(e.Name() + ": hostname says " + out.String())
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := logins.Conns(); n < 1 || n > 16/remote.DefaultSessionsPerConn+1 {
		t.Errorf("16 commands held %d connections to the login node, want at most %d", n, 16/remote.DefaultSessionsPerConn+1)
	}
	remote.CloseExecutors(execs)
	if n := logins.Conns(); n != 0 {
		t.Errorf("%d connections to the login node outlived the last node's Close", n)
	}
}

// A node that fails under a step is lost, in Slurm's words, once the
// controller declares it (SlurmdTimeout, 30 s in the lab): srun itself
// exits 0 then. The job, which survives the failure (--no-kill), no
// longer holds the node: a fresh executor's first step is lost too.
func TestSrunNodeFailureIsLost(t *testing.T) {
	l := needLab(t)
	job := allocate(t, l, "h7", "h8")
	e := srunTo(t, l, nil, job, "h7")
	defer e.Close()
	done := make(chan error, 1)
	go func() { done <- e.Run(t.Context(), remote.Cmd{Command: "echo started; sleep 300"}) }()
	time.Sleep(2 * time.Second)
	if err := l.Cut(t.Context(), "h7"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Restore(context.Background(), "h7") })
	var err error
	select {
	case err = <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("Run did not return two minutes after the node failed")
	}
	var lost *remote.ConnectionLostError
	if !errors.As(err, &lost) || lost.Node != "h7" || !strings.Contains(err.Error(), "Node failure on h7") {
		t.Fatalf("want h7's loss in srun's words, got %T %v", err, err)
	}
	if !e.Lost() {
		t.Error("Lost is false after the node failed")
	}
	again := srunTo(t, l, nil, job, "h7")
	defer again.Close()
	err2 := again.Run(t.Context(), remote.Cmd{Command: "true"})
	if !errors.Is(err2, remote.ErrConnectionLost) {
		t.Errorf("a step on the failed node: %v; want it lost", err2)
	}
	h8 := srunTo(t, l, nil, job, "h8")
	defer h8.Close()
	if err := h8.Run(t.Context(), remote.Cmd{Command: "true"}); err != nil {
		t.Errorf("the job's other node after h7 failed: %v", err)
	}
	t.Logf("lost: %v; afterwards: %v", err, err2)
}

// A cancelled step ends as soon as its command's grace allows, not when
// the guard's lease runs out: the end of the node's stream reaches the
// node's guard through srun (the lease here is far longer than the test
// waits).
func TestSrunCancelEndsTheStepPromptly(t *testing.T) {
	l := needLab(t)
	job := allocate(t, l, "h9")
	cfg := config(t, l, "h1")
	cfg.GuardLease = 60 * time.Second
	e, err := remote.DialNode(t.Context(), remote.Config{Name: "h9", Srun: &remote.SrunConfig{Login: cfg, Job: job, Node: "h9"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, remote.Cmd{Command: "sleep 300", Grace: time.Second}) }()
	time.Sleep(2 * time.Second)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("want context canceled, got %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return 40 s after the cancel")
	}
	took := time.Since(start)
	t.Logf("the cancelled step ended after %s", took.Round(10*time.Millisecond))
	if took > 8*time.Second {
		t.Errorf("the cancelled step took %s to end (grace 1s): the node's guard waited out its lease", took)
	}
}

// A step Slurm does not start (its controller stopped here: srun waits on
// it) ends at the executor's StepStart with what srun said, a failed
// command and no lost node; with the controller back the next command
// runs as a step.
func TestSrunStepThatDoesNotStartIsBounded(t *testing.T) {
	l := needLab(t)
	job := allocate(t, l, "h6")
	e, err := remote.DialNode(t.Context(), remote.Config{Name: "h6", Srun: &remote.SrunConfig{
		Login: config(t, l, "h1"), Job: job, Node: "h6", StepStart: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	echo := func(word string) (string, error) {
		var out bytes.Buffer
		err := e.Run(t.Context(), remote.Cmd{Command: "echo " + word, Stdout: &out})
		return out.String(), err
	}
	if out, err := echo("up"); err != nil || out != "up\n" {
		t.Fatalf("a step before: %q %v", out, err)
	}
	b, err := os.ReadFile(filepath.Join(l.Dir, "slurm", "slurmctld.pid"))
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil {
		t.Fatalf("slurmctld's pid: %q %v %v", b, err, perr)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(resume)
	start := time.Now()
	out, err := echo("never")
	took := time.Since(start)
	resume()
	t.Logf("%s after %s", err, took.Round(10*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "h6: echo never: Slurm did not start the job step within 3s") || e.Lost() || out != "" {
		t.Errorf("a step that did not start: %q %v, lost %v", out, err, e.Lost())
	}
	if took > 15*time.Second {
		t.Errorf("it ended %s after it began, its StepStart 3s", took)
	}
	if out, err := echo("again"); err != nil || out != "again\n" {
		t.Errorf("a step after: %q %v", out, err)
	}
	// The step asked for while the controller was stopped is no orphan:
	// srun went, and no step of the job is left once the commands ended.
	login := dial(t, l, "h1")
	lab.Eventually(t, 15*time.Second, "no step of job "+job+" left", func() bool {
		steps, err := login.Output(t.Context(), "squeue -h -s -j "+job+" -o '%i %j'")
		if err != nil {
			return false
		}
		for _, l := range strings.Split(strings.TrimSpace(string(steps)), "\n") {
			if l != "" && !strings.HasSuffix(l, " extern") {
				return false
			}
		}
		return true
	})
}
