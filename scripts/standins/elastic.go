package standins

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SimPython stands in for the Python that runs torch.distributed.run on
// the demo's nodes (phases.failure.python): `SimPython -m
// torch.distributed.run [torchrun options] ddp_train.py [its options]` is
// an elastic job whose every rank keeps ddp_train.py's log contract
// (GPUACCEPT start/step/checkpoint/error lines, with torchrun's --tee
// prefix), so that the failure test's own phase code (launch, kill,
// detect, relaunch, resume, clean up) runs on simulated nodes. It trains
// nothing. The launchers of one job meet in a directory beside its
// checkpoints (the demo's nodes share that filesystem): each beats a
// heartbeat file; the rendezvous node's launcher (--rdzv_endpoint's host)
// forms each round from the live ones and breaks it when one goes quiet,
// as a collective that times out would; the others follow its round file.
const SimPython = "gpuaccept-sim-python"

// SimSlowEnv makes one simulated node a straggler: its steps' compute
// part takes this many times the others' (a factor, "1.6"). The job's
// clock is shared, so the slowness shows in the node's compute= only;
// ddp_train.py's other figures are the job's.
const SimSlowEnv = "GPUACCEPT_STANDIN_SLOW"

// SimTorchVersion is what SimPython says its torch.__version__ is.
const SimTorchVersion = "0+gpuaccept.simulated"

const (
	elasticTick = 100 * time.Millisecond
	elasticJoin = 5 * time.Second // torchrun's last call: a round below max after this
	// elasticBeats bounds the heartbeats a second of one job, all its
	// launchers together: the demo's nodes share one machine, and 999
	// launchers beating at 10 Hz each (a file written, the round read, the
	// leader stating every heartbeat) kept its two cores busy, so that the
	// simulated nodes' SSH server went a minute without answering a
	// keepalive and the 1,000-node failure test lost a node nothing killed.
	elasticBeats = 1000
)

// elasticTiming is a job's tick, the quiet after which a launcher is gone,
// and the unchanged membership that forms a round: 100 ms, 1.5 s and 0.8 s
// up to 100 launchers (torchrun's own are seconds: keep_alive_interval 5 s,
// three missed), longer in proportion past that so that the job's
// heartbeats stay near elasticBeats a second.
func elasticTiming(launchers int) (tick, stale, settle time.Duration) {
	tick = max(elasticTick, time.Duration(launchers)*time.Second/elasticBeats)
	return tick, 15 * tick, 8 * tick
}

type elasticJob struct {
	node             string
	leader           bool
	minN, maxN       int
	procs            int
	maxRestarts      int
	dir, ckpt        string
	every            int
	steps            int     // --steps: the last step (0: run until stopped)
	batch            int     // --batch: samples a step
	slow             float64 // SimSlowEnv
	stepTime         time.Duration
	tick, stale      time.Duration
	settle           time.Duration
	out              io.Writer
	round            elasticRound
	broken           bool
	next, base, wrld int
}

type elasticRound struct {
	n       int
	members []string
	start   time.Time
	resume  int
	broken  bool
	failed  bool
}

func runElastic(args []string, e environ, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "-c" && (args[1] == "import torch" || args[1] == "import torch.distributed.run") {
		return 0 // the window asks whether the node's Python has torch (torchrun): it does
	}
	if len(args) == 2 && args[0] == "-c" && strings.Contains(args[1], "torch.__version__") {
		// The failure test asks the launcher's version first: say it is
		// no PyTorch at all.
		fmt.Fprintln(stdout, "torch "+SimTorchVersion)
		return 0
	}
	if len(args) < 2 || args[0] != "-m" || args[1] != "torch.distributed.run" {
		fmt.Fprintf(stderr, "%s: %s %s is not simulated (only -m torch.distributed.run)\n", modelLabel, SimPython, strings.Join(args, " "))
		return ExitNotSimulated
	}
	j := &elasticJob{minN: 1, maxN: 1, procs: 1, every: 5, batch: 32, slow: 1, stepTime: 500 * time.Millisecond, out: stdout}
	var rdzvHost, rdzvID string
	script := false
	for i := 2; i < len(args); i++ {
		a := args[i]
		k, v, _ := strings.Cut(a, "=")
		switch {
		case !script && k == "--nnodes":
			lo, hi, ok := strings.Cut(v, ":")
			j.minN, _ = strconv.Atoi(lo)
			j.maxN = j.minN
			if ok {
				j.maxN, _ = strconv.Atoi(hi)
			}
		case !script && k == "--nproc_per_node":
			j.procs, _ = strconv.Atoi(v)
		case !script && k == "--rdzv_endpoint":
			rdzvHost, _, _ = strings.Cut(v, ":")
		case !script && k == "--rdzv_id":
			rdzvID = v
		case !script && k == "--max_restarts":
			j.maxRestarts, _ = strconv.Atoi(v)
		case !script && strings.HasPrefix(a, "--"):
		case !script:
			script = true // ddp_train.py; its options follow
		case k == "--ckpt-dir" && i+1 < len(args):
			j.ckpt = args[i+1]
			i++
		case k == "--ckpt-every":
			j.every, _ = strconv.Atoi(v)
		case k == "--steps":
			j.steps, _ = strconv.Atoi(v)
		case k == "--batch":
			j.batch, _ = strconv.Atoi(v)
		case k == "--step-time":
			if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
				j.stepTime = time.Duration(s * float64(time.Second))
			}
		}
	}
	j.node, _ = e.get("GPUACCEPT_NODE")
	if v, ok := e.get(SimSlowEnv); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 1 && f <= 100 {
			j.slow = f
		}
	}
	switch {
	case !script || j.ckpt == "" || j.node == "" || rdzvID == "" || j.minN < 1 || j.maxN < j.minN || j.procs < 1 || j.every < 0 || j.steps < 0:
		fmt.Fprintf(stderr, "%s: %s: not the failure test's launch (a script, --ckpt-dir, GPUACCEPT_NODE, --rdzv_id, --nnodes)\n", modelLabel, SimPython)
		return ExitNotSimulated
	case strings.ContainsAny(rdzvID, "/\x00") || strings.ContainsAny(j.node, "/\x00"):
		fmt.Fprintf(stderr, "%s: %s: a rendezvous ID or node name with a slash\n", modelLabel, SimPython)
		return 2
	}
	j.leader = j.node == rdzvHost
	j.tick, j.stale, j.settle = elasticTiming(j.maxN)
	j.dir = filepath.Join(filepath.Dir(filepath.Clean(j.ckpt)), "rdzv-"+rdzvID)
	for _, d := range []string{j.dir, j.ckpt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", SimPython, err)
			return 1
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	return j.loop(stop)
}

