package phases

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// judgeSources are the files whose verdicts a window can carry: every
// phase, the fabric judge, the runner, the telemetry judge and the
// usage export's reconciliation (billing.export).
var judgeSources = []string{"*.go", "../fabric/*.go", "../*.go", "../telemetry/*.go", "../billing/*.go"}

var idLiteral = regexp.MustCompile(`"([A-Z]+-[0-9]{3})"`)

// TestEveryJudgedIDIsInTheCatalog reads the judges' sources: every
// requirement ID written there must be in the catalog (or its verdict
// would carry no title and a threshold for it could not be set), and
// every catalog entry must be judged somewhere (no dead rows).
func TestEveryJudgedIDIsInTheCatalog(t *testing.T) {
	written := map[string]string{}
	for _, glob := range judgeSources {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("no judge sources at %s (%v)", glob, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range idLiteral.FindAllStringSubmatch(string(b), -1) {
				// Lint findings (QUOTE-, PLAN-) are about the inventory,
				// not requirements a window judges.
				if !strings.HasPrefix(m[1], "QUOTE-") && !strings.HasPrefix(m[1], "PLAN-") {
					written[m[1]] = f
				}
			}
		}
	}
	for id, f := range written {
		if _, ok := record.Lookup(id); !ok {
			t.Errorf("%s writes requirement %s, which the catalog (orchestrator/record/catalog.go) does not hold", f, id)
		}
	}
	for _, r := range record.Catalog() {
		if _, ok := written[r.ID]; !ok {
			t.Errorf("catalog entry %s is judged nowhere", r.ID)
		}
		if r.Title == "" || r.Family == "" || !strings.HasPrefix(r.ID, r.Family+"-") {
			t.Errorf("catalog entry %+v: title and family are required, the family is the ID's prefix", r)
		}
		if r.Card != "" && !slices.Contains(record.CardRows, r.Card) {
			t.Errorf("catalog entry %s fills card row %q, which the card does not have", r.ID, r.Card)
		}
	}
}

func TestNewVerdictTakesTheCatalogsTitle(t *testing.T) {
	v := record.NewVerdict("NCCL-002", "")
	if v.Title != "inter-node all_reduce bus bandwidth matches the quote" || v.ID != "NCCL-002" || v.Node != "" {
		t.Errorf("%+v", v)
	}
	if got := record.Suggest("NCCL-020", nil); got != "NCCL-002" {
		t.Errorf("Suggest(NCCL-020) = %q, want NCCL-002", got)
	}
	if got := record.Suggest("HEALTH-999", nil); got != "" {
		t.Errorf("Suggest(HEALTH-999) = %q, want none", got)
	}
}

// TestServedPhasesExist: a phase that serves a name no phase has would be
// left out of every selection, and the window would lose its key.
func TestServedPhasesExist(t *testing.T) {
	all := All()
	names := map[string]int{}
	for i, p := range all {
		names[p.Name] = i
	}
	served := 0
	for i, p := range all {
		for _, s := range p.Serves {
			j, ok := names[s]
			if !ok {
				t.Errorf("%s serves %q, which is not a phase", p.Name, s)
			} else if j < i {
				t.Errorf("%s serves %s, which runs before it", p.Name, s)
			}
			served++
		}
	}
	if served == 0 {
		t.Error("no phase serves another: the windowkey's Serves is gone")
	}
}
