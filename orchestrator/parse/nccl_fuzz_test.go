package parse

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzNCCLTests: no panic, a known error kind, determinism, and a result
// the CLI can always print as JSON. Seeded with every nccl-tests sample,
// the JSON form and the other tools' samples.
// Run: go test -run '^$' -fuzz FuzzNCCLTests -fuzztime 20s ./orchestrator/parse/
func FuzzNCCLTests(f *testing.F) {
	if samplesPresent(f) {
		for _, s := range loadNCCLSamples(f) {
			addSeed(f, s)
		}
	}
	addSeed(f, ncclSmall)
	addSeed(f, ncclJSONSample)
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := checkCommon(t, in, func(s string) (any, error) { return NCCLTests(s) })
		n := v.(NCCL)
		if _, merr := json.Marshal(n); merr != nil {
			t.Fatalf("result does not marshal: %v", merr)
		}
		if errors.Is(err, ErrNotRecognized) && (len(n.Rows) > 0 || len(n.Ranks) > 0) {
			t.Fatal("not recognized but returned data")
		}
		if n.OK && (err != nil || len(n.Rows) == 0 || len(n.Errors) > 0) {
			t.Fatalf("OK with err=%v rows=%d errors=%d", err, len(n.Rows), len(n.Errors))
		}
	})
}
