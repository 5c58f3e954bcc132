package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gpuaccept/hostlist"
)

// SrunConfig is the srun transport's settings for one node: a node of
// the window's own Slurm allocation that takes no SSH from the
// coordinator. Every command is a job step on it (srun --overlap
// --nodelist=NODE) started from the login node, which is the only host
// the coordinator reaches over SSH.
type SrunConfig struct {
	// Login reaches the login node.
	Login SSHConfig
	// Logins are the connections to it that the window's nodes share;
	// nil: the node's executor holds its own.
	Logins *Logins
	// Job is the allocation's job ID, Node the node's Slurm name and
	// Addr its NodeAddr (where the other nodes reach it; default Node).
	Job, Node, Addr string
	// StepArgs are srun options every step gets besides the transport's
	// own (--gres=gpu:8 where a step sees no GPU it does not ask for).
	StepArgs []string
	// StepStart bounds how long a command's step may take to start
	// (default stepStartLimit): srun waits for a step Slurm cannot start
	// yet, retrying without end, which would hold the command until its
	// phase's deadline.
	StepStart time.Duration
	// StepEach makes every command a job step of its own; by default the
	// commands the job's nodes start together share one step
	// (srun_step.go).
	StepEach bool
}

// stepStart bounds how long Slurm may take to start a step, beyond
// reaching the login node: the controller answers a step request in
// milliseconds when it is well, in seconds when it is busy.
const stepStart = 30 * time.Second

// stepStartLimit is StepStart's default: a controller busy with a
// hundred nodes' steps took seconds per step in the lab, never minutes,
// and a backup controller takes over after SlurmctldTimeout (120 s by
// default) and a message timeout or two: past that, the step waits on
// something that is not coming.
const stepStartLimit = 5 * time.Minute

// stepStarted is the line each step prints on its stderr before anything
// else of the node's runs (stepLine, by sh: bash would first read the
// BASH_ENV the login session may pass on, which may print): srunSplit
// takes it for Slurm's, and srunLines for the sign that the step started.
const stepStarted = "gpuaccept-step: started"

// stepEndMargin is how long a cancelled step may take to end once its
// command's grace is over: srun reports, slurmstepd tears the step down.
const stepEndMargin = 10 * time.Second

func (s SrunConfig) dial(ctx context.Context, name string) (Executor, error) {
	switch {
	case !validJob(s.Job):
		return nil, &SetupError{Err: fmt.Errorf("%s: srun: job ID %q is not a Slurm job ID", name, s.Job)}
	case s.Node == "" || strings.ContainsAny(s.Node, " \t\n,[]/\\'\"$`;&|<>()*?"):
		return nil, &SetupError{Err: fmt.Errorf("%s: srun: %q is not a Slurm node name", name, s.Node)}
	}
	logins := s.Logins
	if logins == nil {
		logins = NewLogins(s.Login)
	}
	logins.hold()
	// Reaching the node is reaching the login node: a step proves the node
	// at the first command (connect's hostname), as a login does over SSH.
	c, done, err := logins.session(ctx)
	if err != nil {
		logins.release()
		// The login node is the jump host of every node: not reaching it
		// says nothing of the node.
		return nil, withNode(name, "jump host "+s.Login.Host+" (the Slurm login node)", trimNode(err, logins.Name()))
	}
	done()
	closing, cancel := context.WithCancel(context.Background())
	stepStart := cmp.Or(s.StepStart, stepStartLimit)
	return &Srun{
		name: name, node: s.Node, job: s.Job, addr: cmp.Or(s.Addr, s.Node), args: s.StepArgs, logins: logins,
		beat: c.cfg.KeepaliveInterval, lease: c.cfg.GuardLease, stepStart: stepStart,
		steps: logins.stepperFor(s.Job, s.StepArgs, c.cfg.KeepaliveInterval, c.cfg.GuardLease, stepStart), each: s.StepEach,
		closing: closing, closeAll: cancel,
	}, nil
}

func (s SrunConfig) reachWithin() time.Duration {
	return sshTransport{&s.Login}.reachWithin() + stepStart
}

func (s SrunConfig) address() string { return cmp.Or(s.Addr, s.Node) }

func (s SrunConfig) via() string {
	return "through srun in Slurm job " + s.Job + " from the login node " + s.Login.Host + ", no host key of its own"
}

