// Package inventory reads an acceptance window's inventory: the nodes, how
// to reach them, the provider's quote, the acceptance thresholds and the
// phases to run. Load is strict: an unknown key, a wrong type or a bad
// value is an error naming the file, the key path and the line.
package inventory

import (
	"strconv"
	"strings"
	"time"
)

// Inventory is one window's input, as loaded and validated.
type Inventory struct {
	// Path is the file it was read from; Digest its sha256 (hex), kept in
	// the evidence so a report names exactly what it was run against.
	Path   string `mapstructure:"-" json:"path"`
	Digest string `mapstructure:"-" json:"digest"`

	Provider string `mapstructure:"provider" json:"provider"`
	Region   string `mapstructure:"region" json:"region"`
	Window   string `mapstructure:"window" json:"window"` // a label, e.g. "vendor-a-2026-11-trial"
	// Simulated marks a window on stand-in hosts (the lab, the demo); every
	// report made from it says SIMULATED.
	Simulated bool `mapstructure:"simulated" json:"simulated"`

	// Transport reaches every node that names none of its own: ssh
	// (default), or local, the machine gpuaccept runs on. Its settings
	// are its section (ssh:); local has none.
	Transport string `mapstructure:"transport" json:"transport,omitempty"`
	SSH       SSH    `mapstructure:"ssh" json:"ssh"`
	Nodes     []Node `mapstructure:"nodes" json:"nodes"`
	// NodesFrom names more nodes: a file of host names (one per line, #
	// comments, host ranges allowed) or a Slurm nodelist. Each host is a
	// node named by its first label, dialled at the host.
	NodesFrom string `mapstructure:"nodes_from" json:"nodes_from,omitempty"`
	Slurm     Slurm  `mapstructure:"slurm" json:"slurm"`
	// Kubernetes is the cluster whose nodes transport kubernetes reaches
	// through its API.
	Kubernetes Kubernetes `mapstructure:"kubernetes" json:"kubernetes"`
	Image      Image      `mapstructure:"image" json:"image"`
	Quote      Quote      `mapstructure:"quote" json:"quote"`
	Acceptance Acceptance `mapstructure:"acceptance" json:"acceptance"`
	Phases     Phases     `mapstructure:"phases" json:"phases"`
	Cost       Cost       `mapstructure:"cost" json:"cost"`
	// Telemetry is the sampler that runs on every node for the whole
	// window (from the tools phase to teardown).
	Telemetry Telemetry `mapstructure:"telemetry" json:"telemetry"`
	// Idle is the idle guard: a node whose GPUs sit idle while it is
	// held for nothing is signalled (and, if asked, released).
	Idle Idle `mapstructure:"idle" json:"idle"`
	// Billing is the provider's usage export and what it must carry:
	// `gpuaccept bill` and the window's report hold it against the
	// window's own records.
	Billing Billing `mapstructure:"billing" json:"billing"`
}

// Billing says where the provider's usage export is and how to read it.
type Billing struct {
	// Export is the usage export (CSV or JSON); when the file is there at
	// the window's end, the window's report judges it.
	Export string `mapstructure:"export" json:"export,omitempty"`
	// Columns maps the generic format's fields (BillingFields) to the
	// export's own column names, for a provider whose export is none of
	// the formats gpuaccept knows by their headers.
	Columns map[string]string `mapstructure:"columns" json:"columns,omitempty"`
	// RequiredTags are the tags every billed line must carry for its cost
	// to be attributable (team, workload, environment, job).
	RequiredTags []string `mapstructure:"required_tags" json:"required_tags,omitempty"`
}

// BillingFields are what a line of a usage export says, as
// billing.columns names them: resource (an instance or resource ID, or a
// host name), start and end of the usage, quantity in unit, cost in
// currency, the unit price (rate), what was billed (item) and its tags.
var BillingFields = []string{"resource", "start", "end", "quantity", "unit", "cost", "currency", "rate", "item", "tags"}

// Idle configures the idle guard. It watches the telemetry's utilisation:
// a node whose every GPU stays under UtilPct for After, outside any phase
// meant to leave the GPUs idle, is signalled.
type Idle struct {
	// After: how long the GPUs may sit idle; 0 (absent) turns the guard
	// off. 10s to 24h.
	After time.Duration `mapstructure:"after" json:"after,omitempty"`
	// UtilPct: a GPU under it is idle; default 5.
	UtilPct float64 `mapstructure:"util_pct" json:"util_pct,omitempty"`
	// Notify is run on the coordinator (sh -c) when a node is signalled,
	// with GPUACCEPT_IDLE_NODE, GPUACCEPT_IDLE_MINUTES and the rest in
	// its environment. The command is kept in run.json and its output in
	// raw/<node>/idle-notify.log, both scrubbed of known secret shapes: a
	// token belongs in the coordinator's environment, not in the command.
	Notify string `mapstructure:"notify" json:"notify,omitempty"`
	// Action: "signal" (default) or "release": end the window's use of
	// the node early, its teardown run at once.
	Action string `mapstructure:"action" json:"action,omitempty"`
	// ProviderCheck holds one node idle past quote.terms.idle_shutdown_after
	// at the end of the window and records whether the provider stopped
	// or signalled it (IDLE-002).
	ProviderCheck ProviderIdleCheck `mapstructure:"provider_check" json:"provider_check"`
}

// ProviderIdleCheck is idle.provider_check.
type ProviderIdleCheck struct {
	Enabled bool `mapstructure:"enabled" json:"enabled,omitempty"`
	// Grace: how long past the quoted time the node may still answer;
	// default 5m.
	Grace time.Duration `mapstructure:"grace" json:"grace,omitempty"`
	// Signal is run on the coordinator every poll; exit 0 says the
	// provider has signalled the idle node (a mail, an API's event).
	Signal string `mapstructure:"signal" json:"signal,omitempty"`
}

// Idle actions.
const (
	IdleSignal  = "signal"
	IdleRelease = "release"
)

// On says whether the window runs the idle guard.
func (i Idle) On() bool { return i.After > 0 }

