package parse

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The nccl-tests samples are read on their own (not through loadSamples)
// so the existing sample tables stay untouched; see SOURCES.md there.
const ncclSamplesDir = samplesRoot + "/nccl-tests"

func loadNCCLSamples(tb testing.TB) map[string]string {
	tb.Helper()
	if st, err := os.Stat(ncclSamplesDir); err != nil || !st.IsDir() {
		tb.Fatalf("sample directory %s is missing (want the shared samples checked out next to the module, at /work/shared/samples): %v", ncclSamplesDir, err)
	}
	files, err := filepath.Glob(filepath.Join(ncclSamplesDir, "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no samples in %s: %v", ncclSamplesDir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatalf("read sample: %v", err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// ncclWant is what one sample must give. Row checks name a row by index.
type ncclWant struct {
	err         error // sentinel, nil for success
	ok          bool
	collective  string
	version     string
	ncclVersion string
	ranks       int
	hosts       []string // distinct, in rank order
	rows        int
	avgBusBW    float64
	params      map[string]string
	check       func(t *testing.T, n NCCL)
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func iptr(v int) *int        { return &v }

var ncclSampleWants = map[string]ncclWant{
	"a3mega-all-reduce-2node-16xH100.txt": {
		ok: true, collective: "all_reduce", ranks: 16, hosts: []string{"ztan-mig-235z", "ztan-mig-gq73"}, rows: 31, avgBusBW: 70.742,
		params: map[string]string{"nThread": "1", "nGpus": "1", "minBytes": "8", "maxBytes": "8589934592", "step": "2(factor)",
			"warmup iters": "5", "iters": "20", "agg iters": "1", "validation": "1", "graph": "0"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 10", n.Ranks[10], NCCLRank{Rank: 10, Host: "ztan-mig-gq73", Device: 2, Name: "NVIDIA H100 80GB HBM3", PID: 6735})
			eq(t, "last row", n.Rows[30], NCCLRow{Size: 8589934592, Count: 2147483648, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 47535, AlgBW: 180.71, BusBW: 338.82, Wrong: i64(0)},
				IP:  NCCLResult{TimeUS: 47743, AlgBW: 179.92, BusBW: 337.35, Wrong: i64(0)}})
		},
	},
	"awsbench-all-reduce-2node-16xV100-v2.0-error-float-nccl-info.txt": {
		ok: true, collective: "all_reduce", ncclVersion: "2.4.6", ranks: 16, hosts: []string{"ip-172-31-16-64", "ip-172-31-30-227"}, rows: 21, avgBusBW: 0.708142,
		params: map[string]string{"validation": "1", "iters": "20", "warmup iters": "5"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 0", n.Rows[0], NCCLRow{Size: 8, Count: 2, Type: "float", Redop: "sum",
				OOP: NCCLResult{TimeUS: 146.7, Error: f64(2e-07)}, IP: NCCLResult{TimeUS: 159.1, Error: f64(1e-07)}})
			eq(t, "row 1 oop error", *n.Rows[1].OOP.Error, 0.0)
			eq(t, "last row busbw", n.Rows[20].OOP.BusBW, 3.41)
			eq(t, "algorithms", n.Algorithms, []string{"ip-172-31-16-64:62652:62719 [0] NCCL INFO Using 256 threads, Min Comp Cap 7, Trees disabled"})
			eq(t, "params has no agg iters", n.Params["agg iters"], "")
		},
	},
	"awsome-all-reduce-2x-p5-srun-label-prefix-excerpt.txt": {
		// The README excerpt stops after the last row: indistinguishable
		// from a run cut short, so it is not OK.
		err: ErrMalformed, collective: "all_reduce", rows: 32,
		check: func(t *testing.T, n NCCL) {
			eq(t, "last row", n.Rows[31], NCCLRow{Size: 17179869184, Count: 4294967296, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 66132, AlgBW: 259.78, BusBW: 487.09, Wrong: i64(0)},
				IP:  NCCLResult{TimeUS: 66109, AlgBW: 259.87, BusBW: 487.26, Wrong: i64(0)}})
			eq(t, "row 12 oop time", n.Rows[12].OOP.TimeUS, 111.7)
		},
	},
	"awsome-batch-all-reduce-p5-mpirun-tag-prefix.txt": {
		ok: true, collective: "all_reduce", rows: 32, avgBusBW: 156.742,
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 20", n.Rows[20], NCCLRow{Size: 8388608, Count: 2097152, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 84.29, AlgBW: 99.52, BusBW: 174.16, Wrong: i64(0)},
				IP:  NCCLResult{TimeUS: 83.22, AlgBW: 100.80, BusBW: 176.40, Wrong: i64(0)}})
			eq(t, "last in-place busbw", n.Rows[31].IP.BusBW, 483.35)
		},
	},
	"cscs-all-reduce-2.17.1-2x4-gh200-dedented.txt": {
		ok: true, collective: "all_reduce", ranks: 8, hosts: []string{"nid005471", "nid005487"}, rows: 25, avgBusBW: 19.7866,
		params: map[string]string{"maxBytes": "134217728", "warmup iters": "1", "graph": "0"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 4", n.Ranks[4], NCCLRank{Rank: 4, Host: "nid005487", Device: 0, Name: "NVIDIA GH200 120GB", PID: 155254})
			eq(t, "row 16 ip", n.Rows[16].IP, NCCLResult{TimeUS: 349.6, AlgBW: 1.50, BusBW: 2.62, Wrong: i64(0)})
		},
	},
	"cscs-all-reduce-2.18.2-2node-gh200-unalign.txt": {
		ok: true, collective: "all_reduce", version: "2.18.2", ncclVersion: "2.30.7", ranks: 2, hosts: []string{"nid007106", "nid007109"}, rows: 8, avgBusBW: 14.9966,
		params: map[string]string{"minBytes": "1048576", "unalign": "0", "validation": "1"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 0 oop", n.Rows[0].OOP, NCCLResult{TimeUS: 339.61, AlgBW: 3.09, BusBW: 3.09, Wrong: i64(0)})
			eq(t, "row 7 ip time", n.Rows[7].IP.TimeUS, 5867.43)
		},
	},
	"pkb-all-reduce-2node-k80-validation0.txt": {
		// Two ranks and no name: busbw == algbw, told from sendrecv only by
		// the redop; the inference says all_reduce.
		ok: true, collective: "all_reduce", ranks: 2, hosts: []string{"pkb-2b6a393d-2", "pkb-2b6a393d-3"}, rows: 11, avgBusBW: 0.565546,
		params: map[string]string{"validation": "0", "iters": "1"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 1", n.Ranks[1], NCCLRank{Rank: 1, Host: "pkb-2b6a393d-3", Device: 0, Name: "Tesla K80", PID: 9178})
			eq(t, "row 10", n.Rows[10], NCCLRow{Size: 1073741824, Count: 268435456, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 1752724, AlgBW: 0.61, BusBW: 0.61}, IP: NCCLResult{TimeUS: 1763386, AlgBW: 0.61, BusBW: 0.61}})
		},
	},
	"playground-sendrecv-8xA100-inplace-NA-excerpt.txt": {
		err: ErrMalformed, collective: "sendrecv", rows: 4,
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 3", n.Rows[3], NCCLRow{Size: 1073741824, Count: 268435456, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 5503.4, AlgBW: 195.10, BusBW: 195.10, Wrong: i64(0)},
				IP:  NCCLResult{TimeUS: 5490.5, AlgBW: 195.56, BusBW: 195.56}})
		},
	},
	"sb-all-gather-8xA100-old.txt": {
		ok: true, collective: "all_gather", ranks: 8, hosts: []string{"localhost"}, rows: 34, avgBusBW: 58.2651,
		params: map[string]string{"nGpus": "8", "minBytes": "1"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 0", n.Rows[0], NCCLRow{Type: "float", OOP: NCCLResult{TimeUS: 34.27}, IP: NCCLResult{TimeUS: 33.57}})
			eq(t, "row 33 ip", n.Rows[33].IP, NCCLResult{TimeUS: 32669, AlgBW: 262.94, BusBW: 230.07})
			eq(t, "rank 7 pid", n.Ranks[7].PID, 112372)
		},
	},
	"sb-all-reduce-8xA100-old-error-col-NA.txt": {
		ok: true, collective: "all_reduce", ranks: 8, hosts: []string{"localhost"}, rows: 34, avgBusBW: 68.4048,
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 2", n.Rows[2], NCCLRow{Size: 4, Count: 1, Type: "float", Redop: "sum",
				OOP: NCCLResult{TimeUS: 34.73}, IP: NCCLResult{TimeUS: 35.30}})
			eq(t, "row 33 oop busbw", n.Rows[33].OOP.BusBW, 235.26)
		},
	},
	"sb-alltoall-8xA100-old-empty-redop.txt": {
		ok: true, collective: "alltoall", ranks: 8, hosts: []string{"localhost"}, rows: 34, avgBusBW: 58.6481,
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 5", n.Rows[5], NCCLRow{Size: 32, Count: 1, Type: "float", OOP: NCCLResult{TimeUS: 89.00}, IP: NCCLResult{TimeUS: 85.13}})
			eq(t, "row 33 oop", n.Rows[33].OOP, NCCLResult{TimeUS: 33508, AlgBW: 256.36, BusBW: 224.31})
		},
	},
	"sb-broadcast-8xA100-old-root-col.txt": {
		ok: true, collective: "broadcast", ranks: 8, hosts: []string{"localhost"}, rows: 34, avgBusBW: 64.8653,
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 33", n.Rows[33], NCCLRow{Size: 8589934592, Count: 2147483648, Type: "float", Root: iptr(0),
				OOP: NCCLResult{TimeUS: 36896, AlgBW: 232.81, BusBW: 232.81}, IP: NCCLResult{TimeUS: 36599, AlgBW: 234.70, BusBW: 234.70}})
		},
	},
	"sb-reduce-scatter-8xA100-old.txt": {
		ok: true, collective: "reduce_scatter", ranks: 8, hosts: []string{"localhost"}, rows: 34, avgBusBW: 60.168,
		check: func(t *testing.T, n NCCL) {
			eq(t, "row 23", n.Rows[23], NCCLRow{Size: 8388608, Count: 262144, Type: "float", Redop: "sum",
				OOP: NCCLResult{TimeUS: 147.3, AlgBW: 56.96, BusBW: 49.84}, IP: NCCLResult{TimeUS: 166.8, AlgBW: 50.28, BusBW: 44.00}})
		},
	},
	// One H200, one rank (-g 1): busbw is 0 by definition, algbw and time
	// are real; in-place algbw over 999999 GB/s is printed as %g ("1e+06").
	"h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-b8-e4G-g1.txt": {
		ok: true, collective: "all_reduce", version: "2.19.6", ncclVersion: "2.28.9", ranks: 1, hosts: []string{"vm"}, rows: 30, avgBusBW: 0,
		params: map[string]string{"nThread": "1", "nGpus": "1", "minBytes": "8", "maxBytes": "4294967296", "step": "2(factor)",
			"warmup iters": "1", "iters": "20", "agg iters": "1", "validation": "1", "graph": "0", "unalign": "0"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 0", n.Ranks[0], NCCLRank{Rank: 0, Host: "vm", Device: 0, Name: "NVIDIA H200", PID: 2182})
			eq(t, "row 0", n.Rows[0], NCCLRow{Size: 8, Count: 2, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 6.45, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 0.42, AlgBW: 0.02, Wrong: i64(0)}})
			eq(t, "row 27", n.Rows[27], NCCLRow{Size: 1073741824, Count: 268435456, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 506.95, AlgBW: 2118.1, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 0.97, AlgBW: 1e6, Wrong: i64(0)}})
			eq(t, "row 29", n.Rows[29], NCCLRow{Size: 4294967296, Count: 1073741824, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 2006.50, AlgBW: 2140.5, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 1.10, AlgBW: 4e6, Wrong: i64(0)}})
			checkOneRankBusBW(t, n)
		},
	},
	// NCCL_DEBUG=INFO: NCCL's lines among the table's; one rank needs no
	// algorithm, and NCCL names none ("Trees [0] -1/-1/-1->0->-1" is the
	// topology, "Failed to initialize NET plugin IB" an INFO, not a failure).
	"h200x1-nccl2.28.9-nccltests2.19.6-all-reduce-nccl-debug-info.txt": {
		ok: true, collective: "all_reduce", version: "2.19.6", ncclVersion: "2.28.9", ranks: 1, hosts: []string{"vm"}, rows: 4, avgBusBW: 0,
		params: map[string]string{"minBytes": "1048576", "maxBytes": "67108864", "step": "4(factor)", "unalign": "0"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 0 pid", n.Ranks[0].PID, 2234)
			eq(t, "row 3", n.Rows[3], NCCLRow{Size: 67108864, Count: 16777216, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 35.27, AlgBW: 1902.8, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 0.61, AlgBW: 110659, Wrong: i64(0)}})
			eq(t, "algorithms", n.Algorithms, []string(nil))
			checkOneRankBusBW(t, n)
		},
	},
	// all_gather at one rank: the first size, 8 B, rounds down to 0
	// elements per rank and is printed as 0.
	"h200x1-nccl2.28.9-nccltests2.19.6-all-gather-b8-e1G-f4-g1.txt": {
		ok: true, collective: "all_gather", version: "2.19.6", ncclVersion: "2.28.9", ranks: 1, hosts: []string{"vm"}, rows: 14, avgBusBW: 0,
		params: map[string]string{"minBytes": "8", "maxBytes": "1073741824", "step": "4(factor)"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 0 pid", n.Ranks[0].PID, 2297)
			eq(t, "row 0", n.Rows[0], NCCLRow{Size: 0, Count: 0, Type: "float", Redop: "none", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 1.07, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 0.38, Wrong: i64(0)}})
			eq(t, "row 13", n.Rows[13], NCCLRow{Size: 536870912, Count: 134217728, Type: "float", Redop: "none", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 257.95, AlgBW: 2081.3, Wrong: i64(0)}, IP: NCCLResult{TimeUS: 1.10, AlgBW: 490181, Wrong: i64(0)}})
			checkOneRankBusBW(t, n)
		},
	},
	// sendrecv: busbw == algbw, and no in-place check (#wrong N/A).
	"h200x1-nccl2.28.9-nccltests2.19.6-sendrecv-b8-e1G-f4-g1.txt": {
		ok: true, collective: "sendrecv", version: "2.19.6", ncclVersion: "2.28.9", ranks: 1, hosts: []string{"vm"}, rows: 14, avgBusBW: 10692.8,
		params: map[string]string{"minBytes": "8", "maxBytes": "1073741824", "step": "4(factor)"},
		check: func(t *testing.T, n NCCL) {
			eq(t, "rank 0 pid", n.Ranks[0].PID, 2321)
			eq(t, "row 13", n.Rows[13], NCCLRow{Size: 536870912, Count: 134217728, Type: "float", Redop: "sum", Root: iptr(-1),
				OOP: NCCLResult{TimeUS: 289.98, AlgBW: 1851.4, BusBW: 1851.4, Wrong: i64(0)},
				IP:  NCCLResult{TimeUS: 2.22, AlgBW: 242074, BusBW: 242074}})
			for i, r := range n.Rows {
				if r.OOP.Wrong == nil || *r.OOP.Wrong != 0 || r.IP.Wrong != nil || r.OOP.BusBW != r.OOP.AlgBW || r.IP.BusBW != r.IP.AlgBW {
					t.Errorf("row %d = %+v", i, r)
				}
			}
		},
	},
	// all_reduce_perf -h: the usage text, not a run.
	"nccltests2.19.6-all-reduce-perf-help.txt": {err: ErrNotRecognized},
}

