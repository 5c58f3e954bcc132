// Package slurm holds a window's own Slurm allocation: it asks for it on
// the login node (salloc --no-shell), reads its nodes as Slurm knows them
// (scontrol), finds it again after the coordinator was lost, and gives it
// back (scancel). It reaches the cluster only through the login node's
// executor, as any node's commands travel.
package slurm

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/remote"
)

// Login is where Slurm's commands run: the login node's executor.
type Login interface {
	Name() string
	Run(ctx context.Context, cmd remote.Cmd) error
}

// Spec is the allocation a window asks for (the inventory's
// slurm.allocate).
type Spec struct {
	Name      string // the job's name: the window's (gpuaccept-<run id>)
	Partition string
	Account   string
	QOS       string
	// Nodes is how many; NodeList which (a Slurm hostlist). One of them.
	Nodes     int
	NodeList  string
	Exclusive bool
	GRES      string // --gres, e.g. gpu:8
	// Constraint is --constraint: the node features wanted (h100&ib).
	Constraint string
	// Time is the job's time limit: the window's bound. Slurm counts
	// minutes; a part of one is a whole.
	Time  time.Duration
	Extra []string
}

// Args are salloc's arguments for s.
func (s Spec) Args() []string {
	// --no-kill: a node that fails (the failure test's victim, a GPU that
	// falls off the bus) leaves the job, which goes on over the others.
	args := []string{"--no-shell", "--wait-all-nodes=1", "--no-kill", "--job-name=" + s.Name}
	for _, kv := range [][2]string{{"--partition=", s.Partition}, {"--account=", s.Account}, {"--qos=", s.QOS}, {"--gres=", s.GRES}, {"--constraint=", s.Constraint}} {
		if kv[1] != "" {
			args = append(args, kv[0]+kv[1])
		}
	}
	switch {
	case s.NodeList != "":
		args = append(args, "--nodelist="+s.NodeList)
		if n, err := hostlist.Expand(s.NodeList); err == nil {
			args = append(args, fmt.Sprintf("--nodes=%d", len(n)))
		}
	case s.Nodes > 0:
		args = append(args, fmt.Sprintf("--nodes=%d", s.Nodes))
	}
	if s.Exclusive {
		args = append(args, "--exclusive")
	}
	if m := s.Minutes(); m > 0 {
		args = append(args, fmt.Sprintf("--time=%d", m))
	}
	return append(args, s.Extra...)
}

// Command is the salloc line the login node runs (and `check` shows).
func (s Spec) Command() string {
	words := []string{"salloc"}
	for _, a := range s.Args() {
		words = append(words, remote.Quote(a))
	}
	return strings.Join(words, " ")
}

// Allocation is a job the window holds, as Slurm describes it.
type Allocation struct {
	JobID    string `json:"job_id"`
	State    string `json:"state"`
	NodeList string `json:"nodelist"`
	// Nodes are the allocation's nodes in Slurm's order.
	Nodes []Node `json:"nodes"`
}

