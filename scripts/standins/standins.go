package standins

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/scripts/standins/openai"
)

// OpenAIServer is the `standin openai-server FLAGS` command: an OpenAI-compatible server that answers as vLLM's
// does (package openai), for inference load tests on lab hosts and in the demo.
const OpenAIServer = "openai-server"

// DiagSecondsEnv names the environment variable that makes `dcgmi diag` wait that many seconds (a decimal
// number, default 0) before it answers, so a test can kill a node mid-diagnostic. Nothing else ever waits.
const DiagSecondsEnv = "GPUACCEPT_STANDIN_DIAG_SECONDS"

// ExitNotSimulated is the exit status of an invocation the stand-in does not simulate (a real option, subcommand
// or field for which there is no genuine output to replay). Its message on stderr names the stand-in and profile
// so it cannot be taken for the real tool's.
const ExitNotSimulated = 2

// ExitNotInstalled is the shell's exit status for a command that is not installed on the node.
const ExitNotInstalled = 127

// Main answers one invocation of tool (nvidia-smi, dcgmi, ibstat, ibv_devinfo) with args as the node of profile
// would, writing what the real tool writes to stdout and stderr, and returns the exit status. It never waits,
// except `dcgmi diag` when DiagSecondsEnv is set and nvidia-smi's loop (-l, -lms), which runs until the process
// is killed. Main keeps no state but the telemetry's (StateEnv): calls may run concurrently.
func Main(profileName, tool string, args []string, stdout, stderr io.Writer) int {
	p, err := lookup(profileName)
	if err != nil {
		fmt.Fprintf(stderr, "gpuaccept standin: %v\n", err)
		return ExitNotSimulated
	}
	if !slices.Contains(allTools, tool) {
		fmt.Fprintf(stderr, "gpuaccept standin: unknown tool %q (stand-ins: %s)\n", tool, strings.Join(allTools, ", "))
		return ExitNotSimulated
	}
	if !p.has(tool) {
		// Install writes no wrapper for it, so on a node the shell itself answers; this is its bash wording.
		fmt.Fprintf(stderr, "bash: %s: command not found\n", tool)
		return ExitNotInstalled
	}
	switch tool {
	case NvidiaSMI:
		return runNvidiaSMI(p, args, stdout, stderr)
	case DCGMI:
		return runDCGMI(p, args, stdout, stderr)
	case IBStat:
		return runReplay(p, tool, p.ibstat, args, stdout, stderr)
	default:
		return runReplay(p, tool, p.ibvDevinfo, args, stdout, stderr)
	}
}

// Command is the `standin` command line: `[--profile P] TOOL [ARGS...]` runs Main (everything after TOOL goes
// to the tool unchanged), or FabricMain with the process's environment when TOOL is one of FabricTools (the
// profile plays no part there); `--list-profiles` prints one "NAME<TAB>TOOLS<TAB>ABOUT" line per profile. The
// profile defaults to "h100".
func Command(args []string, stdout, stderr io.Writer) int {
	profileName := "h100"
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--list-profiles":
			for _, p := range profiles {
				fmt.Fprintf(stdout, "%s\t%s\t%s\n", p.name, strings.Join(p.tools(), ","), p.about)
			}
			return 0
		case a == "--profile" && len(args) > 1:
			profileName, args = args[1], args[2:]
			continue
		case strings.HasPrefix(a, "--profile="):
			profileName, args = strings.TrimPrefix(a, "--profile="), args[1:]
			continue
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "%s\n", commandUsage)
			return ExitNotSimulated
		case a == Podman:
			return PodmanMain(args[1:], os.Environ(), stdout, stderr)
		case a == OpenAIServer:
			return openai.Main(args[1:], stdout, stderr)
		case a == Dmesg:
			return runDmesg(profileName, args[1:], stdout, stderr, nil)
		case IsFabricTool(a):
			return FabricMain(a, args[1:], os.Environ(), stdout, stderr)
		}
		return Main(profileName, a, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s\n", commandUsage)
	return ExitNotSimulated
}

const commandUsage = `usage: standin [--profile PROFILE] TOOL [ARGS...]   (TOOL: nvidia-smi, dcgmi, ibstat, ibv_devinfo)
       standin FABRIC-TOOL [ARGS...]   (demo only: mpirun, all_reduce_perf, all_gather_perf, reduce_scatter_perf,
                                        alltoall_perf, sendrecv_perf, from GPUACCEPT_STANDIN_FABRIC)
       standin openai-server [FLAGS]   (vLLM's OpenAI API server, simulated; --help for the flags)
       standin --list-profiles`

func standinLabel(p *profile) string {
	return fmt.Sprintf("gpuaccept stand-in (simulated node, profile %s)", p.name)
}

func notSimulated(p *profile, tool string, args []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: `%s` is not simulated: no genuine output of it to replay (see scripts/standins)\n",
		standinLabel(p), strings.Join(append([]string{tool}, args...), " "))
	return ExitNotSimulated
}