// checkOneRankBusBW: with one rank every busbw is 2(n-1)/n × algbw = 0,
// and every #wrong is 0.
func checkOneRankBusBW(t *testing.T, n NCCL) {
	t.Helper()
	for i, r := range n.Rows {
		if r.OOP.BusBW != 0 || r.IP.BusBW != 0 || r.OOP.Wrong == nil || *r.OOP.Wrong != 0 || r.IP.Wrong == nil || *r.IP.Wrong != 0 {
			t.Errorf("row %d = %+v", i, r)
		}
	}
}

func TestNCCLSamples(t *testing.T) {
	samples := loadNCCLSamples(t)
	for name := range ncclSampleWants {
		if _, ok := samples[name]; !ok {
			t.Errorf("expected sample %s is missing from %s", name, ncclSamplesDir)
		}
	}
	for _, name := range sortedKeys(samples) {
		want, ok := ncclSampleWants[name]
		if !ok {
			t.Errorf("sample %s has no entry in ncclSampleWants: add its expected values", name)
			continue
		}
		t.Run(name, func(t *testing.T) { checkNCCLSample(t, samples[name], want) })
	}
}

func checkNCCLSample(t *testing.T, text string, want ncclWant) {
	n, err := NCCLTests(text)
	if !errors.Is(err, want.err) {
		t.Fatalf("err = %v, want %v", err, want.err)
	}
	if errors.Is(want.err, ErrNotRecognized) {
		eq(t, "nothing read", n, NCCL{}) // not a run: no table, no failure to report
		return
	}
	eq(t, "ok", n.OK, want.ok)
	eq(t, "collective", n.Collective, want.collective)
	eq(t, "version", n.Version, want.version)
	eq(t, "nccl version", n.NCCLVersion, want.ncclVersion)
	eq(t, "ranks", len(n.Ranks), want.ranks)
	eq(t, "hosts", ncclHosts(n.Ranks), want.hosts)
	eq(t, "rows", len(n.Rows), want.rows)
	eq(t, "avg busbw", n.AvgBusBW, want.avgBusBW)
	eq(t, "out of bounds", n.OutOfBounds, 0)
	eq(t, "errors", n.Errors, []NCCLError{})
	for k, v := range want.params {
		eq(t, "param "+k, n.Params[k], v)
	}
	for i, r := range n.Ranks {
		if r.Rank != i {
			t.Errorf("rank %d listed at %d", r.Rank, i)
		}
	}
	if len(n.Rows) != want.rows {
		t.FailNow() // the row checks below index by position
	}
	if want.check != nil {
		want.check(t, n)
	}
}

