package inventory

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cleanQuote states everything quote lint looks for.
const cleanQuote = minimal + `quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  cpus_per_node: 112
  host_memory_gib: 2048
  form_factor: SXM
  fabric: infiniband
  nics_per_node: 8
  nic_gbps: 400
  price_per_gpu_hour: 2.49
  price_storage_per_tib_month: 0
  price_egress_per_gib: 0.02
  currency: USD
  driver: "550.90.07"
  cuda: "12.4"
  terms:
    failed_node: replaced within 4h, the job's lost hours credited
    support_response: 1h
    dedicated: true
    isolation: bare metal, no hypervisor, own InfiniBand partition key
    placement: one rail-optimized pod, two leaf switches
    minimum_utilization: none
    cancellation: 7 days' notice
    benchmark_window: 48h
    billing_export: CSV per hour per node
    versions_checkable: true
    compliance: [SOC2, ISO27001]
    data_deletion: disks wiped (NIST 800-88 purge) on release, certificate on request
`

func cleanInventory(t *testing.T) *Inventory {
	t.Helper()
	inv, err := parse("a.yaml", []byte(cleanQuote), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func ids(ws []Warning) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func TestLintQuote(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name   string
		change func(q *Quote)
		want   []Warning // the warnings, in order; nil: none
	}{
		{"everything stated", func(q *Quote) {}, nil},
		{"no form factor", func(q *Quote) { q.FormFactor = "" },
			[]Warning{{"QUOTE-001", "no form factor: PCIe or SXM not stated (quote.form_factor)", []string{"quote.form_factor"}}}},
		{"no host shape", func(q *Quote) { q.CPUsPerNode, q.HostMemoryGiB = 0, 0 },
			[]Warning{{"QUOTE-002", "node shape incomplete: CPUs per node, host memory not stated (quote.cpus_per_node, quote.host_memory_gib)",
				[]string{"quote.cpus_per_node", "quote.host_memory_gib"}}}},
		{"no GPU count", func(q *Quote) { q.GPUsPerNode = 0 },
			[]Warning{{"QUOTE-002", "node shape incomplete: GPUs per node not stated (quote.gpus_per_node)", []string{"quote.gpus_per_node"}}}},
		{"no GPU memory", func(q *Quote) { q.GPUMemoryGiB = 0 },
			[]Warning{{"QUOTE-002", "node shape incomplete: GPU memory not stated (quote.gpu_memory_gib)", []string{"quote.gpu_memory_gib"}}}},
		{"fabric without NICs", func(q *Quote) { q.NICsPerNode, q.NICGbps = 0, 0 },
			[]Warning{{"QUOTE-003", "network not stated: NICs per node, NIC speed missing (quote.nics_per_node, quote.nic_gbps)",
				[]string{"quote.nics_per_node", "quote.nic_gbps"}}}},
		{"blank fabric", func(q *Quote) { q.Fabric = "  " },
			[]Warning{{"QUOTE-003", "network not stated: fabric missing (quote.fabric)", []string{"quote.fabric"}}}},
		{"failed node", func(q *Quote) { q.Terms.FailedNode = "" },
			[]Warning{{"QUOTE-004", "no statement of how a failed node in a distributed job is handled (quote.terms.failed_node)", []string{"quote.terms.failed_node"}}}},
		{"storage and egress", func(q *Quote) { q.PriceStoragePerTiBMonth, q.PriceEgressPerGiB = nil, nil },
			[]Warning{{"QUOTE-005", "storage and egress missing from the price (quote.price_storage_per_tib_month, quote.price_egress_per_gib)",
				[]string{"quote.price_storage_per_tib_month", "quote.price_egress_per_gib"}}}},
		{"egress only", func(q *Quote) { q.PriceEgressPerGiB = nil },
			[]Warning{{"QUOTE-005", "egress missing from the price (quote.price_egress_per_gib)", []string{"quote.price_egress_per_gib"}}}},
		{"free egress is stated", func(q *Quote) { q.PriceEgressPerGiB = f(0) }, nil},
		{"no support time", func(q *Quote) { q.Terms.SupportResponse = 0 },
			[]Warning{{"QUOTE-006", "vague support terms: no response time for the training window (quote.terms.support_response)", []string{"quote.terms.support_response"}}}},
		{"support next day", func(q *Quote) { q.Terms.SupportResponse = 24 * time.Hour },
			[]Warning{{"QUOTE-006", "vague support terms: a first response within 24h is longer than 4h for the training window (quote.terms.support_response)",
				[]string{"quote.terms.support_response"}}}},
		{"support just over 4h", func(q *Quote) { q.Terms.SupportResponse = 4*time.Hour + 30*time.Minute },
			[]Warning{{"QUOTE-006", "vague support terms: a first response within 4h30m is longer than 4h for the training window (quote.terms.support_response)",
				[]string{"quote.terms.support_response"}}}},
		{"support within 4h", func(q *Quote) { q.Terms.SupportResponse = 4 * time.Hour }, nil},
		{"dedicated, nothing said", func(q *Quote) { q.Terms.Isolation, q.Terms.Placement = "", "" },
			[]Warning{{"QUOTE-007", `sold as "dedicated" (quote.terms.dedicated) without tenant isolation or placement stated (quote.terms.isolation, quote.terms.placement)`,
				[]string{"quote.terms.isolation", "quote.terms.placement"}}}},
		{"dedicated, no placement", func(q *Quote) { q.Terms.Placement = "" },
			[]Warning{{"QUOTE-007", `sold as "dedicated" (quote.terms.dedicated) without placement stated (quote.terms.placement)`, []string{"quote.terms.placement"}}}},
		{"not dedicated", func(q *Quote) { q.Terms.Dedicated, q.Terms.Isolation, q.Terms.Placement = false, "", "" }, nil},
		{"a rate and no terms", func(q *Quote) { q.Terms.MinimumUtilization, q.Terms.Cancellation = "", "" },
			[]Warning{{"QUOTE-008", "a rate of 2.49 USD per GPU-hour with no minimum utilisation or cancellation terms (quote.terms.minimum_utilization, quote.terms.cancellation)",
				[]string{"quote.terms.minimum_utilization", "quote.terms.cancellation"}}}},
		{"a rate, no currency", func(q *Quote) { q.Terms.MinimumUtilization, q.Terms.Cancellation, q.Currency = "", "", "" },
			[]Warning{{"QUOTE-008", "a rate of 2.49 per GPU-hour with no minimum utilisation or cancellation terms (quote.terms.minimum_utilization, quote.terms.cancellation)",
				[]string{"quote.terms.minimum_utilization", "quote.terms.cancellation"}}}},
		{"cancellation alone is enough", func(q *Quote) { q.Terms.MinimumUtilization = "" }, nil},
		{"no rate, no commitment terms", func(q *Quote) { q.PricePerGPUHr, q.Terms.MinimumUtilization, q.Terms.Cancellation = 0, "", "" }, nil},
		{"no benchmark window", func(q *Quote) { q.Terms.BenchmarkWindow = 0 },
			[]Warning{{"QUOTE-009", "no benchmark window before commitment (quote.terms.benchmark_window)", []string{"quote.terms.benchmark_window"}}}},
		{"no billing export", func(q *Quote) { q.Terms.BillingExport = "" },
			[]Warning{{"QUOTE-010", "no billing export: usage cannot be checked against the invoice (quote.terms.billing_export)", []string{"quote.terms.billing_export"}}}},
		{"versions not checkable", func(q *Quote) { q.Terms.VersionsCheckable = false },
			[]Warning{{"QUOTE-011", "driver/CUDA/framework versions not checkable before the first workload: no promise they can be checked on the nodes (quote.terms.versions_checkable)",
				[]string{"quote.terms.versions_checkable"}}}},
		{"no driver", func(q *Quote) { q.Driver = "" },
			[]Warning{{"QUOTE-011", "driver/CUDA/framework versions not checkable before the first workload: no driver version (quote.driver)", []string{"quote.driver"}}}},
		{"no versions at all", func(q *Quote) { q.Driver, q.CUDA, q.Terms.VersionsCheckable = "", "", false },
			[]Warning{{"QUOTE-011", "driver/CUDA/framework versions not checkable before the first workload: no driver version, no CUDA version, no promise they can be checked on the nodes (quote.driver, quote.cuda, quote.terms.versions_checkable)",
				[]string{"quote.driver", "quote.cuda", "quote.terms.versions_checkable"}}}},
		{"compliance without deletion", func(q *Quote) { q.Terms.DataDeletion = "" },
			[]Warning{{"QUOTE-012", "compliance claimed (SOC2, ISO27001) without data handling and deletion terms (quote.terms.data_deletion)", []string{"quote.terms.data_deletion"}}}},
		{"no claims, no deletion terms", func(q *Quote) { q.Terms.Compliance, q.Terms.DataDeletion = nil, "" }, nil},
		{"several", func(q *Quote) { q.FormFactor, q.Terms.FailedNode, q.Terms.BillingExport = "", "", "" },
			[]Warning{
				{"QUOTE-001", "no form factor: PCIe or SXM not stated (quote.form_factor)", []string{"quote.form_factor"}},
				{"QUOTE-004", "no statement of how a failed node in a distributed job is handled (quote.terms.failed_node)", []string{"quote.terms.failed_node"}},
				{"QUOTE-010", "no billing export: usage cannot be checked against the invoice (quote.terms.billing_export)", []string{"quote.terms.billing_export"}},
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inv := cleanInventory(t)
			c.change(&inv.Quote)
			got := LintQuote(inv)
			if len(got) == 0 && len(c.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestLintEmptyQuote: a quote that states nothing raises every flag that
// does not need something stated first.
func TestLintEmptyQuote(t *testing.T) {
	inv, err := parse("a.yaml", []byte(minimal), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ws := LintQuote(inv)
	want := []string{"QUOTE-001", "QUOTE-002", "QUOTE-003", "QUOTE-004", "QUOTE-005", "QUOTE-006", "QUOTE-009", "QUOTE-010", "QUOTE-011"}
	if got := ids(ws); !reflect.DeepEqual(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
	checkWarnings(t, ws)
}

// TestLintEveryFlag: each of the fourteen IDs can be raised, all at once.
func TestLintEveryFlag(t *testing.T) {
	src := minimal + `quote:
  gpu_model: H100
  gpus_per_node: 8
  nics_per_node: 8
  nic_gbps: 400
  inter_busbw_gbs: 2880
  price_per_gpu_hour: 1.10
  currency: EUR
  terms:
    dedicated: true
    support_response: 2d
    compliance: [HIPAA]
`
	_, err := parse("a.yaml", []byte(src), noEnv)
	if err == nil || !strings.Contains(err.Error(), "quote.terms.support_response: expected a duration") {
		t.Fatalf("2d: %v", err)
	}
	inv, err := parse("a.yaml", []byte(strings.Replace(src, "2d", "48h", 1)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ws := LintQuote(inv)
	var want []string
	for i := 1; i <= 14; i++ {
		want = append(want, fmt.Sprintf("QUOTE-%03d", i))
	}
	if got := ids(ws); !reflect.DeepEqual(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
	checkWarnings(t, ws)
	for _, w := range ws {
		switch w.ID {
		case "QUOTE-006":
			if !strings.Contains(w.Message, "within 48h") {
				t.Errorf("%s does not say what was given: %s", w.ID, w.Message)
			}
		case "QUOTE-008":
			if !strings.Contains(w.Message, "1.1 EUR per GPU-hour") {
				t.Errorf("%s does not say the rate: %s", w.ID, w.Message)
			}
		case "QUOTE-012":
			if !strings.Contains(w.Message, "(HIPAA)") {
				t.Errorf("%s does not say the claim: %s", w.ID, w.Message)
			}
		}
	}
}

var warningID = regexp.MustCompile(`^QUOTE-0(0[1-9]|1[0-4])$`)

// checkWarnings holds for every warning: a stable ID, keys, and a message
// that names each of its keys.
func checkWarnings(t *testing.T, ws []Warning) {
	t.Helper()
	for _, w := range ws {
		if !warningID.MatchString(w.ID) {
			t.Errorf("bad ID %q", w.ID)
		}
		if len(w.Keys) == 0 {
			t.Errorf("%s has no keys", w.ID)
		}
		for _, k := range w.Keys {
			if !strings.HasPrefix(k, "quote.") || !strings.Contains(w.Message, k) {
				t.Errorf("%s: key %q not named in %q", w.ID, k, w.Message)
			}
		}
	}
}

// TestLintExamples: the H100 example is a complete offer; the L40S one is
// a bare price list, and says so.
func TestLintExamples(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	for file, want := range map[string][]string{
		"example-8xh100-infiniband.yaml":    {},
		"example-8xa100-roce.yaml":          {"QUOTE-007", "QUOTE-009"},
		"example-4xl40s-pcie-ethernet.yaml": {"QUOTE-004", "QUOTE-005", "QUOTE-006", "QUOTE-008", "QUOTE-009", "QUOTE-010", "QUOTE-011", "QUOTE-012"},
	} {
		inv, err := load(filepath.Join(examplesDir, file), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		ws := LintQuote(inv)
		if got := ids(ws); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v\n%+v", file, got, want, ws)
		}
		checkWarnings(t, ws)
	}
}

func TestQuoteTermsDecode(t *testing.T) {
	inv := cleanInventory(t)
	q := inv.Quote
	if q.CPUsPerNode != 112 || q.HostMemoryGiB != 2048 || q.PriceStoragePerTiBMonth == nil || *q.PriceStoragePerTiBMonth != 0 ||
		q.PriceEgressPerGiB == nil || *q.PriceEgressPerGiB != 0.02 {
		t.Errorf("quote %+v", q)
	}
	tm := q.Terms
	if tm.SupportResponse != time.Hour || tm.BenchmarkWindow != 48*time.Hour || !tm.Dedicated || !tm.VersionsCheckable ||
		!reflect.DeepEqual(tm.Compliance, []string{"SOC2", "ISO27001"}) || !strings.HasPrefix(tm.FailedNode, "replaced within 4h") {
		t.Errorf("terms %+v", tm)
	}
	// The environment overrides the terms' scalars, like any key's.
	env := fakeEnv(map[string]string{
		"GPUACCEPT_QUOTE_TERMS_SUPPORT_RESPONSE":      "8h",
		"GPUACCEPT_QUOTE_TERMS_VERSIONS_CHECKABLE":    "false",
		"GPUACCEPT_QUOTE_PRICE_EGRESS_PER_GIB":        "0",
		"GPUACCEPT_QUOTE_TERMS_BILLING_EXPORT":        "API, per minute",
		"GPUACCEPT_QUOTE_PRICE_STORAGE_PER_TIB_MONTH": "",
	})
	inv, err := parse("a.yaml", []byte(cleanQuote), env)
	if err != nil {
		t.Fatal(err)
	}
	tm = inv.Quote.Terms
	if tm.SupportResponse != 8*time.Hour || tm.VersionsCheckable || tm.BillingExport != "API, per minute" || *inv.Quote.PriceEgressPerGiB != 0 {
		t.Errorf("overridden terms %+v egress %v", tm, *inv.Quote.PriceEgressPerGiB)
	}
	if got := ids(LintQuote(inv)); !reflect.DeepEqual(got, []string{"QUOTE-006", "QUOTE-011"}) {
		t.Errorf("lint after overrides: %v", got)
	}
}