func validJob(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Srun is a node of a Slurm allocation reached by job steps from the login
// node. A command is `srun --overlap --nodelist=NODE` running the same
// guard as an SSH node's (guard.sh), inside the login node's guard: the
// coordinator's control stream (heartbeats and the command's stdin) is
// carried as the srun's stdin, which Slurm hands to the step. So a
// cancelled context, a closed executor or a lost coordinator ends the
// command's whole group on the node as over SSH: the guard on the node
// hears the end of its stream or falls silent past its lease, whatever
// became of srun. A node Slurm reports failed, or one that is no longer
// in the job, is lost (*ConnectionLostError, with srun's words).
type Srun struct {
	name, node, job, addr string
	args                  []string
	logins                *Logins
	beat, lease           time.Duration
	stepStart             time.Duration
	// steps gathers the job's nodes' commands into shared steps, unless
	// each; alone is set once the node could not take part in one.
	steps *stepper
	each  bool
	alone atomic.Bool

	closing  context.Context
	closeAll context.CancelFunc
	running  sync.WaitGroup
	mu       sync.Mutex
	closed   bool
	lost     *ConnectionLostError
}

var _ Executor = (*Srun)(nil)

// Name is the node's name.
func (s *Srun) Name() string { return s.name }

// Addr says where the node is reached: its Slurm name, through the job.
func (s *Srun) Addr() string { return "srun:" + s.job + "/" + s.node }

// Lost is true once srun said the node failed or left the job, or the
// login node could not be reached any more.
func (s *Srun) Lost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost != nil
}

// Close ends every command still running (each guard hears its stream
// end) and waits until they have; later calls fail.
func (s *Srun) Close() error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	if first {
		s.closeAll()
		s.running.Wait()
		s.steps.release()
		s.logins.release()
	}
	return nil
}

func (s *Srun) begin(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.lost != nil:
		l := *s.lost
		return &l
	case s.closed:
		return &ConnectionLostError{Node: s.name, Reason: what + ": closed by gpuaccept", Err: net.ErrClosed}
	}
	s.running.Add(1)
	return nil
}

func (s *Srun) markLost(reason string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = &ConnectionLostError{Node: s.name, Reason: reason, Err: err}
	}
	l := *s.lost
	return &l
}

// Run runs cmd as a step on the node under the guard and waits for it.
func (s *Srun) Run(ctx context.Context, cmd Cmd) error {
	for k := range cmd.Env {
		if !IsEnvName(k) {
			return fmt.Errorf("%s: environment variable name %q is not a valid shell name", s.name, k)
		}
	}
	if err := s.begin(Shorten(cmd.Command, 60)); err != nil {
		return err
	}
	defer s.running.Done()
	grace := cmd.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	if s.shares(cmd) {
		if err, alone := s.steps.run(ctx, s, cmd, grace); !alone {
			return err
		}
	}
	// Not bounded here: a command that runs the window's length (a node's
	// telemetry) would hold its place for good, and nodes that stage
	// together must stage at once for their figures to be the fleet's.
	// Their starts are bounded, not their lives: a thousand uploads at
	// once would be a thousand step requests to slurmctld at once.
	select {
	case s.steps.starting <- struct{}{}:
	case <-ctx.Done():
		return s.endedEarly(ctx, cmd)
	case <-s.closing.Done():
		return s.endedEarly(ctx, cmd)
	}
	s.steps.mu.Lock()
	s.steps.own++
	s.steps.mu.Unlock()
	var once sync.Once
	return s.runAlone(ctx, cmd, grace, func() { once.Do(func() { <-s.steps.starting }) })
}

// shares says whether cmd goes into a step shared with the job's other
// nodes: not with stdin (its bytes are the node's alone), not where the
// node or the job cannot, and not with a NUL, which the step's table
// cannot carry. A command that lasts the window (a node's telemetry)
// shares too: a step of its own per node would be a thousand sruns held
// on the login node for the window, which the lab's 127 hosts showed
// slurmctld cannot bear (its job not given back); another node's failure
// ends it with at most 63 others, NOT MEASURED.
func (s *Srun) shares(cmd Cmd) bool {
	if s.each || cmd.Stdin != nil || s.alone.Load() || s.steps.isUnshared() || strings.ContainsRune(cmd.Command, 0) {
		return false
	}
	for k, v := range cmd.Env {
		if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
			return false
		}
	}
	return true
}