// runReplay answers a tool that takes no arguments with its sample. A sample whose last line is an
// ibpanic (infiniband-diags' IBPANIC: "ibpanic: [pid] fn: msg: strerror") ends the way ibstat does then: that
// line on stderr, exit(-1), i.e. status 255. Everything before it is stdout.
func runReplay(p *profile, tool, name string, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return notSimulated(p, tool, args, stderr)
	}
	b := sample(name)
	if i := bytes.LastIndex(b, []byte("\nibpanic: ")); i >= 0 {
		stdout.Write(b[:i+1])
		stderr.Write(b[i+1:])
		return 255
	}
	stdout.Write(b)
	return 0
}

// dcgmi's statuses: main returns the dcgmReturn_t, so negative codes exit modulo 256.
const (
	dcgmExitBadParam  = 255 // DCGM_ST_BADPARAM (-1): "ERROR: Invalid subsystem."
	dcgmExitNVVSError = 226 // DCGM_ST_NVVS_ERROR (-30): a diagnostic test failed
)

var dcgmSubsystems = []string{
	"discovery", "policy", "group", "fieldgroup", "config", "health", "diag", "stats", "topo", "introspect",
	"nvlink", "dmon", "modules", "profile", "set", "test", "mndiag",
}

// diag options that take a value, and switches, as dcgmi diag accepts them; they do not change the replay.
var (
	diagValueOpts = []string{
		"-p", "--parameters", "-i", "--gpuList", "-g", "--group", "-c", "--configfile", "--host", "--iterations",
		"--timeout", "--debugLogFile", "--statspath", "--debugLevel", "--throttle-mask", "--clocksevent-mask",
		"--ignoreErrorCodes", "--expectedNumEntities", "--entity-id", "--watch-frequency",
	}
	diagSwitches = []string{"-j", "--json", "-v", "--verbose", "--fail-early"}
)

func runDCGMI(p *profile, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return notSimulated(p, DCGMI, args, stderr)
	}
	if !slices.Contains(dcgmSubsystems, args[0]) {
		// CommandLineParser::ProcessCommandLine: `ERROR: Invalid subsystem.`, a blank line, then the usage
		// (DCGMOutput::usage: a blank line, the empty description as " ", a blank line, "Usage: dcgmi", ...),
		// all on stdout; returns DCGM_ST_BADPARAM. The stand-in stops after the "Usage:" line.
		fmt.Fprint(stdout, "ERROR: Invalid subsystem.\n\n\n \n\nUsage: dcgmi\n")
		return dcgmExitBadParam
	}
	switch sub, rest := args[0], args[1:]; {
	case sub == "discovery" && len(rest) == 1 && (rest[0] == "-l" || rest[0] == "--list") && p.dcgmDiscovery != "":
		stdout.Write(sample(p.dcgmDiscovery))
		return 0
	case sub == "diag" && p.dcgmDiag != "" && diagArgsOK(rest):
		if code := diagWait(stderr); code != 0 {
			return code
		}
		b := sample(p.dcgmDiag)
		stdout.Write(b)
		if diagFailed(b) {
			return dcgmExitNVVSError
		}
		return 0
	}
	return notSimulated(p, DCGMI, args, stderr)
}

// diagArgsOK accepts `-r LEVEL` / `--run LEVEL` (1-4, a level name or a test name) with any of dcgmi diag's
// other options; TCLAP takes values as the next argument.
func diagArgsOK(args []string) bool {
	run := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-r" || a == "--run":
			if i+1 >= len(args) || args[i+1] == "" || strings.HasPrefix(args[i+1], "-") {
				return false
			}
			i++
			if n, err := strconv.Atoi(args[i]); err == nil && (n < 1 || n > 4) {
				return false
			}
			run = true
		case slices.Contains(diagValueOpts, a):
			if i+1 >= len(args) {
				return false
			}
			i++
		case slices.Contains(diagSwitches, a):
		default:
			return false
		}
	}
	return run
}

// diagFailed says whether a diag table has a result cell that starts with "Fail" ("Fail", "Fail - GPU 3",
// "GPU0: Fail"): dcgmi then returns DCGM_ST_NVVS_ERROR (Diag::GetFailureResult).
func diagFailed(b []byte) bool {
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		r := strings.TrimSpace(cells[2])
		if _, after, ok := strings.Cut(r, ": "); ok && strings.HasPrefix(r, "GPU") {
			r = after
		}
		if strings.HasPrefix(r, "Fail") {
			return true
		}
	}
	return false
}

func diagWait(stderr io.Writer) int {
	s := os.Getenv(DiagSecondsEnv)
	if s == "" {
		return 0
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || secs < 0 || secs > 3600 {
		fmt.Fprintf(stderr, "gpuaccept standin: %s=%q: want seconds between 0 and 3600\n", DiagSecondsEnv, s)
		return ExitNotSimulated
	}
	time.Sleep(time.Duration(secs * float64(time.Second)))
	return 0
}
