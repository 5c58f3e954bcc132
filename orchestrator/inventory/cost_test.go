package inventory

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

func TestCostKeys(t *testing.T) {
	inv, err := parse("a.yaml", []byte(minimal), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inv.Cost, Cost{}) || inv.Quote.PriceHostPerNodeHour != nil {
		t.Errorf("nothing given, yet %+v, host %v", inv.Cost, inv.Quote.PriceHostPerNodeHour)
	}

	inv, err = parse("a.yaml", []byte(minimal+`quote:
  price_storage_per_tib_month: 60
  price_egress_per_gib: 0
  price_host_per_node_hour: 0.8
cost:
  storage_tib: 2
  egress_gib: 0
  licences: 30
  unit: " training step "
  accepted_units: 500
  monthly: {burst: 100, idle_waste: 0}
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	c := inv.Cost
	if *inv.Quote.PriceHostPerNodeHour != 0.8 || *c.StorageTiB != 2 || *c.EgressGiB != 0 || c.Support != nil ||
		*c.Licences != 30 || c.Unit != "training step" || *c.AcceptedUnits != 500 {
		t.Errorf("cost %+v", c)
	}
	var names []string
	for _, m := range c.Monthly.Components() {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"burst", "idle_waste"}) || *c.Monthly.IdleWaste != 0 {
		t.Errorf("monthly components %v", names)
	}

	// A monthly component from the environment.
	env := fakeEnv(map[string]string{"GPUACCEPT_COST_MONTHLY_RETRY_WASTE": "12.5", "GPUACCEPT_COST_SUPPORT": "7"})
	if inv, err = parse("a.yaml", []byte(minimal), env); err != nil {
		t.Fatal(err)
	}
	if inv.Cost.Monthly.RetryWaste == nil || *inv.Cost.Monthly.RetryWaste != 12.5 || *inv.Cost.Support != 7 {
		t.Errorf("from the environment: %+v", inv.Cost)
	}

	for src, want := range map[string]string{
		"cost:\n  unit: \"\"\n":                    "cost.unit: empty",
		"cost:\n  accepted_units: -1\n":            "cost.accepted_units: must not be negative",
		"cost:\n  monthly: {Burst: 1}\n":           `cost.monthly.Burst: unknown key; did you mean "burst"?`,
		"cost:\n  licences: \"30 USD\"\n":          "cost.licences: expected a number",
		"cost:\n  egress_gib: 1\n":                 "cost.egress_gib: needs quote.price_egress_per_gib",
		"cost:\n  unit: accepted node\n  x: 1\n":   "cost.x: unknown key",
		"cost:\n  monthly:\n    snapshots: .inf\n": "cost.monthly.snapshots: must be a finite number",
	} {
		_, err := parse("a.yaml", []byte(minimal+src), noEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", src, err, want)
		}
	}
}

// The monthly keys are the TCO's components, in the formula's order.
func TestMonthlyNames(t *testing.T) {
	var keys []string
	for f := range reflect.TypeFor[Monthly]().Fields() {
		keys = append(keys, tagName(f))
	}
	one := 1.0
	m := Monthly{CommittedCompute: &one, Burst: &one, PersistentStorage: &one, Snapshots: &one, Egress: &one,
		Support: &one, IdleWaste: &one, RetryWaste: &one, EngineeringOverhead: &one}
	var names []string
	for _, c := range m.Components() {
		names = append(names, c.Name)
	}
	if !slices.Equal(keys, record.TCOComponents) || !slices.Equal(names, record.TCOComponents) {
		t.Errorf("keys %v, components %v, want %v", keys, names, record.TCOComponents)
	}
}
