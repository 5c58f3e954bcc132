package record

import (
	"slices"
	"strings"
)

// Requirement is one acceptance criterion a window can judge: the one
// place its ID, title, family, unit and card row are written. Judges make
// their verdicts from it (NewVerdict), inventory validation checks the
// IDs thresholds name against it, and reports take titles and families
// from it.
type Requirement struct {
	ID    string
	Title string
	// Family is the ID's prefix: the junit class (gpuaccept.<family>) and
	// the report's column.
	Family string
	// Card is the row of the buyer's acceptance card the requirement fills
	// (one of CardRows); "" for the window's own preconditions (reached,
	// stayed in the window), which fill no row.
	Card string
	// Figure: its verdicts record a measured Value in Unit (UnitScore's ""
	// included), which `gpuaccept diff` compares and
	// acceptance.regression_by_id may set a threshold for.
	Figure bool
	Unit   string
	// Tolerance: it is judged as a fraction of a quoted figure, which
	// acceptance.thresholds may set.
	Tolerance bool
	// Quote: the quote's keys whose figure the requirement holds the node
	// to (any of them stated makes it required); Enable: the inventory
	// key that turns on what measures it. A quoted figure nothing
	// measured leaves the window incomplete, never passed.
	Quote  []string
	Enable string
}

// The rows of the buyer's acceptance card (DESIGN.md), in its order.
const (
	CardContainer  = "container start"
	CardGPU        = "GPU state"
	CardHealth     = "node health"
	CardNCCL       = "NCCL all-reduce"
	CardStaging    = "storage staging"
	CardCheckpoint = "checkpoint write/read"
	CardFailure    = "failure check"
	CardBilling    = "idle shutdown / billing"
	CardSecurity   = "security check"
	CardLoad       = "load test"
)

// CardRows is the acceptance card's rows in order.
var CardRows = []string{CardContainer, CardGPU, CardHealth, CardNCCL, CardStaging, CardCheckpoint,
	CardFailure, CardBilling, CardSecurity, CardLoad}

func req(id, title, card string) Requirement {
	family, _, _ := strings.Cut(id, "-")
	return Requirement{ID: id, Title: title, Family: family, Card: card}
}

// measured marks a requirement whose verdicts carry a Value in unit.
func (r Requirement) measured(unit string) Requirement {
	r.Figure, r.Unit = true, unit
	return r
}

// quoted names the quote keys a requirement holds the node to and the
// inventory key that measures it.
func (r Requirement) quoted(enable string, keys ...string) Requirement {
	r.Quote, r.Enable = keys, enable
	return r
}

// againstQuote marks a requirement judged as a fraction of a quoted
// figure.
func (r Requirement) againstQuote() Requirement {
	r.Tolerance = true
	return r
}

const preflight = "phases.preflight.enabled"