// Node is one node of the allocation, as scontrol shows it.
type Node struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"` // NodeAddr: where its slurmd is reached
	HostName string `json:"hostname,omitempty"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	GRES     string `json:"gres,omitempty"`
	Features string `json:"features,omitempty"`
}

// NotGranted is an allocation Slurm did not give within the time the
// window waits: the job is cancelled, and Reason is squeue's (Resources,
// Priority, ReqNodeNotAvail, ...).
type NotGranted struct {
	JobID  string
	Reason string
	Within time.Duration
}

func (e *NotGranted) Error() string {
	why := e.Reason
	if why == "" {
		why = "no reason given"
	}
	return fmt.Sprintf("slurm: job %s not allocated within %s (squeue's reason: %s); cancelled", e.JobID, e.Within, why)
}

// outputCap bounds what a Slurm command's output the coordinator keeps: a
// node's record is about 1.5 KB, so 16 MiB holds 10,000 nodes.
const outputCap = 16 << 20

// Allocate asks for s on the login node and waits up to within for it.
// jobID hears the job's ID as soon as Slurm names it (journal it: a
// coordinator lost while it waits can then cancel or keep the job). An
// allocation not granted in time is a *NotGranted, its job cancelled; a
// job salloc never named (a quiet wrapper, a cut connection) is found by
// its name and cancelled, so that none is left holding nodes.
func Allocate(ctx context.Context, login Login, s Spec, within time.Duration, jobID func(string)) (Allocation, error) {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var mu sync.Mutex
	id, other := "", ""
	lines := &lineWriter{each: func(line string) {
		got, _ := parse.SallocJob(line)
		if got == "" {
			return
		}
		mu.Lock()
		first := id == ""
		switch {
		case first:
			id = got
		case got != id:
			other = got
		}
		mu.Unlock()
		if first && jobID != nil {
			jobID(got)
		}
	}}
	// Ask for the reason while salloc still waits: once it is killed,
	// the job is revoked and squeue no longer knows it.
	reason := make(chan string, 1)
	go func() {
		select {
		case <-wctx.Done():
		case <-time.After(max(within-10*time.Second, within*8/10)):
			mu.Lock()
			j := id
			mu.Unlock()
			if j != "" {
				r, _ := squeueReason(ctx, login, j)
				reason <- r
			}
		}
	}()
	// --wait-all-nodes (Args): salloc returns once the nodes are ready
	// to run (booted, their prolog done), not while the job configures.
	err := login.Run(wctx, remote.Cmd{Command: s.Command(), Stderr: lines})
	lines.Flush()
	mu.Lock()
	j, o := id, other
	mu.Unlock()
	giveBack := func() {
		bctx := context.WithoutCancel(ctx)
		if j != "" {
			// Revoked already when salloc was killed; said again, so that
			// nothing of the window is left queued.
			_ = Cancel(bctx, login, j)
		}
		_ = CancelByName(bctx, login, s.Name)
	}
	if o != "" {
		giveBack()
		return Allocation{}, fmt.Errorf("%s: salloc named two jobs, %s and %s: both given back", login.Name(), j, o)
	}
	if err != nil {
		giveBack()
		if wctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			ng := &NotGranted{JobID: j, Within: within}
			select {
			case ng.Reason = <-reason:
			case <-time.After(2 * time.Second):
			}
			if j == "" {
				return Allocation{}, fmt.Errorf("%s: salloc named no job within %s: %w", login.Name(), within, err)
			}
			return Allocation{}, ng
		}
		return Allocation{}, fmt.Errorf("%s: salloc: %s: %w", login.Name(), Printable(lines.Tail(), 400), err)
	}
	if j == "" {
		giveBack()
		return Allocation{}, fmt.Errorf("%s: salloc ended without naming its job (%s); any job named %s given back",
			login.Name(), Printable(lines.Tail(), 400), s.Name)
	}
	a, err := Find(ctx, login, j, s.Name)
	if err != nil {
		giveBack()
		return a, err
	}
	if want := s.Count(); want > 0 && len(a.Nodes) != want {
		giveBack()
		return a, fmt.Errorf("%s: slurm job %s holds %d node(s) (%s), not the %d asked for: given back", login.Name(), j, len(a.Nodes), a.NodeList, want)
	}
	return a, nil
}

// Minutes is the job's time limit as salloc is given it: Slurm's whole
// minutes (0: none asked).
func (s Spec) Minutes() int { return int(math.Ceil(s.Time.Minutes())) }

// Count is how many nodes s asks for (0: not known).
func (s Spec) Count() int {
	if s.NodeList != "" {
		n, err := hostlist.Expand(s.NodeList)
		if err != nil {
			return 0
		}
		return len(n)
	}
	return s.Nodes
}

// CancelByName gives back every job of the login user named name: a job
// whose ID the window never heard.
func CancelByName(ctx context.Context, login Login, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := output(ctx, login, "scancel --name="+remote.Quote(name)+` --user="$(id -un)"`)
	return err
}

// Find is the allocation of job id as Slurm holds it now, with its
// nodes; an error when the job is not the window's (its name is not
// name: a journal's stale ID after Slurm's IDs started over), or not
// running (ended, cancelled, never known).
func Find(ctx context.Context, login Login, id, name string) (Allocation, error) {
	if !validJobID(id) {
		return Allocation{}, fmt.Errorf("slurm: %q is no job ID", id)
	}
	out, err := output(ctx, login, "scontrol show job -o "+id)
	if err != nil {
		return Allocation{}, fmt.Errorf("%s: scontrol show job %s: %w", login.Name(), id, err)
	}
	rec := parse.ScontrolRecord(lineWith(out, "JobId="+id+" "))
	if rec["JobId"] != id {
		return Allocation{}, fmt.Errorf("%s: scontrol show job %s: no such job in what it printed", login.Name(), id)
	}
	if got := rec["JobName"]; name != "" && got != name {
		return Allocation{}, fmt.Errorf("%s: slurm job %s is %q, not the window's %q", login.Name(), id, Printable(got, 80), name)
	}
	a := Allocation{JobID: id, State: Printable(rec["JobState"], 40), NodeList: rec["NodeList"]}
	if a.State != "RUNNING" {
		return a, &NotRunning{JobID: id, State: a.State, Reason: Printable(rec["Reason"], 100)}
	}
	names, err := hostlist.Expand(a.NodeList)
	if err != nil || len(names) == 0 {
		return a, fmt.Errorf("%s: slurm job %s: node list %q: %v", login.Name(), id, Printable(a.NodeList, 200), err)
	}
	nodes, err := Describe(ctx, login, a.NodeList)
	if err != nil {
		return a, err
	}
	by := map[string]Node{}
	for _, n := range nodes {
		by[n.Name] = n
	}
	addrs := map[string]string{}
	for _, name := range names {
		n, ok := by[name]
		if !ok {
			return a, fmt.Errorf("%s: slurm job %s: scontrol shows no node %s", login.Name(), id, Printable(name, 80))
		}
		if !nodeName.MatchString(n.Name) || n.Addr != "" && !nodeAddr.MatchString(n.Addr) {
			return a, fmt.Errorf("%s: slurm job %s: node %q at %q is no name and address a window can use", login.Name(), id,
				Printable(n.Name, 80), Printable(n.Addr, 80))
		}
		addr := cmp.Or(n.Addr, n.Name)
		if prev, dup := addrs[addr]; dup {
			return a, fmt.Errorf("%s: slurm job %s: nodes %s and %s share the address %s", login.Name(), id, prev, n.Name, addr)
		}
		addrs[addr] = n.Name
		a.Nodes = append(a.Nodes, n)
	}
	return a, nil
}

// NotRunning is a job Slurm knows that is not running (pending, still
// configuring, ended).
type NotRunning struct{ JobID, State, Reason string }

func (e *NotRunning) Error() string {
	return fmt.Sprintf("slurm job %s is %s (reason %s), not running", e.JobID, e.State, e.Reason)
}

// Ended says whether the job is over (Slurm gives nothing back for it).
func (e *NotRunning) Ended() bool {
	switch e.State {
	case "PENDING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "STOPPED", "SIGNALING":
		return false
	}
	return true
}

// A node's name and address as a window uses them: in paths of the run
// directory, in collectives' command lines, in SSH's jump chain.
var (
	nodeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	nodeAddr = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}$`)
)