// Telemetry configures the window's sampler: every GPU's temperature,
// power, clocks, utilisation, clock event reasons, ECC and remapped rows,
// the kernel's Xid lines and the IB ports' error counters, every Interval.
type Telemetry struct {
	// Enabled: default on (nil); it needs only nvidia-smi on the node.
	Enabled *bool `mapstructure:"enabled" json:"enabled"`
	// Interval between samples: default 5 s, 1 s to 10 min.
	Interval time.Duration `mapstructure:"interval" json:"interval"`
	// MaxMiBPerNode bounds what the coordinator keeps of one node's
	// stream: a hostile node cannot fill its disk. Default 256.
	MaxMiBPerNode int `mapstructure:"max_mib_per_node" json:"max_mib_per_node"`
}

// On says whether the window runs the sampler.
func (t Telemetry) On() bool { return t.Enabled == nil || *t.Enabled }

// SSH holds the defaults for every node.
type SSH struct {
	User          string   `mapstructure:"user" json:"user"`
	IdentityFiles []string `mapstructure:"identity_files" json:"identity_files"`
	Agent         bool     `mapstructure:"agent" json:"agent"`
	KnownHosts    []string `mapstructure:"known_hosts" json:"known_hosts"`
	AcceptNew     bool     `mapstructure:"accept_new" json:"accept_new"`
	Jump          []string `mapstructure:"jump" json:"jump"`
	Config        string   `mapstructure:"config" json:"config"` // ssh_config file; "none" to ignore ~/.ssh/config
	Concurrency   int      `mapstructure:"concurrency" json:"concurrency"`

	ConnectTimeout    time.Duration `mapstructure:"connect_timeout" json:"connect_timeout"`
	HandshakeTimeout  time.Duration `mapstructure:"handshake_timeout" json:"handshake_timeout"`
	SessionTimeout    time.Duration `mapstructure:"session_timeout" json:"session_timeout"`
	KeepaliveInterval time.Duration `mapstructure:"keepalive_interval" json:"keepalive_interval"`
	KeepaliveMisses   int           `mapstructure:"keepalive_misses" json:"keepalive_misses"`
}

// Node is one rented machine. Empty fields take the SSH defaults.
type Node struct {
	Name    string            `mapstructure:"name" json:"name"`
	Address string            `mapstructure:"address" json:"address"`
	Port    int               `mapstructure:"port" json:"port"`
	User    string            `mapstructure:"user" json:"user"`
	Labels  map[string]string `mapstructure:"labels" json:"labels"`
	// FabricAddress is how the other nodes reach this one (mpirun's -H,
	// Slurm's node name), when that differs from the address the
	// coordinator dials (a public IP, an ssh_config alias, a jump host).
	FabricAddress string `mapstructure:"fabric_address" json:"fabric_address,omitempty"`
	// BillingID is what the provider's usage export calls the node (an
	// instance or resource ID), when that is neither its name nor its
	// address.
	BillingID string `mapstructure:"billing_id" json:"billing_id,omitempty"`
	// Via is the jump chain to this node when it is not ssh.jump: a node
	// of the window's own Slurm allocation is reached through the login
	// node. Set by the window, never by the inventory file.
	Via []string `mapstructure:"-" json:"via,omitempty"`
	// Transport reaches this node: the inventory's when empty (and local
	// for address: local).
	Transport string `mapstructure:"transport" json:"transport,omitempty"`
	// SlurmJob is the job of the window's own allocation that holds the
	// node, whose steps reach it under transport srun. Set by the window,
	// never by the inventory file.
	SlurmJob string `mapstructure:"-" json:"slurm_job,omitempty"`
}

// Image is the pinned container image the window runs.
type Image struct {
	Reference string `mapstructure:"reference" json:"reference"` // repo[:tag]@sha256:<64 hex>
	Runtime   string `mapstructure:"runtime" json:"runtime"`     // docker | podman | enroot
	// Mode: pull (every node pulls from its registry) or push (the
	// coordinator distributes Archive over SSH). Default push when an
	// archive is given, else pull.
	Mode string `mapstructure:"mode" json:"mode"`
	// Archive is a docker-archive or oci-archive tarball (push mode).
	Archive string `mapstructure:"archive" json:"archive"`
	// Dir is a node-local directory the archive is written to (not a
	// shared home: every node writes its own copy). Default /var/tmp.
	Dir string `mapstructure:"dir" json:"dir"`
	// Relay: chain (nodes pass the archive on to the next as it arrives,
	// so the coordinator's uplink carries one copy), sbcast (one copy to
	// the Slurm login node, whose sbcast sends it to the window's job) or
	// direct (the coordinator uploads to every node). Default chain;
	// sbcast with transport srun.
	Relay string `mapstructure:"relay" json:"relay"`
	// GPUs is how the container gets the node's GPUs: "all" (docker
	// --gpus all, podman --device nvidia.com/gpu=all) or "none".
	GPUs string `mapstructure:"gpus" json:"gpus"`
	// Smoke is the command run inside the container. Default nvidia-smi -L.
	Smoke []string `mapstructure:"smoke" json:"smoke"`
	// Keep leaves an image the window loaded or pulled in the node's
	// runtime after teardown (for a job that follows on the same nodes).
	// By default teardown removes it; an image the node had before the
	// window stays either way.
	Keep bool `mapstructure:"keep" json:"keep,omitempty"`
}

