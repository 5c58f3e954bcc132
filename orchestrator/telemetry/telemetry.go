// Package telemetry reads what the window's sampler recorded on every node
// while the window held it (GPU temperature, power, clocks, utilisation,
// clock event reasons, ECC and row-remapper counts, kernel Xid lines, IB
// port counters), summarises it per phase and judges the node's health
// under load (HEALTH-011..016). It is pure: the sampler's lifecycle is the
// telemetry phase's (orchestrator/phases/telemetry.go), the node side is
// scripts/node/telemetry.sh.
//
// The file contract, raw/<node>/telemetry.txt.gz in the bundle: one or
// more gzip members (the coordinator writes one each time it flushes, at
// most every 30 s; a resumed window appends its own), each of lines
//
//	<unix ms, the coordinator's clock when the line arrived> <tag> <payload>
//
// tag is one of the Tag* constants. A gpu line's payload is one row of
// `nvidia-smi --query-gpu=<Fields> --format=csv,noheader,nounits`; a kern
// line's is one kernel log line as dmesg or journalctl -k prints it (the
// NVIDIA drivers' lines only); an ib line's is "<device>:<port>
// <counter>=<value> ..." read from /sys/class/infiniband; a note is the
// sampler's own word (a tool missing, a source unreadable), and a start
// line marks where a sampler began (its payload "interval=<ms>
// fields=<n>"). The coordinator's clock puts every line on the same time
// axis as the phases, whatever the node's clock says.
package telemetry

import "time"

// FileName is each node's telemetry file under raw/<node>/.
const FileName = "telemetry.txt.gz"

// The tags of a telemetry line.
const (
	TagStart  = "start"
	TagGPU    = "gpu"
	TagKernel = "kern"
	TagIB     = "ib"
	TagNote   = "note"
)

// DefaultInterval is telemetry.interval when the inventory leaves it out.
const DefaultInterval = 5 * time.Second

// Span is one phase of the window as the record has it: its name, when it
// ran on the coordinator's clock, and whether the GPUs are meant to be busy
// in it (a phase that loads them: the collectives, the load test, the
// burn-in), which the load-only judgements use.
type Span struct {
	Phase      string    `json:"phase"`
	Start, End time.Time `json:"-"`
	Load       bool      `json:"load,omitempty"`
}
