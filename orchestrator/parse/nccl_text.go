package parse

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// ncclText is the state of one pass over nccl-tests stdout. The output is
// read line by line, each line classified on its own, because launchers
// interleave NCCL INFO, MPI and other ranks' lines between any two lines
// of the tool's own output.
type ncclText struct {
	out        NCCL
	cols       *ncclColumns // from the column header line; nil until seen
	recognized bool         // saw something only nccl-tests prints
	footer     bool         // saw "# Out of bounds values"
	failed     bool         // the footer said FAILED
	bad        error        // first ErrMalformed, reported after the pass
	ranksSeen  map[int]bool
	algsSeen   map[string]bool
}

// ncclColumns is the layout of the results table from its header line:
// the leading columns (size count type [redop] [root]) and, for each of
// the out-of-place and in-place halves, its columns in order
// (time algbw busbw #wrong|error, plus the per-iteration ones of 2.19).
type ncclColumns struct {
	lead      []string
	oop, ip   []string
	timestamp bool // -T: a trailing "YYYY-MM-DD HH:MM:SS" (two tokens)
}

// ncclDefaultColumns is assumed for rows printed without a header line
// (README excerpts): the layout every version prints by default.
var ncclDefaultColumns = ncclColumns{
	oop: []string{"time", "algbw", "busbw", "#wrong"},
	ip:  []string{"time", "algbw", "busbw", "#wrong"},
}

var (
	// Launchers prefix every line: mpirun --tag-output "[1,0]<stdout>:",
	// srun -l "0: " (right-aligned when there are >= 10 tasks).
	ncclMPITag  = regexp.MustCompile(`^\[\d+,\d+\]<std(?:out|err|diag)>: ?`)
	ncclSrunTag = regexp.MustCompile(`^ *\d+: `)

	// "#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:04:00] NVIDIA H100"
	// ("Group" only since 2.13, the bus id was "[0x00]" before).
	ncclRankRe = regexp.MustCompile(`^Rank\s+(\d+)(?:\s+Group\s+(\d+))?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+(?:\[[^\]]*\]\s*)?(.*)$`)

	// Header parameters; "warmup iters:" and "agg iters:" come before the
	// plain "iters:" so the leftmost match takes the longer key.
	ncclParamRe = regexp.MustCompile(`(nThread|nGpus|minBytes|maxBytes|step:|warmup iters:|agg iters:|iters:|validation:|graph:|unalign:)\s*(\S+)`)

	ncclPerfRe    = regexp.MustCompile(`\b([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b`)
	ncclVersionRe = regexp.MustCompile(`NCCL version (\d+\.\d+\.\d+)`)
	ncclTestsVer  = regexp.MustCompile(`^nccl-tests version (\S+)(?:.*\bnccl-library=(\d+))?(?:.*\bnccl-headers=(\d+))?`)

	// NCCL INFO lines worth keeping as the algorithm/protocol record: an
	// "Algo/Proto" pair, tuner output ("Algo 1 proto 2"), environment
	// overrides, or the "Trees disabled" notice of NCCL 2.4.
	ncclAlgoRe = regexp.MustCompile(`\b(?:Ring|Tree|CollNet\w*|NVLS\w*|PAT)/(?:Simple|LL128|LL)\b|(?i:\balgo(?:rithm)?s?\b|\bproto(?:col)?s?\b)|NCCL_(?:ALGO|PROTO)\b|\bTrees (?:disabled|enabled)\b`)

	// "host:pid:tid [dev] NCCL WARN message"
	ncclWarnRe = regexp.MustCompile(`^(?:(\S+?):\d+:\d+\s+\[\d+\]\s+)?(NCCL WARN.*)$`)
)

// ncclFailureMarks are the messages nccl-tests prints when it aborts
// (common.h CUDACHECK/NCCLCHECK/TESTCHECK; the untagged forms are from 2.0),
// in the order they are searched.
var ncclFailureMarks = []string{"Test NCCL failure", "Test CUDA failure", "Test failure", "NCCL failure", "Cuda failure", "CUDA failure", "Invalid number of GPUs"}