// Quote is what the provider promised. Zero means "not stated": the
// criterion is then SKIP, and quote lint warns.
type Quote struct {
	GPUModel      string  `mapstructure:"gpu_model" json:"gpu_model"` // as nvidia-smi names it, e.g. "NVIDIA H100 80GB HBM3"
	GPUsPerNode   int     `mapstructure:"gpus_per_node" json:"gpus_per_node"`
	GPUMemoryGiB  float64 `mapstructure:"gpu_memory_gib" json:"gpu_memory_gib"`
	CPUsPerNode   int     `mapstructure:"cpus_per_node" json:"cpus_per_node,omitempty"`     // host CPU cores (or vCPUs, as sold)
	HostMemoryGiB float64 `mapstructure:"host_memory_gib" json:"host_memory_gib,omitempty"` // host RAM per node
	FormFactor    string  `mapstructure:"form_factor" json:"form_factor"`                   // SXM | PCIe
	Fabric        string  `mapstructure:"fabric" json:"fabric"`                             // infiniband | roce | ethernet | efa ...
	NICsPerNode   int     `mapstructure:"nics_per_node" json:"nics_per_node"`
	NICGbps       float64 `mapstructure:"nic_gbps" json:"nic_gbps"`
	IntraBusBWGBs float64 `mapstructure:"intra_busbw_gbs" json:"intra_busbw_gbs"` // all-reduce busbw inside a node, GB/s
	InterBusBWGBs float64 `mapstructure:"inter_busbw_gbs" json:"inter_busbw_gbs"` // across nodes, GB/s
	BusBWSize     Bytes   `mapstructure:"busbw_size" json:"busbw_size"`           // message size the busbw applies to
	// All-reduce latency of small messages (8 B to 64 KiB, the sweep's
	// small end), µs: across nodes and inside one.
	InterLatencyUs float64 `mapstructure:"inter_latency_us" json:"inter_latency_us,omitempty"`
	IntraLatencyUs float64 `mapstructure:"intra_latency_us" json:"intra_latency_us,omitempty"`
	// The GPU's SM base clock (MHz) and dense bf16 rate (TFLOP/s per
	// GPU) as sold: HEALTH-014 holds clocks under load to the first,
	// BURN-001 the measured compute rate to the second.
	GPUBaseClockMHz float64 `mapstructure:"gpu_base_clock_mhz" json:"gpu_base_clock_mhz,omitempty"`
	GPUTFLOPSBF16   float64 `mapstructure:"gpu_tflops_bf16" json:"gpu_tflops_bf16,omitempty"`
	StagingGBs      float64 `mapstructure:"staging_gbs" json:"staging_gbs"`
	CheckpointGBs   float64 `mapstructure:"checkpoint_gbs" json:"checkpoint_gbs"`
	PricePerGPUHr   float64 `mapstructure:"price_per_gpu_hour" json:"price_per_gpu_hour"`
	// Storage and egress prices: nil is "not stated", 0 is "free". The host
	// (CPUs, memory, local disk) when billed apart from the GPUs, per
	// node-hour: nil when it is not.
	PriceStoragePerTiBMonth *float64 `mapstructure:"price_storage_per_tib_month" json:"price_storage_per_tib_month,omitempty"`
	PriceEgressPerGiB       *float64 `mapstructure:"price_egress_per_gib" json:"price_egress_per_gib,omitempty"`
	PriceHostPerNodeHour    *float64 `mapstructure:"price_host_per_node_hour" json:"price_host_per_node_hour,omitempty"`
	Currency                string   `mapstructure:"currency" json:"currency"`
	Billing                 string   `mapstructure:"billing_granularity" json:"billing_granularity"` // e.g. "1m", "1h"
	Driver                  string   `mapstructure:"driver" json:"driver"`                           // driver version promised, if any
	CUDA                    string   `mapstructure:"cuda" json:"cuda"`
	// Terms are the contract's words on what goes wrong: failed nodes,
	// support, tenancy, commitment, billing, versions, data. gpuaccept
	// does not test them; quote lint (LintQuote) warns where they are
	// missing.
	Terms Terms `mapstructure:"terms" json:"terms"`
}

// Terms are the parts of an offer that are promises, not figures. Free
// text is the provider's own words, kept for the record; empty means "not
// stated".
type Terms struct {
	// FailedNode: what happens when a node of a distributed job fails
	// (replacement time, credit, who detects it).
	FailedNode string `mapstructure:"failed_node" json:"failed_node,omitempty"`
	// SupportResponse is the promised time to a first response during the
	// window; 0 is "not stated".
	SupportResponse time.Duration `mapstructure:"support_response" json:"support_response,omitempty"`
	// Dedicated: the nodes are sold as dedicated; then Isolation (what
	// keeps other tenants out) and Placement (where the nodes are, e.g.
	// one InfiniBand leaf or rail group) say what that means.
	Dedicated bool   `mapstructure:"dedicated" json:"dedicated,omitempty"`
	Isolation string `mapstructure:"isolation" json:"isolation,omitempty"`
	Placement string `mapstructure:"placement" json:"placement,omitempty"`
	// MinimumUtilization and Cancellation: what a low rate commits to.
	MinimumUtilization string `mapstructure:"minimum_utilization" json:"minimum_utilization,omitempty"`
	Cancellation       string `mapstructure:"cancellation" json:"cancellation,omitempty"`
	// BenchmarkWindow: time on the nodes before the commitment starts.
	BenchmarkWindow time.Duration `mapstructure:"benchmark_window" json:"benchmark_window,omitempty"`
	// BillingExport: how usage can be exported, e.g. "CSV per hour".
	BillingExport string `mapstructure:"billing_export" json:"billing_export,omitempty"`
	// VersionsCheckable: the driver, CUDA and framework versions can be
	// checked on the nodes before the first workload.
	VersionsCheckable bool `mapstructure:"versions_checkable" json:"versions_checkable,omitempty"`
	// Compliance: the certifications claimed, e.g. [SOC2, ISO27001];
	// DataDeletion: how data is handled and deleted at the end.
	Compliance   []string `mapstructure:"compliance" json:"compliance,omitempty"`
	DataDeletion string   `mapstructure:"data_deletion" json:"data_deletion,omitempty"`
	// IdleShutdownAfter: the provider stops (or signals) a node idle this
	// long; 0 is "not stated". idle.provider_check tests it.
	IdleShutdownAfter time.Duration `mapstructure:"idle_shutdown_after" json:"idle_shutdown_after,omitempty"`
}

// Cost is what the window used besides the nodes' time, and what counts
// as its accepted work: the inputs of the cost ledger. Nil is "not given".
type Cost struct {
	// StorageTiB is the storage kept during the window (priced at
	// quote.price_storage_per_tib_month for the window's billed time);
	// EgressGiB the data that left the provider (quote.price_egress_per_gib).
	StorageTiB *float64 `mapstructure:"storage_tib" json:"storage_tib,omitempty"`
	EgressGiB  *float64 `mapstructure:"egress_gib" json:"egress_gib,omitempty"`
	// Support and Licences are amounts billed for the window, in the
	// quote's currency.
	Support  *float64 `mapstructure:"support" json:"support,omitempty"`
	Licences *float64 `mapstructure:"licences" json:"licences,omitempty"`
	// Unit is one unit of accepted work, singular ("accepted node",
	// "training step"); AcceptedUnits how many the window produced.
	// Default: accepted nodes, counted from the verdicts.
	Unit          string   `mapstructure:"unit" json:"unit,omitempty"`
	AcceptedUnits *float64 `mapstructure:"accepted_units" json:"accepted_units,omitempty"`
	// Monthly are the inputs of the monthly total cost of ownership.
	Monthly Monthly `mapstructure:"monthly" json:"monthly"`
}