func (j *elasticJob) loop(stop <-chan os.Signal) int {
	tick := time.NewTicker(j.tick)
	defer tick.Stop()
	began := time.Now()
	var seen []string
	seenSince := time.Now()
	for {
		select {
		case <-stop:
			return 143
		case <-tick.C:
		}
		now := time.Now()
		os.WriteFile(filepath.Join(j.dir, j.node+".alive"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		var beats map[string]time.Time
		if j.leader {
			var live []string
			live, beats = j.live(now)
			if !slices.Equal(live, seen) {
				seen, seenSince = live, now
			}
			j.lead(now, live, now.Sub(seenSince) >= j.settle, now.Sub(began) >= elasticJoin)
		}
		r, ok := readRound(filepath.Join(j.dir, "round"))
		if !ok {
			continue
		}
		if j.leader {
			j.hear(r, beats)
		}
		if r.failed {
			return 1
		}
		if r.n != j.round.n {
			j.join(r, now)
		}
		if r.n == j.round.n && r.broken && !j.broken {
			j.broken = true
			for l := range j.procs {
				j.logf(l, "error", "step=%d msg=collective timed out: a member of round %d stopped answering (simulated)", j.next-1, r.n)
			}
		}
		j.stepHeard(now)
		if j.steps > 0 && j.next > j.steps {
			// Done: the rendezvous node stays until every member is, as
			// torchrun's exit barrier does (its round is the others' clock).
			writeAtomic(filepath.Join(j.dir, j.node+".done"), "")
			if !j.leader || j.allDone() || now.Sub(began) > time.Duration(j.steps+100)*j.stepTime {
				return 0
			}
		}
	}
}

// allDone: every member of the round has run its last step.
func (j *elasticJob) allDone() bool {
	for _, m := range j.round.members {
		if _, err := os.Stat(filepath.Join(j.dir, m+".done")); err != nil {
			return false
		}
	}
	return true
}

// stepHeard steps up to now or to what every member of the round is
// known to have lived to, whichever is earlier.
func (j *elasticJob) stepHeard(now time.Time) {
	if heard := readHeard(j.dir, j.round.n); heard.Before(now) {
		now = heard
	}
	j.step(now)
}

// live is every launcher of the job whose heartbeat is fresh, and every
// launcher's last heartbeat.
func (j *elasticJob) live(now time.Time) ([]string, map[string]time.Time) {
	ents, _ := os.ReadDir(j.dir)
	var out []string
	beats := map[string]time.Time{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".alive")
		if !ok {
			continue
		}
		if fi, err := e.Info(); err == nil {
			beats[name] = fi.ModTime()
			_, err := os.Stat(filepath.Join(j.dir, name+".done"))
			// A launcher done with its steps is gone, not lost.
			if now.Sub(fi.ModTime()) < j.stale || err == nil {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out, beats
}

// hear publishes the moment up to which every member of the round is known
// to have been alive, its oldest heartbeat: a step due later is not logged
// until it moves on. A real job's collective blocks the moment a member
// dies; without this the survivors went on stepping until the member was
// stale (15 s at 1,000 launchers), and the steps the figures count as lost
// grew with the timing, not with the checkpoint interval.
func (j *elasticJob) hear(cur elasticRound, beats map[string]time.Time) {
	var heard time.Time
	for _, m := range cur.members {
		b, ok := beats[m]
		if !ok {
			return // a member that never beat: nothing is known of it
		}
		if heard.IsZero() || b.Before(heard) {
			heard = b
		}
	}
	writeAtomic(filepath.Join(j.dir, "heard"), fmt.Sprintf("%d %d\n", cur.n, heard.UnixNano()))
}

// readHeard is the moment hear published for round (the zero time when
// none: no step is due).
func readHeard(dir string, round int) time.Time {
	b, err := os.ReadFile(filepath.Join(dir, "heard"))
	if err != nil {
		return time.Time{}
	}
	var n int
	var at int64
	if _, err := fmt.Sscanf(string(b), "%d %d", &n, &at); err != nil || n != round {
		return time.Time{}
	}
	return time.Unix(0, at)
}

// lead is the rendezvous node's part: break a round a member left, form
// one from the live launchers once they are settled.
func (j *elasticJob) lead(now time.Time, live []string, settled, lastCall bool) {
	cur, ok := readRound(filepath.Join(j.dir, "round"))
	if ok && !cur.broken && !slices.Equal(cur.members, live) {
		for _, m := range cur.members {
			if !slices.Contains(live, m) {
				cur.broken = true
				writeRound(j.dir, cur)
				return
			}
		}
	}
	if ok && slices.Equal(cur.members, live) && !cur.broken {
		return
	}
	if !settled || len(live) < j.minN || (!ok && len(live) < j.maxN && !lastCall) {
		return
	}
	next := elasticRound{n: cur.n + 1, members: live, start: now.Add(3 * j.tick), resume: latestCheckpoint(j.ckpt)}
	if next.n-1 > j.maxRestarts {
		next.failed = true
	}
	if len(live) > j.maxN {
		next.members = live[:j.maxN]
	}
	writeRound(j.dir, next)
}

// join starts this launcher's workers in round r, when it is a member.
func (j *elasticJob) join(r elasticRound, now time.Time) {
	i := slices.Index(r.members, j.node)
	if i < 0 {
		return
	}
	j.round, j.broken = r, r.broken
	j.base, j.wrld, j.next = i*j.procs, len(r.members)*j.procs, r.resume+1
	for l := range j.procs {
		j.logf(l, "start", "world=%d restart=%d resume_step=%d", j.wrld, r.n-1, r.resume)
	}
}

// step logs every step whose time has come, all members on one clock;
// rank 0 checkpoints every few.
func (j *elasticJob) step(now time.Time) {
	if j.round.n == 0 || j.broken {
		return
	}
	for !now.Before(j.round.start.Add(time.Duration(j.next-j.round.resume) * j.stepTime)) {
		if j.steps > 0 && j.next > j.steps {
			return
		}
		// ddp_train.py's split of a step: compute, then the all-reduce's
		// wait for the slowest (a straggler's compute takes its factor).
		st := j.stepTime.Seconds()
		compute := min(0.6*st*j.slow, st)
		for l := range j.procs {
			j.logf(l, "step", "world=%d step=%d step_time=%.6f compute=%.6f wait=%.6f samples=%d", j.wrld, j.next, st, compute, st-compute, j.batch)
		}
		if j.base == 0 && j.every > 0 && j.next%j.every == 0 {
			writeAtomic(filepath.Join(j.ckpt, "latest"), strconv.Itoa(j.next))
			j.logf(0, "checkpoint", "step=%d", j.next)
		}
		j.next++
	}
}

// logf prints one line of local rank l as ddp_train.py does, with the
// prefix torchrun's --tee gives each worker's output.
func (j *elasticJob) logf(l int, kind, format string, args ...any) {
	t := float64(time.Now().UnixMilli()) / 1000
	fmt.Fprintf(j.out, "[default%d]:GPUACCEPT %s t=%.3f node=%s rank=%d %s\n", l, kind, t, j.node, j.base+l, fmt.Sprintf(format, args...))
}

func latestCheckpoint(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "latest"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// The round file: "ROUND START_UNIX_NANO RESUME broken|ok|failed MEMBER,...".
func readRound(path string) (elasticRound, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return elasticRound{}, false
	}
	f := strings.Fields(string(b))
	if len(f) != 5 {
		return elasticRound{}, false
	}
	n, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseInt(f[1], 10, 64)
	resume, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return elasticRound{}, false
	}
	return elasticRound{n: n, start: time.Unix(0, start), resume: resume, broken: f[3] == "broken", failed: f[3] == "failed",
		members: strings.Split(f[4], ",")}, true
}

func writeRound(dir string, r elasticRound) {
	state := "ok"
	switch {
	case r.failed:
		state = "failed"
	case r.broken:
		state = "broken"
	}
	writeAtomic(filepath.Join(dir, "round"), fmt.Sprintf("%d %d %d %s %s\n", r.n, r.start.UnixNano(), r.resume, state, strings.Join(r.members, ",")))
}

func writeAtomic(path, body string) {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if os.WriteFile(tmp, []byte(body), 0o644) == nil {
		os.Rename(tmp, path)
	}
}
