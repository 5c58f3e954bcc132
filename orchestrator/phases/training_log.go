package phases

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator/redact"
)

// The training job's log, as it reaches the coordinator. Two readers of a
// step line: ddp_train.py's log contract ("GPUACCEPT step ... step=S
// step_time=SECS compute=SECS wait=SECS samples=N [tokens=N]
// [mem_peak_mib=MIB mem_total_mib=MIB]", see scripts/ddp_train.py), and
// for a command of the buyer's own phases.workload.training.step_pattern,
// a regexp with the named groups step and any of step_time (seconds),
// samples, tokens (per step, the worker's own). Each worker's lines are a
// stream of their own (rank= of the contract, else torchrun's
// "[default<local rank>]:" prefix); a stream's first warm-up step lines
// are left out of the steady figures; a step line without its step_time
// gets the time since the stream's previous step line at the coordinator
// (divided by the steps between, for a log that says every tenth).

// stepPattern is a compiled phases.workload.training.step_pattern.
type stepPattern struct {
	re                              *regexp.Regexp
	step, stepTime, samples, tokens int
}

// compileStepPattern reads the inventory's pattern (the inventory has
// checked it).
func compileStepPattern(s string) (*stepPattern, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, fmt.Errorf("phases.workload.training.step_pattern: %w", err)
	}
	return &stepPattern{re: re, step: re.SubexpIndex("step"), stepTime: re.SubexpIndex("step_time"),
		samples: re.SubexpIndex("samples"), tokens: re.SubexpIndex("tokens")}, nil
}

// stepRec is one step line; a figure the line does not give is NaN.
type stepRec struct {
	at                      float64 // seconds since the job was launched
	step                    int
	stepTime, compute, wait float64
	samples, tokens         float64
	memPeakMiB, memTotalMiB float64
}

func newStepRec(at float64, step int) stepRec {
	n := math.NaN()
	return stepRec{at: at, step: step, stepTime: n, compute: n, wait: n, samples: n, tokens: n, memPeakMiB: n, memTotalMiB: n}
}

// Bounds on what a node's log may make the coordinator hold.
const (
	maxStreams    = 1024    // workers a node
	maxStepsKept  = 100_000 // step lines a worker
	maxStepNumber = 1 << 40
)

// trainingLog collects one run of the job from every node's streams.
type trainingLog struct {
	mu      sync.Mutex
	start   time.Time
	pattern *stepPattern
	warmup  int
	notify  chan struct{}
	nodes   map[string]*nodeLog
	order   []string
}

// nodeLog is what one node's launcher and workers said, as times since
// the job was launched.
type nodeLog struct {
	launched, firstLine, rendezvous, started float64 // NaN until seen
	inImage                                  bool
	streams                                  map[string][]stepRec
	contractErrors, tracebacks, restarts     int
	errorLines                               []string
}

func newTrainingLog(start time.Time, pattern *stepPattern, warmup int) *trainingLog {
	return &trainingLog{start: start, pattern: pattern, warmup: warmup, notify: make(chan struct{}), nodes: map[string]*nodeLog{}}
}

func (l *trainingLog) node(name string) *nodeLog {
	n := l.nodes[name]
	if n == nil {
		nan := math.NaN()
		n = &nodeLog{launched: nan, firstLine: nan, rendezvous: nan, started: nan, streams: map[string][]stepRec{}}
		l.nodes[name] = n
		l.order = append(l.order, name)
	}
	return n
}

// launched notes when node's launcher was started, and whether in a
// container.
func (l *trainingLog) launched(node string, inImage bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.node(node)
	n.launched, n.inImage = time.Since(l.start).Seconds(), inImage
}

func (l *trainingLog) out(node, line string, at time.Time) { l.add(node, line, at) }
func (l *trainingLog) err(node, line string, at time.Time) { l.add(node, line, at) }

// poke wakes the waiters without a line (a launcher ended).
func (l *trainingLog) poke() {
	l.mu.Lock()
	close(l.notify)
	l.notify = make(chan struct{})
	l.mu.Unlock()
}

// next is closed at the next line or launcher's end.
func (l *trainingLog) next() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.notify
}

var (
	// torchrun's --tee prefix of a worker's line: "[default0]:" (1.13 to
	// 2.x), "[rank0]:" where ranks are logged.
	teePrefix = regexp.MustCompile(`^\[(?:default|rank)(\d{1,6})\]:`)
)