// Monthly is the monthly TCO formula's components, in the quote's currency
// per month; nil is "not given". The names are record.TCOComponents.
type Monthly struct {
	CommittedCompute    *float64 `mapstructure:"committed_compute" json:"committed_compute,omitempty"`
	Burst               *float64 `mapstructure:"burst" json:"burst,omitempty"`
	PersistentStorage   *float64 `mapstructure:"persistent_storage" json:"persistent_storage,omitempty"`
	Snapshots           *float64 `mapstructure:"snapshots" json:"snapshots,omitempty"`
	Egress              *float64 `mapstructure:"egress" json:"egress,omitempty"`
	Support             *float64 `mapstructure:"support" json:"support,omitempty"`
	IdleWaste           *float64 `mapstructure:"idle_waste" json:"idle_waste,omitempty"`
	RetryWaste          *float64 `mapstructure:"retry_waste" json:"retry_waste,omitempty"`
	EngineeringOverhead *float64 `mapstructure:"engineering_overhead" json:"engineering_overhead,omitempty"`
}

// Components lists the given components by name (record.TCOComponents'
// order), with their keys' pointers for validation.
func (m *Monthly) Components() []MonthlyComponent {
	all := []MonthlyComponent{
		{"committed_compute", m.CommittedCompute}, {"burst", m.Burst}, {"persistent_storage", m.PersistentStorage},
		{"snapshots", m.Snapshots}, {"egress", m.Egress}, {"support", m.Support},
		{"idle_waste", m.IdleWaste}, {"retry_waste", m.RetryWaste}, {"engineering_overhead", m.EngineeringOverhead},
	}
	var out []MonthlyComponent
	for _, c := range all {
		if c.Value != nil {
			out = append(out, c)
		}
	}
	return out
}

// MonthlyComponent is one given component of the monthly TCO.
type MonthlyComponent struct {
	Name  string
	Value *float64
}

// Acceptance says how close to the quote is close enough.
type Acceptance struct {
	// Tolerance is the fraction of a quoted figure that still passes
	// (0.9: 90% of the quoted busbw passes). Default 0.9.
	Tolerance float64 `mapstructure:"tolerance" json:"tolerance"`
	// Thresholds override Tolerance per requirement ID (e.g. "NCCL-002": 0.85).
	Thresholds map[string]float64 `mapstructure:"thresholds" json:"thresholds"`
	// Strict aborts the window when a node fails a gating phase instead of
	// quarantining it.
	Strict bool `mapstructure:"strict" json:"strict"`
	// Regression is how much worse than a baseline run's a measured figure
	// may be before `gpuaccept diff` calls it a regression (0.05: 5%).
	// Default 0.05. RegressionByID overrides it per requirement ID. Both
	// are recorded in run.json, so the candidate run carries them.
	Regression     float64            `mapstructure:"regression" json:"regression"`
	RegressionByID map[string]float64 `mapstructure:"regression_by_id" json:"regression_by_id"`
	// Retest is how many more runs a measured figure (fabric, workload,
	// staging, checkpoint) gets after it failed, before its FAIL stands: a
	// transient failure must not decide a contract. A pass right after a
	// failure is confirmed by one more run (beyond this count), so a node
	// that fails, passes and fails is named unstable. Default 1; 0 turns
	// retests off.
	Retest *int `mapstructure:"retest" json:"retest,omitempty"`
	// Workload is what the buyer's representative workload must reach
	// (phases.workload); a target left out is not judged.
	Workload WorkloadTargets `mapstructure:"workload" json:"workload,omitempty"`
}

// RetestOr is how many retests a failed figure gets: Retest, else
// DefaultRetest.
func (a Acceptance) RetestOr() int {
	if a.Retest != nil {
		return *a.Retest
	}
	return DefaultRetest
}

// DefaultRetest: one retest before a measured figure's FAIL stands.
const DefaultRetest = 1

// WorkloadTargets are the buyer's own targets for the load test. Zero is
// "not set": that figure is measured and recorded but not judged.
type WorkloadTargets struct {
	// Ready bounds the start of the workload on each node: an inference
	// server's start until its health endpoint and one completion answer;
	// a training job's launch until its first step.
	Ready time.Duration `mapstructure:"ready_within" json:"ready_within,omitempty"`

	// Inference. At is the load level the latency and throughput targets
	// are judged at: "concurrency:32" or "rate:10" (requests/s), one of
	// phases.workload.inference.levels; default the highest level.
	At string `mapstructure:"at" json:"at,omitempty"`
	// Percentile the latency targets are held to: 50, 90, 95 or 99.
	// Default 95.
	Percentile int `mapstructure:"percentile" json:"percentile,omitempty"`
	// TTFT: time to first token; TPOT: time per output token after the
	// first (mean per request); ITL: inter-token latency (every gap
	// between tokens); E2EL: end-to-end request latency.
	TTFT time.Duration `mapstructure:"ttft" json:"ttft,omitempty"`
	TPOT time.Duration `mapstructure:"tpot" json:"tpot,omitempty"`
	ITL  time.Duration `mapstructure:"itl" json:"itl,omitempty"`
	E2EL time.Duration `mapstructure:"e2el" json:"e2el,omitempty"`
	// OutputTokensPerSec per node at the judged level (at least).
	OutputTokensPerSec float64 `mapstructure:"output_tokens_per_s" json:"output_tokens_per_s,omitempty"`
	RequestsPerSec     float64 `mapstructure:"requests_per_s" json:"requests_per_s,omitempty"`
	// ErrorRate: the most requests that may fail or time out, as a
	// fraction (0.001) or a percentage ("0.1%").
	ErrorRate *float64 `mapstructure:"error_rate" json:"error_rate,omitempty"`
	// Goodput: the least share of requests that met every latency target
	// set (as vLLM's bench serve --goodput and GuideLLM count it).
	Goodput float64 `mapstructure:"goodput" json:"goodput,omitempty"`

	// Training: steady throughput per node (at least), and the most a
	// node's median step may take.
	SamplesPerSec float64       `mapstructure:"samples_per_s" json:"samples_per_s,omitempty"`
	TokensPerSec  float64       `mapstructure:"tokens_per_s" json:"tokens_per_s,omitempty"`
	StepTime      time.Duration `mapstructure:"step_time" json:"step_time,omitempty"`

	// MemoryHeadroom: the least GPU memory left free at the workload's
	// peak, as a fraction of the GPU's memory (0.1) or a percentage.
	MemoryHeadroom float64 `mapstructure:"memory_headroom" json:"memory_headroom,omitempty"`
	// MaxErrors: errors and restarts a training run may log. Default 0.
	MaxErrors int `mapstructure:"max_errors" json:"max_errors,omitempty"`
}