// runAlone runs cmd as a job step of its own.
func (s *Srun) runAlone(ctx context.Context, cmd Cmd, grace time.Duration, begun func()) error {
	defer begun()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-s.closing.Done():
			stop()
		case <-runCtx.Done():
		}
	}()
	login, done, err := s.logins.session(runCtx)
	if err != nil {
		return s.loginError(ctx, cmd, err)
	}
	defer done()

	// The node's guard hears the coordinator through the srun's stdin: its
	// own control stream, carried as data of the login guard's.
	pr, pw := io.Pipe()
	_, stopInner := streamControl(pw, s.beat, cmd.Stdin)
	started := make(chan struct{})
	srunErr := &srunLines{node: s.node, started: started}
	stderr := &srunSplit{cmd: cmd.Stderr, tail: NewStderrTail(), srun: srunErr}
	// A cancel ends the node's stream, not srun: srun answers a TERM by
	// KILLing the step, which would leave the command no grace. Its guard
	// hears the end of its stream (srun passes the EOF on) and stops the
	// command as over SSH, TERM then KILL after the grace, and srun ends
	// with the step. Only a step that outlives that is ended through srun.
	loginCtx, stopLogin := context.WithCancel(context.Background())
	defer stopLogin()
	ran := make(chan struct{})
	defer close(ran)
	go func() {
		select {
		case <-started:
			begun()
		case <-ran:
		}
	}()
	var notStarted atomic.Bool
	go func() {
		limit := time.NewTimer(s.stepStart)
		defer limit.Stop()
		// Until the step started, the limit; then only the run's end.
		waiting, st := limit.C, (<-chan struct{})(started)
		for cancelled := false; !cancelled; {
			select {
			case <-runCtx.Done():
				cancelled = true
			case <-ran:
				return
			case <-st:
				waiting, st = nil, nil
			case <-waiting:
				select {
				case <-st: // just now
					waiting, st = nil, nil
					continue
				default:
				}
				// Nothing of the node's ran, or its first words are
				// late: the step ends as a cancelled one does, its
				// command given the grace.
				notStarted.Store(true)
				cancelled = true
			}
		}
		stopInner()
		select {
		case <-ran:
		case <-time.After(grace + stepEndMargin):
			stopLogin()
		}
	}()
	err = login.Run(loginCtx, Cmd{
		Command: s.stepLine(cmd, grace),
		Stdin:   pr,
		Stdout:  cmd.Stdout,
		Stderr:  stderr,
		Grace:   grace + stepEndMargin,
	})
	pr.CloseWithError(io.ErrClosedPipe)
	stopInner()
	stderr.flush()

	// Cancelled by the coordinator: srun's "Job step aborted" is its answer
	// to the end of the step, no word about the node.
	switch {
	case notStarted.Load() && ctx.Err() == nil:
		said := srunErr.String()
		if said != "" {
			said = ": " + said
		}
		select {
		case <-started:
			return fmt.Errorf("%s: %s: the job step said nothing for %s, and was ended%s", s.name, Shorten(cmd.Command, 120), s.stepStart, said)
		default:
		}
		return &StepNotStartedError{Node: s.name, Command: Shorten(cmd.Command, 120), After: s.stepStart, Said: srunErr.String()}
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %s: %w", s.name, Shorten(cmd.Command, 120), ctx.Err())
	case s.closing.Err() != nil:
		return &ConnectionLostError{Node: s.name, Reason: Shorten(cmd.Command, 60) + ": closed by gpuaccept", Err: net.ErrClosed}
	}
	// srun may exit 0 after a node failure: its words raise the question,
	// Slurm's view of the job answers it (a command could print srun's
	// words itself, and a step refused for its options is no lost node).
	if why := srunErr.lost(); why != "" {
		gone, state, cerr := s.leftTheJob(ctx)
		switch {
		case cerr != nil:
			return s.markLost("srun: "+why+"; and Slurm could not be asked: "+cerr.Error(), nil)
		case gone:
			return s.markLost("srun: "+why+" ("+state+")", nil)
		}
		if err == nil {
			err = &ExitError{Node: s.name, Command: cmd.Command, Status: 1}
		}
	}
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		// srun's own words first: the command's last words end the tail.
		tail := srunErr.String() + stderr.tail.String()
		if len(tail) > StderrTailBytes {
			tail = tail[len(tail)-StderrTailBytes:]
		}
		return &ExitError{Node: s.name, Command: cmd.Command, Status: ee.Status, Signal: ee.Signal, StderrTail: tail}
	}
	return s.loginError(ctx, cmd, err)
}

