package standins

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// geteuid is os.Geteuid; tests replace it to see the root refusal whoever runs them.
var geteuid = os.Geteuid

// Open MPI 4's messages, copied from genuine outputs (help-orterun.txt, help-orte-rmaps-base.txt,
// help-plm-base.txt, errmgr); mpirun exits 1 after each.
const (
	ompiRule = "--------------------------------------------------------------------------\n"

	ompiRootMsg = ompiRule + `mpirun has detected an attempt to run as root.

Running as root is *strongly* discouraged as any mistake (e.g., in
defining TMPDIR) or bug can result in catastrophic damage to the OS
file system, leaving your system in an unusable state.

We strongly suggest that you run mpirun as a non-root user.

You can override this protection by adding the --allow-run-as-root option
to the cmd line or by setting two environment variables in the following way:
the variable OMPI_ALLOW_RUN_AS_ROOT=1 to indicate the desire to override this
protection, and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 to confirm the choice and
add one more layer of certainty that you want to do so.
We reiterate our advice against doing so - please proceed at your own risk.
` + ompiRule

	ompiNoExecutableMsg = ompiRule + `No executable was specified on the mpirun command line.

Aborting.
` + ompiRule

	// %d slots, %s the application as given.
	ompiSlotsMsg = ompiRule + `There are not enough slots available in the system to satisfy the %d
slots that were requested by the application:

  %s

Either request fewer slots for your application, or make more slots
available for use.

A "slot" is the Open MPI term for an allocatable unit where we can
launch a process.  The number of slots available are defined by the
environment in which Open MPI processes are run:

  1. Hostfile, via "slots=N" clauses (N defaults to number of
     processor cores if not provided)
  2. The --host command line parameter, via a ":N" suffix on the
     hostname (N defaults to 1 if not provided)
  3. Resource manager (e.g., SLURM, PBS/Torque, LSF, etc.)
  4. If none of a hostfile, the --host command line parameter, or an
     RM is present, Open MPI defaults to the number of processor cores

In all the above cases, if you want Open MPI to default to the number
of hardware threads instead of the number of processor cores, use the
--use-hwthread-cpus option.

Alternatively, you can use the --oversubscribe option to ignore the
number of available slots when deciding the number of processes to
launch.
` + ompiRule

	ompiDaemonsMsg = ompiRule + `ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
` + ompiRule

	// %s the node, %s the executable.
	ompiNotFoundMsg = ompiRule + `mpirun was unable to find the specified executable file, and therefore
did not launch the job.  This error was first reported for process
rank 0; it may have occurred for other processes as well.

NOTE: A common cause for this error is misspelling a mpirun command
      line parameter option (remember that mpirun interprets the first
      unrecognized command line token as the executable).

Node:       %s
Executable: %s
` + ompiRule

	// %d the job id, %d the exit code.
	ompiNonZeroMsg = ompiRule + `Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
` + ompiRule + ompiRule + `mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[%d,1],0]
  Exit code:    %d
` + ompiRule
)