// ncclLauncherFailures are launcher messages that mean a rank died; they do
// not make the text nccl-tests output on their own.
var ncclLauncherFailures = []string{"MPI_ABORT was invoked", "mpirun noticed that process", "srun: error:", "Segmentation fault", "terminate called after throwing"}

func ncclFromText(text string) (NCCL, error) {
	lines := splitLines(text)
	p := &ncclText{ranksSeen: map[int]bool{}, algsSeen: map[string]bool{}}
	p.out.Ranks, p.out.Rows, p.out.Errors = []NCCLRank{}, []NCCLRow{}, []NCCLError{}
	for _, l := range lines {
		l.text = ncclStripPrefix(l.text)
		p.line(l)
	}
	return p.finish(lines)
}

// ncclStripPrefix removes an mpirun --tag-output or srun -l label. Neither
// can start a genuine nccl-tests line: those begin with "#", spaces before
// a number, or a host name followed by ":" without a space.
func ncclStripPrefix(s string) string {
	if loc := ncclMPITag.FindStringIndex(s); loc != nil {
		return s[loc[1]:]
	}
	if loc := ncclSrunTag.FindStringIndex(s); loc != nil {
		return s[loc[1]:]
	}
	return s
}

// line classifies one line. NCCL's own lines come first because they can
// contain anything, including "#" and numbers.
func (p *ncclText) line(l line) {
	t := strings.TrimSpace(l.text)
	switch {
	case t == "":
	case strings.Contains(t, "NCCL INFO"):
		p.info(t)
	case strings.Contains(t, "NCCL WARN"):
		p.warn(t)
	case p.failure(t):
	case strings.HasPrefix(t, "#"):
		p.comment(l, strings.TrimSpace(t[1:]))
	case strings.HasPrefix(t, "NCCL version"):
		p.ncclVersion(t)
	default:
		p.other(l, t)
	}
}

// info keeps the NCCL version and the lines that name an algorithm.
func (p *ncclText) info(t string) {
	p.ncclVersion(t)
	if ncclAlgoRe.MatchString(t) && !p.algsSeen[t] {
		p.algsSeen[t] = true
		p.out.Algorithms = append(p.out.Algorithms, t)
	}
}

func (p *ncclText) ncclVersion(t string) {
	if m := ncclVersionRe.FindStringSubmatch(t); m != nil && p.out.NCCLVersion == "" {
		p.out.NCCLVersion = m[1]
	}
}

// warn records an NCCL WARN line as an error: NCCL prints WARN for the
// conditions it then fails on (or silently degrades around), and either
// is worth a look before signing off a cluster.
func (p *ncclText) warn(t string) {
	m := ncclWarnRe.FindStringSubmatch(t)
	if m == nil {
		p.addError("", t)
		return
	}
	p.addError(m[1], m[2])
}

// failure recognizes the abort messages of nccl-tests and of the launcher.
func (p *ncclText) failure(t string) bool {
	for _, mark := range ncclFailureMarks {
		if i := strings.Index(t, mark); i >= 0 {
			p.recognized = true
			p.addError(ncclFailureHost(t[:i]), t[i:])
			return true
		}
	}
	for _, mark := range ncclLauncherFailures {
		if strings.Contains(t, mark) {
			p.addError("", t)
			return true
		}
	}
	return false
}

// ncclFailureHost takes the host from what precedes the failure message:
// "host: " (CUDACHECK/NCCLCHECK) or " .. host pid 1234: " (TESTCHECK).
func ncclFailureHost(before string) string {
	f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(before), ":"))
	if n := len(f); n >= 3 && f[n-2] == "pid" {
		f = f[:n-2]
	}
	if len(f) == 0 || f[len(f)-1] == ".." {
		return ""
	}
	return f[len(f)-1]
}

func (p *ncclText) addError(host, msg string) {
	p.out.Errors = append(p.out.Errors, NCCLError{Host: host, Message: msg})
}