// leftTheJob asks the login node's Slurm whether the node is still the
// job's to reach: the job running with the node in its nodelist, the node
// not down. state says what Slurm said.
func (s *Srun) leftTheJob(ctx context.Context) (gone bool, state string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepStart)
	defer cancel()
	login, done, err := s.logins.session(ctx)
	if err != nil {
		return false, "", err
	}
	defer done()
	var out bytes.Buffer
	err = login.Run(ctx, Cmd{Stdout: &limitWriter{w: &out, n: 4096}, Command: "squeue -h -j " + s.job + " -o '%T %N' 2>/dev/null; echo @; sinfo -h -N -n " +
		Quote(s.node) + " -o %T 2>/dev/null; true"})
	if err != nil {
		return false, "", err
	}
	job, node, _ := strings.Cut(out.String(), "@")
	jobState, nodes, _ := strings.Cut(strings.TrimSpace(job), " ")
	nodeState := strings.TrimSpace(node)
	list, _ := hostlist.Expand(strings.TrimSpace(nodes))
	switch {
	case jobState != "RUNNING":
		return true, "job " + s.job + " is " + cmp.Or(printableWord(jobState), "gone"), nil
	case !slices.Contains(list, s.node):
		return true, s.node + " is no longer in job " + s.job, nil
	case strings.HasPrefix(nodeState, "down") || strings.HasPrefix(nodeState, "fail") || strings.HasSuffix(nodeState, "*"):
		return true, s.node + " is " + printableWord(nodeState), nil
	}
	return false, "", nil
}

// printableWord is a word of Slurm's, bounded and without control bytes.
func printableWord(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x21 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// limitWriter keeps the first n bytes written to it.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(l.n, len(p))
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// loginError is an error of the way to the node through the login node.
func (s *Srun) loginError(ctx context.Context, cmd Cmd, err error) error {
	var cl *ConnectionLostError
	var te *TimeoutError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %s: %w", s.name, Shorten(cmd.Command, 120), ctx.Err())
	case s.closing.Err() != nil:
		return &ConnectionLostError{Node: s.name, Reason: Shorten(cmd.Command, 60) + ": closed by gpuaccept", Err: net.ErrClosed}
	case errors.As(err, &cl):
		return s.markLost("the login node "+s.logins.Name()+": "+cl.Reason, cl.Err)
	case errors.As(err, &te):
		return &TimeoutError{Node: s.name, Step: "through the login node " + s.logins.Name() + ": " + te.Step, After: te.After}
	}
	// Whatever else kept the command from the node on the way through the
	// login node (a redial that failed): the node is out of reach.
	return s.markLost("the login node "+s.logins.Name()+": "+trimNode(err, s.logins.Name()).Error(), err)
}

// stepLine is the login node's command: srun of the guarded command as
// one task on the node, sharing the allocation with the window's other
// steps (--overlap), quiet but for errors.
func (s *Srun) stepLine(cmd Cmd, grace time.Duration) string {
	// --propagate=NONE: the node's own limits, not the login session's
	// (a small memlock breaks NCCL); no MPI plugin for a command that is
	// no rank.
	// Without --quiet: srun's notes ("Job step creation temporarily
	// disabled, retrying") are what a step that did not start says, and
	// srunSplit keeps them out of the command's stderr.
	words := []string{"exec", "srun", "--jobid=" + s.job, "--overlap", "--nodelist=" + Quote(s.node),
		"--nodes=1", "--ntasks=1", "--job-name=gpuaccept-step", "--propagate=NONE", "--mpi=none"}
	for _, a := range s.args {
		words = append(words, Quote(a))
	}
	// The command sees the node as a login there would: without the
	// step's Slurm and PMI variables, which would make an MPI program
	// started alone on the node (the intra-node sweep) take itself for a
	// rank of srun's and fail in MPI_Init.
	words = append(words, "sh", "-c", Quote(`printf '%s\n' '`+stepStarted+`' >&2; exec "$@"`), "gpuaccept-step",
		"bash", "-c", Quote(stepClean), "gpuaccept-step", "bash")
	for _, a := range GuardArgs(cmd, s.lease, grace) {
		words = append(words, Quote(a))
	}
	return strings.Join(words, " ")
}

