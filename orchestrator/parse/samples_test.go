package parse

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// The genuine tool outputs live outside the module, shared by every package
// that parses or replays them (see SOURCES.md in each directory).
const samplesRoot = "../../../shared/samples"

var sampleDirs = []string{"nvidia-smi", "dcgmi", "ib", "kernel"}

type sample struct {
	key  string // "<dir>/<file>", the key of sampleChecks
	text string
}

// loadSamples reads every file of the sample directories. A missing
// directory is fatal: silently testing nothing would hide a broken checkout.
func loadSamples(tb testing.TB) []sample {
	tb.Helper()
	var out []sample
	for _, dir := range sampleDirs {
		path := filepath.Join(samplesRoot, dir)
		if st, err := os.Stat(path); err != nil || !st.IsDir() {
			tb.Fatalf("sample directory %s is missing (want the shared samples checked out next to the module, at /work/shared/samples): %v", path, err)
		}
		files, err := filepath.Glob(filepath.Join(path, "*"))
		if err != nil {
			tb.Fatal(err)
		}
		if len(files) == 0 {
			tb.Fatalf("sample directory %s is empty", path)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatalf("read sample: %v", err)
			}
			out = append(out, sample{key: dir + "/" + filepath.Base(f), text: string(b)})
		}
	}
	return out
}

// parserName names one exported parser; "" marks a file no parser owns.
type parserName string

const (
	pList      parserName = "NvidiaSmiList"
	pCSV       parserName = "NvidiaSmiQueryCSV"
	pTopo      parserName = "NvidiaSmiTopo"
	pQ         parserName = "NvidiaSmiQ"
	pDiscovery parserName = "DCGMDiscovery"
	pDiag      parserName = "DCGMDiag"
	pIBStat    parserName = "IBStat"
	pIBV       parserName = "IBVDevinfo"
	pKernel    parserName = "KernelMessages"
	pNone      parserName = ""
)

// parsers runs each exported parser and returns its value and error.
var parsers = map[parserName]func(string) (any, error){
	pList:      func(s string) (any, error) { return NvidiaSmiList(s) },
	pCSV:       func(s string) (any, error) { return NvidiaSmiQueryCSV(s) },
	pTopo:      func(s string) (any, error) { return NvidiaSmiTopo(s) },
	pQ:         func(s string) (any, error) { return NvidiaSmiQ(s) },
	pDiscovery: func(s string) (any, error) { return DCGMDiscovery(s) },
	pDiag:      func(s string) (any, error) { return DCGMDiag(s) },
	pIBStat:    func(s string) (any, error) { return IBStat(s) },
	pIBV:       func(s string) (any, error) { return IBVDevinfo(s) },
	pKernel:    func(s string) (any, error) { return KernelMessages(s) },
}

// sampleCheck says which parser owns a sample and what it must extract.
// wantErr is the sentinel the owner must return (nil: success).
type sampleCheck struct {
	parser  parserName
	wantErr error
	check   func(t *testing.T, text string)
}

func allSampleChecks() map[string]sampleCheck {
	all := map[string]sampleCheck{}
	for _, m := range []map[string]sampleCheck{nvidiaSmiSamples, dcgmiSamples, ibSamples, kernelSamples, h200Samples} {
		for k, v := range m {
			all[k] = v
		}
	}
	return all
}

// TestSamplesAllCovered keeps the table and the directories in step: a new
// sample without expectations, or an expectation whose file went away, fails.
func TestSamplesAllCovered(t *testing.T) {
	checks := allSampleChecks()
	seen := map[string]bool{}
	for _, s := range loadSamples(t) {
		seen[s.key] = true
		if _, ok := checks[s.key]; !ok {
			t.Errorf("sample %s has no entry in the sample table: add its expected values", s.key)
		}
	}
	for k := range checks {
		if !seen[k] {
			t.Errorf("sample table entry %s has no file", k)
		}
	}
}

// TestSamples runs every sample through its parser's checks, and through
// every other parser, which must not mistake it for its own tool's output.
func TestSamples(t *testing.T) {
	checks := allSampleChecks()
	for _, s := range loadSamples(t) {
		c, ok := checks[s.key]
		if !ok {
			continue // reported by TestSamplesAllCovered
		}
		t.Run(s.key, func(t *testing.T) {
			if c.check != nil {
				c.check(t, s.text)
			}
			for name, run := range parsers {
				if name == c.parser {
					if _, err := run(s.text); !errors.Is(err, c.wantErr) { // errors.Is(err, nil) means err == nil
						t.Errorf("%s: err = %v, want %v", name, err, c.wantErr)
					}
					continue
				}
				if _, err := run(s.text); !errors.Is(err, ErrNotRecognized) {
					t.Errorf("%s accepted a sample that is not its tool's output: err = %v", name, err)
				}
			}
		})
	}
}

// result carries a parser's two return values so a test can unwrap them in
// one expression: ok(NvidiaSmiList(s)).must(t).
type result[T any] struct {
	v   T
	err error
}

func ok[T any](v T, err error) result[T] { return result[T]{v, err} }

// must stops the test when a parser that should succeed fails.
func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}

// eq reports a mismatch without stopping the test.
func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
