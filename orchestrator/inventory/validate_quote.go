package inventory

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// The provider's quote, the cost ledger's inputs and the acceptance
// thresholds: what validate checks of them.

var currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)

func (v *validator) quote() {
	q := &v.inv.Quote
	v.nonNegativeInt("quote.gpus_per_node", q.GPUsPerNode)
	v.nonNegativeInt("quote.nics_per_node", q.NICsPerNode)
	v.nonNegativeNumber("quote.gpu_memory_gib", q.GPUMemoryGiB)
	v.nonNegativeNumber("quote.nic_gbps", q.NICGbps)
	v.nonNegativeNumber("quote.intra_busbw_gbs", q.IntraBusBWGBs)
	v.nonNegativeNumber("quote.inter_busbw_gbs", q.InterBusBWGBs)
	v.nonNegativeNumber("quote.inter_latency_us", q.InterLatencyUs)
	v.nonNegativeNumber("quote.intra_latency_us", q.IntraLatencyUs)
	v.nonNegativeNumber("quote.gpu_base_clock_mhz", q.GPUBaseClockMHz)
	v.nonNegativeNumber("quote.gpu_tflops_bf16", q.GPUTFLOPSBF16)
	v.nonNegativeNumber("quote.staging_gbs", q.StagingGBs)
	v.nonNegativeNumber("quote.checkpoint_gbs", q.CheckpointGBs)
	v.nonNegativeNumber("quote.price_per_gpu_hour", q.PricePerGPUHr)
	v.nonNegativeInt("quote.cpus_per_node", q.CPUsPerNode)
	v.nonNegativeNumber("quote.host_memory_gib", q.HostMemoryGiB)
	if q.PriceStoragePerTiBMonth != nil {
		v.nonNegativeNumber("quote.price_storage_per_tib_month", *q.PriceStoragePerTiBMonth)
	}
	if q.PriceEgressPerGiB != nil {
		v.nonNegativeNumber("quote.price_egress_per_gib", *q.PriceEgressPerGiB)
	}
	if q.PriceHostPerNodeHour != nil {
		v.nonNegativeNumber("quote.price_host_per_node_hour", *q.PriceHostPerNodeHour)
	}
	if q.BusBWSize < 0 {
		v.problem("quote.busbw_size", "must not be negative, got %d", q.BusBWSize)
	}
	switch {
	case q.FormFactor == "":
	case strings.EqualFold(q.FormFactor, "SXM"):
		q.FormFactor = "SXM"
	case strings.EqualFold(q.FormFactor, "PCIe"):
		q.FormFactor = "PCIe"
	default:
		v.problem("quote.form_factor", "must be SXM or PCIe, got %q", short(q.FormFactor))
	}
	if q.Currency != "" {
		if currencyCode.MatchString(q.Currency) {
			q.Currency = strings.ToUpper(q.Currency)
		} else {
			v.problem("quote.currency", "expected an ISO 4217 code such as USD or EUR, got %q", short(q.Currency))
		}
	}
	if q.Billing != "" {
		if d, err := time.ParseDuration(q.Billing); err != nil || d <= 0 {
			v.problem("quote.billing_granularity", "expected the billing step as a duration such as \"1s\", \"1m\" or \"1h\", got %q", short(q.Billing))
		}
	}
	v.terms(&q.Terms)
}

// terms checks what can be checked of the contract's terms: the durations
// and the list of compliance claims. The free text is the provider's.
func (v *validator) terms(t *Terms) {
	const k = "quote.terms."
	if v.given(k+"support_response") && t.SupportResponse <= 0 {
		v.problem(k+"support_response", "must be more than 0 (the promised time to a first response, e.g. 1h), got %v", t.SupportResponse)
	}
	v.nonNegativeDuration(k+"benchmark_window", t.BenchmarkWindow)
	if v.given(k+"idle_shutdown_after") && t.IdleShutdownAfter <= 0 {
		v.problem(k+"idle_shutdown_after", "must be more than 0 (how long a node may sit idle before the provider stops or signals it, e.g. 30m), got %v", t.IdleShutdownAfter)
	}
	seen := map[string]int{}
	for i, c := range t.Compliance {
		key := fmt.Sprintf("%scompliance[%d]", k, i)
		name := strings.TrimSpace(c)
		if name == "" {
			v.problem(key, "empty: name the certification or standard claimed, e.g. %q", "SOC2")
			continue
		}
		if j, dup := seen[strings.ToLower(name)]; dup {
			v.problem(key, "%q is listed twice (also compliance[%d])", short(name), j)
			continue
		}
		seen[strings.ToLower(name)] = i
	}
}

// DefaultCostUnit is the cost ledger's unit of accepted work when
// cost.unit is not given.
const DefaultCostUnit = "accepted node"

