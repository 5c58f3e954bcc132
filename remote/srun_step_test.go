package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// testBatch is a launched shared step over nodes, as its output reader
// sees it: no login node, no srun.
func testBatch(nodes ...string) *stepBatch {
	p := &stepper{job: "7", stepStart: time.Minute, gather: time.Millisecond}
	b := &stepBatch{p: p, tasks: map[int]*stepTask{}, launched: true}
	for _, n := range nodes {
		s := &Srun{name: "node-" + n, node: n}
		var out, errb bytes.Buffer
		b.order = append(b.order, &stepTask{s: s, ctx: context.Background(), cmd: Cmd{Command: "cmd on " + n, Stdout: &out, Stderr: &errb},
			grace: time.Second, line: "echo " + n, tail: NewStderrTail(), result: make(chan error, 1)})
	}
	b.pending = len(b.order)
	return b
}

// beats is a control stream as the coordinator sends it: a heartbeat
// every 100 ms, frames at their times, the end at until.
type beats struct {
	start  time.Time
	frames map[time.Duration]string
	until  time.Duration
}

func newBeats(until time.Duration, frames map[time.Duration]string) *beats {
	return &beats{start: time.Now(), frames: frames, until: until}
}

func (b *beats) Read(p []byte) (int, error) {
	time.Sleep(100 * time.Millisecond)
	since := time.Since(b.start)
	if since > b.until {
		return 0, io.EOF
	}
	s := "h\n"
	for at, f := range b.frames {
		if at <= since {
			s += f + "\n"
			delete(b.frames, at)
		}
	}
	return copy(p, s), nil
}

func outOf(t *stepTask) string { return t.cmd.Stdout.(*bytes.Buffer).String() }
func errOf(t *stepTask) string { return t.cmd.Stderr.(*bytes.Buffer).String() }

// runTask runs the step's script (srun_step.sh, the runner, the guard) on
// this machine as the task on node would, the table and then control
// on its stdin, and reads its output as srun would mark it (task 4), as
// it comes.
func runTask(t *testing.T, b *stepBatch, node string, control io.Reader, env ...string) {
	t.Helper()
	if err := <-startTask(t, b, node, control, env...); err != nil {
		t.Fatal(err)
	}
}

// startTask is runTask without waiting: the task's end (or why it
// failed) comes on the channel.
func startTask(t *testing.T, b *stepBatch, node string, control io.Reader, env ...string) <-chan error {
	t.Helper()
	return startTaskWith(t, b, node, control, 0, env...)
}

// startTaskWith is startTask with extra more files open in the task, as
// srun may leave a task's: the runner's own pipes then take other numbers.
func startTaskWith(t *testing.T, b *stepBatch, node string, control io.Reader, extra int, env ...string) <-chan error {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl here")
	}
	c := exec.Command("/bin/bash", "-c", stepSource, "gpuaccept-step", "5", guardSource, stepRunner)
	c.Env = append(append(c.Environ(), "SLURMD_NODENAME="+node, "SLURM_PROCID=4"), env...)
	c.Stdin = io.MultiReader(bytes.NewReader(b.table()), control)
	o := &stepOutput{b: b}
	o.Write([]byte("4: s " + node + ".\n"))
	out := &labelled{o: o, label: "4: ", start: true}
	var errb bytes.Buffer
	c.Stdout, c.Stderr = out, &errb
	for range extra {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		c.ExtraFiles = append(c.ExtraFiles, f)
	}
	done := make(chan error, 1)
	if err := c.Start(); err != nil {
		done <- err
		return done
	}
	go func() {
		err := c.Wait()
		o.flush()
		switch {
		case err != nil:
			done <- fmt.Errorf("the step's script: %v: %s", err, errb.String())
		case errb.Len() > 0:
			done <- fmt.Errorf("the step's script wrote on stderr: %q", errb.String())
		default:
			done <- nil
		}
	}()
	return done
}

// labelled marks each line written with label, as srun --label does.
type labelled struct {
	o     *stepOutput
	label string
	start bool
}