// add reads one line of node's launcher output (stdout or stderr).
func (l *trainingLog) add(node, line string, at time.Time) {
	t := at.Sub(l.start).Seconds()
	l.mu.Lock()
	defer func() {
		close(l.notify)
		l.notify = make(chan struct{})
		l.mu.Unlock()
	}()
	n := l.node(node)
	if math.IsNaN(n.firstLine) {
		n.firstLine = t
	}
	// torch.distributed.elastic's agent, once its rendezvous formed.
	if math.IsNaN(n.rendezvous) && strings.Contains(line, "Rendezvous complete for workers") {
		n.rendezvous = t
	}
	if strings.Contains(line, "will restart worker group") {
		n.restarts++
	}
	if strings.Contains(line, "Traceback (most recent call last)") {
		n.tracebacks++
		n.noteError(line)
	}
	if i := strings.Index(line, "GPUACCEPT "); i >= 0 {
		if l.contract(n, line[i+len("GPUACCEPT "):], t) {
			return
		}
	}
	if l.pattern == nil {
		return
	}
	m := l.pattern.re.FindStringSubmatch(line)
	if m == nil {
		return
	}
	step, err := strconv.Atoi(m[l.pattern.step])
	if err != nil || step < 0 || step > maxStepNumber {
		return
	}
	r := newStepRec(t, step)
	group := func(i int) float64 {
		if i < 0 || m[i] == "" {
			return math.NaN()
		}
		return figure(m[i])
	}
	r.stepTime, r.samples, r.tokens = group(l.pattern.stepTime), group(l.pattern.samples), group(l.pattern.tokens)
	stream := "0"
	if p := teePrefix.FindStringSubmatch(line); p != nil {
		stream = p[1]
	}
	n.addStep(stream, r)
}

// contract reads a ddp_train.py line (after "GPUACCEPT "); false when it
// is no line of the contract.
func (l *trainingLog) contract(n *nodeLog, rest string, t float64) bool {
	kind, kv, _ := strings.Cut(rest, " ")
	msg := ""
	if j := strings.Index(kv, "msg="); j >= 0 {
		kv, msg = kv[:j], kv[j+len("msg="):]
	}
	vals := map[string]string{}
	for _, f := range strings.Fields(kv) {
		if k, v, ok := strings.Cut(f, "="); ok {
			vals[k] = v
		}
	}
	switch kind {
	case "start":
		if math.IsNaN(n.started) {
			n.started = t
		}
		if r, err := strconv.Atoi(vals["restart"]); err == nil && r > n.restarts && r < 1<<20 {
			n.restarts = r
		}
	case "error":
		n.contractErrors++
		n.noteError("error: " + msg)
	case "step":
		step, err := strconv.Atoi(vals["step"])
		if err != nil || step < 0 || step > maxStepNumber {
			return true
		}
		r := newStepRec(t, step)
		get := func(k string) float64 {
			if v, ok := vals[k]; ok {
				return figure(v)
			}
			return math.NaN()
		}
		r.stepTime, r.compute, r.wait = get("step_time"), get("compute"), get("wait")
		r.samples, r.tokens = get("samples"), get("tokens")
		r.memPeakMiB, r.memTotalMiB = get("mem_peak_mib"), get("mem_total_mib")
		n.addStep("rank "+vals["rank"], r)
	case "checkpoint":
	default:
		return false
	}
	return true
}

// figure is a non-negative finite number, else NaN.
func figure(s string) float64 {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return math.NaN()
	}
	return x
}

func (n *nodeLog) addStep(stream string, r stepRec) {
	recs, ok := n.streams[stream]
	if !ok && len(n.streams) >= maxStreams {
		return
	}
	if len(recs) >= maxStepsKept {
		return
	}
	n.streams[stream] = append(recs, r)
}

func (n *nodeLog) noteError(line string) {
	if len(n.errorLines) < maxErrorLines {
		n.errorLines = append(n.errorLines, clip(redact.Shown(strings.TrimSpace(line)), 200))
	}
}

// steadyFor is how long every node has logged steady steps: from the
// moment the last of them logged its first steady step; 0 before.
func (l *trainingLog) steadyFor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	latest := 0.0
	for _, name := range l.order {
		n := l.nodes[name]
		first := math.NaN()
		for _, recs := range n.streams {
			if len(recs) > l.warmup {
				if at := recs[l.warmup].at; math.IsNaN(first) || at < first {
					first = at
				}
			}
		}
		if math.IsNaN(first) {
			return 0
		}
		latest = max(latest, first)
	}
	if len(l.order) == 0 {
		return 0
	}
	return time.Since(l.start) - time.Duration(latest*float64(time.Second))
}
