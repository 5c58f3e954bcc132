package standins

// The fabric model: a SIMULATION of nccl-tests (all_reduce_perf and friends) and of Open MPI's mpirun, for the
// demo's simulated nodes only. Nothing here measures anything: every number is computed from the model in
// FabricEnv. The lab uses the real thing instead (scripts/standins/nccl: an MPI program over real links, under a
// real mpirun). See doc.go, "The fabric model (demo only)".

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The environment the fabric model reads. The demo sets all but FabricSeedEnv on every node.
const (
	// FabricEnv describes the simulated fabric, one entry per host, comma-separated:
	//
	//	NAME=INTER/INTRA[/GPUS[/INTER_US/INTRA_US]]      e.g. gpu-01=370/450,gpu-02=370/450,gpu-03=185/450
	//
	// INTER is the bus bandwidth (GB/s) a healthy all_reduce reaches across nodes when this host takes part,
	// INTRA the bus bandwidth (GB/s) of a collective inside this host (NVLink), GPUS the host's GPU count
	// (default 8), INTER_US and INTRA_US the latency floor (µs) of one collective across nodes with this host
	// and inside it (default 30 and 5): the small-message rows' time. Hosts are the names mpirun's -H uses.
	FabricEnv = "GPUACCEPT_STANDIN_FABRIC"
	// FabricNodeEnv names the host a *_perf stand-in run directly (without mpirun) runs on: the simulated
	// node's own name, which `hostname` cannot give (the demo's nodes all share the real machine).
	FabricNodeEnv = "GPUACCEPT_STANDIN_NODE"
	// FabricSeedEnv seeds the model's jitter: a decimal integer, default 1.
	FabricSeedEnv = "GPUACCEPT_STANDIN_SEED"
	// FabricRunsEnv, when set, is a file the model appends one line to per run (the collective and the rank
	// layout); the number of earlier identical lines is mixed into the jitter, so that repeating a run gives
	// slightly different numbers while a fresh file replays the same sequence. Unset: every repeat of a run
	// prints the same numbers.
	FabricRunsEnv = "GPUACCEPT_STANDIN_FABRIC_RUNS"
)

// MPIRun is the launcher the fabric model stands in for.
const MPIRun = "mpirun"

// ModelDeviceName is the device name on every rank line the model prints, where nccl-tests prints the GPU's
// name: the one field of the real format that can say this is no hardware.
const ModelDeviceName = "gpuaccept-model-standin"

const (
	modelTestsVersion = "2.18.2"
	modelLabel        = "gpuaccept fabric model (simulated, demo only)"
	defaultFabricGPUs = 8
	defaultFabricSeed = 1

	// The model: time = latency + bytes on the wire / bandwidth, then ±jitterAmp.
	intraLatency = 5e-6  // s, one collective inside a host
	interLatency = 30e-6 // s, one collective across hosts
	jitterAmp    = 0.01  // relative, uniform

	// The stand-in sleeps sleepFraction of the time it models, at most maxSleep per run.
	sleepFraction = 1e-3
	maxSleep      = 100 * time.Millisecond
)

// perfTools are the nccl-tests binaries the model answers for; the collective comes from the name.
var perfTools = []string{"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"}

// Getent is the resolver the fabric model stands in for: the simulated hosts' names resolve on every
// simulated node (the demo's nodes share this machine, whose resolver knows none of them).
const Getent = "getent"

// FabricTools lists the commands InstallFabric writes wrappers for: mpirun, then the nccl-tests binaries,
// then getent and the failure test's launcher (SimPython).
func FabricTools() []string { return append(append([]string{MPIRun}, perfTools...), Getent, SimPython) }

// IsFabricTool says whether FabricMain answers for tool.
func IsFabricTool(tool string) bool { return slices.Contains(FabricTools(), tool) }

// FabricHost is one host of the model (an entry of FabricEnv).
type FabricHost struct {
	Name     string
	InterGBs float64 // bus bandwidth across nodes, GB/s
	IntraGBs float64 // bus bandwidth inside the host, GB/s
	GPUs     int
	// InterUs and IntraUs are the latency floors, µs: of a collective
	// across nodes this host takes part in, and of one inside it; 0 is the
	// model's default (interLatency, intraLatency).
	InterUs, IntraUs float64
}

