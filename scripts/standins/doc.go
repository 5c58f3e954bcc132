// Package standins answers as the GPU tools of a simulated node — nvidia-smi, dcgmi, ibstat, ibv_devinfo — for
// the lab hosts and the demo, where there is no GPU (shared DESIGN.md, "The two stand-ins for GPUs"). It never
// invents an output: it replays genuine outputs copied byte for byte from shared/samples (samples/, provenance in
// samples/SOURCES.md), or derives one from them in the real tool's own format (nvidia-smi -L and --query-gpu,
// from the profile's -q text). Everything it prints is simulated; reports made with it must say so.
//
// The one exception is the demo's fabric model (FabricMain, "The fabric model" below): mpirun and the nccl-tests
// binaries, whose numbers are COMPUTED from a model of the demo's links, because the demo has no hosts to run MPI
// across. It is a simulation for the demo only, not a launcher; its output says so in the fields the real format
// allows (nccl-library=0, device gpuaccept-model-standin). The demo's podman (PodmanMain, podman.go) is the other:
// it loads real image archives into a per-node store and answers load, image inspect and run in podman 4.3's
// formats (held against the real podman by a test), but `run` starts no container: it runs the command on the
// node itself, in the foreground, or with -d as a background process of its own group that ps, logs, stop,
// kill, rm and inspect then find in the store (podman_detached*.go). The demo gives each node a loopback
// address of its own (LoopbackEnv), which a detached `standin openai-server` listens on.
//
// # Use
//
//	Main(profile, tool, args, stdout, stderr) int    one invocation, returns the exit status
//	Command(args, stdout, stderr) int                the `standin [--profile P] TOOL ARGS...` command line
//	Install(dir, profile, argv0) error               executable wrappers in dir (put dir on PATH) + dir/PROFILE
//	Profiles(), Tools(profile), About(profile)
//
//	FabricMain(tool, args, env, stdout, stderr) int  the demo's fabric model: mpirun and the nccl-tests binaries
//	InstallFabric(dir, argv0) error                   their wrappers (demo only; see "The fabric model" below)
//
// `standin openai-server FLAGS` (Command) is another kind of stand-in: an OpenAI-compatible HTTP server that
// answers as vLLM's, with set timings, for inference load tests (package openai, its doc for the flags). The
// lab's test image carries cmd/standin at /usr/local/bin/standin for it.
//
// cmd/standin is the standalone binary; gpuaccept carries the same as a hidden `standin` subcommand, so
// Install(dir, p, []string{"/path/gpuaccept", "standin"}) writes `exec '/path/gpuaccept' 'standin' '--profile'
// 'p' 'nvidia-smi' "$@"`. The wrapper execs, so killing the process that runs it kills the stand-in itself.
//
// # Profiles
//
// A profile is one simulated node: which genuine output answers each command. h100 is the healthy reference;
// each other profile changes one thing.
//
//	profile            nvidia-smi -q / topo -m                     dcgmi discovery / diag            ibstat / ibv_devinfo
//	h100               8xH100 535.183.01 (gpud) / 8xH100 NV18      8x H800 / 3.3.3 pass (8xA100)     12 CA all up / none
//	h100-other-driver  1xH100 590.48.01 (exporter) / 1xH100 ANSI    as h100                           as h100
//	h100-diag-fail     as h100                                     diag: DCGM 1.x, 5 Fail (exit 226)  as h100
//	h100-ib-down       as h100                                     as h100                           3 ports Down / none
//	h100-ib-panic      as h100                                     as h100                           8 CA + ibpanic (255) / none
//	h100-ibv-devinfo   as h100                                     as h100                           as h100 / 2x ConnectX-3
//	h100-dcgm4-diag    as h100                                     diag: DCGM 4.4.2 layout (1xA10G)  as h100
//	h100-no-dcgm       as h100                                     not installed                     as h100
//	a10-wrong-model    1xA10 535.129.03 / none                     none / 4.4.2 pass (1xA10G)        not installed
//
// A tool whose sources are all empty is not installed: Install writes no wrapper and the node's shell answers
// "command not found" (exit 127); Main says the same in bash's words.
//
// # What each tool answers
//
// nvidia-smi (every profile):
//   - -L, --list-gpus: "GPU i: NAME (UUID: GPU-...)" per GPU, derived from -q (Product Name, GPU UUID, in -q
//     order), in the format of the genuine -L samples (tests hold the pattern against them).
//   - -q, --query: the -q sample verbatim.
//   - topo -m, topo --matrix: the topo sample verbatim (not a10-wrong-model: no sample).
//   - --query-gpu=F1,F2 --format=csv[,noheader][,nounits] (also "--query-gpu F --format csv"): one row per GPU,
//     cells joined by ", ", header "name [unit]" as nvidia-smi prints it, NVML words bracketed ("[N/A]"), units
//     in the cells unless nounits (the header keeps them). 87 fields are derived from -q (qFields); every one of
//     them reproduces, cell for cell, the genuine csv captured with the 590.48.01 -q. h100-other-driver answers
//     all ~210 fields of that capture from the capture itself (so e.g. compute_cap and timestamp exist there only).
//   - An unknown field: `Field "X" is not a valid field to query.` and a blank line on stdout, exit 2. Unknown
//     means outside that capture's field list, the derived fields and a few documented aliases.
//   - An unknown option: `ERROR: Option X is not recognized. Please run 'nvidia-smi -h' for help.` and a blank
//     line on stdout, exit 2. Both messages are copied from genuine captures (a fixture's -lms100, -format=csv;
//     cuda_version).
//
// dcgmi (all but h100-no-dcgm):
//   - discovery -l, discovery --list: the discovery sample verbatim (not a10-wrong-model).
//   - diag -r|--run LEVEL (1-4 or a name) with any of -j/--json, -p, -i, -g, -c, --iterations, ...: the profile's
//     diag sample verbatim, whatever the level, and TEXT EVEN UNDER -j: no profile has a complete genuine JSON diag
//     (the one JSON sample is a fragment). Parsers must expect the text table when they asked for -j. The status
//     is 226 (DCGM_ST_NVVS_ERROR, -30 as an exit byte; Diag::GetFailureResult) when a result cell reads Fail,
//     else 0. DiagSecondsEnv (GPUACCEPT_STANDIN_DIAG_SECONDS) makes diag wait first; nothing else waits.
//   - An unknown subsystem: "ERROR: Invalid subsystem." and the first lines of dcgmi's usage on stdout, exit 255
//     (DCGM_ST_BADPARAM, -1), as CommandLineParser::ProcessCommandLine does; the usage is cut after "Usage: dcgmi".
//
// ibstat, ibv_devinfo (no arguments): the sample verbatim, exit 0 — except the ibpanic sample: what precedes the
// "ibpanic:" line is stdout, that line (and the sample's trailing blank line) stderr, exit 255, as ibstat's
// IBPANIC does (fprintf(stderr), exit(-1)); stdout and stderr together are the sample's bytes.
//
// Anything else a real tool would answer (nvidia-smi with no arguments, -h, -i, -d, other subcommands; dcgmi
// with other options; ibstat with arguments...) gets ExitNotSimulated (2) and a message on stderr naming the
// stand-in and its profile, never an invented output.
//
// # Telemetry: the loop, planted events, dmesg, the IB tree (telemetry*.go, dmesg.go, ib_tree.go)
//
// nvidia-smi --query-gpu=F --format=csv,noheader[,nounits] with -l N / --loop=N / --loop N (seconds) or -lms N /
// --loop-ms=N / --loop-ms N (milliseconds) prints a row per GPU at once and then every interval until killed
// (SIGTERM and SIGPIPE end it without a word, as they end nvidia-smi). Its cells come from the genuine H200
// telemetry captures (driver 580.159.04): the idle row, or the bf16 GEMM load row (690 W of 700, SW Power Cap
// active, SM 1,530 MHz) while a stand-in workload marks the node busy; index, name, pci.bus_id, driver_version
// and memory.total are the profile's own (from its -q, as -L and the one-shot query say), fields outside the
// captures are the one-shot query's. nounits drops " <unit>" from the cells of a column whose header has one
// (the rule holds the genuine idle pair, with and without units). A looping query with a header is not simulated
// (no sample shows how often it repeats).
//
// Busy: a workload writes STATE/busy/<pid> (its pid as content; MarkBusy; nccl_perf.c's busyMark), removed at
// exit; a marker whose pid is gone is dropped. STATE is StateEnv (GPUACCEPT_STANDIN_STATE), else
// DefaultStateDir (/srv/gpuaccept-standin) where it exists: on a lab host that is the host's own /srv, so
// ranks that mpirun starts over ssh without the wrappers' environment find it. STATE/t0 is the first loop
// start on the node: the origin of SimTelemetryEnv's times (GPUACCEPT_SIM_TELEMETRY, its doc for the syntax):
// throttle sets the reason's column Active and its NVML bit in clocks_event_reasons.active; ecc and remap raise
// the CSV's counts from their moment on (remap: remapped_rows.uncorrectable +1, pending Yes); stall gives a GPU
// the load row at the idle row's power; xid puts, at its time, a line in the dmesg stand-in (`dmesg`, `-w` /
// `--follow`, `-W` / `--follow-new`): "[%5lu.%06lu] NVRM: Xid (PCI:dddd:bb:dd): CODE, " and the rest of the first
// genuine line of that code in samples/kernel (13, 43, 45, 48, 63, 94, 119; another code is refused), the
// timestamp seconds since the kernel booted, the device the profile's GPU. The dmesg stand-in prints nothing
// else: lab hosts share the machine's kernel. linkdown moves the IB tree: STATE/sys/class/infiniband laid out
// as sysfs (<dev>/ports/<port>/{state,phys_state,link_layer,counters/<IBCounters>}) for the profile's ibstat
// ports, all counters 0; link_downed counts the downs begun, state reads "1: DOWN" while one lasts. The loop
// applies it every tick (a function of the elapsed time alone). The node script reads the tree through
// SysfsIBEnv (GPUACCEPT_SYSFS_IB), which the lab's sshd sets for every session (IBTreeInHost).
//
//	InstallTelemetry(dir, profile, argv0, Telemetry{State, Plant})  after Install: nvidia-smi's wrapper with
//	                                 StateEnv and SimTelemetryEnv, dmesg's where Xids are planted, a fresh STATE
//
// Cost: the loop parses the profile once and then, per tick, reads STATE/busy and writes a few KiB: at 5 s over
// 20 s it used 0.06 s of CPU, most of it starting up.
//
// # Known limits of replaying genuine outputs
//
// The samples come from different machines, so one node's tools disagree with each other:
//   - dcgmi discovery -l is an 8x NVIDIA H800 (PCI 18,3E,51,65,98,BD,CF,E2; its own UUIDs) while -q is 8x H100
//     80GB HBM3 (PCI 53,64,75,86,97,A8,B9,CA) — and h100-other-driver's -q has a single GPU.
//   - The passing diag is an 8x A100 p4de run (device id 20b2, driver 535.104.12, DCGM 3.3.3); the failing one is
//     DCGM 1.x (Blacklist, no Metadata); the 4.4.2 one is a single A10G (2237).
//   - topo -m (h100) shows 6 NICs mlx5_0-5; ibstat shows 12 CAs mlx5_0-11 (RoCE, all Ethernet); the ib-down
//     sample is another host (IB link layer on the 400G ports); the ibpanic sample is an A100 VM (MT4124) indented
//     with spaces; ibv_devinfo is two ConnectX-3 (mlx4) from yet another host, not the one of any ibstat.
//   - The level asked of dcgmi diag is not reflected (the pass sample is -r 2, the fail sample -r 1).
//
// Oddities kept because the bytes are genuine: the gpud -q samples lack the empty first line nvidia-smi prints
// before "==============NVSMI LOG==============" (the 590 exporter capture has it); the gpud ibstat samples end
// without a final newline; the 590 topo header row carries ANSI underline escapes; the h100 topo has empty CPU
// Affinity cells and rows of empty tab cells; the 590 -q has a "GPU Memory Power Readings " key with a trailing
// space; the 590 csv prints fabric.health.* as bare N/A where other cells say [N/A].
//
// # The fabric model (demo only): a simulation of nccl-tests and mpirun
//
// The demo has no hosts to run MPI across and no GPUs, so its NCCL phases run against a MODEL: FabricMain
// answers for mpirun and for all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf and
// sendrecv_perf, computing every number from an environment variable. It measures nothing, launches nothing and is
// not a launcher. The lab does not use it: there the real mpirun runs the MPI stand-in of nccl/ over real links
// (Install never writes these wrappers; InstallFabric does, for the demo).
//
// Environment (the demo sets the first three on every node):
//
//	GPUACCEPT_STANDIN_FABRIC        FabricEnv: NAME=INTER/INTRA[/GPUS[/INTER_US/INTRA_US]],...  e.g.
//	                                gpu-01=370/450,gpu-02=370/450,gpu-03=185/450,gpu-04=370/450
//	                                INTER: bus bandwidth (GB/s) a healthy all_reduce reaches across nodes with this
//	                                host; INTRA: bus bandwidth inside the host (NVLink); GPUS: default 8;
//	                                INTER_US, INTRA_US: latency floors (µs), default 30 and 5
//	GPUACCEPT_STANDIN_NODE          FabricNodeEnv: the node's own name, the host of a *_perf run without mpirun
//	GPUACCEPT_STANDIN_FABRIC_RUNS   FabricRunsEnv: a file counting runs (one line each: collective and rank layout)
//	GPUACCEPT_STANDIN_SEED          FabricSeedEnv: the jitter's seed, a decimal integer, default 1
//
// The model. A run's ranks all on one host use that host's INTRA rate and its INTRA_US latency (5 µs); ranks on
// several hosts use the lowest INTER rate and the highest INTER_US latency among them (30 µs). One collective takes latency + bytes on the wire /
// rate, the bytes on the wire being nccl-tests' algbw numerator times its busbw factor (2(n-1)/n for all_reduce,
// (n-1)/n for all_gather, reduce_scatter and alltoall, 1 for sendrecv), so busbw = rate x efficiency, the
// efficiency rising from latency-bound at small sizes to ~1 at large ones; algbw and busbw then follow nccl-tests'
// formulas from that time. Every time is multiplied by 1 + a jitter uniform in ±1%, a hash of the seed, the run
// (collective and rank layout), its repeat number (how many identical runs FabricRunsEnv's file already holds; 0
// without the file), and the row: the same seed and file give the same numbers, repeats differ slightly.
// FabricBusBW gives the model's busbw without jitter. All collectives reach the same rate: a real alltoall or
// sendrecv across nodes is bounded by the NIC, lower than all_reduce's busbw; the model does not know NICs. The
// stand-in sleeps a thousandth of the time it models, at most 0.1 s a run.
//
// The output is nccl-tests 2.18.2's text, line for line as nccl_perf.c prints it (tests hold it against the
// genuine 2.18.2 sample): version line with nccl-headers=0 nccl-library=0, header, one "#  Rank" line per rank
// naming its host and device with the device name "gpuaccept-model-standin" (ModelDeviceName) and bus id
// [0000:00:00], column headers, one row per size with nccl-tests' getFloatStr formats and #wrong 0 under -c
// (N/A for in-place alltoall and sendrecv, as nccl-tests), Out of bounds, Avg bus bandwidth (mean busbw of every
// row's two halves), "Collective test concluded", the closing "#" and blank line. -J FILE.json writes nccl-tests'
// JSON report as nccl_perf.c does (existing files are not overwritten: FILE.0, ...). Options are nccl-tests'
// (getopt_long, with glibc's messages and nccl-tests' "invalid option" + usage, exit 0); -t/-g/-b/-e/-i/-f/-n/
// -w/-m/-c/-d/-o/-N/-z/-p/-G/-C/-S/-J change the output, the rest are accepted. -N 0 is not simulated. A host
// with fewer GPUs than its ranks need fails with nccl-tests' "Invalid number of GPUs" (exit 1);
// NCCL_TESTS_MIN_BW is honoured (FAILED, exit 5).
//
// NCCL's INFO lines, from rank 0, when NCCL_DEBUG is INFO or TRACE, gated by NCCL_DEBUG_SUBSYS as NCCL gates them
// (a comma list, ^ to invert, ALL; unset means INIT,ENV): with ENV and NCCL_ALGO set, "HOST:PID:TID [DEV] NCCL
// INFO NCCL_ALGO set by environment to VALUE" after the rank lines (NCCL logs it under ENV, so
// NCCL_DEBUG_SUBSYS=INIT,TUNING does not print it); with TUNING, once per size during the warm-up (before the
// rows), "HOST:PID:TID [DEV] NCCL INFO BYTES Bytes -> Algo 1 proto 2 time US" for all_reduce, all_gather and
// reduce_scatter (alltoall and sendrecv are point-to-point: no tuner). The model is a ring with the Simple
// protocol whatever NCCL_ALGO says; real NCCL prints the tuner line for every call. No "NCCL version" line: there
// is no NCCL.
//
// mpirun: [--allow-run-as-root] [-np N] -H h1:k,h2:k,... [-x VAR[=VAL]]... [--mca KEY VAL]... [--tag-output]
// [--bind-to X] [--map-by slot|core|socket|numa|node] [--oversubscribe] [-q] BINARY ARGS. It checks, in Open
// MPI 4's order and with its messages (copied from genuine outputs), exit 1 each: running as root without
// --allow-run-as-root or OMPI_ALLOW_RUN_AS_ROOT=1 + OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; no executable; a host of
// -H not in the fabric (a model line, then "ORTE was unable to reliably start one or more daemons"); more ranks
// than -H slots ("There are not enough slots available in the system to satisfy the N slots..."); an executable
// that is not an nccl-tests binary ("mpirun was unable to find the specified executable file", or not simulated
// when it exists). No -np means every slot; ranks fill hosts slot by slot (round-robin with --map-by node), so
// -np below the slots leaves later hosts out, as Open MPI does; rank r's device counts the processes before it on
// its host. BINARY may be a path: only its name is looked at. Then it runs BINARY as ONE in-process invocation of
// the model for the whole job, with -x's variables in its environment; the output is rank 0's (--tag-output:
// "[1,0]<stdout>:" on every line, "[1,0]<stderr>:" on its stderr), and a non-zero exit of the binary gets Open
// MPI's "mpirun detected that one or more processes exited with non-zero status" epilogue. Rank lines show
// made-up pids (mpirun's + 1 + rank). -J writes on the node that ran mpirun. Anything else (other options,
// --oversubscribe beyond the slots, no -H, ppr mappings, several app contexts) is not simulated: a message naming
// the model, exit 2.
package standins
