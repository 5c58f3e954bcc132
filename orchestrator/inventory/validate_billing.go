package inventory

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// billing checks the billing section and each node's billing_id.
func (v *validator) billing() {
	b := &v.inv.Billing
	if v.given("billing.export") {
		b.Export = v.path("billing.export", b.Export)
	}
	used := map[string]string{}
	for _, f := range sortedMapKeys(b.Columns) {
		col := strings.TrimSpace(b.Columns[f])
		key := "billing.columns." + f
		switch {
		case !slices.Contains(BillingFields, f):
			v.problem(key, "unknown field: billing.columns maps %s to the export's column names", strings.Join(BillingFields, ", "))
		case col == "" || !printable(col):
			v.problem(key, "must name the export's column (printable text), got %q", short(col))
		case used[col] != "":
			v.problem(key, "column %q is also billing.columns.%s: one column says one thing", short(col), used[col])
		default:
			used[col] = f
		}
	}
	seen := map[string]int{}
	for i, t := range b.RequiredTags {
		key := fmt.Sprintf("billing.required_tags[%d]", i)
		t = strings.TrimSpace(t)
		if t == "" || !printable(t) {
			v.problem(key, "must be a tag's key, e.g. team, got %q", short(t))
			continue
		}
		if j, dup := seen[t]; dup {
			v.problem(key, "%q is also billing.required_tags[%d]", short(t), j)
			continue
		}
		seen[t] = i
		b.RequiredTags[i] = t
	}
	ids := map[string]int{}
	for i := range v.inv.Nodes {
		n := &v.inv.Nodes[i]
		if n.BillingID == "" {
			continue
		}
		key := v.keyOf(i) + ".billing_id"
		id := strings.TrimSpace(n.BillingID)
		switch j, dup := ids[strings.ToLower(id)]; {
		case id == "" || len(id) > 512 || !printable(id):
			v.problem(key, "%smust be what the usage export calls the node (an instance or resource ID, printable, at most 512 bytes), got %q",
				v.who(i), short(id))
		case dup:
			v.problem(key, "%s%q is also %s's: a billed line must name one node", v.who(i), short(id), v.keyOf(j))
		default:
			ids[strings.ToLower(id)] = i
			n.BillingID = id
		}
	}
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func sortedMapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
