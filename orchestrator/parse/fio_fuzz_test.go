package parse

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzFio: no panic, a known error kind, determinism, a result the CLI can
// always print as JSON, and OK/errors that agree with the jobs. Seeded with
// every fio sample, the constructed reports and the other tools' samples.
// Run: go test -run '^$' -fuzz FuzzFio -fuzztime 20s ./orchestrator/parse/
func FuzzFio(f *testing.F) {
	if samplesPresent(f) {
		for _, s := range loadFioSamples(f) {
			addSeed(f, s)
		}
	}
	addSeed(f, fioSmallWith("0"))
	addSeed(f, fioSmallWith("5"))
	addSeed(f, fioClient)
	addSeed(f, fioNormalOutput)
	addSeed(f, ncclJSONSample)
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := checkCommon(t, in, func(s string) (any, error) { return Fio(s) })
		r := v.(FioResult)
		if _, merr := json.Marshal(r); merr != nil {
			t.Fatalf("result does not marshal: %v", merr)
		}
		if errors.Is(err, ErrNotRecognized) && (len(r.Jobs) > 0 || r.Documents > 0) {
			t.Fatal("not recognized but returned data")
		}
		failed := false
		for _, j := range append(append([]FioJob{}, r.Jobs...), r.AllClients...) {
			failed = failed || j.Error != 0
		}
		if failed != errors.Is(err, ErrToolFailed) {
			t.Fatalf("a job failed: %v, but err = %v", failed, err)
		}
		if r.OK != (err == nil) || (r.OK && len(r.Jobs) == 0) {
			t.Fatalf("OK %v with err=%v jobs=%d", r.OK, err, len(r.Jobs))
		}
		_, _ = r.ReadBW(), r.WriteBW()
	})
}