// Phases says which phases run and with what parameters.
type Phases struct {
	Preflight Toggle `mapstructure:"preflight" json:"preflight"`
	// Security reads the node's access, isolation and residue before the
	// window writes, and checks after teardown that nothing is left.
	Security   Toggle     `mapstructure:"security" json:"security"`
	Diag       Diag       `mapstructure:"diag" json:"diag"`
	AllReduce  AllReduce  `mapstructure:"allreduce" json:"allreduce"`
	ImagePh    Toggle     `mapstructure:"image" json:"image"`
	Staging    Staging    `mapstructure:"staging" json:"staging"`
	Checkpoint Checkpoint `mapstructure:"checkpoint" json:"checkpoint"`
	Failure    Failure    `mapstructure:"failure" json:"failure"`
	// Workload is the load test: the buyer's representative training or
	// inference workload on every node.
	Workload Workload `mapstructure:"workload" json:"workload"`
	// Burnin loads every GPU for a set time with telemetry on; off by
	// default.
	Burnin Burnin `mapstructure:"burnin" json:"burnin"`
	// Deadline bounds each phase on each node unless the phase sets its own.
	Deadline time.Duration `mapstructure:"deadline" json:"deadline"`
}

// Burnin is phases.burnin: sustained load with telemetry on.
type Burnin struct {
	Enabled bool `mapstructure:"enabled" json:"enabled"`
	// Duration of the whole burn-in: 1 min to 30 days.
	Duration time.Duration `mapstructure:"duration" json:"duration"`
	Compute  Compute       `mapstructure:"compute" json:"compute"`
	// Collectives runs the intra-node all-reduce (phases.allreduce's
	// binary and sizes, one process over the node's GPUs) after each run
	// of the compute rate: default true.
	Collectives *bool `mapstructure:"collectives" json:"collectives"`
	// GPUBurn and DCGMStress run gpu-burn and dcgmi diag -r
	// targeted_stress after the collective: auto (default) where the node
	// has them, true (a node without it is NOT MEASURED) or false.
	GPUBurn    Auto `mapstructure:"gpu_burn" json:"gpu_burn"`
	DCGMStress Auto `mapstructure:"dcgm_stress" json:"dcgm_stress"`
	// ClusterAllReduce ends each iteration with every node still in the
	// burn-in meeting and phases.allreduce's collective run once over
	// them all: default false (each iteration then waits for the slowest
	// node).
	ClusterAllReduce bool `mapstructure:"cluster_allreduce" json:"cluster_allreduce"`
	// Workload runs the training phase's job once a round, after the
	// cluster all-reduce (the same meeting): default false.
	Workload bool `mapstructure:"workload" json:"workload"`
}

// Auto is a switch that may also be left to the node: "auto" (the
// default, ""), "true" or "false". YAML's true and false read as such.
type Auto string

// Auto's values.
const (
	AutoDefault Auto = "auto"
	AutoOn      Auto = "true"
	AutoOff     Auto = "false"
)

// Wanted says whether the load runs where the node has it; Asked whether
// the inventory asked for it outright.
func (a Auto) Wanted() bool { return a != AutoOff }
func (a Auto) Asked() bool  { return a == AutoOn }

// String is the value as the inventory says it ("auto" where it was left
// out: an inventory built in code is not validated).
func (a Auto) String() string {
	if a == "" {
		return string(AutoDefault)
	}
	return string(a)
}

// Compute is the per-GPU compute rate: dense bf16 matrix products on every
// GPU of the node at once for Seconds, TFLOP/s per GPU.
type Compute struct {
	// Enabled: default on within the burn-in (nil).
	Enabled *bool `mapstructure:"enabled" json:"enabled"`
	// Seconds each run multiplies for: default 60, 5 to 3,600.
	Seconds int `mapstructure:"seconds" json:"seconds"`
	// Size is the square matrices' dimension: default 8192, 1,024 to
	// 32,768.
	Size int `mapstructure:"size" json:"size"`
	// Python runs scripts/node/gemm.py: default python3 on the node (it
	// needs PyTorch with CUDA; the lab's stand-in needs none).
	Python string `mapstructure:"python" json:"python"`
}

// On says whether the burn-in measures the compute rate.
func (c Compute) On() bool { return c.Enabled == nil || *c.Enabled }

// Toggle is a phase that only needs switching on or off (default on).
type Toggle struct {
	Enabled *bool         `mapstructure:"enabled" json:"enabled"`
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
}

// Diag configures dcgmi diag.
type Diag struct {
	Enabled *bool         `mapstructure:"enabled" json:"enabled"`
	Level   int           `mapstructure:"level" json:"level"` // 1..4 (dcgmi diag -r); default 1
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
	// Image is NVIDIA's DCGM container image, pinned by digest, run
	// through the node's podman or docker with the GPUs where the node
	// has no dcgmi of its own (most rented nodes have none).
	Image string `mapstructure:"image" json:"image,omitempty"`
}