// lineWith is the first line of s holding prefix at its start (a login
// shell's greeting may come first), else s's first line.
func lineWith(s, prefix string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line)+" ", prefix) {
			return line
		}
	}
	return firstLine(s)
}

// Describe is each node of list (a Slurm hostlist) as scontrol shows it;
// every node of the cluster for list "", those of hidden partitions too
// (-a: rented nodes are often a partition of their own, hidden from
// others).
func Describe(ctx context.Context, login Login, list string) ([]Node, error) {
	cmd := "scontrol -a show node -o"
	if list != "" {
		cmd = "scontrol show node -o " + remote.Quote(list)
	}
	out, err := output(ctx, login, cmd)
	if err != nil {
		return nil, err // output's error names the login node and the command
	}
	var nodes []Node
	for _, r := range parse.ScontrolRecords(out, "Reason") {
		f := func(k string, n int) string { return Printable(null(r[k]), n) }
		n := Node{Name: f("NodeName", 100), Addr: f("NodeAddr", 100), HostName: f("NodeHostName", 100), State: f("State", 100),
			Reason: f("Reason", 200), GRES: f("Gres", 200), Features: f("ActiveFeatures", 200)}
		if n.Name != "" {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// Cancel gives job id back and waits (bounded) until squeue no longer
// lists it: nothing of the window outlives its allocation.
func Cancel(ctx context.Context, login Login, id string) error {
	if !validJobID(id) {
		return fmt.Errorf("slurm: %q is no job ID", id)
	}
	ctx, cancel := context.WithTimeout(ctx, cancelWithin)
	defer cancel()
	if _, err := output(ctx, login, "scancel "+id); err != nil {
		return fmt.Errorf("%s: scancel %s: %w", login.Name(), id, err)
	}
	for {
		out, err := output(ctx, login, "squeue -h -j "+id+" -o %T 2>/dev/null || true")
		if err == nil && !listsState(out) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: slurm job %s still listed (%s) %s after scancel", login.Name(), id, Printable(strings.TrimSpace(out), 60), cancelWithin)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// listsState says whether squeue's output holds a job's state (a word in
// capitals: RUNNING, COMPLETING): a login shell's greeting is none.
func listsState(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if jobState.MatchString(strings.TrimSpace(line)) {
			return true
		}
	}
	return false
}

var jobState = regexp.MustCompile(`^[A-Z][A-Z_]{3,20}$`)

// cancelWithin bounds a cancel: Slurm's KillWait (30 s by default) and
// the epilog.
const cancelWithin = 2 * time.Minute

// squeueReason is why job id still waits, as squeue says it.
func squeueReason(ctx context.Context, login Login, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := output(ctx, login, "squeue -h -j "+id+" -o %r")
	return Printable(strings.TrimSpace(firstLine(out)), 200), err
}

// Printable is s without control characters, at most n bytes: a login
// node's words go into the evidence and onto the buyer's terminal.
func Printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}

func output(ctx context.Context, login Login, command string) (string, error) {
	var b capWriter
	err := login.Run(ctx, remote.Cmd{Command: command, Stdout: &b})
	return b.String(), err
}

func validJobID(id string) bool {
	if id == "" || len(id) > 12 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// null is "" for Slurm's "(null)".
func null(s string) string {
	if s == "(null)" {
		return ""
	}
	return s
}

// capWriter keeps the first outputCap bytes.
type capWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := outputCap - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// lineWriter hands each line salloc writes to each, and keeps the last
// few for an error.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	tail []string
	each func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			if len(w.buf) > 4<<10 {
				w.line(string(w.buf))
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) line(l string) {
	l = strings.TrimRight(l, "\r")
	w.tail = append(w.tail, l)
	if len(w.tail) > 4 {
		w.tail = w.tail[1:]
	}
	w.each(l)
}

// Flush hands over a last line without its newline.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

// Tail is the last lines, in one.
func (w *lineWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, "; ")
}

var _ io.Writer = (*lineWriter)(nil)

// TestOnly asks the login node's Slurm whether it would grant s, without
// submitting anything (sbatch --test-only): the partition, account, QoS,
// GRES and node count are checked against the cluster, and Slurm says
// when and where the job would start. The answer is sbatch's own line;
// a request Slurm refuses is an error with its reason.
func TestOnly(ctx context.Context, login Login, s Spec) (string, error) {
	words := []string{"sbatch", "--test-only"}
	for _, a := range s.Args() {
		if a != "--no-shell" {
			words = append(words, remote.Quote(a))
		}
	}
	var out capWriter
	// sbatch answers on stderr, refusals too: both are the answer.
	err := login.Run(ctx, remote.Cmd{Command: strings.Join(words, " ") + " --wrap=true 2>&1", Stdout: &out})
	said := lastSlurmLine(out.String())
	if err != nil {
		if said == "" {
			return "", fmt.Errorf("%s: sbatch --test-only: %w", login.Name(), err)
		}
		return "", fmt.Errorf("%s: Slurm would not grant the allocation: %s", login.Name(), said)
	}
	if said == "" {
		return "", fmt.Errorf("%s: sbatch --test-only said nothing", login.Name())
	}
	return said, nil
}

// lastSlurmLine is what sbatch and the controller said (at most three
// lines, joined), printable and bounded: a login shell's greeting may come
// first.
func lastSlurmLine(out string) string {
	var said []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "sbatch:") || strings.HasPrefix(l, "allocation failure:") {
			said = append(said, l)
		}
	}
	if len(said) > 3 {
		said = said[len(said)-3:]
	}
	return Printable(strings.Join(said, "; "), 400)
}