// ParseFabric reads FabricEnv's format.
func ParseFabric(s string) ([]FabricHost, error) {
	var hosts []FabricHost
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, rates, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		f := strings.Split(rates, "/")
		if !ok || name == "" || strings.ContainsAny(name, " \t:") || len(f) < 2 || len(f) == 4 || len(f) > 5 {
			return nil, fmt.Errorf("%q: want NAME=INTER/INTRA[/GPUS[/INTER_US/INTRA_US]]", entry)
		}
		h := FabricHost{Name: name, GPUs: defaultFabricGPUs}
		var err1, err2 error
		h.InterGBs, err1 = strconv.ParseFloat(strings.TrimSpace(f[0]), 64)
		h.IntraGBs, err2 = strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		if err1 != nil || err2 != nil || !(h.InterGBs > 0) || !(h.IntraGBs > 0) || math.IsInf(h.InterGBs, 0) || math.IsInf(h.IntraGBs, 0) {
			return nil, fmt.Errorf("%q: bandwidths must be positive numbers of GB/s", entry)
		}
		if len(f) >= 3 {
			g, err := strconv.Atoi(strings.TrimSpace(f[2]))
			if err != nil || g < 1 {
				return nil, fmt.Errorf("%q: GPUS must be a positive integer", entry)
			}
			h.GPUs = g
		}
		if len(f) == 5 {
			var err1, err2 error
			h.InterUs, err1 = strconv.ParseFloat(strings.TrimSpace(f[3]), 64)
			h.IntraUs, err2 = strconv.ParseFloat(strings.TrimSpace(f[4]), 64)
			if err1 != nil || err2 != nil || !(h.InterUs > 0) || !(h.IntraUs > 0) || math.IsInf(h.InterUs, 0) || math.IsInf(h.IntraUs, 0) {
				return nil, fmt.Errorf("%q: latencies must be positive numbers of µs", entry)
			}
		}
		if slices.ContainsFunc(hosts, func(o FabricHost) bool { return o.Name == name }) {
			return nil, fmt.Errorf("host %q given twice", name)
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, errors.New("no hosts")
	}
	return hosts, nil
}

func orFloat(x, def float64) float64 {
	if x > 0 {
		return x
	}
	return def
}

// FormatFabric writes hosts in FabricEnv's format (GPUS only when it is not the default 8 or latencies follow,
// the latencies only when one is not the default).
func FormatFabric(hosts []FabricHost) string {
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = fmt.Sprintf("%s=%s/%s", h.Name, strconv.FormatFloat(h.InterGBs, 'g', -1, 64), strconv.FormatFloat(h.IntraGBs, 'g', -1, 64))
		gpus := h.GPUs
		if gpus == 0 {
			gpus = defaultFabricGPUs
		}
		if h.InterUs > 0 || h.IntraUs > 0 {
			parts[i] += fmt.Sprintf("/%d/%s/%s", gpus, strconv.FormatFloat(orFloat(h.InterUs, interLatency*1e6), 'g', -1, 64),
				strconv.FormatFloat(orFloat(h.IntraUs, intraLatency*1e6), 'g', -1, 64))
		} else if gpus != defaultFabricGPUs {
			parts[i] += fmt.Sprintf("/%d", gpus)
		}
	}
	return strings.Join(parts, ",")
}

func fabricHost(hosts []FabricHost, name string) (FabricHost, bool) {
	for _, h := range hosts {
		if h.Name == name {
			return h, true
		}
	}
	return FabricHost{}, false
}

