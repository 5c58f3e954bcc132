package parse

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets: one per parser, seeded with every shared sample (of every
// tool, so each parser also chews on the others' output). They assert no
// panic, a known error kind, determinism and basic invariants of the result.
// Run one with: go test -run '^$' -fuzz FuzzDCGMDiag -fuzztime 10s ./orchestrator/parse/

func addSampleSeeds(f *testing.F) {
	if !samplesPresent(f) {
		return
	}
	for _, s := range loadSamples(f) {
		addSeed(f, s.text)
	}
}

// samplesPresent says whether the shared samples, the fuzzers' seed
// corpus, are beside the module. Outside such a checkout (a copy of the
// module alone, another repository's CI) a fuzzer is no reason to fail:
// under -fuzz it fuzzes from its built-in seeds, and a plain go test skips
// it saying why. The sample tests (TestSamplesAllCovered and the others
// that read them) still fail loudly: CI always has the samples, and a
// checkout without them must not pass by testing nothing. The corpus is
// not copied into testdata/: the samples grow with every field report
// (h200-*), and a copy would go stale unseen.
func samplesPresent(f *testing.F) bool {
	f.Helper()
	if st, err := os.Stat(samplesRoot); err == nil && st.IsDir() {
		return true
	}
	why := fmt.Sprintf("no shared samples at %s (the seed corpus; /work/shared/samples beside the module)", samplesRoot)
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		f.Logf("%s: fuzzing from the built-in seeds only", why)
		return false
	}
	f.Skipf("%s: skipped; go test -fuzz runs it from its built-in seeds", why)
	return false
}

// maxFuzzInput bounds a fuzz input. The fuzzer minimises every input that
// finds new coverage, for up to a minute; a sample of 100 KB made that the
// whole run (60 executions in 30 s). The samples' full text is the sample
// tests' to check; the fuzzer explores their first 8 KiB and what it makes
// of them.
const maxFuzzInput = 8 << 10

func addSeed(f *testing.F, s string) {
	if len(s) > maxFuzzInput {
		s = s[:maxFuzzInput]
	}
	f.Add(s)
}

// checkCommon: the error is nil or wraps one of the package sentinels, blank
// input is never recognized, and a second parse gives the same answer.
func checkCommon(t *testing.T, in string, run func(string) (any, error)) (any, error) {
	t.Helper()
	if len(in) > maxFuzzInput {
		t.Skip("input over maxFuzzInput")
	}
	v, err := run(in)
	if err != nil && !errors.Is(err, ErrNotRecognized) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrToolFailed) {
		t.Fatalf("error wraps no package sentinel: %v", err)
	}
	if strings.TrimSpace(normalize(in)) == "" && !errors.Is(err, ErrNotRecognized) {
		t.Fatalf("blank input: err = %v, want ErrNotRecognized", err)
	}
	v2, err2 := run(in)
	if !reflect.DeepEqual(v, v2) || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
		t.Fatalf("parse is not deterministic:\n%+v %v\n%+v %v", v, err, v2, err2)
	}
	return v, err
}

func FuzzNvidiaSmiList(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, _ := checkCommon(t, in, parsers[pList])
		seen := map[int]bool{}
		for _, g := range v.([]GPU) {
			if g.Index < 0 || g.Name == "" || seen[g.Index] {
				t.Fatalf("bad GPU %+v", g)
			}
			seen[g.Index] = true
			for _, m := range g.MIG {
				if m.Index < 0 || m.UUID == "" || m.Profile == "" {
					t.Fatalf("bad MIG device %+v", m)
				}
			}
		}
	})
}

func FuzzNvidiaSmiQueryCSV(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := checkCommon(t, in, parsers[pCSV])
		c := v.(CSV)
		if err == nil && len(c.Header) > 0 && len(c.Rows) == 0 {
			t.Fatal("header without rows accepted")
		}
		for _, r := range c.Rows {
			for k := range r {
				if !contains(c.Header, k) {
					t.Fatalf("row key %q not in header %q", k, c.Header)
				}
			}
		}
	})
}