// AllReduce configures the cluster-wide all-reduce: nccl-tests'
// all_reduce_perf over every node still in the window, under mpirun.
type AllReduce struct {
	// Enabled is off by default for now: the nodes need nccl-tests and
	// Open MPI, and the window must not fail for want of them.
	Enabled  bool   `mapstructure:"enabled" json:"enabled"`
	Binary   string `mapstructure:"binary" json:"binary"`       // default all_reduce_perf
	MinBytes Bytes  `mapstructure:"min_bytes" json:"min_bytes"` // -b, default 1MiB
	MaxBytes Bytes  `mapstructure:"max_bytes" json:"max_bytes"` // -e, default 8GiB
	Factor   int    `mapstructure:"step_factor" json:"step_factor"`
	Iters    int    `mapstructure:"iters" json:"iters"`   // -n, default 20
	Warmup   int    `mapstructure:"warmup" json:"warmup"` // -w, default 5
	Repeats  int    `mapstructure:"repeats" json:"repeats"`
	// RanksPerNode is one rank per GPU: default the quote's GPUs per node.
	RanksPerNode int           `mapstructure:"ranks_per_node" json:"ranks_per_node"`
	MPIArgs      []string      `mapstructure:"mpi_args" json:"mpi_args"` // extra mpirun arguments (transport selection, say)
	Timeout      time.Duration `mapstructure:"timeout" json:"timeout"`
	// Launcher is mpirun (from the first node, over the window's own ssh
	// key) or srun (from the Slurm login node; needs the slurm section).
	Launcher string `mapstructure:"launcher" json:"launcher"`
	// Collectives are run across the cluster after the all-reduce, once
	// each, for the record: all_gather, reduce_scatter, alltoall, sendrecv.
	Collectives []string `mapstructure:"collectives" json:"collectives"`
	// IntraNode runs the benchmark inside every node at once (-g = ranks
	// per node) before the cluster-wide sweeps. Default on.
	IntraNode *bool     `mapstructure:"intra_node" json:"intra_node"`
	Bisection Bisection `mapstructure:"bisection" json:"bisection"`
}

// Staging copies the dataset and weights to every node's local disk at
// the same time, as the training job's setup would.
type Staging struct {
	Enabled bool `mapstructure:"enabled" json:"enabled"`
	// Dir is the node-local destination (it is emptied of what the window
	// put there at teardown).
	Dir     string          `mapstructure:"dir" json:"dir"`
	Sources []StagingSource `mapstructure:"sources" json:"sources"`
	// Window is the planned setup window: staging must fit in it.
	Window  time.Duration `mapstructure:"window" json:"window"`
	Fio     *bool         `mapstructure:"fio" json:"fio"` // a fio baseline of the local disk when fio is installed; default on
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
}

// StagingSource is one thing to stage: exactly one of Path (on shared
// storage), URL (http, https, s3, gs, az via a tool present on the node)
// or Size (synthetic data the coordinator generates and sends).
type StagingSource struct {
	Name   string `mapstructure:"name" json:"name"`
	Path   string `mapstructure:"path" json:"path,omitempty"`
	URL    string `mapstructure:"url" json:"url,omitempty"`
	Size   Bytes  `mapstructure:"size" json:"size,omitempty"`
	SHA256 string `mapstructure:"sha256" json:"sha256,omitempty"` // expected; checked on every node
	// Endpoint is an S3-compatible store's URL for an s3:// source (the
	// aws CLI's --endpoint-url): most GPU clouds' object storage is one.
	Endpoint string `mapstructure:"endpoint" json:"endpoint,omitempty"`
}

// Checkpoint writes a checkpoint on every node and restores it.
type Checkpoint struct {
	Enabled bool `mapstructure:"enabled" json:"enabled"`
	// Dir is where checkpoints go: a shared filesystem (then node i
	// restores what node i+1 wrote) or a local disk.
	Dir string `mapstructure:"dir" json:"dir"`
	// Size per node, split into Shards files (one per GPU rank; default
	// the quote's GPUs per node).
	Size   Bytes `mapstructure:"size" json:"size"`
	Shards int   `mapstructure:"shards" json:"shards"`
	// Shared says Dir is one filesystem for all nodes. Default true.
	Shared  *bool         `mapstructure:"shared" json:"shared"`
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
}

// Failure configures the node-kill failure test: a distributed training
// job (torchrun) on every node, one node failed on purpose once it runs
// steadily, and what recovering costs.
type Failure struct {
	Enabled bool `mapstructure:"enabled" json:"enabled"`
	// Victim is the node failed on purpose. Default the last node in the
	// window; never the first, which holds the rendezvous.
	Victim string `mapstructure:"victim" json:"victim"`
	// Inject: kill-worker (the victim's training process), kill-node
	// (every process of the window on it), cut (its network, for CutFor,
	// the restore scheduled on the node itself first), reboot (only with
	// AllowReboot). Default kill-node.
	Inject      string        `mapstructure:"inject" json:"inject"`
	CutFor      time.Duration `mapstructure:"cut_for" json:"cut_for"`
	AllowReboot bool          `mapstructure:"allow_reboot" json:"allow_reboot"`
	// Recovery: elastic (torchrun goes on with the survivors, the victim
	// rejoins when back) or relaunch (the job is stopped and started again
	// on the nodes that answer). Default elastic.
	Recovery string `mapstructure:"recovery" json:"recovery"`
	// Python runs torch.distributed.run (torchrun). Default python3.
	Python string `mapstructure:"python" json:"python"`
	// Command replaces the embedded ddp_train.py: the user's own training
	// command, with the same log contract, run by torchrun --no_python.
	Command []string `mapstructure:"command" json:"command"`
	// InImage runs torchrun inside the pinned image (image.runtime, the
	// node's GPUs, host network) when an image is configured. Default on
	// then. ContainerArgs are more runtime arguments (volumes, say).
	InImage       *bool    `mapstructure:"in_image" json:"in_image"`
	ContainerArgs []string `mapstructure:"container_args" json:"container_args"`
	// ProcsPerNode: workers per node. Default the quote's GPUs per node.
	ProcsPerNode int `mapstructure:"procs_per_node" json:"procs_per_node"`
	// Dir holds the job's checkpoints: a filesystem every node sees.
	// Default phases.checkpoint.dir.
	Dir             string `mapstructure:"dir" json:"dir"`
	CheckpointEvery int    `mapstructure:"checkpoint_every" json:"checkpoint_every"` // steps; default 5
	Hidden          int    `mapstructure:"hidden" json:"hidden"`                     // model width; default 1024
	// StepTime: ddp_train.py's steps take at least this long (a small
	// model alone steps in milliseconds). Default 500ms.
	StepTime time.Duration `mapstructure:"step_time" json:"step_time"`
	// SteadySteps every node logs before the failure; ResumeSteps the
	// job logs after it for progress to count as resumed. Defaults 5, 3.
	SteadySteps int `mapstructure:"steady_steps" json:"steady_steps"`
	ResumeSteps int `mapstructure:"resume_steps" json:"resume_steps"`
	// CollectiveTimeout bounds a collective (init_process_group's
	// timeout): without it a cut link hangs the survivors for good.
	// Default 30s.
	CollectiveTimeout time.Duration `mapstructure:"collective_timeout" json:"collective_timeout"`
	// Port of the rendezvous on the first node. Default one derived from
	// the run ID (an old store on a reused port is joined silently).
	Port int `mapstructure:"port" json:"port"`
	// Thresholds: ResumeWithin (default 5m) from the failure to resumed
	// progress; MaxStepsLost (default CheckpointEvery).
	ResumeWithin time.Duration `mapstructure:"resume_within" json:"resume_within"`
	MaxStepsLost *int          `mapstructure:"max_steps_lost" json:"max_steps_lost"`
	Timeout      time.Duration `mapstructure:"timeout" json:"timeout"`
}