// ncclHosts lists distinct hosts in order of first appearance.
func ncclHosts(ranks []NCCLRank) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range ranks {
		if !seen[r.Host] {
			seen[r.Host] = true
			out = append(out, r.Host)
		}
	}
	return out
}

// TestNCCLSamplesOnlyOwnParser: the other parsers must not take nccl-tests
// output for theirs, and NCCLTests must not take theirs.
func TestNCCLSamplesOnlyOwnParser(t *testing.T) {
	for name, text := range loadNCCLSamples(t) {
		for pname, run := range parsers {
			if _, err := run(text); !errors.Is(err, ErrNotRecognized) {
				t.Errorf("%s accepted nccl-tests sample %s: err = %v", pname, name, err)
			}
		}
	}
	for _, s := range loadSamples(t) {
		if _, err := NCCLTests(s.text); !errors.Is(err, ErrNotRecognized) {
			t.Errorf("NCCLTests accepted %s: err = %v", s.key, err)
		}
	}
}

// ncclSample returns one sample's text.
func ncclSample(t *testing.T, name string) string {
	t.Helper()
	s, ok := loadNCCLSamples(t)[name]
	if !ok {
		t.Fatalf("sample %s missing", name)
	}
	return s
}

const ncclSmall = `# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_gather_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on      node1 device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  1 Pid   1001 on      node2 device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             1     float    none      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0
          16             2     float    none      -1    11.00    0.00    0.00      0    11.00    0.00    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.001
#
# Collective test concluded: all_gather_perf
`

