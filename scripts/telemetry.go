package scripts

import _ "embed"

// Telemetry is the window's sampler on a node: GPU rows from nvidia-smi's
// own loop, new NVIDIA kernel lines, IB port counters, each line tagged,
// until its stdin closes (see node/telemetry.sh).
//
//go:embed node/telemetry.sh
var Telemetry string