// Workload is the representative load test: the buyer's own training job
// or inference server, in the pinned image (or its own), on every node at
// once, measured from the node itself.
type Workload struct {
	Enabled bool `mapstructure:"enabled" json:"enabled"`
	// Kind: training or inference.
	Kind string `mapstructure:"kind" json:"kind"`
	// Image runs the workload (an inference server's image, pinned by
	// digest); default the window's image.reference.
	Image         string   `mapstructure:"image" json:"image,omitempty"`
	ContainerArgs []string `mapstructure:"container_args" json:"container_args,omitempty"`
	// Repeats of the whole measurement, kept as a distribution (min /
	// median / max, never the best). Default 1.
	Repeats   int               `mapstructure:"repeats" json:"repeats,omitempty"`
	Timeout   time.Duration     `mapstructure:"timeout" json:"timeout"`
	Training  WorkloadTraining  `mapstructure:"training" json:"training"`
	Inference WorkloadInference `mapstructure:"inference" json:"inference"`
}

// WorkloadTraining is a multi-node training job under torchrun with the
// window's rendezvous: the buyer's command, or the built-in DDP job
// (ddp_train.py) when none is given.
type WorkloadTraining struct {
	// Command is the buyer's training command (run by torchrun
	// --no_python); empty runs ddp_train.py.
	Command []string `mapstructure:"command" json:"command,omitempty"`
	// StepPattern reads a step line of the buyer's command's log: a Go
	// regexp with the named groups step and (any of) step_time (seconds),
	// samples, tokens. Empty: the log contract ddp_train.py follows.
	StepPattern string `mapstructure:"step_pattern" json:"step_pattern,omitempty"`
	Python      string `mapstructure:"python" json:"python,omitempty"`
	// ProcsPerNode: workers per node. Default the quote's GPUs per node.
	ProcsPerNode int `mapstructure:"procs_per_node" json:"procs_per_node,omitempty"`
	// Steps: how many steps the job runs (ddp_train.py's --steps); Warmup
	// of them are left out of the steady figures. Defaults 30 and 5.
	Steps  int `mapstructure:"steps" json:"steps,omitempty"`
	Warmup int `mapstructure:"warmup" json:"warmup,omitempty"`
	// Duration ends a job of the buyer's that runs on once it has run
	// this long in steady state. Default: until Steps or the timeout.
	Duration time.Duration `mapstructure:"duration" json:"duration,omitempty"`
	// StragglerRatio: a node whose median step time exceeds the median of
	// every node's by more than this factor is named the straggler.
	// Default 1.1.
	StragglerRatio float64 `mapstructure:"straggler_ratio" json:"straggler_ratio,omitempty"`
	// Hidden and Batch size ddp_train.py's model and per-worker batch.
	Hidden int `mapstructure:"hidden" json:"hidden,omitempty"`
	Batch  int `mapstructure:"batch" json:"batch,omitempty"`
	// Port of the rendezvous; default one derived from the run ID.
	Port int `mapstructure:"port" json:"port,omitempty"`
	// InImage runs torchrun inside the image (default on when there is
	// one).
	InImage *bool `mapstructure:"in_image" json:"in_image,omitempty"`
}

// WorkloadInference is an OpenAI-compatible server (vLLM, SGLang, TGI,
// llama.cpp's server) on every node, driven over loopback by the load
// generator gpuaccept ships.
type WorkloadInference struct {
	// Command starts the server inside the image (its arguments after the
	// image, e.g. [vllm, serve, MODEL, --port, "8000"]); empty runs the
	// image's own entrypoint.
	Command []string `mapstructure:"command" json:"command,omitempty"`
	// Model is the name requests ask for (the server's served model).
	Model string `mapstructure:"model" json:"model"`
	// Port the server listens on (host network). Default 8000.
	Port int `mapstructure:"port" json:"port,omitempty"`
	// HealthPath answers 200 once the server is ready. Default /health.
	HealthPath string `mapstructure:"health_path" json:"health_path,omitempty"`
	// MetricsPath is scraped for queue time, preemptions and KV-cache use
	// when the server has one (vLLM: /metrics). Default /metrics; "none"
	// to skip.
	MetricsPath string `mapstructure:"metrics_path" json:"metrics_path,omitempty"`
	// ServersPerNode: one server per GPU group (GPUs split evenly). Default 1.
	ServersPerNode int `mapstructure:"servers_per_node" json:"servers_per_node,omitempty"`
	// Prompts is a JSONL file of the buyer's requests, each {"prompt":
	// "...", "max_tokens": N} or {"input_tokens": N, "output_tokens": M};
	// without it a synthetic set of InputTokens / OutputTokens lengths.
	Prompts      string       `mapstructure:"prompts" json:"prompts,omitempty"`
	InputTokens  LengthSpread `mapstructure:"input_tokens" json:"input_tokens,omitempty"`
	OutputTokens LengthSpread `mapstructure:"output_tokens" json:"output_tokens,omitempty"`
	// Levels is the sweep: "concurrency:N" (closed loop, N streams) or
	// "rate:R" (open loop, Poisson arrivals of R requests/s). Default
	// concurrency 1, 8, 32.
	Levels []string `mapstructure:"levels" json:"levels,omitempty"`
	// Duration of each level (after Warmup). Defaults 60s and 10s.
	Duration time.Duration `mapstructure:"duration" json:"duration,omitempty"`
	Warmup   time.Duration `mapstructure:"warmup" json:"warmup,omitempty"`
	// RequestTimeout bounds one request; Retries of a request that failed
	// to connect (never of one the server answered). Defaults 60s, 0.
	RequestTimeout time.Duration `mapstructure:"request_timeout" json:"request_timeout,omitempty"`
	Retries        int           `mapstructure:"retries" json:"retries,omitempty"`
	// Loadgen is a gpuaccept binary for the nodes' architecture when it
	// is not the coordinator's (the load generator is `gpuaccept loadgen`,
	// uploaded to every node). Default the running gpuaccept.
	Loadgen string `mapstructure:"loadgen" json:"loadgen,omitempty"`
	// ReadyTimeout bounds the server's start. Default 10m (a large
	// model's weights load for minutes).
	ReadyTimeout time.Duration `mapstructure:"ready_timeout" json:"ready_timeout,omitempty"`
}

