package phases

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/remote"
)

// bench is one nccl-tests invocation: which binary, which sweep.
type bench struct {
	binary             string
	min, max           inventory.Bytes
	factor, iters, wup int
	gpus               int    // -g: devices per process
	json               string // -J: where rank 0 writes nccl-tests' JSON report (a shell word)
}

func allReduceBench(a inventory.AllReduce) bench {
	return bench{binary: a.Binary, min: a.MinBytes, max: a.MaxBytes, factor: a.Factor, iters: a.Iters, wup: a.Warmup, gpus: 1}
}

// collectiveBinary is NAME_perf beside the all-reduce binary.
func collectiveBinary(allReduce, collective string) string {
	if dir := path.Dir(allReduce); strings.Contains(allReduce, "/") {
		return path.Join(dir, collective+"_perf")
	}
	return collective + "_perf"
}

func (b bench) args() []string {
	args := []string{remote.Quote(b.binary), "-b", fmt.Sprint(int64(b.min)), "-e", fmt.Sprint(int64(b.max)),
		"-f", fmt.Sprint(b.factor), "-n", fmt.Sprint(b.iters), "-w", fmt.Sprint(b.wup), "-c", "1", "-g", fmt.Sprint(b.gpus)}
	if b.json != "" {
		args = append(args, "-J", b.json)
	}
	return args
}

// ncclEnv asks NCCL to say which algorithm and protocol it chose. For two
// nodes the ring is forced: tree and NVLS figures exceed the NIC's line
// rate there (DESIGN.md, measurement rules).
func ncclEnv(hosts int) []string {
	env := []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING"}
	if hosts == 2 {
		env = append(env, "NCCL_ALGO=Ring")
	}
	return env
}

// job is one benchmark run across a set of nodes.
type job struct {
	nodes        []*orchestrator.Node
	ranksPerNode int
	bench        bench
	log          string // the raw log's name (phase, pair)
}

// command is the launcher's command line: mpirun's, run on the first
// node, or srun's, run on the Slurm login node.
func (j job) command(w *orchestrator.Window) string {
	a := w.Inv.Phases.AllReduce
	if a.Launcher == "srun" {
		return j.srunCommand(w)
	}
	var hosts []string
	for _, n := range j.nodes {
		hosts = append(hosts, fmt.Sprintf("%s:%d", w.FabricHost(n), j.ranksPerNode))
	}
	// Addresses are validated (inventory.ValidHost); quoted all the same.
	args := []string{"mpirun", "$ROOT", "-np", fmt.Sprint(len(j.nodes) * j.ranksPerNode), "-H", remote.Quote(strings.Join(hosts, ",")),
		// mpirun's daemons reach the nodes with the window's key only.
		"--mca", "plm_rsh_args", `"-F ` + nodeDir(w) + `/ssh/config"`, "-x", "GPUACCEPT_RUN"}
	for _, e := range ncclEnv(len(j.nodes)) {
		args = append(args, "-x", e)
	}
	for _, m := range a.MPIArgs {
		args = append(args, remote.Quote(m))
	}
	args = append(args, j.bench.args()...)
	// mpirun refuses root unless told; the window may well run as root.
	return `ROOT=; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root; ` + strings.Join(args, " ")
}

