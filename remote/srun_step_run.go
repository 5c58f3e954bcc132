package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/hostlist"
)

// A shared step's life: started from the login node with its table, its
// output read until srun ends, every node's command given its outcome.

// table is the step's table (srun_step.sh): every node's command index,
// then each distinct command once, with its grace. A command withdrawn
// before the step started is left out: its node's task finds no command
// and runs nothing (a "k NODE" after the table would come only once the
// guard had started it).
func (b *stepBatch) table() []byte {
	var nodes, cmds bytes.Buffer
	index := map[string]int{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.order {
		if t.cancelled {
			continue
		}
		key := strconv.Itoa(ceilSeconds(t.grace)) + " " + t.line
		i, ok := index[key]
		if !ok {
			i = len(index)
			index[key] = i
			fmt.Fprintf(&cmds, "c %d %d %d\n%s", i, len(t.line), ceilSeconds(t.grace), t.line)
		}
		fmt.Fprintf(&nodes, "n %s %d\n", t.s.node, i)
	}
	nodes.Write(cmds.Bytes())
	nodes.WriteString("t\n")
	return nodes.Bytes()
}

// stepLine is the login node's command for the step.
func (b *stepBatch) stepLine() string {
	p := b.p
	var list []string
	for _, t := range b.order {
		list = append(list, t.s.node)
	}
	n := strconv.Itoa(len(list))
	words := []string{"exec", "srun", "--jobid=" + p.job, "--overlap", "--nodelist=" + Quote(strings.Join(list, ",")),
		"--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--label", "--input=all",
		"--job-name=gpuaccept-step", "--propagate=NONE", "--mpi=none",
		// The nodes' commands are each on their own: one that fails, or a
		// node that dies, ends no other's, whatever the cluster's
		// KillOnBadExit and WaitTime say.
		"--no-kill", "--kill-on-bad-exit=0", "--wait=0"}
	for _, a := range p.args {
		words = append(words, Quote(a))
	}
	// sh says the task runs before bash reads a BASH_ENV the login
	// session may pass on, as stepLine does for a step of its own.
	words = append(words, "sh", "-c", Quote(`printf 's %s.\n' "$SLURMD_NODENAME"; exec bash -c "$@"`), "gpuaccept-step",
		Quote(stepSource), "gpuaccept-step", strconv.Itoa(ceilSeconds(p.lease)), Quote(guardSource), Quote(stepRunner))
	return strings.Join(words, " ")
}

// run is the step's life: started from the login node, its output read
// until srun ends, every task given its outcome.
func (b *stepBatch) run() {
	p := b.p
	login, done, err := b.session(context.Background())
	if err != nil {
		b.mu.Lock()
		for _, t := range b.order {
			b.finish(t, t.s.loginError(t.ctx, t.cmd, err))
		}
		b.mu.Unlock()
		return
	}
	defer done()
	b.mu.Lock()
	if b.pending == 0 {
		// Every command was withdrawn while the step waited for a login
		// session: nothing to start.
		for _, t := range b.order {
			b.finish(t, errStepAlone)
		}
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()

	maxGrace := time.Duration(0)
	for _, t := range b.order {
		maxGrace = max(maxGrace, t.grace)
	}
	pr, pw := io.Pipe()
	ctl, stopInner := streamControl(pw, p.beat, nil)
	loginCtx, stopLogin := context.WithCancel(context.Background())
	defer stopLogin()
	ran := make(chan struct{})
	var ending sync.Once
	end := func() {
		ending.Do(func() {
			// The bound first: ending the stream may block on a stdin srun
			// no longer reads.
			go func() {
				select {
				case <-ran:
				case <-time.After(maxGrace + stepEndMargin):
					stopLogin()
				}
			}()
			go stopInner()
		})
	}
	b.mu.Lock()
	b.ctl, b.closeAll = ctl, end
	for _, t := range b.order {
		if t.cancelled {
			// The stream is read only once login.Run runs, below.
			go ctl.frame("k "+t.s.node, nil)
		}
	}
	if b.pending == 0 {
		// The last was withdrawn since the look above.
		go end()
	}
	b.mu.Unlock()
	// The table as it stands now, less the commands withdrawn so far.
	table := b.table()

	// Nothing of any node's ran within stepStart: the step waits on Slurm,
	// and ends as a cancelled one does.
	limit := time.AfterFunc(p.stepStart, func() {
		b.mu.Lock()
		late := !b.started
		b.notStarted = late
		b.mu.Unlock()
		if late {
			end()
		}
	})
	srunErr := &srunLines{heard: b.heard, shared: true}
	stderr := &srunSplit{tail: NewStderrTail(), srun: srunErr}
	out := &stepOutput{b: b}
	err = login.Run(loginCtx, Cmd{
		Command: b.stepLine(),
		Stdin:   io.MultiReader(bytes.NewReader(table), pr),
		Stdout:  out,
		Stderr:  stderr,
		Grace:   maxGrace + stepEndMargin,
	})
	close(ran)
	limit.Stop()
	pr.CloseWithError(io.ErrClosedPipe)
	stopInner()
	out.flush()
	stderr.flush()
	b.ended(err, srunErr, stderr.tail.String())
}

// heard takes srun's line as it comes: a node that failed under the step
// is lost now, once Slurm says it left the job, not when the step ends
// (the other nodes' commands run on, maybe for hours); a task that ended,
// or was never launched, without the frame of its command's end no longer
// holds the step's stream open, its outcome the step's end's to say.
func (b *stepBatch) heard(line string) {
	if nodes, launch := taskGone(line); len(nodes) > 0 {
		b.mu.Lock()
		for _, t := range b.order {
			if slices.Contains(nodes, t.s.node) && !t.done {
				t.launchFailed = t.launchFailed || launch
				b.settle(t)
			}
		}
		b.mu.Unlock()
		return
	}
	_, after, ok := strings.Cut(line, "Node failure on ")
	if !ok {
		return
	}
	node := strings.TrimSpace(after)
	b.mu.Lock()
	var t *stepTask
	for _, o := range b.order {
		if o.s.node == node && !o.done {
			t = o
		}
	}
	b.mu.Unlock()
	if t == nil {
		return
	}
	go func() {
		gone, state, err := b.p.leftTheJob(t.ctx, t.s)
		if err != nil || !gone {
			return // the step's end will tell
		}
		lost := t.s.markLost("srun: "+strings.TrimPrefix(strings.TrimPrefix(line, srunPrefix), "error: ")+" ("+state+")", nil)
		b.mu.Lock()
		b.finish(t, lost)
		b.mu.Unlock()
	}()
}

// launchFailed is srun's line for a node on which it could not launch the
// step's task ("srun: error: Task launch for StepId=7.3 failed on node h3:
// Communication connection failure").
var launchFailed = regexp.MustCompile(`Task launch for \S+ failed on node ([^\s:]+)`)

// taskGone is the nodes whose tasks srun says ended ("srun: error:
// h[3-4]: tasks 2-3: Killed") or could not be launched (launch).
func taskGone(line string) (nodes []string, launch bool) {
	if m := launchFailed.FindStringSubmatch(line); m != nil {
		return []string{m[1]}, true
	}
	if !taskEnded.MatchString(line) {
		return nil, false
	}
	list, _, _ := strings.Cut(strings.TrimPrefix(line, "srun: error: "), ": ")
	nodes, err := hostlist.Expand(list)
	if err != nil {
		return nil, false
	}
	return nodes, false
}

// session waits for a place on a login connection, bounded by the tasks:
// it gives up once every one of them has gone.
func (b *stepBatch) session(ctx context.Context) (*Client, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for _, t := range b.order {
			select {
			case <-t.ctx.Done():
			case <-t.s.closing.Done():
			case <-ctx.Done():
				return
			}
		}
		cancel()
	}()
	return b.p.logins.session(ctx)
}

// ended gives every task still without an outcome its own, from how the
// step ended: srun's words, Slurm's view of the node, the login node.
func (b *stepBatch) ended(err error, said *srunLines, stderr string) {
	b.mu.Lock()
	var left []taskState
	for _, t := range b.order {
		if !t.done {
			// As they are now: withdraw may change them meanwhile.
			left = append(left, taskState{t: t, cancelled: t.cancelled, started: t.started, launchFailed: t.launchFailed, said: lines(t.said)})
		}
	}
	started, notStarted := b.started, b.notStarted
	b.mu.Unlock()
	why := said.lost()
	aborted := said.aborted()
	if aborted {
		// srun gives up a whole step for one node's I/O error: sharing
		// steps would put every node's command at the mercy of each
		// other's, so the job's nodes take a step each for a while
		// (unshareFor), after a second abort for good.
		b.p.aborted(b.launchedAt)
	}
	// Slurm is asked about each node at once: a step over a thousand nodes
	// that srun gave up must not take a thousand questions in turn.
	var asked sync.WaitGroup
	for _, ts := range left {
		asked.Add(1)
		go func() {
			defer asked.Done()
			res := b.outcome(ts, err, said, why, aborted, started, notStarted, stderr)
			b.mu.Lock()
			b.finish(ts.t, res)
			b.mu.Unlock()
		}()
	}
	asked.Wait()
}

// taskState is a task as the step's end found it.
type taskState struct {
	t                                *stepTask
	cancelled, started, launchFailed bool
	said                             string
}

// onSaid is srun's lines, if any, after a colon.
func onSaid(said string) string {
	if said = strings.TrimSpace(said); said != "" {
		return ": " + strings.ReplaceAll(said, "\n", "; ")
	}
	return ""
}

// outcome is the outcome of t, whose command's end the step never said.
func (b *stepBatch) outcome(ts taskState, err error, said *srunLines, why string, aborted, started, notStarted bool, stderr string) error {
	t, s := ts.t, ts.t.s
	var ee *ExitError
	switch {
	case ts.cancelled:
		return s.endedEarly(t.ctx, t.cmd)
	case notStarted && !ts.started:
		return &StepNotStartedError{Node: s.name, Command: Shorten(t.cmd.Command, 120), After: b.p.stepStart, Said: said.String()}
	case err != nil && !errors.As(err, &ee):
		return s.loginError(t.ctx, t.cmd, err)
	case !started:
		// No task of the step ran (srun could not make it: one node gone
		// or short of what it asks for): nothing ran, and the node's
		// command goes again as a step of its own, whose answer is the
		// node's alone.
		return errStepAlone
	case aborted:
		// Another node's I/O failure may be all it was: the node's next
		// command shows whether it is still the job's.
		return &StepAbortedError{Node: s.name, Command: Shorten(t.cmd.Command, 120), Said: said.String()}
	case why != "" || !ts.started:
		gone, state, cerr := b.p.leftTheJob(t.ctx, s)
		switch {
		case cerr != nil:
			// The controller's silence says nothing of the node.
			return &StepAbortedError{Node: s.name, Command: Shorten(t.cmd.Command, 120),
				Said: said.String() + "and Slurm could not be asked about the node: " + cerr.Error()}
		case gone:
			return s.markLost("srun: "+why+" ("+state+")", nil)
		case !ts.started && ts.launchFailed:
			// srun could not launch the node's task there ("Task launch
			// ... failed on node"), and the node is still the job's: its
			// command never started, and goes again as a step of its own,
			// whose answer is the node's alone.
			return errStepAlone
		case !ts.started:
			// Its task never said it ran, and srun did not say why: it may
			// have started the command all the same, which must not run
			// twice at once.
			return &StepAbortedError{Node: s.name, Command: Shorten(t.cmd.Command, 120),
				Reason: "its task in the job step it shared with other nodes' commands never said it ran" + onSaid(said.String())}
		}
	}
	// The task ended without the runner's last line: killed with its
	// runner, or the step was.
	status := 1
	if ee != nil && ee.Status > 0 {
		status = ee.Status
	}
	tail := said.String() + ts.said + t.tail.String()
	if !started {
		tail = said.String() + stderr
	}
	if strings.TrimSpace(tail) == "" {
		tail = "the node's task in the shared job step ended without the command's end, and srun said nothing"
	}
	if len(tail) > StderrTailBytes {
		tail = tail[len(tail)-StderrTailBytes:]
	}
	return &ExitError{Node: s.name, Command: t.cmd.Command, Status: status, StderrTail: tail}
}