// FabricMain answers one invocation of a fabric tool (mpirun or a *_perf binary) from the model, with env as its
// environment, and returns the exit status. A *_perf binary run directly is one process on the host named by
// FabricNodeEnv, with -g ranks; mpirun runs its binary as one invocation of the same model for the whole job.
func FabricMain(tool string, args, env []string, stdout, stderr io.Writer) int {
	e := environ(env)
	switch {
	case tool == MPIRun:
		return runMPIRun(args, e, stdout, stderr)
	case slices.Contains(perfTools, tool):
		node, _ := e.get(FabricNodeEnv) // checked after the options, so that -h needs no model
		return runPerf(perfJob{argv0: tool, args: args, env: e, procs: []string{node}, pids: []int{os.Getpid()}}, stdout, stderr)
	case tool == Getent:
		return runGetent(args, e, stdout, stderr)
	case tool == SimPython:
		return runElastic(args, e, stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: unknown tool %q (fabric tools: %s)\n", modelLabel, tool, strings.Join(FabricTools(), ", "))
	return ExitNotSimulated
}

// runGetent answers `getent ahosts|hosts NAME...` for the model's hosts, each at the loopback address,
// in glibc getent's format (ahosts: "%-15s %-6s %s", the name on the first line only; hosts: the address,
// spaces, the name); a name the model does not hold is not found (exit 2, after the others), as getent
// goes on past a key it cannot resolve. Any other database is not simulated.
func runGetent(args []string, e environ, stdout, stderr io.Writer) int {
	if len(args) < 2 || (args[0] != "ahosts" && args[0] != "hosts") {
		fmt.Fprintf(stderr, "%s: getent %s is not simulated (only ahosts and hosts with keys)\n", modelLabel, strings.Join(args, " "))
		return ExitNotSimulated
	}
	spec, _ := e.get(FabricEnv)
	hosts, err := ParseFabric(spec)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", modelLabel, FabricEnv, err)
		return ExitNotSimulated
	}
	code := 0
	for _, name := range args[1:] {
		if !slices.ContainsFunc(hosts, func(h FabricHost) bool { return h.Name == name }) {
			code = 2
			continue
		}
		if args[0] == "hosts" {
			fmt.Fprintf(stdout, "%-15s %s\n", "127.0.0.1", name)
			continue
		}
		fmt.Fprintf(stdout, "%-15s %-6s %s\n%-15s %-6s \n%-15s %-6s \n", "127.0.0.1", "STREAM", name, "127.0.0.1", "DGRAM", "127.0.0.1", "RAW")
	}
	return code
}

// ---- the environment

type environ []string

// get returns the last value of key, as a process started with this environment would see it.
func (e environ) get(key string) (string, bool) {
	for i := len(e) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(e[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// with returns a copy of e with key set to value (the old entries removed).
func (e environ) with(key, value string) environ {
	out := make(environ, 0, len(e)+1)
	for _, kv := range e {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// ---- collectives (nccl-tests' byte counts and bandwidth formulas)

type collective int

const (
	collAllReduce collective = iota
	collAllGather
	collReduceScatter
	collAllToAll
	collSendRecv
)

var collNames = []string{"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"}

// collectiveOf takes the collective from a binary's name: all_reduce_perf, /opt/nccl-tests/all_reduce_perf,
// all_reduce_perf_mpi.
func collectiveOf(binary string) (collective, bool) {
	b := path.Base(binary)
	b = strings.TrimSuffix(b, "_mpi")
	name, ok := strings.CutSuffix(b, "_perf")
	if !ok {
		return 0, false
	}
	i := slices.Index(collNames, name)
	return collective(i), i >= 0
}

// hasOp: the collectives whose rows name a reduction op (and loop over -o); the others print "none".
func (c collective) hasOp() bool {
	return c == collAllReduce || c == collReduceScatter || c == collSendRecv
}

// tuned: the collectives NCCL's tuner picks an algorithm for; alltoall and sendrecv are point-to-point.
func (c collective) tuned() bool {
	return c == collAllReduce || c == collAllGather || c == collReduceScatter
}

// sizes is nccl-tests' GetCollByteCount, in elements.
type sizes struct{ send, recv, param int64 }

func (c collective) counts(count, eltSize, n int64) sizes {
	base := (count / n) &^ (16/eltSize - 1) // aligned down to 16 bytes per rank
	switch c {
	case collAllGather:
		return sizes{send: base, recv: base * n, param: base}
	case collReduceScatter:
		return sizes{send: base * n, recv: base, param: base}
	case collAllToAll:
		return sizes{send: base * n, recv: base * n, param: base}
	}
	return sizes{send: count, recv: count, param: count}
}

// algBytes is what nccl-tests divides by the time to get algbw; busFactor turns algbw into busbw (GetBw).
func (c collective) algBytes(param, eltSize, n int64) float64 {
	switch c {
	case collAllGather, collReduceScatter, collAllToAll:
		return float64(param * eltSize * n)
	}
	return float64(param * eltSize)
}

func (c collective) busFactor(n int64) float64 {
	switch c {
	case collAllReduce:
		return float64(2*(n-1)) / float64(n)
	case collAllGather, collReduceScatter, collAllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// link is what a set of ranks runs over: the intra-node link when they share one host, else the slowest
// inter-node link of the hosts taking part.
type link struct {
	gbs     float64
	latency float64
}

func linkOf(fabric []FabricHost, hosts []string) link {
	distinct := slices.Compact(slices.Sorted(slices.Values(hosts)))
	if len(distinct) == 1 {
		h, _ := fabricHost(fabric, distinct[0])
		return link{gbs: h.IntraGBs, latency: orFloat(h.IntraUs*1e-6, intraLatency)}
	}
	// A collective waits for its slowest hop: the lowest bandwidth and the
	// highest latency of the hosts taking part.
	l := link{gbs: math.Inf(1)}
	for _, name := range distinct {
		h, _ := fabricHost(fabric, name)
		l.gbs = min(l.gbs, h.InterGBs)
		l.latency = max(l.latency, orFloat(h.InterUs*1e-6, interLatency))
	}
	return l
}

// seconds is the modelled time of one collective (no jitter): the latency, then the bytes each rank puts on the
// bus at the link's bus bandwidth. A single rank copies its buffer.
func (l link) seconds(c collective, param, eltSize, n int64) float64 {
	wire := c.algBytes(param, eltSize, n) * c.busFactor(n)
	if wire == 0 {
		wire = c.algBytes(param, eltSize, n)
	}
	return l.latency + wire/(l.gbs*1e9)
}

// FabricBusBW is the bus bandwidth (GB/s) the model gives, before jitter, to a run of program (all_reduce_perf,
// ...) with ranks ranks spread over hosts (a host per rank, in rank order), at the row of size bytes (the -b/-e
// value) in float: what the stand-in prints within ±1%. It lets tests state what a phase should find.
func FabricBusBW(fabric []FabricHost, program string, hosts []string, size int64) (float64, error) {
	c, ok := collectiveOf(program)
	if !ok {
		return 0, fmt.Errorf("%q is not an nccl-tests binary the model knows", program)
	}
	if len(hosts) == 0 {
		return 0, errors.New("no ranks")
	}
	for _, h := range hosts {
		if _, ok := fabricHost(fabric, h); !ok {
			return 0, fmt.Errorf("host %q is not in the fabric", h)
		}
	}
	n := int64(len(hosts))
	s := c.counts(size/4, 4, n)
	t := linkOf(fabric, hosts).seconds(c, s.param, 4, n)
	return c.algBytes(s.param, 4, n) / 1e9 / t * c.busFactor(n), nil
}

// ---- the jitter: a hash of the seed, the run and the row, so that it is reproducible

func mix64(x uint64) uint64 { // splitmix64's finalizer
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// jitter is uniform in [-jitterAmp, +jitterAmp).
func jitter(seed uint64, key string, parts ...uint64) float64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := mix64(seed ^ h.Sum64())
	for _, p := range parts {
		x = mix64(x ^ p)
	}
	u := float64(x>>11) / (1 << 53)
	return (2*u - 1) * jitterAmp
}

// repeatOf appends key to the runs file (FabricRunsEnv) under an exclusive lock and returns how many times it
// was there before.
func repeatOf(file, key string) (int, error) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	n := 0
	for l := range strings.Lines(string(b)) {
		if strings.TrimSuffix(l, "\n") == key {
			n++
		}
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		return 0, err
	}
	return n, nil
}

// ---- the nccl-tests stand-in

// perfJob is one run of a *_perf binary: one process per entry of procs (the host it runs on), each driving
// nThreads x nGpus ranks, as nccl-tests numbers them.
type perfJob struct {
	argv0 string
	args  []string
	env   environ
	procs []string // host of each process, in MPI rank order
	pids  []int    // pid of each process, for the rank lines
}

type perfOpts struct {
	nThreads, nGpus               int64
	minBytes, maxBytes            int64
	stepBytes, stepFactor         int64
	datacheck, warmup, iters, agg int64
	runCycles                     int64
	ops                           []string
	types                         []dataType
	blocking, parallelInit, graph int64
	cputime, timestamps           int64
	jsonPath                      string
}

// modelRank is one rank: where it runs.
type modelRank struct {
	host   string
	device int64
	pid    int
}

type dataType struct {
	name string
	size int64
}

// nccl-tests' types and ops, in its order ("-d all", "-o all").
var (
	ncclTypes = []dataType{
		{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8},
		{"half", 2}, {"float", 4}, {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1},
	}
	ncclOps = []string{"sum", "prod", "max", "min", "avg", "mulsum"}
)

func typeByName(name string) (dataType, bool) {
	for _, t := range ncclTypes {
		if t.name == name {
			return t, true
		}
	}
	return dataType{}, false
}

func defaultPerfOpts() perfOpts {
	f, _ := typeByName("float")
	return perfOpts{
		nThreads: 1, nGpus: 1, minBytes: 32 << 20, maxBytes: 32 << 20, stepBytes: 1 << 20, stepFactor: 1,
		datacheck: 1, warmup: 1, iters: 20, agg: 1, runCycles: 1, ops: []string{"sum"}, types: []dataType{f},
	}
}

// runPerf prints what nccl-tests 2.18 prints for the job, from the model. Exit statuses are nccl-tests': 0, 255
// for bad sizes, 1 when a host has fewer GPUs than asked for, 5 when NCCL_TESTS_MIN_BW is not met.
func runPerf(j perfJob, stdout, stderr io.Writer) int {
	prog := path.Base(j.argv0)
	c, ok := collectiveOf(prog)
	if !ok {
		fmt.Fprintf(stderr, "%s: %q is not an nccl-tests binary the model knows (%s)\n", modelLabel, j.argv0, strings.Join(perfTools, ", "))
		return ExitNotSimulated
	}
	o, code, done := parsePerfArgs(j.argv0, j.args, stdout, stderr)
	if done {
		return code
	}
	if slices.Contains(j.procs, "") {
		fmt.Fprintf(stderr, "%s: %s is not set: the model cannot tell which host %s runs on\n", modelLabel, FabricNodeEnv, prog)
		return ExitNotSimulated
	}
	spec, ok := j.env.get(FabricEnv)
	if !ok {
		fmt.Fprintf(stderr, "%s: %s is not set: no fabric to model\n", modelLabel, FabricEnv)
		return ExitNotSimulated
	}
	fabric, err := ParseFabric(spec)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", modelLabel, FabricEnv, err)
		return ExitNotSimulated
	}
	for _, h := range j.procs {
		if _, ok := fabricHost(fabric, h); !ok {
			fmt.Fprintf(stderr, "%s: host %q is not in %s (%s)\n", modelLabel, h, FabricEnv, spec)
			return ExitNotSimulated
		}
	}
	seed := uint64(defaultFabricSeed)
	if s, ok := j.env.get(FabricSeedEnv); ok && s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s=%q: want a decimal integer\n", modelLabel, FabricSeedEnv, s)
			return ExitNotSimulated
		}
		seed = uint64(v)
	}

	// Ranks, as nccl-tests numbers them: process p drives ranks p*t*g .. (p+1)*t*g-1, on devices
	// localRank*t*g + i, where localRank counts the processes before p on the same host. A host with fewer GPUs
	// than that is nccl-tests' "Invalid number of GPUs", after the header.
	perProc := o.nThreads * o.nGpus
	procsOn := map[string]int64{}
	for _, h := range j.procs {
		procsOn[h]++
	}
	tooFew := ""
	for _, h := range slices.Sorted(maps.Keys(procsOn)) {
		fh, _ := fabricHost(fabric, h)
		if perProc < 1 || perProc > int64(fh.GPUs) || procsOn[h]*perProc > int64(fh.GPUs) {
			tooFew = fmt.Sprintf("%s: Invalid number of GPUs: %d requested but only %d were found.\n"+
				"Please check the number of processes and GPUs per process.\n", h, procsOn[h]*perProc, fh.GPUs)
			break
		}
	}
	var ranks []modelRank
	if tooFew == "" {
		local := map[string]int64{}
		for p, h := range j.procs {
			for i := range perProc {
				ranks = append(ranks, modelRank{host: h, device: local[h]*perProc + i, pid: j.pids[p]})
			}
			local[h]++
		}
	}
	nranks := int64(len(ranks))
	hosts := make([]string, len(ranks))
	for r, rk := range ranks {
		hosts[r] = rk.host
	}
	// The run's identity for the jitter: the collective and where its ranks are.
	key := collNames[c] + " " + layout(hosts)
	repeat := 0
	if file, ok := j.env.get(FabricRunsEnv); ok && file != "" && tooFew == "" {
		if repeat, err = repeatOf(file, key); err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", modelLabel, FabricRunsEnv, err)
			return ExitNotSimulated
		}
	}

	w := bufio.NewWriter(stdout)
	defer w.Flush()
	js := openJSON(o.jsonPath, j.argv0, j.args, j.env, w)

	fmt.Fprintf(w, "# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", modelTestsVersion, 0, 0)
	fmt.Fprintf(w, "# Collective test starting: %s\n", prog)
	stepKind, step := "bytes", o.stepBytes
	if o.stepFactor > 1 {
		stepKind, step = "factor", o.stepFactor
	}
	fmt.Fprintf(w, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
		o.nThreads, o.nGpus, o.minBytes, o.maxBytes, step, stepKind, o.warmup, o.iters, o.agg, o.datacheck, o.graph, 0)
	if o.blocking != 0 {
		fmt.Fprint(w, "# Blocking Enabled: wait for completion and barrier after each collective \n")
	}
	if o.parallelInit != 0 {
		fmt.Fprint(w, "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n")
	}
	fmt.Fprint(w, "#\n")
	js.config(o)
	fmt.Fprint(w, "# Using devices\n")
	if tooFew != "" {
		w.Flush()
		fmt.Fprint(stderr, tooFew)
		js.abort()
		return 1
	}
	for r, rk := range ranks {
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", r, 0, rk.pid, rk.host, rk.device, 0, 0, 0, ModelDeviceName)
	}
	js.devices(ranks)
	l := linkOf(fabric, hosts)

	// NCCL's own INFO lines, from rank 0 (NCCL_DEBUG=INFO; the subsystem must be enabled, as in NCCL).
	info := ncclDebug(j.env)
	infoPrefix := fmt.Sprintf("%s:%d:%d [%d] NCCL INFO ", ranks[0].host, ranks[0].pid, ranks[0].pid, ranks[0].device)
	if algo, ok := j.env.get("NCCL_ALGO"); ok && info["ENV"] {
		fmt.Fprintf(w, "%sNCCL_ALGO set by environment to %s\n", infoPrefix, algo)
	}

	timeStr := "time"
	if o.cputime != 0 {
		timeStr = "cputime"
	}
	tsLbl, tsFmt, tsPad := "", "", 0
	if o.timestamps != 0 {
		tsLbl, tsFmt, tsPad = "timestamp", "%Y-%m-%d %H:%M:%S", 19
	}
	fmt.Fprint(w, "#\n")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type", "redop", "root",
		timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", tsPad, tsLbl)
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt)
	js.startResults()

	var bwSum float64
	var bwCount int
	slept := time.Duration(0)
	sleep := func(modelled float64) {
		d := min(time.Duration(modelled*sleepFraction*float64(time.Second)), maxSleep-slept)
		if d > 0 {
			time.Sleep(d)
			slept += d
		}
	}
	ops := o.ops
	if !c.hasOp() {
		ops = []string{"none"}
	}
	for ti, t := range o.types {
		for oi, op := range ops {
			sweep := o.sizes()
			// nccl-tests warms up over every size first: that is when NCCL's tuner first speaks for each size.
			for _, size := range sweep {
				s := c.counts(size/t.size, t.size, nranks)
				shown := max(s.send, s.recv) * t.size
				if info["TUNING"] && c.tuned() && s.param > 0 {
					fmt.Fprintf(w, "%s%d Bytes -> Algo %d proto %d time %f\n", infoPrefix, shown, 1, 2, l.seconds(c, s.param, t.size, nranks)*1e6)
				}
				sleep(float64(o.warmup) * l.seconds(c, s.param, t.size, nranks))
			}
			for cycle := range o.runCycles {
				for _, size := range sweep {
					s := c.counts(size/t.size, t.size, nranks)
					shown := max(s.send, s.recv) * t.size
					fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6s", shown, s.param, t.name, op, fmt.Sprintf("%6d", -1))
					js.rowStart(shown, s.param, t.name, op)
					base := l.seconds(c, s.param, t.size, nranks)
					for half := range int64(2) { // out-of-place, then in-place
						sec := base * (1 + jitter(seed, key, uint64(repeat), uint64(cycle), uint64(ti), uint64(oi), uint64(size), uint64(half)))
						algBW := c.algBytes(s.param, t.size, nranks) / 1e9 / sec
						busBW := algBW * c.busFactor(nranks)
						check := o.datacheck != 0 && !(half == 1 && (c == collAllToAll || c == collSendRecv))
						writeRowHalf(w, sec*1e6, algBW, busBW, check)
						if half == 1 && o.timestamps != 0 {
							fmt.Fprintf(w, "%21s", time.Now().Format("2006-01-02 15:04:05"))
						}
						js.rowHalf(half == 0, o.cputime != 0, sec*1e6, algBW, busBW, check)
						bwSum += busBW
						bwCount++
						sleep(float64(1+o.iters*o.agg+o.datacheck) * sec)
					}
					fmt.Fprint(w, "\n")
					js.rowEnd(o.iters)
					if err := w.Flush(); err != nil {
						return 1 // stdout is gone (the reader was killed): nccl-tests would die of SIGPIPE
					}
				}
			}
		}
	}

	bw := 0.0
	if bwCount > 0 {
		bw = bwSum / float64(bwCount)
	}
	minBW := -1.0
	if s, ok := j.env.get("NCCL_TESTS_MIN_BW"); ok {
		minBW = atof(s)
	}
	verdict := ""
	failed := false
	if minBW != -1 {
		failed = bw < minBW*0.9
		verdict = map[bool]string{false: "OK", true: "FAILED"}[failed]
	}
	js.endResults()
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", 0, "OK")
	fmt.Fprintf(w, "# %-20s : %s %s\n", "Avg bus bandwidth", formatG(bw), verdict)
	fmt.Fprint(w, "#\n")
	fmt.Fprintf(w, "# Collective test concluded: %s\n", prog)
	js.footer(bw, minBW, failed)
	fmt.Fprint(w, "#\n")
	fmt.Fprint(w, "\n") // writeErrors: no NCCL error
	js.finish()
	if failed {
		return 5
	}
	return 0
}

// layout names where the ranks are: "gpu-01:8,gpu-02:8" (host:ranks, in rank order).
func layout(hosts []string) string {
	var parts []string
	for i := 0; i < len(hosts); {
		j := i
		for j < len(hosts) && hosts[j] == hosts[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s:%d", hosts[i], j-i))
		i = j
	}
	return strings.Join(parts, ",")
}

// maxRows bounds the rows a run prints (sizes x types x ops x cycles): the model answers for benchmarks, not for
// sweeps of millions of sizes.
const maxRows = 100000

// sizes is nccl-tests' size loop; -b 0 with a factor steps to 1 instead of looping forever (as nccl_perf.c). It
// stops after maxRows+1 sizes.
func (o perfOpts) sizes() []int64 {
	var out []int64
	for size := o.minBytes; size <= o.maxBytes && len(out) <= maxRows; {
		out = append(out, size)
		next := size + o.stepBytes
		if o.stepFactor > 1 {
			next = size * o.stepFactor
		}
		if next <= size {
			next = size + 1
		}
		size = next
	}
	return out
}

// writeRowHalf is nccl-tests' writeBenchmarkLineBody.
func writeRowHalf(w io.Writer, timeUsec, algBW, busBW float64, check bool) {
	if check {
		fmt.Fprintf(w, "  %7s  %6s  %6s  %6s", floatStr(timeUsec, 7), floatStr(algBW, 6), floatStr(busBW, 6), "0")
		return
	}
	fmt.Fprintf(w, "  %7s  %6s  %6s    N/A", floatStr(timeUsec, 7), floatStr(algBW, 6), floatStr(busBW, 6))
}

// floatStr is nccl-tests' getFloatStr: two decimals, fewer when the width does not allow, then %e.
func floatStr(v float64, width int) string {
	for _, prec := range []int{2, 1, 0} {
		if s := fmt.Sprintf("%*.*f", width, prec, v); len(s) <= width {
			return s
		}
	}
	if width >= 7 {
		return fmt.Sprintf("%*.1e", width, v)
	}
	return fmt.Sprintf("%*.0e", width, v)
}

// formatG is C's %g (six significant digits, trailing zeros removed).
func formatG(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// ncclDebug is the set of NCCL debug subsystems whose INFO lines print: none unless NCCL_DEBUG is INFO (or
// TRACE); NCCL_DEBUG_SUBSYS as NCCL reads it (a comma list, "^" to invert, ALL), default INIT and ENV.
func ncclDebug(env environ) map[string]bool {
	level, _ := env.get("NCCL_DEBUG")
	if l := strings.ToUpper(level); l != "INFO" && l != "TRACE" {
		return map[string]bool{}
	}
	subsys, ok := env.get("NCCL_DEBUG_SUBSYS")
	if !ok {
		return map[string]bool{"INIT": true, "ENV": true}
	}
	invert := strings.HasPrefix(subsys, "^")
	listed := map[string]bool{}
	for _, s := range strings.Split(strings.TrimPrefix(subsys, "^"), ",") {
		listed[strings.ToUpper(strings.TrimSpace(s))] = true
	}
	on := map[string]bool{}
	for _, s := range []string{"INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL", "PROXY", "NVLS", "BOOTSTRAP", "REG"} {
		on[s] = (listed[s] || listed["ALL"]) != invert
	}
	return on
}

// ---- nccl-tests' options (getopt_long, with glibc's messages)

const perfOptString = "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:"

var perfLongOpts = []struct {
	name  string
	short byte
}{
	{"nthreads", 't'}, {"ngpus", 'g'}, {"minbytes", 'b'}, {"maxbytes", 'e'}, {"stepbytes", 'i'}, {"stepfactor", 'f'},
	{"iters", 'n'}, {"agg_iters", 'm'}, {"warmup_iters", 'w'}, {"run_cycles", 'N'}, {"parallel_init", 'p'},
	{"check", 'c'}, {"op", 'o'}, {"datatype", 'd'}, {"root", 'r'}, {"blocking", 'z'}, {"stream_null", 'y'},
	{"timeout", 'T'}, {"cudagraph", 'G'}, {"report_cputime", 'C'}, {"report_timestamps", 'S'},
	{"output_file", 'J'}, {"average", 'a'}, {"local_register", 'R'}, {"memory", 'M'}, {"help", 'h'},
}

// parsePerfArgs reads nccl-tests' command line. done is true when the run ends here, with code.
func parsePerfArgs(argv0 string, args []string, stdout, stderr io.Writer) (o perfOpts, code int, done bool) {
	o = defaultPerfOpts()
	bad := func() (perfOpts, int, bool) { // nccl-tests: "invalid option", the usage, exit 0
		fmt.Fprintf(stdout, "invalid option '%c'\n", '?')
		perfUsage(stdout, argv0)
		return o, 0, true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var opt byte
		var val string
		switch {
		case a == "--":
			i = len(args)
			continue
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			var match []int
			for k, lo := range perfLongOpts {
				if lo.name == name {
					match = []int{k}
					break
				}
				if strings.HasPrefix(lo.name, name) {
					match = append(match, k)
				}
			}
			switch {
			case len(match) == 0:
				fmt.Fprintf(stderr, "%s: unrecognized option '%s'\n", argv0, a)
				return bad()
			case len(match) > 1:
				fmt.Fprintf(stderr, "%s: option '--%s' is ambiguous\n", argv0, name)
				return bad()
			}
			lo := perfLongOpts[match[0]]
			opt = lo.short
			if opt == 'h' {
				if hasV {
					fmt.Fprintf(stderr, "%s: option '--%s' doesn't allow an argument\n", argv0, lo.name)
					return bad()
				}
				break
			}
			if !hasV {
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "%s: option '--%s' requires an argument\n", argv0, lo.name)
					return bad()
				}
				i++
				v = args[i]
			}
			val = v
		case strings.HasPrefix(a, "-") && len(a) > 1:
			opt = a[1]
			k := strings.IndexByte(perfOptString, opt)
			if k < 0 || opt == ':' {
				fmt.Fprintf(stderr, "%s: invalid option -- '%c'\n", argv0, opt)
				return bad()
			}
			if opt == 'h' {
				break
			}
			if len(a) > 2 {
				val = a[2:]
			} else {
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "%s: option requires an argument -- '%c'\n", argv0, opt)
					return bad()
				}
				i++
				val = args[i]
			}
		default:
			continue // getopt_long permutes operands to the end; nccl-tests ignores them
		}
		switch opt {
		case 't':
			o.nThreads = strtol(val)
		case 'g':
			o.nGpus = strtol(val)
		case 'b', 'e', 'i':
			v := parseSize(val)
			if v < 0 {
				fmt.Fprintf(stderr, "invalid size specified for '%s'\n", map[byte]string{'b': "minbytes", 'e': "maxbytes", 'i': "stepBytes"}[opt])
				return o, 255, true
			}
			*map[byte]*int64{'b': &o.minBytes, 'e': &o.maxBytes, 'i': &o.stepBytes}[opt] = v
		case 'f':
			o.stepFactor = strtol(val)
		case 'n':
			o.iters = strtol(val)
		case 'm':
			o.agg = strtol(val)
		case 'w':
			o.warmup = strtol(val)
		case 'N':
			o.runCycles = strtol(val)
		case 'c':
			o.datacheck = strtol(val)
		case 'p':
			o.parallelInit = strtol(val)
		case 'z':
			o.blocking = strtol(val)
		case 'G':
			o.graph = strtol(val)
		case 'C':
			o.cputime = strtol(val)
		case 'S':
			o.timestamps = strtol(val)
		case 'J':
			o.jsonPath = val
		case 'o':
			switch {
			case val == "all":
				o.ops = ncclOps
			case slices.Contains(ncclOps, val):
				o.ops = []string{val}
			default:
				fmt.Fprintf(stdout, "invalid op %s, defaulting to %s .. \n", val, "sum")
				o.ops = []string{"sum"}
			}
		case 'd':
			if val == "all" {
				o.types = ncclTypes
			} else if t, ok := typeByName(val); ok {
				o.types = []dataType{t}
			} else {
				fmt.Fprintf(stdout, "invalid type %s, defaulting to %s .. \n", val, "float")
				f, _ := typeByName("float")
				o.types = []dataType{f}
			}
		case 'h':
			perfUsage(stdout, argv0)
			return o, 0, true
		default: // -r -y -T -a -R -x -D -V -M: accepted; nothing to model
		}
	}
	if o.minBytes > o.maxBytes {
		fmt.Fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %d > %d\n", o.minBytes, o.maxBytes)
		return o, 255, true
	}
	switch {
	case o.runCycles < 1:
		fmt.Fprintf(stderr, "%s: -N %d (run until killed) is not simulated\n", modelLabel, o.runCycles)
		return o, ExitNotSimulated, true
	case o.iters < 0 || o.agg < 0 || o.warmup < 0 || o.datacheck < 0:
		fmt.Fprintf(stderr, "%s: negative -n, -m, -w or -c is not simulated\n", modelLabel)
		return o, ExitNotSimulated, true
	case o.stepFactor <= 1 && o.stepBytes == 0:
		fmt.Fprintf(stderr, "%s: stepbytes 0 with stepfactor %d would never end\n", modelLabel, o.stepFactor)
		return o, ExitNotSimulated, true
	case o.maxBytes > 1<<40:
		fmt.Fprintf(stderr, "%s: maxbytes %d is beyond any GPU's memory\n", modelLabel, o.maxBytes)
		return o, ExitNotSimulated, true
	case float64(len(o.sizes()))*float64(len(o.types))*float64(len(o.ops))*float64(o.runCycles) > maxRows:
		fmt.Fprintf(stderr, "%s: more than %d rows is not simulated\n", modelLabel, maxRows)
		return o, ExitNotSimulated, true
	}
	return o, 0, false
}