// srunCommand launches one task per GPU on every node through Slurm, the
// PMI plugin wiring the ranks together; the environment travels with it.
func (j job) srunCommand(w *orchestrator.Window) string {
	sl := w.Inv.Slurm
	var hosts []string
	for _, n := range j.nodes {
		hosts = append(hosts, w.FabricHost(n))
	}
	env := ncclEnv(len(j.nodes))
	// Open MPI reads under srun from the environment what mpirun takes as
	// --mca pairs; the inventory's mpi_args serve both launchers.
	// (validated as --mca KEY VALUE triples).
	for m := w.Inv.Phases.AllReduce.MPIArgs; len(m) >= 3; m = m[3:] {
		env = append(env, "OMPI_MCA_"+m[1]+"="+m[2])
	}
	image := containerImageArgs(w)
	if len(image) > 0 {
		env = append(env, containerGPUs(w)...)
	}
	args := append(envPrefix(env), "srun", fmt.Sprintf("--nodes=%d", len(j.nodes)),
		fmt.Sprintf("--ntasks-per-node=%d", j.ranksPerNode), "--nodelist="+remote.Quote(strings.Join(hosts, ",")),
		"--mpi="+remote.Quote(sl.MPI), "--kill-on-bad-exit=1", "--job-name="+remote.Quote(j.jobName(w)))
	if job := w.SlurmJob(); job != "" {
		// A step of the window's own allocation, which holds the nodes
		// (exclusively): a job of its own would wait for them forever.
		args = append(args, "--jobid="+job, "--overlap")
	} else {
		if sl.Partition != "" {
			args = append(args, "--partition="+remote.Quote(sl.Partition))
		}
		if sl.Account != "" {
			args = append(args, "--account="+remote.Quote(sl.Account))
		}
	}
	for _, a := range sl.SrunArgs {
		args = append(args, remote.Quote(a))
	}
	// In the pinned image where the image phase imported it through Pyxis
	// (image.runtime pyxis): the benchmark is then the image's.
	args = append(args, image...)
	return strings.Join(append(args, j.bench.args()...), " ")
}

// jobName names the Slurm job, so a run that must be ended can be
// cancelled by name without touching the others.
func (j job) jobName(w *orchestrator.Window) string { return "gpuaccept-" + w.RunID() + "-" + j.log }

// launcher is where the job's command runs.
func (j job) launcher(ctx context.Context, w *orchestrator.Window) (*orchestrator.Node, error) {
	if len(j.nodes) > 1 && w.Inv.Phases.AllReduce.Launcher == "srun" {
		return w.SlurmLogin(ctx)
	}
	return j.nodes[0], nil
}

// Sweep is one run of a benchmark.
type Sweep struct {
	Nodes     []string          `json:"nodes,omitempty"`
	Judgement *fabric.Judgement `json:"judgement,omitempty"`
	// Choices: what NCCL's lines naming the algorithm and protocol it used
	// say, per algorithm/protocol; Algorithms: those lines, verbatim, when
	// none of them could be read as a choice.
	Algorithms []string           `json:"algorithms,omitempty"`
	Choices    []parse.NCCLChoice `json:"nccl_choices,omitempty"`
	Error      string             `json:"error,omitempty"`
	// Silent are the nodes that did not answer after the run failed: the
	// likely cause. Ended counts the ranks ended on each node afterwards.
	Silent []string `json:"silent,omitempty"`
	// Source: the results table came from nccl-tests' -J JSON report or
	// from its text output.
	Source string         `json:"source,omitempty"`
	Ended  map[string]int `json:"ended,omitempty"`
	Secs   float64        `json:"seconds"`
	// ExitHung: the run printed its whole table and footer, then its
	// launcher did not exit within the timeout (MPI_Finalize or the
	// daemons' teardown stuck): the figures printed are judged, the ranks
	// ended, and the verdicts say so.
	ExitHung string `json:"exit_hung,omitempty"`
	// NCCLVersion is the NCCL library version the run printed
	// ("NCCL version 2.21.5+cuda12.4", with NCCL_DEBUG=INFO), when it did.
	NCCLVersion string `json:"nccl_version,omitempty"`
	// Points: the sweep's out-of-place bus bandwidth per message size, for
	// the report's chart.
	Points []SweepPoint `json:"points,omitempty"`
	// Faults: what Open MPI and NCCL said of a run that failed or hung
	// (a host that could not reach a peer, a host lost), with the
	// window's node names where the hosts and addresses are its nodes'.
	Faults []SweepFault `json:"faults,omitempty"`
	// NotMeasured: the benchmark is not in the pinned image the run was
	// to run in (Pyxis): a tool missing, not a broken fabric. Error says
	// the same, so that nothing reads the sweep as one that ran.
	NotMeasured string `json:"not_measured,omitempty"`
}

