package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

// A quote the lint found nothing in is recorded as such ("lint": []),
// not left out like a run's that never kept it: compare told the
// cleanest offer "not recorded".
func TestCleanLintIsRecorded(t *testing.T) {
	inv := testInventory(t, "a")
	var c calls
	clean := func(*inventory.Inventory) []inventory.Warning { return nil }
	rec, _, err := Start(t.Context(), inv, []Phase{phase("one", &c, false, nil)}, Options{RunsDir: t.TempDir(), Lint: clean})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"lint":[]`) {
		t.Fatalf("run.json of a clean lint has no \"lint\":[]: %s", js)
	}
	var back record.Run
	if err := json.Unmarshal(js, &back); err != nil || back.Lint == nil {
		t.Fatalf("read back: lint %#v, %v: a clean lint reads as not recorded", back.Lint, err)
	}
	if js, _ := json.Marshal(record.Run{}); strings.Contains(string(js), `"lint"`) {
		t.Fatalf("a run that did not keep the lint says it did: %s", js)
	}
}