func TestNCCLVariants(t *testing.T) {
	cases := []struct {
		name     string
		text     string
		wantErr  error
		wantOK   bool
		validate func(t *testing.T, n NCCL)
	}{
		{"clean", ncclSmall, nil, true, func(t *testing.T, n NCCL) {
			eq(t, "collective", n.Collective, "all_gather")
			eq(t, "nccl version", n.NCCLVersion, "2.27.3")
			eq(t, "group", n.Ranks[1].Group, 1)
			eq(t, "redop none", n.Rows[0].Redop, "none")
		}},
		{"wrong count", strings.Replace(ncclSmall, "11.00    0.00    0.00      0", "11.00    0.00    0.00      3", 1), nil, false, func(t *testing.T, n NCCL) {
			eq(t, "wrong", *n.Rows[1].OOP.Wrong, int64(3))
		}},
		{"wrong as %g exponent", strings.Replace(ncclSmall, "11.00    0.00    0.00      0", "11.00    0.00    0.00 1.23457e+06", 1), nil, false, func(t *testing.T, n NCCL) {
			eq(t, "wrong", *n.Rows[1].OOP.Wrong, int64(1234570))
		}},
		{"out of bounds failed", strings.Replace(ncclSmall, "values : 0 OK", "values : 2 FAILED", 1), nil, false, func(t *testing.T, n NCCL) {
			eq(t, "oob", n.OutOfBounds, 2)
		}},
		{"avg check failed", strings.Replace(ncclSmall, "0.001\n", "0.001 FAILED\n", 1), nil, false, nil},
		{"truncated mid row", ncclSmall[:strings.Index(ncclSmall, "11.00")+8], ErrMalformed, false, func(t *testing.T, n NCCL) {
			eq(t, "rows", len(n.Rows), 1)
		}},
		{"truncated after header", ncclSmall[:strings.Index(ncclSmall, "           8")], ErrMalformed, false, nil},
		{"failure before header", ncclSmall[:strings.Index(ncclSmall, "#\n#   ")] +
			"node2: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n" +
			" .. node2 pid 1001: Test failure common.cu:891\n", ErrToolFailed, false, func(t *testing.T, n NCCL) {
			eq(t, "errors", n.Errors, []NCCLError{
				{Host: "node2", Message: "Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '"},
				{Host: "node2", Message: "Test failure common.cu:891"}})
			eq(t, "ranks", len(n.Ranks), 2)
		}},
		{"failure after rows", ncclSmall[:strings.Index(ncclSmall, "# Out of")] +
			"node1:1000:1010 [0] NCCL WARN NET/IB : Got completion with error 12\n" +
			"node1: Test NCCL failure common.cu:345 'remote process exited or there was a network error'\n", ErrToolFailed, false, func(t *testing.T, n NCCL) {
			eq(t, "rows", len(n.Rows), 2)
			eq(t, "warn", n.Errors[0], NCCLError{Host: "node1", Message: "NCCL WARN NET/IB : Got completion with error 12"})
		}},
		{"error footer line", ncclSmall + "# error: unhandled cuda error\n", ErrToolFailed, false, nil},
		{"only a failure", "node3: Test CUDA failure common.cu:892 'out of memory'\n", ErrToolFailed, false, func(t *testing.T, n NCCL) {
			eq(t, "errors", n.Errors, []NCCLError{{Host: "node3", Message: "Test CUDA failure common.cu:892 'out of memory'"}})
		}},
		{"noise between every line", ncclNoisy(ncclSmall), nil, true, func(t *testing.T, n NCCL) {
			eq(t, "rows", len(n.Rows), 2)
			eq(t, "algorithms", n.Algorithms, []string{"node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0 Ring/Simple"})
		}},
		{"srun prefix two digits", ncclPrefix(ncclSmall, " 12: "), nil, true, nil},
		{"mpirun stderr tag", ncclPrefix(ncclSmall, "[1,3]<stderr>:"), nil, true, nil},
		{"CRLF", strings.ReplaceAll(ncclSmall, "\n", "\r\n"), nil, true, nil},
		{"command line names test", "$ mpirun -np 2 ./build/broadcast_perf -b 8 -e 16\n" + ncclSmall[strings.Index(ncclSmall, "# nThread"):], nil, true, func(t *testing.T, n NCCL) {
			eq(t, "collective", n.Collective, "broadcast")
		}},
		{"misaligned columns", strings.Replace(ncclSmall, "           8             1     float    none      -1    10.00", "8 1 float none -1 10.00", 1), nil, true, nil},
		{"empty", "", ErrNotRecognized, false, nil},
		{"other text", "hello world\n12 34\n", ErrNotRecognized, false, nil},
		{"dcgm-like json", `{"category":"x"}`, ErrNotRecognized, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := NCCLTests(c.text)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			eq(t, "ok", n.OK, c.wantOK)
			if c.validate != nil {
				c.validate(t, n)
			}
		})
	}
}

