// Package standins answers as the GPU tools of a simulated node — nvidia-smi, dcgmi, ibstat, ibv_devinfo — for
// the lab hosts and the demo, where there is no GPU (shared DESIGN.md, "The two stand-ins for GPUs"). It never
// invents an output: it replays genuine outputs copied byte for byte from shared/samples (samples/, provenance in
// samples/SOURCES.md), or derives one from them in the real tool's own format (nvidia-smi -L and --query-gpu,
// from the profile's -q text). Everything it prints is simulated; reports made with it must say so.
//
// # Use
//
//	Main(profile, tool, args, stdout, stderr) int    one invocation, returns the exit status
//	Command(args, stdout, stderr) int                the `standin [--profile P] TOOL ARGS...` command line
//	Install(dir, profile, argv0) error               executable wrappers in dir (put dir on PATH) + dir/PROFILE
//	Profiles(), Tools(profile), About(profile)
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
package standins