// stepClean runs its arguments without the variables srun gives a step.
// It starts in the user's home, as a login does (srun keeps the login
// node's directory, which the node may not have), and drops what belongs
// to the login node's session: its runtime and bus directories, its SSH
// connection and its TMPDIR.
const stepClean = `cd "$HOME" 2>/dev/null || cd /; for v in ${!SLURM@} ${!PMI@} ${!PMIX@} XDG_RUNTIME_DIR DBUS_SESSION_BUS_ADDRESS ` +
	`XDG_SESSION_ID SSH_CLIENT SSH_CONNECTION SSH_TTY TMPDIR; do unset "$v"; done; exec "$@"`

// Upload copies a local file to remotePath on the node, as UploadFrom.
func (s *Srun) Upload(ctx context.Context, local, remotePath string, o TransferOptions) (TransferResult, error) {
	return UploadLocalFile(ctx, s, local, remotePath, o)
}

// UploadFrom sends the bytes as a step's stdin; the node checks their size
// and sha256 before the file takes its place (UploadByCommand).
func (s *Srun) UploadFrom(ctx context.Context, src io.ReaderAt, size int64, remotePath string, o TransferOptions) (TransferResult, error) {
	if err := s.begin("upload " + remotePath); err != nil {
		return TransferResult{}, err
	}
	defer s.running.Done()
	return UploadByCommand(ctx, s, src, size, remotePath, o)
}

// srunSplit passes the command's stderr on and keeps Slurm's own lines
// apart: srun starts every message of its own with "srun: " and
// slurmstepd with its name, and the command under it is the window's,
// which runs no srun of its own on a node. Only the start of a line is
// held back, and only while it could still be Slurm's.
type srunSplit struct {
	// mu: the login node's session may end, past its grace, before its
	// output is copied to the end; a late Write then meets flush.
	mu      sync.Mutex
	cmd     io.Writer
	tail    *Tail
	srun    *srunLines
	pending []byte // the start of a line that may be srun's
	ours    bool   // the current line is srun's
	mid     bool   // inside a line that is the command's
}

// Slurm's own lines: srun's, and slurmstepd's that srun passes on
// ("slurmstepd-h2: error: *** STEP 12.3 ON h2 CANCELLED ... ***").
var slurmPrefixes = []string{srunPrefix, "slurmstepd: ", "slurmstepd-", stepStarted}

const srunPrefix = "srun: "

const (
	lineUndecided = iota
	lineSlurm
	lineCommand
)

// slurmLine says whose the line that starts with start is, if that is
// known yet.
func slurmLine(start []byte) int {
	if start[len(start)-1] == '\n' {
		return lineCommand
	}
	undecided := false
	for _, p := range slurmPrefixes {
		switch {
		case len(start) >= len(p) && string(start[:len(p)]) == p:
			return lineSlurm
		case len(start) < len(p) && p[:len(start)] == string(start):
			undecided = true
		}
	}
	if undecided {
		return lineUndecided
	}
	return lineCommand
}

func (w *srunSplit) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		switch {
		case w.mid:
			i := indexNL(p)
			w.pass(p[:i])
			w.mid = p[i-1] != '\n'
			p = p[i:]
		case w.ours:
			i := indexNL(p)
			if len(w.pending) < srunLineBytes {
				w.pending = append(w.pending, p[:min(i, srunLineBytes)]...)
			}
			if p[i-1] == '\n' {
				w.srun.add(string(w.pending))
				w.pending, w.ours = w.pending[:0], false
			}
			p = p[i:]
		default:
			// The start of a line: Slurm's if it begins with one of its
			// prefixes, held until that is known.
			b := p[0]
			p = p[1:]
			w.pending = append(w.pending, b)
			switch slurmLine(w.pending) {
			case lineSlurm:
				w.ours = true
			case lineCommand:
				w.pass(w.pending)
				w.mid = b != '\n'
				w.pending = w.pending[:0]
			}
		}
	}
	return n, nil
}