// ncclNoisy puts NCCL INFO and MPI lines between all lines of text.
func ncclNoisy(text string) string {
	var b strings.Builder
	b.WriteString("node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0 Ring/Simple\n")
	for _, l := range strings.SplitAfter(text, "\n") {
		b.WriteString(l)
		b.WriteString("node1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 - Init COMPLETE\n")
		b.WriteString("[node1:01000] 1 more process has sent help message help-mpi-btl.txt\n")
	}
	return b.String()
}

func ncclPrefix(text, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// ncclJSONSample follows src/util.cu of nccl-tests (JSON_FILE_VERSION 2):
// no genuine -J file was available, see the report.
const ncclJSONSample = `{"version":2,"start_time":"2025-06-01 10:00:00","args":["./build/all_reduce_perf","-b","8","-e","16","-J","out.json"],"env":["PATH=\/usr\/bin"],"nccl_version":22703,"config":{"nthreads":1,"ngpus":1,"minimum_bytes":8,"maximum_bytes":16,"step_factor":2,"warmup_iters":1,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false","per_iter_timing":"false","parallel_init":"false","devices":[{"rank":0,"group":0,"pid":1000,"hostname":"node1","device":0,"device_hex":"0000:04:00","device_info":"NVIDIA H100 80GB HBM3"},{"rank":1,"group":0,"pid":1001,"hostname":"node2","device":0,"device_hex":"0000:04:00","device_info":"NVIDIA H100 80GB HBM3"}]},"results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":10.500000,"alg_bw":0.000762,"bus_bw":0.000762,"nwrong":0.000000},"in_place":{"time":10.250000,"alg_bw":0.000780,"bus_bw":0.000780,"nwrong":null},"actual_iterations":20,"experiment_name":""},{"size":16,"count":4,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":11.000000,"alg_bw":0.001455,"bus_bw":0.001455,"nwrong":0.000000},"in_place":{"time":11.000000,"alg_bw":0.001455,"bus_bw":0.001455,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""}],"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.001113,"okay":"unchecked"},"errors":[""],"end_time":"2025-06-01 10:00:01"}`

func TestNCCLJSON(t *testing.T) {
	n, err := NCCLTests(ncclJSONSample)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "ok", n.OK, true)
	eq(t, "collective", n.Collective, "all_reduce")
	eq(t, "nccl version", n.NCCLVersion, "2.27.3")
	eq(t, "ranks", n.Ranks[1], NCCLRank{Rank: 1, Host: "node2", Device: 0, Name: "NVIDIA H100 80GB HBM3", PID: 1001})
	eq(t, "row 0", n.Rows[0], NCCLRow{Size: 8, Count: 2, Type: "float", Redop: "sum", Root: iptr(-1),
		OOP: NCCLResult{TimeUS: 10.5, AlgBW: 0.000762, BusBW: 0.000762, Wrong: i64(0)},
		IP:  NCCLResult{TimeUS: 10.25, AlgBW: 0.000780, BusBW: 0.000780}})
	eq(t, "avg", n.AvgBusBW, 0.001113)
	eq(t, "params", n.Params, map[string]string{"nThread": "1", "nGpus": "1", "minBytes": "8", "maxBytes": "16", "step": "2(factor)",
		"warmup iters": "1", "iters": "20", "agg iters": "1", "validation": "1", "graph": "0"})

	t.Run("truncated", func(t *testing.T) {
		cut := ncclJSONSample[:strings.Index(ncclJSONSample, `{"size":16`)+30]
		n, err := NCCLTests(cut)
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("err = %v, want ErrMalformed", err)
		}
		eq(t, "rows", len(n.Rows), 1)
		eq(t, "ranks", len(n.Ranks), 2)
		eq(t, "ok", n.OK, false)
	})
	t.Run("bare inf and failure", func(t *testing.T) {
		s := strings.Replace(ncclJSONSample, `"bus_bw":0.001455,"nwrong":0.000000},"in_place"`, `"bus_bw":inf,"nwrong":7.000000},"in_place"`, 1)
		s = strings.Replace(s, `"errors":[""]`, `"errors":["unhandled system error"]`, 1)
		n, err := NCCLTests(s)
		if !errors.Is(err, ErrToolFailed) {
			t.Fatalf("err = %v, want ErrToolFailed", err)
		}
		eq(t, "wrong", *n.Rows[1].OOP.Wrong, int64(7))
		eq(t, "busbw", n.Rows[1].OOP.BusBW, 0.0)
		eq(t, "errors", n.Errors, []NCCLError{{Message: "unhandled system error"}})
	})
}

// TestNCCLMarshal: the CLI prints the struct as JSON; N/A must be null.
func TestNCCLMarshal(t *testing.T) {
	n, _ := NCCLTests(ncclSample(t, "playground-sendrecv-8xA100-inplace-NA-excerpt.txt"))
	b, err := json.Marshal(n.Rows[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"size":134217728,"count":33554432,"type":"float","redop":"sum","root":-1,"oop":{"time_us":1211.2,"algbw":110.81,"busbw":110.81,"wrong":0},"ip":{"time_us":1211.8,"algbw":110.76,"busbw":110.76,"wrong":null}}`
	eq(t, "row json", string(b), want)
}