func (l *labelled) Write(p []byte) (int, error) {
	for _, piece := range strings.SplitAfter(string(p), "\n") {
		if piece == "" {
			continue
		}
		if l.start {
			l.o.Write([]byte(l.label))
		}
		l.o.Write([]byte(piece))
		l.start = strings.HasSuffix(piece, "\n")
	}
	return len(p), nil
}

// The node's task takes its own command from the table (commands shared
// by nodes sent once), and its output comes back to the byte: every byte
// value, stderr apart, a last line without a newline, the exit status,
// the command's variables without the step's.
func TestStepTaskRunsItsNodesCommand(t *testing.T) {
	b := testBatch("a", "b", "c")
	b.order[1].line = `printf 'x\000\377y'; printf 'to stderr' >&2; echo "[$SLURM_PROCID]" >&2
echo second line; exit 3`
	b.order[2].line = b.order[0].line
	table := string(b.table())
	if strings.Count(table, "\nc ") != 1 || !strings.HasPrefix(table, "n a 0\nn b 1\nn c 0\nc 0 6 1\necho a") {
		t.Fatalf("table:\n%s", table)
	}
	runTask(t, b, "b", newBeats(5*time.Second, nil))
	tk := b.order[1]
	err := <-tk.result
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || ee.Node != "node-b" {
		t.Fatalf("b's outcome: %v", err)
	}
	if got, want := outOf(tk), "x\x00\xffysecond line\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got, want := errOf(tk), "to stderr[]\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if !strings.Contains(ee.StderrTail, "to stderr") {
		t.Errorf("the error's tail %q", ee.StderrTail)
	}
	if outOf(b.order[0]) != "" || outOf(b.order[2]) != "" {
		t.Error("another node's task got b's output")
	}
}