// cost checks the cost ledger's inputs: amounts are not negative, a usage
// has the price that makes it a cost, a unit of its own comes with its
// count. Unknown monthly components are unknown keys already.
func (v *validator) cost() {
	c := &v.inv.Cost
	q := &v.inv.Quote
	const k = "cost."
	for _, a := range []struct {
		key string
		val *float64
	}{{"storage_tib", c.StorageTiB}, {"egress_gib", c.EgressGiB}, {"support", c.Support},
		{"licences", c.Licences}, {"accepted_units", c.AcceptedUnits}} {
		if a.val != nil {
			v.nonNegativeNumber(k+a.key, *a.val)
		}
	}
	if c.StorageTiB != nil && q.PriceStoragePerTiBMonth == nil {
		v.problem(k+"storage_tib", "needs quote.price_storage_per_tib_month to be priced")
	}
	if c.EgressGiB != nil && q.PriceEgressPerGiB == nil {
		v.problem(k+"egress_gib", "needs quote.price_egress_per_gib to be priced")
	}
	if v.given(k + "unit") {
		c.Unit = strings.TrimSpace(c.Unit)
		switch {
		case c.Unit == "":
			v.problem(k+"unit", "empty: name one unit of accepted work, e.g. %q, or leave the key out (%q)", "training step", DefaultCostUnit)
		case c.Unit != DefaultCostUnit && c.AcceptedUnits == nil:
			v.problem(k+"unit", "%q needs cost.accepted_units: how many the window produced (only accepted nodes are counted by gpuaccept)", short(c.Unit))
		}
	}
	for _, m := range c.Monthly.Components() {
		v.nonNegativeNumber(k+"monthly."+m.Name, *m.Value)
	}
}

func (v *validator) acceptance() {
	a := &v.inv.Acceptance
	if !v.given("acceptance.tolerance") {
		a.Tolerance = DefaultTolerance
	} else {
		v.fraction("acceptance.tolerance", a.Tolerance)
	}
	for id, f := range a.Thresholds {
		key := "acceptance.thresholds." + id
		if v.requirement(key, id, func(r record.Requirement) bool { return r.Tolerance },
			"is not judged against a quoted figure, so a threshold would never be used") {
			v.fraction(key, f)
		}
	}
	if !v.given("acceptance.regression") {
		a.Regression = record.DefaultRegression
	} else {
		v.regressionFraction("acceptance.regression", a.Regression)
	}
	for id, f := range a.RegressionByID {
		key := "acceptance.regression_by_id." + id
		if v.requirement(key, id, func(r record.Requirement) bool { return r.Figure },
			"measures no figure, so gpuaccept diff has nothing to hold to a threshold") {
			v.regressionFraction(key, f)
		}
	}
	if a.Retest != nil && (*a.Retest < 0 || *a.Retest > MaxRetest) {
		v.problem("acceptance.retest", "must be 0..%d (how many more runs a failed figure gets; 0 turns retests off), got %d", MaxRetest, *a.Retest)
	}
	v.workloadTargets(&a.Workload)
}

// requirement checks that id, a key under key's map, is a requirement of
// the catalog that fits (uses says why one that does not fit is refused),
// with the nearest fitting ID as a did-you-mean: a mistyped ID would
// otherwise be accepted and silently never used.
func (v *validator) requirement(key, id string, fits func(record.Requirement) bool, why string) bool {
	r, known := record.Lookup(id)
	switch {
	case known && fits(r):
		return true
	case known:
		v.problem(key, "%s (%q) %s; it applies to %s", id, r.Title, why, fittingIDs(fits))
	default:
		msg := fmt.Sprintf("%q is not a requirement ID gpuaccept judges", short(id))
		if s := record.Suggest(id, fits); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		} else {
			msg += "; it applies to " + fittingIDs(fits)
		}
		v.problem(key, "%s", msg)
	}
	return false
}

func fittingIDs(fits func(record.Requirement) bool) string {
	var ids []string
	for _, r := range record.Catalog() {
		if fits(r) {
			ids = append(ids, r.ID)
		}
	}
	return strings.Join(ids, ", ")
}

// regressionFraction checks how much worse than the baseline a figure may
// be, as a fraction of it: 0 makes any worsening a regression; 1 lets a
// throughput fall to nothing or a time double.
func (v *validator) regressionFraction(key string, f float64) {
	if !(f >= 0 && f <= 1) {
		v.problem(key, "must be at least 0 and at most 1 (how much worse than the baseline a figure may be: 0.05 allows 5%%), got %v", f)
	}
}

// fraction checks a share of a quoted figure: 0.9 passes at 90%.
func (v *validator) fraction(key string, f float64) {
	if !(f > 0 && f <= 1) {
		v.problem(key, "must be more than 0 and at most 1 (a fraction of the quoted figure: 0.9 passes at 90%%), got %v", f)
	}
}