// indexNL is where the line in p ends, past its newline; len(p) if it
// does not.
func indexNL(p []byte) int {
	for i, b := range p {
		if b == '\n' {
			return i + 1
		}
	}
	return len(p)
}

func (w *srunSplit) pass(p []byte) {
	if len(p) == 0 {
		return
	}
	w.tail.Write(p)
	if w.cmd != nil {
		w.cmd.Write(p)
	}
}

// flush ends the stream: a line left unfinished is given to whoever it
// belongs to.
func (w *srunSplit) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ours {
		w.srun.add(string(w.pending))
	} else {
		w.pass(w.pending)
	}
	w.pending, w.ours, w.mid = nil, false, false
}

// srunLines are srun's own messages about one step, bounded; started is
// closed at the step's stepStarted line, which is not kept.
type srunLines struct {
	// mu: written by the stderr copy, read by the step's end, which a
	// session past its grace does not wait for.
	mu      sync.Mutex
	node    string
	lines   []string
	started chan struct{}
	// heard, when set, is told every line kept, as it comes.
	heard func(line string)
	// shared: the lines are a shared step's, whose reports of each
	// task's end (one per node) are not kept: they would push the lines
	// that matter out of the last srunKeep.
	shared bool
	// lostSaid is the first line that said a node left the job, abort
	// whether srun gave the step up: kept whatever lines follow.
	lostSaid string
	abort    bool
}

// srunKeep lines of srunLineBytes at most are kept.
const (
	srunKeep      = 16
	srunLineBytes = 512
)

func (s *srunLines) add(line string) {
	if heard := s.keep(line); heard != "" && s.heard != nil {
		s.heard(heard)
	}
}

// keep keeps line, and says it back when heard must be told of it.
func (s *srunLines) keep(line string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	line = strings.TrimRight(line, "\r\n")
	if line == stepStarted {
		if s.started != nil {
			select {
			case <-s.started:
			default:
				close(s.started)
			}
		}
		return ""
	}
	if len(line) > srunLineBytes {
		line = line[:srunLineBytes]
	}
	if s.lostSaid == "" {
		for _, m := range srunLostSays {
			if strings.Contains(line, m) {
				s.lostSaid = strings.TrimPrefix(strings.TrimPrefix(line, srunPrefix), "error: ")
				break
			}
		}
	}
	if strings.Contains(line, "aborting, io error") || strings.Contains(line, "Aborting, io error") {
		s.abort = true
	}
	if s.shared && taskEnded.MatchString(line) {
		// Not kept, but heard: a task that ended without its last frame
		// must stop holding the shared step's stream open.
		return line
	}
	if len(s.lines) == srunKeep {
		copy(s.lines, s.lines[1:])
		s.lines = s.lines[:srunKeep-1]
	}
	s.lines = append(s.lines, line)
	return line
}

// lost is the line in which srun says the node cannot be reached through
// the job any more (it failed, it left the job, the job ended); "" when
// none does.
func (s *srunLines) lost() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostSaid
}

// What srun (Slurm 20.11 to 25.05) says when a step cannot reach its
// node: the node failed under it, the step could not be made (the node
// left the job after a failure, the job ended), the job is gone.
var srunLostSays = []string{
	"Node failure on", "Unable to create step", "Unable to confirm allocation", "Invalid job id",
	"Job step aborted", "step creation disabled", "has expired",
}

// String is srun's lines worth an error's tail: its report of how the
// task ended ("srun: error: NODE: task 0: Exited with exit code 3") says
// nothing the exit status does not.
func (s *srunLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, l := range s.lines {
		if strings.HasPrefix(l, "srun: error: "+s.node+": task ") {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// trimNode drops the login node's name from its error, which the error
// of the node reached through it then carries after its own.
func trimNode(err error, name string) error {
	if s := err.Error(); strings.HasPrefix(s, name+": ") {
		return &prefixed{err: err, text: strings.TrimPrefix(s, name+": ")}
	}
	return err
}

type prefixed struct {
	err  error
	text string
}

func (p *prefixed) Error() string { return p.text }
func (p *prefixed) Unwrap() error { return p.err }