var catalog = []Requirement{
	req("CONN-001", "reachable by its transport (over SSH: host key verified)", ""),
	req("WIN-001", "node took part in the whole window", ""),
	// The window's own Slurm allocation (slurm.allocate): its nodes.
	req("SLURM-001", "the window's Slurm allocation granted in time", ""),
	req("SLURM-002", "node in service in Slurm (not drained, down or failing)", CardHealth),
	req("SLURM-003", "Slurm's GPUs (GRES count and type) match the quote and nvidia-smi", CardGPU),
	req("SLURM-004", "the partition lets the window run as planned (state, time and node limits)", ""),
	req("SLURM-005", "node has the features the allocation asked for (slurm.allocate.constraint)", ""),

	// A managed Kubernetes cluster's nodes (transport kubernetes), as its
	// API says them.
	req("KUBE-001", "node ready and schedulable in Kubernetes (no pressure, not cordoned)", CardHealth),
	req("KUBE-002", "the GPUs Kubernetes schedules (allocatable) match its capacity, the quote and nvidia-smi", CardGPU),
	req("KUBE-003", "the window's pods removed at its end (the API lists none with its label)", ""),

	req("GPU-001", "GPU model matches the quote", CardGPU).quoted(preflight, "gpu_model"),
	req("GPU-002", "GPUs per node match the quote", CardGPU).quoted(preflight, "gpus_per_node"),
	req("GPU-003", "GPU memory matches the quote", CardGPU).againstQuote().quoted(preflight, "gpu_memory_gib"),
	req("GPU-004", "GPU form factor matches the quote", CardGPU).quoted(preflight, "form_factor"),
	req("GPU-005", "driver version the same on every node (and as quoted)", CardGPU).quoted(preflight, "driver"),
	req("GPU-006", "CUDA version the same on every node (and as quoted)", CardGPU).quoted(preflight, "cuda"),
	req("NET-001", "network ports active at the quoted count and speed", CardGPU).againstQuote().quoted(preflight, "nics_per_node", "nic_gbps"),
	req("NET-002", "neighbour table holds every peer (gc_thresh3)", CardGPU),
	req("NODE-001", "node matches the rest of the fleet", CardGPU),

	req("DIAG-001", "DCGM diagnostic passes", CardHealth),
	req("HEALTH-001", "no GPU slowed on an idle node (clock event reasons)", CardHealth),
	req("HEALTH-002", "no uncorrectable memory error, no remap or retirement pending", CardHealth),
	req("HEALTH-003", "no Xid or SXid in the kernel log since boot", CardHealth),
	req("HEALTH-004", "no GPU fell off the bus", CardHealth),

	req("NCCL-001", "collective results are correct", CardNCCL),
	req("NCCL-002", "inter-node all_reduce bus bandwidth matches the quote", CardNCCL).measured(UnitGBs).againstQuote().
		quoted("phases.allreduce.enabled", "inter_busbw_gbs"),
	req("NCCL-003", "intra-node all_reduce bus bandwidth matches the quote", CardNCCL).measured(UnitGBs).againstQuote().
		quoted("phases.allreduce.enabled (and phases.allreduce.intra_node)", "intra_busbw_gbs"),
	req("NCCL-004", "no slow node or link (pairwise bisection)", CardNCCL).measured(UnitScore),
	req("NCCL-005", "other collectives run correctly across the cluster", CardNCCL),
	req("NCCL-006", "inter-node all_reduce latency (small messages) matches the quote", CardNCCL).measured(UnitMicroseconds).againstQuote().
		quoted("phases.allreduce.enabled", "inter_latency_us"),
	req("NCCL-007", "intra-node all_reduce latency (small messages) matches the quote", CardNCCL).measured(UnitMicroseconds).againstQuote().
		quoted("phases.allreduce.enabled (and phases.allreduce.intra_node)", "intra_latency_us"),

	req("IMG-001", "the node's image is the pinned one", CardContainer).measured(UnitSeconds),
	req("IMG-002", "the image starts with the GPUs", CardContainer).measured(UnitSeconds),
	req("IMG-003", "the pinned image reaches every node", CardContainer).measured(UnitSeconds),

	req("STAGE-001", "staged files' sha256 verified on every node", CardStaging),
	req("STAGE-002", "staging throughput matches the quote", CardStaging).measured(UnitGBs).againstQuote().
		quoted("phases.staging.enabled", "staging_gbs"),
	req("STAGE-003", "staging fits the planned setup window", CardStaging).measured(UnitSeconds),

	req("CKPT-001", "checkpoint restore is byte-exact", CardCheckpoint),
	req("CKPT-002", "checkpoint write throughput matches the quote", CardCheckpoint).measured(UnitGBs).againstQuote().
		quoted("phases.checkpoint.enabled", "checkpoint_gbs"),
	req("CKPT-003", "checkpoint read throughput matches the quote", CardCheckpoint).measured(UnitGBs).againstQuote().
		quoted("phases.checkpoint.enabled", "checkpoint_gbs"),
	req("CKPT-004", "GPU idle for a blocking checkpoint save and restore (cluster)", CardCheckpoint).measured(UnitSeconds).againstQuote(),

	req("RECOV-001", "the job resumed after losing a node, in time", CardFailure).measured(UnitSeconds),
	req("RECOV-002", "work lost to the failure is within the checkpoint interval", CardFailure).measured(UnitSteps),
	req("RECOV-003", "the failed node came back into the job", CardFailure).measured(UnitSeconds),
	req("RECOV-004", "nothing of the test is left running", CardFailure),

	// The load test: the buyer's workload on every node, against the
	// buyer's own targets (acceptance.workload), the worst node named.
	req("WORK-001", "the workload started and was ready in time", CardLoad).measured(UnitSeconds),
	req("WORK-002", "inference: time to first token within the target", CardLoad).measured(UnitMilliseconds),
	req("WORK-003", "inference: time per output token and inter-token latency within the target", CardLoad).measured(UnitMilliseconds),
	req("WORK-004", "inference: end-to-end request latency within the target", CardLoad).measured(UnitMilliseconds),
	req("WORK-005", "inference: output tokens/s per node meet the target", CardLoad).measured(UnitTokensPerSec),
	req("WORK-006", "inference: requests failed or timed out within the target", CardLoad).measured(UnitPercentFailed),
	req("WORK-007", "inference: goodput (requests that met every latency target) meets the target", CardLoad).measured(UnitPercentGood),
	req("WORK-008", "training: steady throughput per node meets the target", CardLoad).measured(UnitPerSecond),
	req("WORK-009", "training: no straggler (every node's step time near the median)", CardLoad).measured(UnitTimesMedian),
	req("WORK-010", "GPU memory headroom at the workload's peak", CardLoad).measured(UnitPercentGood),
	req("WORK-011", "the workload ran without errors or restarts", CardLoad),
	// Under load: what the window's telemetry saw while it held the node
	// (the card's load test row: "without throttling, Xid or ECC errors").
	req("HEALTH-011", "no fault slowdown under load (HW, thermal, power brake)", CardLoad),
	req("HEALTH-012", "no Xid or SXid during the window", CardLoad),
	req("HEALTH-013", "no ECC count rose, no row remapped or pending", CardLoad),
	req("HEALTH-014", "SM clocks under load at or above the quoted base clock", CardLoad).measured(UnitMHz).
		quoted("telemetry.enabled", "gpu_base_clock_mhz"),
	req("HEALTH-015", "no IB port went down or counted errors", CardLoad),
	req("HEALTH-016", "no GPU stalled under load (busy, drawing idle power)", CardLoad),
	req("BURN-001", "per-GPU compute rate (dense bf16) matches the quote and the fleet", CardLoad).measured(UnitTFLOPS).
		againstQuote().quoted("phases.burnin.enabled", "gpu_tflops_bf16"),
	req("BURN-002", "no GPU's rate or node's collective busbw drifted down under sustained load", CardLoad).measured(UnitTimesFirst),
	req("BURN-003", "gpu-burn and DCGM's targeted stress passed on every burn-in iteration", CardLoad),
	req("BURN-004", "the cluster all-reduce passed every burn-in round, its busbw not drifting down", CardLoad).
		measured(UnitTimesFirst),
	req("BURN-005", "the training job passed every burn-in round, its step time not drifting up", CardLoad).
		measured(UnitTimesFirst),

	// The idle guard and the provider's idle shutdown (the card's idle
	// shutdown / billing row).
	req("IDLE-001", "no node held idle past idle.after outside a phase meant to be idle", CardBilling).measured(UnitSeconds),
	// A term, not a figure: a quote that states it and a window that
	// did not check it is not incomplete (the check costs a node).
	req("IDLE-002", "the provider stops or signals an idle node as quoted", CardBilling),

	// The provider's usage export held against the window (gpuaccept
	// bill, billing.export): the card's billing row, and the failure
	// check's billing.
	req("BILL-001", "the usage export reads whole: each line's time, cost and currency", CardBilling),
	req("BILL-002", "billed time per node at most the window's own, rounded up to the billing granule", CardBilling).measured(UnitSeconds),
	req("BILL-003", "a node that failed or never answered billed as quote.terms.failed_node says", CardBilling),
	req("BILL-004", "nothing billed twice (no duplicate or overlapping lines)", CardBilling),
	req("BILL-005", "the billed rate is the quoted price", CardBilling),
	req("BILL-006", "every billed line attributable: to a node, with billing.required_tags", CardBilling),
	req("BILL-007", "the total billed agrees with the cost ledger, line by line", CardBilling),
	req("BILL-008", "the failure test's victim billed around the kill as quote.terms.failed_node says", CardFailure),

	req("SEC-001", "access: key login only, no other key for the window's user", CardSecurity),
	req("SEC-002", "isolation: no other user's or GPU process, no container running", CardSecurity),
	req("SEC-003", "no residue of an earlier tenant before the window", CardSecurity),
	req("SEC-004", "nothing of the window left after teardown", CardSecurity),
}