func FuzzNvidiaSmiTopo(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := checkCommon(t, in, parsers[pTopo])
		tp := v.(Topology)
		if len(tp.GPUs())+len(tp.NICs()) != len(tp.Devices) {
			t.Fatalf("GPUs+NICs != devices: %q", tp.Devices)
		}
		for row, cells := range tp.Links {
			if !contains(tp.Devices, row) || len(cells) != len(tp.Devices) {
				t.Fatalf("row %q has %d cells for devices %q", row, len(cells), tp.Devices)
			}
		}
		if err == nil && len(tp.Links) != len(tp.Devices) {
			t.Fatalf("accepted a matrix with %d rows for %d columns", len(tp.Links), len(tp.Devices))
		}
		for gpu := range tp.CPUAffinity {
			if !reTopoGPU.MatchString(gpu) {
				t.Fatalf("affinity for non-GPU row %q", gpu)
			}
		}
		_ = tp.NVLinked()
	})
}

func FuzzNvidiaSmiQ(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := checkCommon(t, in, parsers[pQ])
		q := v.(Query)
		if q.AttachedGPUs < 0 || (err == nil && q.AttachedGPUs > 0 && len(q.GPUs) > q.AttachedGPUs) {
			t.Fatalf("attached %d, sections %d", q.AttachedGPUs, len(q.GPUs))
		}
		for _, g := range q.GPUs {
			if g.MemoryTotalMiB < 0 || !(g.PowerLimitW >= 0) || g.BusID == "" {
				t.Fatalf("bad GPU %+v", withoutFields(g))
			}
		}
	})
}

func FuzzDCGMDiscovery(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, _ := checkCommon(t, in, parsers[pDiscovery])
		for _, d := range v.([]DCGMDevice) {
			if d.ID < 0 || d.Kind == "" {
				t.Fatalf("bad device %+v", d)
			}
		}
	})
}

func FuzzDCGMDiag(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, err := checkCommon(t, in, parsers[pDiag])
		d := v.(Diag)
		if err != nil {
			return
		}
		if d.Format != "text" && d.Format != "json" {
			t.Fatalf("format %q", d.Format)
		}
		if d.OK && len(d.Errors) > 0 {
			t.Fatalf("OK with errors %q", d.Errors)
		}
		for _, tt := range d.Tests {
			if _, known := normStatus(tt.Status); !known && len(d.Errors) == 0 {
				t.Fatalf("test %q: unknown status %q not reported", tt.Name, tt.Status)
			}
			if tt.Status == StatusFail && d.OK {
				t.Fatalf("test %q failed but OK", tt.Name)
			}
			for _, g := range tt.GPUs {
				if g.GPU < 0 {
					t.Fatalf("GPU index %d", g.GPU)
				}
				if statusRank(g.Status) > statusRank(tt.Status) {
					t.Fatalf("test %q status %q better than GPU %d %q", tt.Name, tt.Status, g.GPU, g.Status)
				}
			}
		}
	})
}

func checkIBDevices(t *testing.T, devs []IBDevice) {
	t.Helper()
	for _, d := range devs {
		if d.CA == "" {
			t.Fatalf("CA without a name: %+v", d)
		}
		for _, p := range d.Ports {
			if p.Port < 0 || !(p.RateGbps >= 0) || math.IsInf(p.RateGbps, 0) {
				t.Fatalf("bad port %+v", p)
			}
		}
	}
}

func FuzzIBStat(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, _ := checkCommon(t, in, parsers[pIBStat])
		checkIBDevices(t, v.([]IBDevice))
	})
}

func FuzzIBVDevinfo(f *testing.F) {
	addSampleSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		v, _ := checkCommon(t, in, parsers[pIBV])
		checkIBDevices(t, v.([]IBDevice))
	})
}