// SweepFault is one fault a failed run's output named.
type SweepFault struct {
	parse.Fault
	// From and To are the window's nodes the fault is between (To empty
	// when only a lost host was named); "" where the name or address is
	// no node's.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// SweepPoint is one row of a sweep.
type SweepPoint struct {
	Bytes int64   `json:"bytes"`
	BusBW float64 `json:"busbw_gbs"`
	// TimeUS is the out-of-place time of one collective at that size: the
	// latency of a small message (allreduce_latency.go).
	TimeUS float64 `json:"time_us,omitempty"`
}

// run launches the job and checks that it ran as planned: a binary built
// without MPI runs one single-rank copy per rank and prints numbers that
// mean nothing (nccl-tests #27, #213). A hung collective never fails by
// itself (a cut link hangs mpirun for minutes), so the run is bounded by
// timeout; when it fails, every rank left on every node is ended and the
// nodes that no longer answer are named.
func (j job) run(ctx context.Context, w *orchestrator.Window, timeout time.Duration) Sweep {
	start := time.Now()
	ctx = orchestrator.WithLog(ctx, j.log)
	s := j.runOnce(ctx, w, timeout)
	// A step whose image lacks the benchmark ran nothing to end.
	if (s.Error != "" || s.ExitHung != "") && s.NotMeasured == "" && ctx.Err() == nil {
		if j.usesSrun(w) {
			if err := j.scancel(ctx, w); err != nil {
				s.Error = join(s.Error, err.Error())
			}
		}
		s.Silent, s.Ended = endRanks(ctx, w, j.nodes, j.bench.binary)
		if len(s.Silent) > 0 {
			s.Error = join(strings.Join(s.Silent, ", ")+" stopped answering", s.Error)
		}
	}
	for _, n := range j.nodes {
		s.Nodes = append(s.Nodes, n.Name)
	}
	s.Secs = time.Since(start).Seconds()
	return s
}

func (j job) runOnce(ctx context.Context, w *orchestrator.Window, timeout time.Duration) Sweep {
	if sl := w.Inv.Slurm; j.usesSrun(w) && sl.Timeout > 0 {
		timeout = min(timeout, sl.Timeout)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	from, err := j.launcher(sctx, w)
	if err != nil {
		return Sweep{Error: err.Error()}
	}
	// -J is asked of the node's benchmark, and the image's would write the
	// report (if it takes -J at all, and sees the path): not in a container.
	if len(containerImageArgs(w)) == 0 && j.supportsJSON(sctx, w) {
		// $HOME expands on the node that runs rank 0.
		j.bench.json = fmt.Sprintf(`"%s/%s-%d.json"`, nodeDir(w), j.log, time.Now().UnixNano())
	}
	var command string
	hosts := len(j.nodes)
	if hosts == 1 && j.bench.gpus >= 1 && j.ranksPerNode == 1 {
		// Inside one node: one process drives every GPU (-g).
		command = strings.Join(append(envPrefix(ncclEnv(1)), j.bench.args()...), " ")
	} else {
		command = j.command(w)
	}
	out, errOut, err := runBoth(sctx, w, from, command)
	if err != nil && j.usesSrun(w) && len(containerImageArgs(w)) > 0 {
		if why := missingInImage(string(out)+"\n"+string(errOut), j.bench.binary, w, j.nodes); why != "" {
			return Sweep{Error: why, NotMeasured: why}
		}
	}
	faulted := func(s Sweep) Sweep {
		s.Faults = faultsOf(w, j.nodes, string(out)+"\n"+string(errOut))
		if len(s.Faults) > 0 {
			s.Error = join(faultsText(s.Faults), s.Error)
		}
		if j.usesSrun(w) {
			s.Error = join(srunFirstEnded(string(errOut)), s.Error)
		}
		return s
	}
	if from.Index < 0 {
		// The login node's log holds the run; each node's evidence says where.
		for _, n := range j.nodes {
			if f, _, lerr := w.LogFile(n, j.log); lerr == nil {
				fmt.Fprintf(f, "# launched with srun from the Slurm login node: raw/%s/%s.log.gz\n", from.Name, j.log)
				f.Close()
			}
		}
	}
	r, perr := parse.NCCLTests(string(out))
	hung := ""
	if sctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		// A table with its footer and no error is a finished sweep whose
		// launcher hung on the way out (seen at 60 lab hosts): its figures
		// are as good as any, and throwing them away sent the window
		// looking for a fault the fabric did not have.
		if perr != nil || !r.OK {
			return faulted(Sweep{Error: fmt.Sprintf("the collective did not finish within %s", timeout)})
		}
		hung = fmt.Sprintf("the launcher did not exit within %s of its start, after printing its whole result", timeout)
		err = nil
		// The -J report is read with a context of its own: sctx is spent.
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if errors.Is(perr, parse.ErrNotRecognized) {
		if err != nil {
			return faulted(Sweep{Error: err.Error()})
		}
		return faulted(Sweep{Error: "no nccl-tests output: " + perr.Error()})
	}
	source := "text"
	if j.bench.json != "" && j.mergeJSON(sctx, w, &r) {
		source = "json"
	}
	judge := fabric.Judge(r, w.Inv, "")
	// A sweep keeps the verdicts of its own that did not pass: the phase's
	// judge makes the requirements' verdicts from the sweeps' figures, and
	// two passing verdicts a sweep, titles and all, three sweeps a node,
	// were a tenth of a fleet's run.json.
	judge.Verdicts = slices.DeleteFunc(judge.Verdicts, func(v record.Verdict) bool { return v.Status == record.Pass })
	s := Sweep{Judgement: &judge, Choices: r.Choices(), Source: source, NCCLVersion: r.NCCLVersion, ExitHung: hung}
	if len(s.Choices) == 0 {
		// NCCL's own lines are kept only when they said nothing the
		// record could read: the raw log has them all, and a sweep's
		// eight tuning lines on each of a thousand nodes were a tenth of
		// run.json.
		s.Algorithms = capLines(r.Algorithms, 20)
	}
	for _, row := range r.Rows {
		s.Points = append(s.Points, SweepPoint{Bytes: row.Size, BusBW: row.OOP.BusBW, TimeUS: row.OOP.TimeUS})
	}
	ranks := hosts * j.ranksPerNode * j.bench.gpus
	switch {
	case judge.Ranks != ranks || judge.Hosts != hosts:
		s.Error = fmt.Sprintf("the benchmark ran as %d rank(s) on %d host(s), planned %d on %d: not one job over the planned nodes (a build without MPI runs single-rank copies)", judge.Ranks, judge.Hosts, ranks, hosts)
	case err != nil:
		s.Error = err.Error()
	case perr != nil:
		s.Error = perr.Error()
	}
	if s.Error != "" {
		return faulted(s)
	}
	return s
}

// faultsOf is what out says went wrong between the run's nodes, each host
// and address named as the window's node where it is one: a node's own
// name, the host name it answered with, its address or fabric address.
func faultsOf(w *orchestrator.Window, nodes []*orchestrator.Node, out string) []SweepFault {
	found := parse.CollectiveFaults(out)
	if len(found) == 0 {
		return nil
	}
	// The host names the nodes answered with first, each only when one
	// node gave it (cloud images share "ubuntu"); then the inventory's
	// names and addresses, which no answer overrides.
	names := map[string]string{}
	said := map[string][]string{}
	for _, n := range nodes {
		var reached Reached
		if _, ok := w.Result("connect", n.Index, &reached); ok && reached.Hostname != "" {
			short, _, _ := strings.Cut(reached.Hostname, ".")
			for _, h := range uniq([]string{reached.Hostname, short}) {
				said[h] = append(said[h], n.Name)
			}
		}
	}
	for h, ns := range said {
		if len(ns) == 1 {
			names[h] = ns[0]
		}
	}
	for _, n := range nodes {
		names[w.FabricHost(n)] = n.Name
		if n.Index >= 0 && n.Index < len(w.Inv.Nodes) {
			names[w.Inv.Nodes[n.Index].Address] = n.Name
		}
	}
	for _, n := range nodes {
		names[n.Name] = n.Name
	}
	var faults []SweepFault
	for _, f := range found {
		sf := SweepFault{Fault: f, From: names[f.Local], To: names[f.Peer]}
		if f.PeerAddr != "" {
			sf.To = names[f.PeerAddr]
		}
		if f.Lost != "" {
			sf.From = names[f.Lost]
		}
		faults = append(faults, sf)
		if len(faults) == 16 {
			break
		}
	}
	return faults
}

// faultsText names the links and nodes the faults are on: "h3 could not
// reach h1 (connect() to 10.0.0.11:1025 failed: ... (Open MPI))".
func faultsText(fs []SweepFault) string {
	var parts []string
	// The first few: the rest are in the sweep's faults.
	const said = 3
	for _, f := range fs[:min(said, len(fs))] {
		from, to := orElse(f.From, f.Local), orElse(f.To, orElse(f.Peer, f.PeerAddr))
		switch {
		case f.Lost != "":
			parts = append(parts, fmt.Sprintf("%s was lost (%s)", orElse(f.From, f.Lost), f.Said))
		default:
			parts = append(parts, fmt.Sprintf("%s could not reach %s (%s)", from, to, f.Said))
		}
	}
	if len(fs) > said {
		parts = append(parts, fmt.Sprintf("and %d more", len(fs)-said))
	}
	return strings.Join(parts, "; ")
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// supportsJSON: the installed nccl-tests writes -J reports (2.17 and
// later say --output_file in their usage). Asked once per binary.
func (j job) supportsJSON(ctx context.Context, w *orchestrator.Window) bool {
	n := j.nodes[0]
	v, _ := w.Shared("json:"+j.bench.binary, func() (any, error) {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, _ := runOn(pctx, w, n, remote.Quote(j.bench.binary)+" -h 2>&1 | grep -c -e --output_file")
		return strings.TrimSpace(string(out)) != "" && strings.TrimSpace(string(out)) != "0", nil
	})
	ok, _ := v.(bool)
	return ok
}

// mergeJSON reads the -J report from the node that ran rank 0 (the first,
// for mpirun; any, under srun) and takes the results from it: full
// precision, no column parsing. Ranks, hosts and NCCL's lines stay the
// text's (nccl-tests' JSON lists one device per process).
func (j job) mergeJSON(ctx context.Context, w *orchestrator.Window, r *parse.NCCL) bool {
	for _, n := range j.nodes {
		// The report copies rank 0's whole environment (tokens and keys
		// on a real node): neither the log nor the record keeps more of
		// it than the measurement needs.
		out, err := runLogged(ctx, w, n, "cat "+j.bench.json+" 2>/dev/null && rm -f "+j.bench.json, nil, redact.NCCLEnv)
		if err != nil || len(out) == 0 {
			continue
		}
		jr, perr := parse.NCCLTests(string(out))
		if errors.Is(perr, parse.ErrNotRecognized) || len(jr.Rows) == 0 {
			return false
		}
		r.Rows, r.OutOfBounds, r.AvgBusBW = jr.Rows, jr.OutOfBounds, jr.AvgBusBW
		r.OK = r.OK && jr.OK
		r.Errors = append(r.Errors, jr.Errors...)
		return true
	}
	return false
}

func (j job) usesSrun(w *orchestrator.Window) bool {
	return len(j.nodes) > 1 && w.Inv.Phases.AllReduce.Launcher == "srun"
}

// srunTaskEnded is srun's line on tasks of a step that ended badly:
// "srun: error: h2: task 0: Exited with exit code 1", "srun: error:
// h[3-4]: tasks 1-2: Terminated".
var srunTaskEnded = regexp.MustCompile(`(?m)^srun: error: (\S+): (tasks? \S+): (.+)$`)

// srunFirstEnded names the task that ended a step first, as srun said it
// ("" when srun said none): under --kill-on-bad-exit srun then terminates
// every other task, and its lines about those are all that a failed
// command's last lines hold, which named no node.
func srunFirstEnded(stderr string) string {
	// Only before srun began ending the step: after it, its KILL of a
	// task that outlived the TERM says "Killed" of a task it ended.
	if i := strings.Index(stderr, "_step_signal: Terminating StepId"); i >= 0 {
		stderr = stderr[:i]
	}
	for _, m := range srunTaskEnded.FindAllStringSubmatch(stderr, -1) {
		if what := strings.TrimSpace(m[3]); what != "Terminated" {
			return fmt.Sprintf("%s on %s ended the step first (srun: %s)", m[2], m[1], remote.Shorten(what, 80))
		}
	}
	return ""
}

// scancel ends the job's Slurm job: killing srun alone may leave its
// step running until slurmctld notices.
func (j job) scancel(ctx context.Context, w *orchestrator.Window) error {
	login, err := w.SlurmLogin(ctx)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := "scancel --name=" + remote.Quote(j.jobName(w))
	if job := w.SlurmJob(); job != "" {
		// A step of the window's job: scancel names steps by ID only.
		cmd = "set -o pipefail; squeue -h -s -j " + job + " -o '%i %j' | awk -v n=" + remote.Quote(j.jobName(w)) +
			" '$2 == n { print $1 }' | xargs -r scancel"
	}
	_, err = runOn(sctx, w, login, cmd)
	return err
}

func envPrefix(env []string) []string {
	var out []string
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		out = append(out, k+"="+remote.Quote(v))
	}
	return out
}

func capLines(lines []string, n int) []string {
	if len(lines) > n {
		return append(lines[:n:n], fmt.Sprintf("... %d more", len(lines)-n))
	}
	return lines
}

// endRanks ends what a failed run left on each node: the benchmark's
// processes (they carry the window's mark) and Open MPI's daemons started
// for the window (their command line names the window's ssh config; read
// from /proc, since a pod's image may have no pgrep). The
// call doubles as the liveness probe: a node that cannot run it within
// 20 s is named silent.
func endRanks(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, binary string) (silent []string, ended map[string]int) {
	script := `n=0
for e in $(grep -lsxzF "GPUACCEPT_RUN=$1" /proc/[0-9]*/environ); do
  p=${e#/proc/}; p=${p%/environ}
  case "$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)" in *"$2"*) kill -KILL "$p" 2>/dev/null && n=$((n+1)) ;; esac
done
for c in /proc/[0-9]*/cmdline; do
  p=${c#/proc/}; p=${p%/cmdline}
  case "$(tr '\0' ' ' <"$c" 2>/dev/null)" in *[op]rted*"/.gpuaccept/$1/ssh/config"*) kill -KILL "$p" 2>/dev/null && n=$((n+1)) ;; esac
done
echo "$n"`
	cmd := "bash -c " + remote.Quote(script) + " endranks " + remote.Quote(w.RunID()) + " " + remote.Quote(path.Base(binary))
	var mu sync.Mutex
	ended = map[string]int{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			var out strings.Builder
			var err error
			if e := n.Exec(); e == nil || e.Lost() {
				err = errors.New("connection lost")
			} else {
				// Without the window's mark: it must not end itself.
				err = e.Run(pctx, remote.Cmd{Command: cmd, Stdout: &out})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				silent = append(silent, n.Name)
				return
			}
			var k int
			fmt.Sscan(out.String(), &k)
			if k > 0 {
				ended[n.Name] = k
			}
		}()
	}
	wg.Wait()
	return orderBy(nodes, silent), ended
}

// orderBy sorts names in the nodes' order.
func orderBy(nodes []*orchestrator.Node, names []string) []string {
	var out []string
	for _, n := range nodes {
		for _, m := range names {
			if m == n.Name {
				out = append(out, m)
			}
		}
	}
	return out
}

// execveMissing is slurmstepd's line for a task whose program it could
// not find ("slurmstepd-h2: error: execve(): all_reduce_perf: No such
// file or directory"), srun --label's "N: " before it or not.
var execveMissing = regexp.MustCompile(`(?m)^(?:\s*\d+: )?slurmstepd(?:-(\S+?))?: error: execve\(\): (\S+): No such file or directory\s*$`)

// missingInImage says which nodes' containers lack the benchmark, from
// slurmstepd's execve error for it in a step that ran in the pinned image,
// as a NOT MEASURED reason; "" when out says no such thing of binary. A
// benchmark the image lacks is a tool missing, not a fabric that failed.
func missingInImage(out, binary string, w *orchestrator.Window, nodes []*orchestrator.Node) string {
	byHost := map[string]string{}
	for _, n := range nodes {
		byHost[w.FabricHost(n)], byHost[n.Name] = n.Name, n.Name
	}
	var on []string
	found := false
	for _, m := range execveMissing.FindAllStringSubmatch(out, -1) {
		if path.Base(m[2]) != path.Base(binary) {
			continue
		}
		found = true
		if name, ok := byHost[m[1]]; ok && !slices.Contains(on, name) {
			on = append(on, name)
		}
	}
	if !found {
		return ""
	}
	where := "the pinned image (image.reference)"
	if len(on) > 0 {
		where += " on " + hostlist.Compress(on)
	}
	return fmt.Sprintf("%s not in %s: %s not measured", path.Base(binary), where, path.Base(binary))
}