// comment handles the "#" lines: the preamble, the column header and the
// footer. Lines it does not know ("# Using devices", the out-of-place
// banner, the units line, "# GPU memory usage") carry nothing to keep.
func (p *ncclText) comment(l line, s string) {
	switch {
	case strings.HasPrefix(s, "nccl-tests version"):
		p.testsVersion(s)
	case strings.HasPrefix(s, "Collective test starting:"):
		p.recognized = true
		p.collective(s)
	case strings.HasPrefix(s, "Collective test concluded:"):
		p.recognized = true
	case strings.HasPrefix(s, "nThread "):
		p.params(s)
	case strings.HasPrefix(s, "Rank "):
		p.rank(l, s)
	case strings.HasPrefix(s, "size ") || strings.HasPrefix(s, "size\t"):
		p.header(s)
	case strings.HasPrefix(s, "Out of bounds values"):
		p.outOfBounds(l, s)
	case strings.HasPrefix(s, "Avg bus bandwidth"):
		p.avgBusBW(l, s)
	case strings.HasPrefix(s, "error:"):
		if msg := strings.TrimSpace(strings.TrimPrefix(s, "error:")); msg != "" {
			p.addError("", msg)
		}
	}
}

// testsVersion reads "nccl-tests version 2.18.2 nccl-headers=23007
// nccl-library=23007"; the library code is what actually ran.
func (p *ncclText) testsVersion(s string) {
	m := ncclTestsVer.FindStringSubmatch(s)
	if m == nil {
		return
	}
	p.recognized = true
	p.out.Version = m[1]
	for _, code := range []string{m[2], m[3]} {
		if v, ok := ncclParseInt(code); ok && p.out.NCCLVersion == "" {
			p.out.NCCLVersion = ncclVersionFromCode(v)
		}
	}
}

// collective names the test from "all_reduce_perf" in any line; the first
// naming wins ("Collective test starting:" is printed before anything).
func (p *ncclText) collective(s string) {
	if p.out.Collective != "" {
		return
	}
	if m := ncclPerfRe.FindStringSubmatch(s); m != nil {
		p.out.Collective = m[1]
	}
}

// params reads "nThread 1 nGpus 1 minBytes 8 ... validation: 1 graph: 0".
func (p *ncclText) params(s string) {
	p.recognized = true
	if p.out.Params == nil {
		p.out.Params = map[string]string{}
	}
	for _, m := range ncclParamRe.FindAllStringSubmatch(s, -1) {
		p.out.Params[strings.TrimSuffix(m[1], ":")] = m[2]
	}
}

// rank reads one device line; a repeated rank (a second run appended to
// the same log) keeps the first.
func (p *ncclText) rank(l line, s string) {
	m := ncclRankRe.FindStringSubmatch(s)
	if m == nil {
		p.malformed(l, "unreadable rank line")
		return
	}
	p.recognized = true
	r := NCCLRank{Host: m[4], Name: strings.TrimSpace(m[6])}
	var ok [4]bool
	r.Rank, ok[0] = ncclAtoi(m[1])
	r.PID, ok[1] = ncclAtoi(m[3])
	r.Device, ok[2] = ncclAtoi(m[5])
	r.Group, ok[3] = 0, true
	if m[2] != "" {
		r.Group, ok[3] = ncclAtoi(m[2])
	}
	if ok != [4]bool{true, true, true, true} {
		p.malformed(l, "rank line number out of range")
		return
	}
	if !p.ranksSeen[r.Rank] {
		p.ranksSeen[r.Rank] = true
		p.out.Ranks = append(p.out.Ranks, r)
	}
}

// header reads the column names. The halves start at each "time" (or
// "cputime" with -C); a trailing "timestamp" (-T) is two tokens per row.
func (p *ncclText) header(s string) {
	f := strings.Fields(s)
	var starts []int
	for i, name := range f {
		if name == "time" || name == "cputime" {
			starts = append(starts, i)
		}
	}
	if len(starts) != 2 || !ncclContains(f[:starts[0]], "count") {
		return // a "# size ..." line of something else
	}
	p.recognized = true
	c := &ncclColumns{lead: f[:starts[0]], oop: f[starts[0]:starts[1]], ip: f[starts[1]:]}
	if n := len(c.ip); n > 0 && c.ip[n-1] == "timestamp" {
		c.ip, c.timestamp = c.ip[:n-1], true
	}
	p.cols = c
}