// "k NODE" on the stream ends that node's command (TERM; it dies by it),
// and only that node's; the end of the stream ends everyone's.
func TestStepTaskCancelledByName(t *testing.T) {
	b := testBatch("a", "b")
	b.order[1].line = "sleep 30"
	start := time.Now()
	// The stream goes on: only the k ends the command.
	ended := startTask(t, b, "b", newBeats(8*time.Second, map[time.Duration]string{0: "k a", 300 * time.Millisecond: "k b"}))
	var ee *ExitError
	if err := <-b.order[1].result; !errors.As(err, &ee) || ee.Signal != "TERM" {
		t.Fatalf("b's cancelled command: %v; want it killed by TERM", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("b's command ended %s after it began, cancelled after 0.3 s", took)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}

	// The stream's end (or silence) while b was not cancelled is srun no
	// longer passing it on: the guard stops the command, and its end is
	// NOT MEASURED, not the node's failure.
	b = testBatch("a", "b")
	b.order[1].line = "sleep 30"
	start = time.Now()
	runTask(t, b, "b", newBeats(300*time.Millisecond, nil))
	var sa *StepAbortedError
	if err := <-b.order[1].result; !errors.As(err, &sa) || sa.Reason == "" || time.Since(start) > 4*time.Second {
		t.Fatalf("b's command after the stream ended: %v after %s; want it NOT MEASURED, the stream silent", err, time.Since(start))
	}
	t.Log(b.order[1].s.name, "after the stream ended:", sa)

	// However many files the task had open: the runner's pipes may be fd
	// 9 themselves, which the guard's word must not lose.
	for _, extra := range []int{1, 3, 4} {
		b = testBatch("a", "b")
		b.order[1].line = "sleep 30"
		if err := <-startTaskWith(t, b, "b", newBeats(300*time.Millisecond, nil), extra); err != nil {
			t.Fatal(err)
		}
		if err := <-b.order[1].result; !errors.As(err, &sa) || sa.Reason == "" {
			t.Errorf("with %d more file(s) open: %v; want it NOT MEASURED, the stream silent", extra, err)
		}
	}

	// A command that had ended by itself when the stream ended keeps its
	// own answer.
	b = testBatch("a", "b")
	b.order[1].line = "exit 3"
	runTask(t, b, "b", newBeats(300*time.Millisecond, nil))
	if err := <-b.order[1].result; !errors.As(err, &ee) || ee.Status != 3 {
		t.Errorf("a command that exited 3 before the stream ended: %v", err)
	}
}

// A node without a working perl says so and runs nothing: its command
// goes as a step of its own (errStepAlone), and so do its next ones.
func TestStepTaskWithoutPerl(t *testing.T) {
	b := testBatch("a")
	b.order[0].line = "touch /nonexistent-gpuaccept-ran"
	runTask(t, b, "a", strings.NewReader(""), "PATH=/nonexistent")
	if err := <-b.order[0].result; err != errStepAlone {
		t.Fatalf("a without perl: %v; want errStepAlone", err)
	}
	if !b.order[0].s.alone.Load() {
		t.Error("the node is not marked to run its commands alone")
	}
}

// Whatever the step prints, however the writes cut it: a task speaks only
// for the node it claimed first and alone, each node's outcome comes once,
// nothing panics, and lines past the bound are dropped, not kept.
func FuzzStepOutput(f *testing.F) {
	f.Add("0: s a.\n1: s b.\n0: o 6869.\n1: e 6f6f.\n0: x 0 0.\n1: x 3 0.\n", uint8(5))
	f.Add("0: s a.\n1: s a.\n0: o 6869.\n1: x 0 0.\n", uint8(2))
	f.Add("00: s b.\n+1: s a.\n 1: s a.\n0: n no perl.\n2: s c.\n1: o zz.\n1: x 9 x.\n", uint8(1))
	f.Add("garbage\n0: s a.\n0: x 0 9.\n0: o 41.\n", uint8(7))
	f.Fuzz(func(t *testing.T, out string, cut uint8) {
		b := testBatch("a", "b")
		o := &stepOutput{b: b}
		for len(out) > 0 {
			n := min(len(out), 1+int(cut)%13)
			o.Write([]byte(out[:n]))
			out = out[n:]
		}
		o.flush()
		b.mu.Lock()
		defer b.mu.Unlock()
		claimedBy := map[*stepTask]int{}
		for n, tk := range b.tasks {
			if tk == nil {
				continue
			}
			if m, twice := claimedBy[tk]; twice {
				t.Fatalf("tasks %d and %d both speak for %s", m, n, tk.s.node)
			}
			claimedBy[tk] = n
		}
		for _, tk := range b.order {
			if _, ok := claimedBy[tk]; !ok && !tk.done && (outOf(tk) != "" || errOf(tk) != "") {
				t.Fatalf("%s got output with no task of its own: %q", tk.s.node, outOf(tk))
			}
			if len(tk.said) > stepSayKeep {
				t.Fatalf("%d lines kept", len(tk.said))
			}
			select {
			case <-tk.result:
				select {
				case <-tk.result:
					t.Fatal("two outcomes")
				default:
				}
			default:
			}
		}
	})
}

// A hostile node claiming another's name gets neither its output counted:
// the node's command fails saying so.
func TestStepClaimTwice(t *testing.T) {
	b := testBatch("a", "b")
	o := &stepOutput{b: b}
	o.Write([]byte("0: s a.\n1: s a.\n1: o 6869.\n0: x 0 0.\n1: s b.\n1: x 0 0.\n"))
	err := <-b.order[0].result
	var sa *StepAbortedError
	if !errors.As(err, &sa) || !strings.Contains(err.Error(), "tasks 0 and 1 of the job step both said they ran on a") {
		t.Fatalf("a's outcome: %v; want it not measured (a StepAbortedError), naming both tasks", err)
	}
	if outOf(b.order[0]) != "" {
		t.Errorf("a got %q", outOf(b.order[0]))
	}
	select {
	case err := <-b.order[1].result:
		t.Errorf("b's outcome from the task that lied about a: %v", err)
	default:
	}
}

// Commands of many nodes at once gather into one step; a node that
// already has a command in the step being gathered starts the next one;
// one taken back before its step starts leaves it.
func TestStepperGathers(t *testing.T) {
	p := &stepper{gather: time.Hour, users: 3}
	var mu sync.Mutex
	var launched [][]string
	launch := func(b *stepBatch) {
		var names []string
		for _, tk := range b.order {
			names = append(names, tk.s.node)
		}
		mu.Lock()
		launched = append(launched, names)
		mu.Unlock()
	}
	p.onLaunch = launch
	task := func(node string) *stepTask {
		return &stepTask{s: &Srun{name: node, node: node}, result: make(chan error, 1)}
	}
	p.add(task("a"))
	p.add(task("b"))
	p.add(task("b")) // b again: a and b go, b waits
	c := task("c")
	bc := p.add(c)
	if !bc.withdraw(c) {
		t.Fatal("c taken back before its step started: withdraw says it ran")
	}
	p.add(task("a"))
	p.add(task("c")) // three: it goes
	mu.Lock()
	defer mu.Unlock()
	want := [][]string{{"a", "b"}, {"b", "a", "c"}}
	if fmt.Sprint(launched) != fmt.Sprint(want) {
		t.Errorf("steps %v, want %v", launched, want)
	}
}

// srun pads a task's number to the width of the last one: with spaces
// (Slurm 22.05: " 7: " among 32 tasks) or zeros; either is the task's.
func TestStepOutputPaddedNumbers(t *testing.T) {
	b := testBatch("a", "b", "c")
	o := &stepOutput{b: b}
	o.Write([]byte(" 0: s a.\n01: s b.\n 2: s c.\n 0: o 6869.\n01: o 6f6b.\n 0: x 0 0.\n01: x 0 0.\n 2: x 4 0.\n"))
	for i, want := range []string{"hi", "ok", ""} {
		err := <-b.order[i].result
		if got := outOf(b.order[i]); got != want || (i < 2) != (err == nil) {
			t.Errorf("%s: %q %v; want %q", b.order[i].s.node, got, err, want)
		}
	}
}

// srun gives a whole step up for one node's I/O error (step_launch.c):
// the other nodes' commands whose end was not heard are NOT MEASURED
// (StepAbortedError), not failed, and the job's nodes take a step each
// from then on.
func TestStepAbortedBySrun(t *testing.T) {
	b := testBatch("a", "b", "c")
	o := &stepOutput{b: b}
	o.Write([]byte("0: s a.\n1: s b.\n2: s c.\n0: o 6869.\n0: x 0 0.\n"))
	said := &srunLines{}
	said.add("srun: error: _server_read: fd 19 got error or unexpected eof reading message body")
	said.add("srun: error: step_launch_notify_io_failure: aborting, io error with slurmstepd on node 2")
	b.ended(&ExitError{Node: "slurm-login", Status: 137}, said, "")
	if err := <-b.order[0].result; err != nil {
		t.Errorf("a ended before the abort: %v", err)
	}
	for _, tk := range b.order[1:] {
		var sa *StepAbortedError
		if err := <-tk.result; !errors.As(err, &sa) || !strings.Contains(err.Error(), "aborting, io error with slurmstepd on node 2") {
			t.Errorf("%s: %v; want a StepAbortedError in srun's words", tk.s.node, err)
		}
	}
	if !b.p.isUnshared() {
		t.Error("the job's steps are still shared after srun aborted one")
	}
	// Shared again once unshareFor has passed; after a second abort, not
	// again.
	now := time.Now()
	b.p.now = func() time.Time { return now }
	b.p.unsharedUntil = now.Add(unshareFor)
	if now = now.Add(unshareFor + time.Second); b.p.isUnshared() {
		t.Errorf("still unshared %s after the abort", unshareFor+time.Second)
	}
	b2 := testBatch("a", "b")
	b2.p, b2.launchedAt = b.p, now
	b2.ended(&ExitError{Node: "slurm-login", Status: 137}, said, "")
	now = now.Add(24 * time.Hour)
	if !b.p.isUnshared() {
		t.Error("shared again a day after srun's second abort")
	}
}

// srun breaks a line slurmstepd passed on in parts into lines of their
// own, each marked with the task: the pieces are joined until the dot
// that ends every frame, and no byte is lost (seen in the lab's contract:
// 435 bytes of 8 MiB of stderr).
func TestStepOutputJoinsPieces(t *testing.T) {
	b := testBatch("a", "b")
	o := &stepOutput{b: b}
	o.Write([]byte("0: s a.\n1: s b.\n0: e 6869\n1: o 6f.\n0: 2074\n0: 6865726521.\n1: \n1: x 0 0.\n0: x 0 0.\n"))
	<-b.order[0].result
	<-b.order[1].result
	if got := errOf(b.order[0]); got != "hi there!" {
		t.Errorf("a's stderr from pieces: %q", got)
	}
	if got := outOf(b.order[1]); got != "o" {
		t.Errorf("b's stdout beside a's pieces: %q", got)
	}
}

// A node whose task never said it ran, in a step that ran on the others
// (srun: "Task launch ... failed on node b"), never started its command:
// while Slurm still counts the node in the job, the command goes again as
// a step of its own, and is no failure of the node's.
func TestStepTaskThatNeverStartedGoesAlone(t *testing.T) {
	// aDoneAndB is a step over a and b whose a ended well, Slurm saying b
	// gone from the job or not, srun's line about b heard as it came.
	aDoneAndB := func(gone bool, srunSaid string) (*stepBatch, *srunLines) {
		b := testBatch("a", "b")
		b.p.askSlurm = func(*Srun) (bool, string, error) { return gone, "b is down*", nil }
		(&stepOutput{b: b}).Write([]byte("0: s a.\n0: x 0 0.\n"))
		said := &srunLines{heard: b.heard, shared: true}
		said.add(srunSaid)
		if b.pending != 0 {
			// Heard as it came: b holds the stream open no more.
			t.Errorf("%d task(s) still counted after a's end and srun's %q", b.pending, srunSaid)
		}
		return b, said
	}
	const launchFailed = "srun: error: Task launch for StepId=7.3 failed on node b: Communication connection failure"

	b, said := aDoneAndB(false, launchFailed)
	b.ended(&ExitError{Node: "slurm-login", Status: 1}, said, "")
	if err := <-b.order[0].result; err != nil {
		t.Errorf("a: %v", err)
	}
	if err := <-b.order[1].result; err != errStepAlone {
		t.Errorf("b, whose task never ran: %v; want errStepAlone", err)
	}

	// Never said it ran, and srun said nothing of a launch: it may have
	// run, so it is NOT MEASURED, not run again. srun's report of the
	// task's end settles it too.
	b, said = aDoneAndB(false, "srun: error: b: task 1: Killed")
	b.ended(&ExitError{Node: "slurm-login", Status: 137}, said, "")
	<-b.order[0].result
	var sa *StepAbortedError
	if err := <-b.order[1].result; !errors.As(err, &sa) || !strings.Contains(err.Error(), "never said it ran") {
		t.Errorf("b, whose task never said it ran: %v; want it NOT MEASURED", err)
	}

	// Gone from the job: lost, as before.
	b, said = aDoneAndB(true, launchFailed)
	b.ended(&ExitError{Node: "slurm-login", Status: 1}, said, "")
	<-b.order[0].result
	var lost *ConnectionLostError
	if err := <-b.order[1].result; !errors.As(err, &lost) {
		t.Errorf("b, gone from the job: %v; want it lost", err)
	}
}

// A command withdrawn while Slurm was still making its step never starts:
// left out of the table when withdrawn before the table went, and, when
// its "k NODE" came after the table but before the task began, the task
// reads it first and runs nothing.
func TestStepWithdrawnCommandNeverStarts(t *testing.T) {
	marker := t.TempDir() + "/ran"
	for _, how := range []string{"out of the table", "k after the table"} {
		b := testBatch("a", "b")
		b.order[1].line = "touch " + marker
		var control io.Reader = newBeats(2*time.Second, nil)
		if how == "out of the table" {
			b.order[1].cancelled = true
		} else {
			control = io.MultiReader(strings.NewReader("h\nk a\nk b\n"), control)
		}
		runTask(t, b, "b", control)
		if err := <-b.order[1].result; err != errStepAlone {
			t.Errorf("%s: b's outcome %v; want errStepAlone (nothing ran)", how, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: the withdrawn command ran", how)
		}
	}
}