// LengthSpread is a synthetic length distribution of tokens: Mean and,
// when set, a uniform spread of ±Spread around it (vLLM bench's
// random-range-ratio). Zero Mean is "not given".
type LengthSpread struct {
	Mean   int     `mapstructure:"mean" json:"mean,omitempty"`
	Spread float64 `mapstructure:"spread" json:"spread,omitempty"`
}

// Bisection finds the slow node or link: disjoint pairs of nodes tested at
// once, round robin, suspects retested against nodes already proven good.
type Bisection struct {
	Enabled *bool `mapstructure:"enabled" json:"enabled"` // default on (with the all-reduce, 3 nodes or more)
	// MaxRounds bounds the pairing rounds. Default 3.
	MaxRounds int `mapstructure:"max_rounds" json:"max_rounds"`
	// SlowRatio: a pair below this fraction of the typical pair is slow.
	// Default 0.8.
	SlowRatio float64 `mapstructure:"slow_ratio" json:"slow_ratio"`
	// The pair sweep; defaults are the all-reduce's sizes, and 1 repeat.
	MinBytes Bytes `mapstructure:"min_bytes" json:"min_bytes"`
	MaxBytes Bytes `mapstructure:"max_bytes" json:"max_bytes"`
	Iters    int   `mapstructure:"iters" json:"iters"`
}

// Slurm says the nodes are Slurm-managed: collectives are launched with
// srun from the login node, which is reached like any node but is not one.
type Slurm struct {
	Login     SlurmLogin `mapstructure:"login" json:"login"`
	Partition string     `mapstructure:"partition" json:"partition"`
	Account   string     `mapstructure:"account" json:"account"`
	// MPI is srun's --mpi plugin (pmix, pmi2, ...). Default pmix.
	MPI      string   `mapstructure:"mpi" json:"mpi"`
	SrunArgs []string `mapstructure:"srun_args" json:"srun_args"`
	// StepArgs are srun options every step of transport srun gets besides
	// its own (--gres=gpu:8 where a step sees no GPU it does not ask
	// for).
	StepArgs []string `mapstructure:"step_args" json:"step_args,omitempty"`
	// Steps is how transport srun runs the nodes' commands: StepsShared
	// (the default) or StepsEach.
	Steps   string        `mapstructure:"steps" json:"steps,omitempty"`
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
	// Allocate: the window holds its own allocation for its whole length
	// and its nodes are the allocation's (the inventory then names none).
	Allocate *SlurmAllocate `mapstructure:"allocate" json:"allocate,omitempty"`
	// AllocateTimeout is how long the window waits for the allocation
	// (default DefaultAllocateTimeout): past it, the window is INCOMPLETE
	// with squeue's reason.
	AllocateTimeout time.Duration `mapstructure:"allocate_timeout" json:"allocate_timeout,omitempty"`
}

// SlurmAllocate is the allocation a window asks for: salloc --no-shell on
// the login node, with slurm.partition and slurm.account.
type SlurmAllocate struct {
	// Nodes is how many, NodeList which (a Slurm hostlist): one of them.
	Nodes    int    `mapstructure:"nodes" json:"nodes,omitempty"`
	NodeList string `mapstructure:"nodelist" json:"nodelist,omitempty"`
	// Exclusive: whole nodes, no other job beside the window's (default
	// true: an acceptance shares no node).
	Exclusive *bool  `mapstructure:"exclusive" json:"exclusive,omitempty"`
	GRES      string `mapstructure:"gres" json:"gres,omitempty"`
	QOS       string `mapstructure:"qos" json:"qos,omitempty"`
	// Constraint is salloc's --constraint: the node features the window
	// wants (h100&ib). SLURM-005 names a granted node whose active
	// features lack one; the window judges what it asked for, which it
	// could not from a --constraint among Args.
	Constraint string `mapstructure:"constraint" json:"constraint,omitempty"`
	// Time is the job's time limit; default the window's bound.
	Time SlurmTime `mapstructure:"time" json:"time,omitempty"`
	Args []string  `mapstructure:"args" json:"args,omitempty"`
}

// DefaultAllocateTimeout is slurm.allocate_timeout's default.
const DefaultAllocateTimeout = 10 * time.Minute

// Allocates says whether the window's nodes come from its own Slurm
// allocation.
func (s Slurm) Allocates() bool { return s.Allocate != nil }

// SlurmLogin is where srun runs.
type SlurmLogin struct {
	Address string `mapstructure:"address" json:"address"`
	Port    int    `mapstructure:"port" json:"port"`
	User    string `mapstructure:"user" json:"user"`
}

// LoginHop is the login node as a jump host: [user@]host[:port].
func (s Slurm) LoginHop() string {
	l := s.Login
	h := l.Address
	if l.Port != 0 {
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
			h = "[" + h + "]"
		}
		h += ":" + strconv.Itoa(l.Port)
	}
	if l.User != "" {
		h = l.User + "@" + h
	}
	return h
}

// Enabled reports whether the inventory names a Slurm login node.
func (s Slurm) Enabled() bool { return s.Login.Address != "" }

// On reports whether an optional switch is on; nil means the default, on.
func On(b *bool) bool { return b == nil || *b }

// Bytes is a size given as "1GiB", "512MiB", "8G" or a plain number of bytes.
type Bytes int64

// ToleranceFor is the fraction of a quoted figure that passes requirement id:
// its own threshold when the inventory sets one, else the window's.
func (a Acceptance) ToleranceFor(id string) float64 {
	if t, ok := a.Thresholds[id]; ok && t > 0 {
		return t
	}
	if a.Tolerance > 0 {
		return a.Tolerance
	}
	return DefaultTolerance
}