// outOfBounds reads "Out of bounds values : 0 OK" (or "3 FAILED").
func (p *ncclText) outOfBounds(l line, s string) {
	p.recognized, p.footer = true, true
	_, v, _ := cutKV(s)
	f := strings.Fields(v)
	n, ok := 0, len(f) > 0
	if ok {
		n, ok = ncclAtoi(f[0])
	}
	if !ok {
		p.malformed(l, "unreadable out-of-bounds count")
		return
	}
	p.out.OutOfBounds = n
	if len(f) > 1 && f[1] == "FAILED" {
		p.failed = true
	}
}

// avgBusBW reads "Avg bus bandwidth    : 70.742 " and the OK/FAILED verdict
// that -c/--check prints after the value.
func (p *ncclText) avgBusBW(l line, s string) {
	p.recognized = true
	_, v, _ := cutKV(s)
	f := strings.Fields(v)
	if len(f) == 0 {
		p.malformed(l, "no average bus bandwidth value")
		return
	}
	bw, ok := ncclFloat(f[0])
	if !ok {
		p.malformed(l, "unreadable average bus bandwidth")
		return
	}
	p.out.AvgBusBW = bw
	if len(f) > 1 && f[1] == "FAILED" {
		p.failed = true
	}
}

// other handles the lines without "#": table rows, and command lines that
// name the test binary. Anything else is launcher or application noise.
func (p *ncclText) other(l line, t string) {
	f := strings.Fields(t)
	if p.isRow(f) {
		if row, err := p.row(f); err != "" {
			p.malformed(l, "%s", err)
		} else {
			p.out.Rows = append(p.out.Rows, row)
		}
		return
	}
	p.collective(t)
}

// isRow: rows start with two integers (size, count). Without a header line
// a full row's worth of columns is required as well, so that stray numbers
// in launcher noise are not taken for a truncated row.
func (p *ncclText) isRow(f []string) bool {
	if len(f) < 2 {
		return false
	}
	if _, ok := ncclParseInt(f[0]); !ok {
		return false
	}
	if _, ok := ncclParseInt(f[1]); !ok {
		return false
	}
	return p.cols != nil || len(f) >= 3+len(ncclDefaultColumns.oop)+len(ncclDefaultColumns.ip)
}

func (p *ncclText) malformed(l line, format string, args ...any) {
	if p.bad == nil {
		p.bad = malformed(ncclTool, l, format, args...)
	}
}

// finish decides recognition, truncation and the verdict.
func (p *ncclText) finish(lines []line) (NCCL, error) {
	if !p.recognized && len(p.out.Rows) == 0 {
		return NCCL{}, notRecognized(ncclTool, lines, "nccl-tests header, results table or footer")
	}
	tableStarted := p.cols != nil || len(p.out.Rows) > 0
	if p.bad == nil && len(p.out.Errors) == 0 {
		switch {
		case tableStarted && !p.footer:
			p.bad = ncclMalformedEnd(lines, "results table ends without the \"# Out of bounds values\" footer (truncated output?)")
		case !tableStarted:
			p.bad = ncclMalformedEnd(lines, "no results table")
		}
	}
	hasRedop := p.cols != nil && ncclContains(p.cols.lead, "redop")
	ncclFinish(&p.out, p.footer && !p.failed && p.bad == nil, hasRedop)
	if len(p.out.Errors) > 0 {
		return p.out, ncclToolFailed(p.out.Errors)
	}
	if p.bad != nil {
		return p.out, p.bad
	}
	return p.out, nil
}

// ncclMalformedEnd reports a problem with the output as a whole at its
// last non-blank line, where a truncation shows.
func ncclMalformedEnd(lines []line, msg string) error {
	last := line{}
	for _, l := range lines {
		if strings.TrimSpace(l.text) != "" {
			last = l
		}
	}
	return malformed(ncclTool, last, "%s", msg)
}

// ncclContains reports whether names holds want.
func ncclContains(names []string, want string) bool {
	for _, n := range names {
		if n == want {
			return true
		}
	}
	return false
}

// ncclAtoi reads a non-negative-or-negative int that fits an int on every
// platform (rank, pid, device numbers).
func ncclAtoi(s string) (int, bool) {
	v, err := strconv.ParseInt(s, 10, 32)
	return int(v), err == nil
}

// ncclFloat reads a finite float: NaN and Inf would make the result
// impossible to print as JSON and are never genuine measurements.
func ncclFloat(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