// strtol is C's strtol(s, NULL, 0): leading blanks, a sign, 0x for hex, 0 for octal, digits until the first
// that is not one; nothing readable is 0.
func strtol(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isDigit(s[2], 16):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var v int64
	for i := 0; i < len(s) && isDigit(s[i], base); i++ {
		d := digitVal(s[i])
		if v > (math.MaxInt64-d)/base {
			v = math.MaxInt64 // strtol saturates
			break
		}
		v = v*base + d
	}
	if neg {
		return -v
	}
	return v
}

func digitVal(c byte) int64 {
	switch {
	case c >= '0' && c <= '9':
		return int64(c - '0')
	case c >= 'a' && c <= 'f':
		return int64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int64(c-'A') + 10
	}
	return 99
}

func isDigit(c byte, base int64) bool { return digitVal(c) < base }

func atof(s string) float64 {
	m := leadingFloat.FindString(strings.TrimSpace(s))
	v, _ := strconv.ParseFloat(m, 64)
	return v
}

var (
	leadingFloat = regexp.MustCompile(`^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?`)
	sizeRe       = regexp.MustCompile(`^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(\S?)`)
)

// parseSize is nccl-tests' parsesize: a number with an optional K, M or G (powers of 1024); -1 when unreadable.
func parseSize(s string) int64 {
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v < 0 {
		return -1
	}
	switch m[2] {
	case "":
	case "G", "g":
		v *= 1 << 30
	case "M", "m":
		v *= 1 << 20
	case "K", "k":
		v *= 1 << 10
	default:
		return -1
	}
	if v > math.MaxInt64/2 {
		return -1
	}
	return int64(v)
}

