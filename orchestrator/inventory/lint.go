package inventory

import (
	"fmt"
	"strings"
	"time"
)

// Warning is one red flag in a provider's offer: the quote leaves out
// something a buyer should have in writing before the window. A warning
// is advice; it never makes an inventory invalid.
type Warning struct {
	// ID is stable (QUOTE-001..QUOTE-014): scripts and reviews can name it.
	ID string `json:"id"`
	// Message says what is missing, and names the keys that would state it.
	Message string `json:"message"`
	// Keys are the inventory keys that are missing or that raise the flag.
	Keys []string `json:"keys"`
}

// MaxSupportResponse is the longest first-response time quote lint takes
// as a real support promise for a training window (QUOTE-006).
const MaxSupportResponse = 4 * time.Hour

// LintQuote returns the red flags in inv's quote, in ID order; none for a
// quote that states everything. It reads inv only.
func LintQuote(inv *Inventory) []Warning {
	q := &inv.Quote
	t := &q.Terms
	var out []Warning
	warn := func(id, msg string, keys ...string) {
		out = append(out, Warning{ID: id, Message: msg + " (" + strings.Join(keys, ", ") + ")", Keys: keys})
	}

	if blank(q.FormFactor) {
		warn("QUOTE-001", "no form factor: PCIe or SXM not stated", "quote.form_factor")
	}

	if names, keys := missing([]stated{
		{q.GPUsPerNode > 0, "GPUs per node", "quote.gpus_per_node"},
		{q.GPUMemoryGiB > 0, "GPU memory", "quote.gpu_memory_gib"},
		{q.CPUsPerNode > 0, "CPUs per node", "quote.cpus_per_node"},
		{q.HostMemoryGiB > 0, "host memory", "quote.host_memory_gib"},
	}); len(keys) > 0 {
		warn("QUOTE-002", "node shape incomplete: "+strings.Join(names, ", ")+" not stated", keys...)
	}

	if names, keys := missing([]stated{
		{!blank(q.Fabric), "fabric", "quote.fabric"},
		{q.NICsPerNode > 0, "NICs per node", "quote.nics_per_node"},
		{q.NICGbps > 0, "NIC speed", "quote.nic_gbps"},
	}); len(keys) > 0 {
		warn("QUOTE-003", "network not stated: "+strings.Join(names, ", ")+" missing", keys...)
	}

	if blank(t.FailedNode) {
		warn("QUOTE-004", "no statement of how a failed node in a distributed job is handled", "quote.terms.failed_node")
	}

	if names, keys := missing([]stated{
		{q.PriceStoragePerTiBMonth != nil, "storage", "quote.price_storage_per_tib_month"},
		{q.PriceEgressPerGiB != nil, "egress", "quote.price_egress_per_gib"},
	}); len(keys) > 0 {
		warn("QUOTE-005", strings.Join(names, " and ")+" missing from the price", keys...)
	}

	switch {
	case t.SupportResponse <= 0:
		warn("QUOTE-006", "vague support terms: no response time for the training window", "quote.terms.support_response")
	case t.SupportResponse > MaxSupportResponse:
		warn("QUOTE-006", fmt.Sprintf("vague support terms: a first response within %s is longer than %s for the training window", shortDuration(t.SupportResponse), shortDuration(MaxSupportResponse)),
			"quote.terms.support_response")
	}

	if t.Dedicated {
		var names, keys []string
		if blank(t.Isolation) {
			names, keys = append(names, "tenant isolation"), append(keys, "quote.terms.isolation")
		}
		if blank(t.Placement) {
			names, keys = append(names, "placement"), append(keys, "quote.terms.placement")
		}
		if len(keys) > 0 {
			warn("QUOTE-007", `sold as "dedicated" (quote.terms.dedicated) without `+strings.Join(names, " or ")+" stated", keys...)
		}
	}

	if q.PricePerGPUHr > 0 && blank(t.MinimumUtilization) && blank(t.Cancellation) {
		warn("QUOTE-008", fmt.Sprintf("a rate of %s per GPU-hour with no minimum utilisation or cancellation terms", rate(q)),
			"quote.terms.minimum_utilization", "quote.terms.cancellation")
	}

	if t.BenchmarkWindow <= 0 {
		warn("QUOTE-009", "no benchmark window before commitment", "quote.terms.benchmark_window")
	}

	if blank(t.BillingExport) {
		warn("QUOTE-010", "no billing export: usage cannot be checked against the invoice", "quote.terms.billing_export")
	}

	if names, keys := missing([]stated{
		{!blank(q.Driver), "no driver version", "quote.driver"},
		{!blank(q.CUDA), "no CUDA version", "quote.cuda"},
		{t.VersionsCheckable, "no promise they can be checked on the nodes", "quote.terms.versions_checkable"},
	}); len(keys) > 0 {
		warn("QUOTE-011", "driver/CUDA/framework versions not checkable before the first workload: "+strings.Join(names, ", "), keys...)
	}

	if claims := nonBlank(t.Compliance); len(claims) > 0 && blank(t.DataDeletion) {
		warn("QUOTE-012", fmt.Sprintf("compliance claimed (%s) without data handling and deletion terms", strings.Join(claims, ", ")),
			"quote.terms.data_deletion")
	}
	return append(out, lintClaims(inv)...)
}

// stated is one part of the quote: whether it is there, how a message
// names it, and its key.
type stated struct {
	ok        bool
	name, key string
}

// missing returns the names and keys of the parts not stated, in order.
func missing(parts []stated) (names, keys []string) {
	for _, p := range parts {
		if !p.ok {
			names = append(names, p.name)
			keys = append(keys, p.key)
		}
	}
	return names, keys
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

func nonBlank(list []string) []string {
	var out []string
	for _, s := range list {
		if !blank(s) {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// rate is the quoted price as written: 2.49 USD.
func rate(q *Quote) string {
	s := fmt.Sprintf("%g", q.PricePerGPUHr)
	if q.Currency != "" {
		s += " " + q.Currency
	}
	return s
}

// shortDuration writes 24h for 24h0m0s and 1h30m for 1h30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
