package remote

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// One job step for many nodes. A window's phases run a command on every
// node at about the same time; as one step per command, a thousand nodes
// are a thousand srun processes on the login node, a thousand step
// requests to slurmctld and a thousand SSH sessions. The stepper gathers
// the commands that the nodes of one job start together into one step
// over all of them (srun --nodelist=A,B,... --label --input=all): one
// srun, one session, one step, slurmd's tree carrying the launch. Each
// node's task picks its own command from the table the stream begins
// with, and runs it under the same guard as a step of its own would, whose
// control stream every task hears (a cancel names its node: "k NODE").
// The task's output comes back as short hex lines (srun_step.pl) that
// srun's --label marks with the task's number, so no node's bytes can pass
// for another's.

//go:embed srun_step.sh
var stepSource string

//go:embed srun_step.pl
var stepRunner string

// stepWidth bounds the nodes of one shared step: srun gives a whole step
// up for one node's I/O error, so a step of the fleet would put every
// node's command at the mercy of the weakest; 64 nodes a step still makes
// a thousand nodes' fan-out sixteen steps.
const stepWidth = 64

// startsAtOnce bounds the steps of a command's own that wait for Slurm
// to start them at once (ssh.concurrency's default).
const startsAtOnce = 32

// stepGather is how long the first command of a step waits for others
// to join it when not every node has a command yet: a fan-out's
// goroutines start within a millisecond of each other, and a node whose
// command comes later gets the next step.
const stepGather = 20 * time.Millisecond

// stepLineBytes bounds a line of a step's output: the runner's are under
// 500 bytes, and srun cuts a node's lines at 1 KiB.
const stepLineBytes = 4096

// stepper gathers the commands of the nodes of one job, with the same
// step options, into shared steps.
type stepper struct {
	logins      *Logins
	job         string
	args        []string
	beat, lease time.Duration
	stepStart   time.Duration
	gather      time.Duration
	// starting bounds the steps of a command's own that are being started.
	starting chan struct{}

	mu    sync.Mutex
	users int
	open  *stepBatch
	steps int
	own   int // steps of a command's own
	// aborts counts the shared steps srun gave up; after the first,
	// every command takes a step of its own until unsharedUntil, after
	// the second for good.
	aborts                   int
	lastAbort, unsharedUntil time.Time
	// now, in unit tests, is the clock.
	now func() time.Time
	// onLaunch, in unit tests, takes a step instead of starting it.
	onLaunch func(*stepBatch)
	// askSlurm, in unit tests, answers leftTheJob.
	askSlurm func(*Srun) (gone bool, state string, err error)
}

// leftTheJob asks Slurm whether s's node left the job.
func (p *stepper) leftTheJob(ctx context.Context, s *Srun) (bool, string, error) {
	if p.askSlurm != nil {
		return p.askSlurm(s)
	}
	return s.leftTheJob(ctx)
}

// stepperFor is the stepper the nodes of job with args share.
func (l *Logins) stepperFor(job string, args []string, beat, lease, stepStart time.Duration) *stepper {
	key := job + "\x00" + strings.Join(args, "\x00")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.steppers == nil {
		l.steppers = map[string]*stepper{}
	}
	p := l.steppers[key]
	if p == nil {
		p = &stepper{logins: l, job: job, args: args, beat: beat, lease: lease, stepStart: stepStart,
			gather: stepGather, starting: make(chan struct{}, startsAtOnce)}
		l.steppers[key] = p
	}
	p.mu.Lock()
	p.users++
	p.mu.Unlock()
	return p
}

// unshareFor is how long the job's commands take steps of their own
// after srun gave up a shared step for the first time. srun gives a whole
// step up for one node's I/O error: a node that fails once may be gone
// since, and steps of one's own cost slurmctld a step request per node
// and command (at a thousand nodes more than it bears for long); a second
// abort ends sharing for the window.
const unshareFor = 10 * time.Minute

func (p *stepper) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *stepper) isUnshared() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.aborts > 1 || (p.aborts == 1 && p.clock().Before(p.unsharedUntil))
}

// aborted counts a shared step srun gave up, launched at launched. Steps
// launched before the last abort was counted are the same incident (one
// node's death aborts each step it shared: its telemetry's and a phase's).
func (p *stepper) aborted(launched time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.aborts > 0 && !launched.After(p.lastAbort) {
		return
	}
	p.aborts++
	p.lastAbort = p.clock()
	p.unsharedUntil = p.lastAbort.Add(unshareFor)
}

func (p *stepper) release() {
	p.mu.Lock()
	p.users--
	p.mu.Unlock()
}

// Steps is how many job steps the nodes reached through l have started:
// shared by the nodes' commands, and a command's own. What the window
// says of its load on slurmctld, and what the tests count.
func (l *Logins) Steps() (shared, own int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.steppers {
		p.mu.Lock()
		shared += p.steps
		own += p.own
		p.mu.Unlock()
	}
	return shared, own
}

// stepTask is one node's command in a shared step.
type stepTask struct {
	s     *Srun
	ctx   context.Context
	cmd   Cmd
	line  string // the guard's COMMAND: the exports, then the command
	grace time.Duration
	tail  *Tail
	// result gets the task's outcome once: the command's error, or
	// errStepAlone when the node must run it as a step of its own.
	result chan error

	// Under the batch's mu.
	started, done, cancelled bool
	// lost: its guard stopped the command when the stream fell silent.
	lost bool
	// settled: no longer counted among the tasks the stream waits on.
	settled bool
	// launchFailed: srun said it could not launch the node's task.
	launchFailed bool
	said         []string // the node's lines that are no frame

	// wmu orders the writes to cmd's Stdout and Stderr with Run's return:
	// none reaches them once gone.
	wmu  sync.Mutex
	gone bool
}