func perfUsage(w io.Writer, argv0 string) {
	fmt.Fprintf(w, "USAGE: %s \n\t"+
		"[-t,--nthreads <num threads>] \n\t"+
		"[-g,--ngpus <gpus per thread>] \n\t"+
		"[-b,--minbytes <min size in bytes>] \n\t"+
		"[-e,--maxbytes <max size in bytes>] \n\t"+
		"[-i,--stepbytes <increment size>] \n\t"+
		"[-f,--stepfactor <increment factor>] \n\t"+
		"[-n,--iters <iteration count>] \n\t"+
		"[-m,--agg_iters <aggregated iteration count>] \n\t"+
		"[-w,--warmup_iters <warmup iteration count>] \n\t"+
		"[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"+
		"[-p,--parallel_init <0/1>] \n\t"+
		"[-c,--check <check iteration count>] \n\t"+
		"[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"+
		"[-d,--datatype <nccltype/all>] \n\t"+
		"[-r,--root <root>] \n\t"+
		"[-z,--blocking <0/1>] \n\t"+
		"[-y,--stream_null <0/1>] \n\t"+
		"[-T,--timeout <time in seconds>] \n\t"+
		"[-G,--cudagraph <num graph launches>] \n\t"+
		"[-C,--report_cputime <0/1>] \n\t"+
		"[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"+
		"[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)] \n\t"+
		"[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"+
		"[-h,--help]\n"+
		"%s: every number is computed from %s, nothing is measured; not nccl-tests.\n", path.Base(argv0), modelLabel, FabricEnv)
}
