package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
	"gpuaccept/scripts/standins"
)

// The demo's burn-in (--burnin): ten seconds of iterations on every
// simulated node, each the compute rate, the intra-node all-reduce (the
// fabric model) and DCGM's targeted stress (the dcgmi stand-in, which
// replays the node's genuine diag table: gpu-04's fails). gpu-03's GPU 3
// computes 20% slower, which BURN-001 names against the fleet's median;
// gpu-02's all-reduce sags to 0.7 × from the third iteration, which
// BURN-002 names (the first quarter against the last). The simulated GPUs compute at the
// rate a genuine H200 sustained at its 700 W cap (../shared/field: 668.7
// TFLOP/s dense bf16); their Python is demoGemmPython, which answers as
// gemm.py does (its output contract) after waiting out the run's seconds.
const (
	demoBurninFor   = 10 * time.Second
	demoGemmSeconds = 2
	demoGemmPython  = "gpuaccept-sim-gemm"
	demoGemmSlowGPU = 3
	demoGemmSlow    = 0.8
	demoH200TFLOPS  = 668.7
	demoSagNode     = 1
	demoSag         = 0.7
	demoSagFrom     = 3
	// demoRunsFile counts the gemm.py runs of a node's burn-in, in its
	// home: the sagging all-reduce reads it, so the intranode phase
	// before the burn-in is not touched.
	demoRunsFile = ".demo-burnin-runs"
)

// demoAddBurnin switches the burn-in on, set after the inventory was
// checked: a real one lasts a minute at least, a demo keeps its time.
func demoAddBurnin(inv *inventory.Inventory) {
	inv.Phases.Burnin = inventory.Burnin{Enabled: true, Duration: demoBurninFor,
		Compute: inventory.Compute{Seconds: demoGemmSeconds, Size: inventory.DefaultComputeSize, Python: demoGemmPython},
		// Each iteration ends with the cluster all-reduce over every node
		// still in the burn-in, and the training job where --workload
		// training runs one (BURN-004, BURN-005).
		ClusterAllReduce: inv.Phases.AllReduce.Enabled && len(inv.Nodes) > 1,
		Workload:         demoTraining(inv) && len(inv.Nodes) > 1}
	// The idle guard: the quarantined node sits idle through the burn-in
	// and the failure test, is signalled after 10 s of 1-second samples
	// and released while the others go on. Its notice is an echo, kept in
	// raw/<node>/idle-notify.log.
	inv.Telemetry.Interval = time.Second
	inv.Idle = inventory.Idle{After: demoIdleAfter, UtilPct: inventory.DefaultIdleUtilPct, Action: inventory.IdleRelease,
		Notify: `echo "gpuaccept demo: $GPUACCEPT_IDLE_NODE idle for $GPUACCEPT_IDLE_MINUTES min (quarantined: $GPUACCEPT_IDLE_QUARANTINED)"`}
}

// demoIdleAfter is the idle guard's time in the demo's burn-in: the
// least idle.after takes.
const demoIdleAfter = 10 * time.Second

// demoGemmScript is node i's simulated gemm.py run: eight GPUs, each a
// few tenths of a TFLOP/s apart, GPU 3 of the slow node at 0.8 ×. The
// GPUs are the quote's model (an H100 and an H200 share one compute die:
// the H200's sustained rate stands for either), labelled simulated.
func demoGemmScript(bin string, i int, model string) error {
	slow := 1.0
	if i == demoSlow {
		slow = demoGemmSlow
	}
	script := fmt.Sprintf(`#!/bin/bash
# gpuaccept demo: a simulated node's answer to gemm.py (no GPU, no torch).
secs=%d size=8192
for a in "$@"; do
  case $a in --seconds=*) secs=${a#*=} ;; --size=*) size=${a#*=} ;; esac
done
# The simulated GPUs read busy while it runs (the stand-in nvidia-smi
# reads the marker; a marker whose process is gone is stale).
busy=
if [ -n "${GPUACCEPT_STANDIN_STATE:-}" ] && mkdir -p "$GPUACCEPT_STANDIN_STATE/busy" 2>/dev/null; then
  busy=$GPUACCEPT_STANDIN_STATE/busy/gemm.$$
  echo $$ > "$busy.tmp" && mv -f "$busy.tmp" "$busy"
  trap 'rm -f "$busy"' EXIT
fi
sleep "$secs"
n=$(cat "$HOME/%s" 2>/dev/null || echo 0)
echo $((n + 1)) > "$HOME/%s"
awk -v secs="$secs" -v size="$size" -v rate=%g -v slowgpu=%d -v slow=%g 'BEGIN {
  for (g = 0; g < 8; g++) {
    r = rate - 0.3 * g; if (g == slowgpu) r *= slow
    printf "GPUACCEPT gemm gpu=%%d tflops=%%.6g iters=%%d secs=%%.3f size=%%d on=cuda device=%s (simulated)\n",
      g, r, r * 1e12 * secs / (2 * size * size * size), secs, size
  }
  print "GPUACCEPT gemm done"
}'
`, demoGemmSeconds, demoRunsFile, demoRunsFile, demoH200TFLOPS, demoGemmSlowGPU, slow, awkString(cmp.Or(model, "NVIDIA H200")))
	return os.WriteFile(filepath.Join(bin, demoGemmPython), []byte(script), 0o755)
}

// demoSagScript replaces node's all_reduce_perf with one that, from the
// burn-in's demoSagFrom-th iteration, runs the fabric model with the
// node's NVLink at demoSag × its rate: the model's own output, in
// nccl-tests' format, from a fabric that sagged under sustained load.
func demoSagScript(bin string, argv0 []string, hosts []standins.FabricHost, node string) error {
	sagged := slices.Clone(hosts)
	for i := range sagged {
		if sagged[i].Name == node {
			sagged[i].IntraGBs *= demoSag
		}
	}
	words := []string{}
	for _, w := range append(slices.Clone(argv0), "all_reduce_perf") {
		words = append(words, remote.Quote(w))
	}
	script := fmt.Sprintf(`#!/bin/sh
# gpuaccept demo: %s's intra-node all-reduce sags under sustained load (the fabric model at %.1f x its NVLink).
n=$(cat "$HOME/%s" 2>/dev/null || echo 0)
if [ "$n" -ge %d ]; then
  %s=%s
  export %s
fi
exec %s "$@"
`, node, demoSag, demoRunsFile, demoSagFrom, standins.FabricEnv, remote.Quote(standins.FormatFabric(sagged)), standins.FabricEnv,
		strings.Join(words, " "))
	return os.WriteFile(filepath.Join(bin, "all_reduce_perf"), []byte(script), 0o755)
}

// awkString is s safe inside the awk program's double-quoted string and
// the shell's single-quoted script around it (a quote's model is the
// buyer's text).
func awkString(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"' || r == '\\' || r == '\'' || r == '%' || r < 0x20 || r == 0x7f:
			return -1
		}
		return r
	}, s)
}