// write passes a chunk of the command's output on, unless Run returned.
func (t *stepTask) write(w io.Writer, data []byte) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if !t.gone && w != nil {
		w.Write(data)
	}
}

// leave is Run's return: no more output reaches the caller.
func (t *stepTask) leave() {
	t.wmu.Lock()
	t.gone = true
	t.wmu.Unlock()
}

// errStepAlone: the node could not take its command in the shared step,
// which never started it there.
var errStepAlone = errors.New("the node runs the command as a step of its own")

// run runs cmd in a shared step; alone reports that it did not and the
// caller must run it as a step of its own.
func (p *stepper) run(ctx context.Context, s *Srun, cmd Cmd, grace time.Duration) (err error, alone bool) {
	t := &stepTask{s: s, ctx: ctx, cmd: cmd, line: guardCommand(cmd), grace: grace, tail: NewStderrTail(),
		result: make(chan error, 1)}
	b := p.add(t)
	defer t.leave()
	select {
	case err := <-t.result:
		if err == errStepAlone {
			return nil, true
		}
		return err, false
	case <-ctx.Done():
	case <-s.closing.Done():
	}
	if b.withdraw(t) {
		// Gone before its step started: nothing ran.
		return s.endedEarly(ctx, cmd), false
	}
	// Its guard heard "k NODE" and stops the command, TERM then KILL
	// after the grace: Run returns once it has.
	select {
	case <-t.result:
	case <-time.After(grace + stepEndMargin):
	}
	return s.endedEarly(ctx, cmd), false
}

// endedEarly is the error of a command the coordinator ended.
func (s *Srun) endedEarly(ctx context.Context, cmd Cmd) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %s: %w", s.name, Shorten(cmd.Command, 120), ctx.Err())
	}
	return &ConnectionLostError{Node: s.name, Reason: Shorten(cmd.Command, 60) + ": closed by gpuaccept", Err: net.ErrClosed}
}

// add puts t into the step being gathered; that step starts once every
// node of the stepper has a command in it, once gather has passed, or
// when t's node already has one there.
func (p *stepper) add(t *stepTask) *stepBatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.open
	if b != nil && b.has(t.s.node) {
		p.launch(b)
		b = nil
	}
	if b == nil {
		b = &stepBatch{p: p, tasks: map[int]*stepTask{}}
		p.open = b
		b.timer = time.AfterFunc(p.gather, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.open == b {
				p.launch(b)
			}
		})
	}
	b.mu.Lock()
	b.order = append(b.order, t)
	b.mu.Unlock()
	if len(b.order) >= p.users || len(b.order) >= stepWidth {
		p.launch(b)
	}
	return b
}

// launch starts b; p.mu is held.
func (p *stepper) launch(b *stepBatch) {
	if p.open == b {
		p.open = nil
	}
	b.timer.Stop()
	b.mu.Lock()
	b.launched = true
	b.launchedAt = p.clock()
	b.pending = len(b.order)
	empty := len(b.order) == 0
	b.mu.Unlock()
	if !empty {
		p.steps++
		if p.onLaunch != nil {
			p.onLaunch(b)
			return
		}
		go b.run()
	}
}

// stepBatch is one shared step: the nodes' commands in the order they
// came, and what the step's output said of each.
type stepBatch struct {
	p     *stepper
	timer *time.Timer

	mu         sync.Mutex
	order      []*stepTask
	launched   bool
	launchedAt time.Time
	ctl        *control
	tasks      map[int]*stepTask // by srun's task number, once its node said it runs
	claimed    map[string]int    // node: the task number that said it runs there
	started    bool              // some task runs
	pending    int               // tasks neither done nor cancelled
	closeAll   func()            // ends the control stream
	noise      []string          // lines that are no task's
	pieces     map[int]string    // by task: the start of a frame srun broke
	// notStarted: no task ran within the stepper's stepStart.
	notStarted bool
}

func (b *stepBatch) has(node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.order {
		if t.s.node == node {
			return true
		}
	}
	return false
}

// withdraw takes back t's command after its context ended: true when its
// step had not started yet, so nothing ran; else its guard is told.
func (b *stepBatch) withdraw(t *stepTask) bool {
	p := b.p
	p.mu.Lock()
	b.mu.Lock()
	if !b.launched {
		for i, o := range b.order {
			if o == t {
				b.order = append(b.order[:i], b.order[i+1:]...)
				break
			}
		}
		if len(b.order) == 0 && p.open == b {
			p.open = nil
			b.timer.Stop()
		}
		b.mu.Unlock()
		p.mu.Unlock()
		return true
	}
	p.mu.Unlock()
	defer b.mu.Unlock()
	if t.done || t.cancelled {
		return false
	}
	t.cancelled = true
	if b.ctl != nil {
		// Not under b.mu, and not waited for: a write blocks until srun
		// reads its stdin, and srun may not (yet, or any more).
		go b.ctl.frame("k "+t.s.node, nil)
	}
	b.settle(t)
	return false
}

// settle counts t as no longer waiting on the step's control stream, once,
// and ends the stream when no task does; b.mu is held.
func (b *stepBatch) settle(t *stepTask) {
	if t.settled {
		return
	}
	t.settled = true
	if b.pending--; b.pending == 0 && b.closeAll != nil {
		go b.closeAll()
	}
}

// finish gives t its outcome once; b.mu is held.
func (b *stepBatch) finish(t *stepTask, err error) {
	if t.done {
		return
	}
	t.done = true
	t.result <- err
	b.settle(t)
}