var byID = func() map[string]Requirement {
	m := make(map[string]Requirement, len(catalog))
	for _, r := range catalog {
		if _, dup := m[r.ID]; dup {
			panic("record: requirement " + r.ID + " is in the catalog twice")
		}
		m[r.ID] = r
	}
	return m
}()

// Catalog is every requirement, in the order reports list them.
func Catalog() []Requirement { return slices.Clone(catalog) }

// Lookup is the requirement id names.
func Lookup(id string) (Requirement, bool) {
	r, ok := byID[id]
	return r, ok
}

// FamilyOf is id's family: the catalog's, or, for an ID it does not hold
// (a run made by another version), the ID's prefix.
func FamilyOf(id string) string {
	if r, ok := byID[id]; ok {
		return r.Family
	}
	f, _, _ := strings.Cut(id, "-")
	return f
}

// TitleOf is id's title in the catalog; fallback for an ID it does not
// hold (a run made by another version keeps its own).
func TitleOf(id, fallback string) string {
	if r, ok := byID[id]; ok {
		return r.Title
	}
	return fallback
}

// NewVerdict is a verdict of requirement id on node ("" for the whole
// cluster), titled from the catalog. An ID missing from the catalog keeps
// the ID as its title; TestEveryJudgedIDIsInTheCatalog keeps that from
// happening.
func NewVerdict(id, node string) Verdict {
	return Verdict{ID: id, Title: TitleOf(id, id), Node: node}
}

// Suggest is the catalog ID nearest to id, for a did-you-mean; "" when
// none is near (more than two edits away). only, when set, limits the
// candidates.
func Suggest(id string, only func(Requirement) bool) string {
	best, dist := "", 3
	up := strings.ToUpper(strings.TrimSpace(id))
	for _, r := range catalog {
		if only != nil && !only(r) {
			continue
		}
		if d := editDistance(up, r.ID); d < dist {
			best, dist = r.ID, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and
// swaps of neighbours that turn a into b (the optimal string alignment
// distance): a swap is the commonest slip in an ID ("NCCL-020").
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