// runMPIRun models Open MPI 4's mpirun for the command lines gpuaccept runs:
//
//	mpirun [--allow-run-as-root] [-np N] -H h1:k,h2:k,... [-x VAR[=VAL]]... [--mca KEY VAL]... [--tag-output]
//	       [--bind-to X] [--map-by slot|core|socket|numa|node] [--oversubscribe] [-q] BINARY ARGS...
//
// It is NOT a launcher: it checks what mpirun checks, in mpirun's order — running as root, the hosts (each must
// be a host of FabricEnv: mpirun could not start its daemon elsewhere), the slots (-np beyond the -H slots is
// refused unless --oversubscribe, which is not simulated; no -np means every slot), the executable (its name must
// be one of the nccl-tests binaries; the path is not looked at) — maps ranks by slot (or round-robin with
// --map-by node), and then runs BINARY as ONE invocation of the nccl-tests model for the whole job, in this
// process, with the -x variables set. Its output is rank 0's, as nccl-tests prints only there; --tag-output
// labels each line "[1,0]<stdout>:". A -J file is written on the node that ran mpirun.
func runMPIRun(args []string, env environ, stdout, stderr io.Writer) int {
	notSim := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: mpirun %s is not simulated\n", modelLabel, fmt.Sprintf(format, a...))
		return ExitNotSimulated
	}
	np := int64(-1)
	var hostSpecs []string
	allowRoot, tag, oversubscribe := false, false, false
	mapBy := "slot"
	appEnv := env
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		nargs := 0
		switch a {
		case "--allow-run-as-root", "-allow-run-as-root":
			allowRoot = true
		case "--tag-output", "-tag-output":
			tag = true
		case "--oversubscribe", "-oversubscribe":
			oversubscribe = true
		case "-q", "--quiet", "-quiet":
		case "-np", "--np", "-n", "--n", "-c", "-H", "-host", "--host", "-x", "--bind-to", "-bind-to", "--map-by", "-map-by":
			nargs = 1
		case "--mca", "-mca":
			nargs = 2
		default:
			return notSim("option %q", a)
		}
		if i+nargs >= len(args) {
			return notSim("option %q without its value", a)
		}
		v := args[i+1 : i+1+nargs]
		i += nargs
		switch a {
		case "-np", "--np", "-n", "--n", "-c":
			n, err := strconv.ParseInt(v[0], 10, 32)
			if err != nil || n < 0 {
				return notSim("%s %q", a, v[0])
			}
			np = n
		case "-H", "-host", "--host":
			hostSpecs = append(hostSpecs, v[0])
		case "-x":
			name, val, hasVal := strings.Cut(v[0], "=")
			if !hasVal {
				val, hasVal = env.get(name)
			}
			if name != "" && hasVal {
				appEnv = appEnv.with(name, val)
			}
		case "--map-by", "-map-by":
			mapBy, _, _ = strings.Cut(strings.ToLower(v[0]), ":")
		}
	}

	if geteuid() == 0 && !allowRoot {
		r, _ := env.get("OMPI_ALLOW_RUN_AS_ROOT")
		c, _ := env.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
		if r != "1" || c != "1" {
			fmt.Fprint(stderr, ompiRootMsg)
			return 1
		}
	}
	if i == len(args) {
		fmt.Fprint(stderr, ompiNoExecutableMsg)
		return 1
	}
	binary, appArgs := args[i], args[i+1:]
	if len(hostSpecs) == 0 {
		return notSim("without -H (the model needs the hosts)")
	}

	// The hosts, each with its slots, in the order given; a host given twice adds up.
	var hosts []string
	slots := map[string]int64{}
	for _, spec := range hostSpecs {
		for _, h := range strings.Split(spec, ",") {
			name, n, hasN := strings.Cut(h, ":")
			k := int64(1)
			if hasN {
				v, err := strconv.ParseInt(n, 10, 32)
				if err != nil || v < 1 {
					return notSim("-H entry %q", h)
				}
				k = v
			}
			if name == "" {
				continue
			}
			if _, seen := slots[name]; !seen {
				hosts = append(hosts, name)
			}
			slots[name] += k
		}
	}
	spec, ok := env.get(FabricEnv)
	if !ok {
		fmt.Fprintf(stderr, "%s: %s is not set: no fabric to model\n", modelLabel, FabricEnv)
		return ExitNotSimulated
	}
	fabric, err := ParseFabric(spec)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", modelLabel, FabricEnv, err)
		return ExitNotSimulated
	}
	for _, h := range hosts {
		if _, ok := fabricHost(fabric, h); !ok {
			fmt.Fprintf(stderr, "%s: %q is not a host of the simulated fabric (%s=%s): mpirun cannot start its daemon there\n", modelLabel, h, FabricEnv, spec)
			fmt.Fprint(stderr, ompiDaemonsMsg)
			return 1
		}
	}
	var total int64
	for _, h := range hosts {
		total += slots[h]
	}
	if np <= 0 {
		np = total
	}
	if np > total {
		if oversubscribe {
			return notSim("--oversubscribe beyond the -H slots (%d ranks, %d slots)", np, total)
		}
		fmt.Fprintf(stderr, ompiSlotsMsg, np, binary)
		return 1
	}
	var procs []string
	switch mapBy {
	case "slot", "core", "socket", "numa", "hwthread", "l1cache", "l2cache", "l3cache", "board":
		for _, h := range hosts {
			for k := int64(0); k < slots[h] && int64(len(procs)) < np; k++ {
				procs = append(procs, h)
			}
		}
	case "node":
		used := map[string]int64{}
		for int64(len(procs)) < np {
			for _, h := range hosts {
				if used[h] < slots[h] && int64(len(procs)) < np {
					procs = append(procs, h)
					used[h]++
				}
			}
		}
		// nccl-tests numbers devices by process order on a host, which round-robin keeps.
	default:
		return notSim("--map-by %q", mapBy)
	}
	if _, ok := collectiveOf(binary); !ok {
		if found(binary, env) {
			return notSim("of %q (only the nccl-tests binaries are modelled)", binary)
		}
		node, _ := env.get(FabricNodeEnv)
		if node == "" {
			node = procs[0]
		}
		fmt.Fprintf(stderr, ompiNotFoundMsg, node, binary)
		return 1
	}

	pids := make([]int, len(procs))
	for r := range pids {
		pids[r] = os.Getpid() + 1 + r
	}
	out, errOut := stdout, stderr
	var tags []*tagWriter
	if tag {
		to, te := &tagWriter{w: stdout, prefix: "[1,0]<stdout>:"}, &tagWriter{w: stderr, prefix: "[1,0]<stderr>:"}
		out, errOut, tags = to, te, []*tagWriter{to, te}
	}
	code := runPerf(perfJob{argv0: binary, args: appArgs, env: appEnv, procs: procs, pids: pids}, out, errOut)
	for _, t := range tags {
		t.end()
	}
	if code != 0 {
		fmt.Fprintf(stderr, ompiNonZeroMsg, os.Getpid()&0xffff, code)
	}
	return code
}

// found says whether a real mpirun would find binary: a path that exists, or a name on PATH.
func found(binary string, env environ) bool {
	if strings.Contains(binary, "/") {
		_, err := os.Stat(binary)
		return err == nil
	}
	p, _ := env.get("PATH")
	for _, dir := range filepath.SplitList(p) {
		if fi, err := os.Stat(filepath.Join(dir, binary)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// tagWriter prefixes every line with mpirun --tag-output's label.
type tagWriter struct {
	w      io.Writer
	prefix string
	mid    bool // inside a line
}

func (t *tagWriter) Write(p []byte) (int, error) {
	n := len(p)
	var b []byte
	for len(p) > 0 {
		if !t.mid {
			b = append(b, t.prefix...)
			t.mid = true
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b = append(b, p...)
			break
		}
		b = append(b, p[:i+1]...)
		p = p[i+1:]
		t.mid = false
	}
	_, err := t.w.Write(b)
	return n, err
}

// end finishes a last line without a newline, as mpirun's output forwarding does.
func (t *tagWriter) end() {
	if t.mid {
		t.w.Write([]byte("\n"))
		t.mid = false
	}
}
