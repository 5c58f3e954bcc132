package phases

import (
	"encoding/json"
	"fmt"
	"strings"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// measures says whether the plan of inv runs what judges requirement id:
// the phases whose verdicts hold the node to a quoted figure.
func measures(inv *inventory.Inventory, id string) bool {
	switch id {
	case "NCCL-002", "NCCL-006":
		return inv.Phases.AllReduce.Enabled
	case "NCCL-003", "NCCL-007":
		return intraEnabled(inv)
	case "STAGE-002":
		return inv.Phases.Staging.Enabled
	case "CKPT-002", "CKPT-003":
		return inv.Phases.Checkpoint.Enabled
	case "BURN-001":
		return inv.Phases.Burnin.Enabled && inv.Phases.Burnin.Compute.On()
	}
	return Preflight.Enabled(inv)
}

// Unmeasured warns of every figure the quote states that the plan will
// not measure (PLAN-001), naming the key that would: such a window could
// only end INCOMPLETE, never holding the provider to the figure.
func Unmeasured(inv *inventory.Inventory) []inventory.Warning {
	raw, err := json.Marshal(inv.Quote)
	if err != nil {
		return nil
	}
	var quote map[string]any
	json.Unmarshal(raw, &quote)
	var out []inventory.Warning
	at := map[string]int{} // quote key → its warning, so one key is one line
	for _, r := range record.Catalog() {
		if len(r.Quote) == 0 || measures(inv, r.ID) {
			continue
		}
		for _, key := range r.Quote {
			v, ok := quote[key]
			if !ok || v == nil || v == "" || v == 0.0 || v == false {
				continue
			}
			if i, seen := at[key]; seen {
				out[i].Message = strings.Replace(out[i].Message, " needs ", ", "+r.ID+" need ", 1)
				break
			}
			at[key] = len(out)
			out = append(out, inventory.Warning{ID: "PLAN-001",
				Message: fmt.Sprintf("quote.%s (%v) will not be measured: %s needs %s; the window would end INCOMPLETE", key, v, r.ID, r.Enable),
				Keys:    []string{"quote." + key, r.Enable}})
			break
		}
	}
	return out
}
