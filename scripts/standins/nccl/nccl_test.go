package nccl

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/parse"
)

// needMPI skips where MPI is missing, except as root on Linux (CI, which installs libopenmpi-dev), where a missing
// mpicc/mpirun is a failure.
func needMPI(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("%s not found: install Open MPI (apt-get install -y libopenmpi-dev openmpi-bin)", strings.Join(missing, ", "))
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func build(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("bash", "build.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}
	return dir
}

func mpirun(t *testing.T, np int, args ...string) (string, error) {
	t.Helper()
	return mpirunEnv(t, nil, np, args...)
}

// mpirunEnv runs mpirun with env added to this process's environment and passed to every rank with -x.
func mpirunEnv(t *testing.T, env []string, np int, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := []string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np)}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		full = append(full, "-x", name)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	// Loopback only; keep Open MPI quiet and off the host's other interfaces. NCCL_* and Open MPI's tuned
	// allreduce choice from the caller's environment would change the output: only env sets them.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NCCL_") && !strings.HasPrefix(kv, "OMPI_MCA_coll_tuned_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "OMPI_MCA_btl=self,tcp", "OMPI_MCA_btl_tcp_if_include=lo", "OMPI_MCA_oob_tcp_if_include=lo",
		"OMPI_MCA_pml=ob1", "OMPI_MCA_btl_base_warn_component_unused=0")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%v\nstderr:\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}

// The fixed lines of nccl-tests 2.18.x, as printed for -b 1K -e 1M -f 4 -n 2 -w 1 -c 1 (see
// shared/samples/nccl-tests/cscs-all-reduce-2.18.2-2node-gh200-unalign.txt).
var (
	colsTop   = "#                                                              out-of-place                       in-place          "
	colsNames = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong "
	colsUnits = "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         "
	rankRe    = regexp.MustCompile(`^#  Rank +(\d+) Group  0 Pid +(\d+) on +(\S+) device +(\d+) \[0000:00:00\] gpuaccept-mpi-standin$`)
	// %12li  %12li  %8s  %6s  %6s then twice "  %7s  %6s  %6s  %6g" (or "    N/A").
	rowRe = regexp.MustCompile(`^ {0,11}\d{1,12}  {0,11}\d{1,12}  +(\S+)  +(\S+)  +-1( +[0-9.e+]+ +[0-9.e+]+ +[0-9.e+]+ +(\d+|N/A)){2}$`)
	avgRe = regexp.MustCompile(`^# Avg bus bandwidth    : [0-9.e+-]+ $`)
)

// checkOutput checks the whole text of a run of np processes with -g gpus, -b 1K -e maxBytes -f 4 -n 2 -w 1 -c 1,
// all on this host: every line but the rows exactly, the rows by layout, and #wrong 0 (N/A in place if inPlaceNA).
func checkOutput(t *testing.T, out, prog, redop string, np, gpus int, maxBytes int64, sizes []int64, inPlaceNA bool) {
	t.Helper()
	lines := strings.Split(out, "\n")
	want := []string{
		"# nccl-tests version 2.18.2 nccl-headers=0 nccl-library=0",
		"# Collective test starting: " + prog,
		fmt.Sprintf("# nThread 1 nGpus %d minBytes 1024 maxBytes %d step: 4(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0", gpus, maxBytes),
		"#",
		"# Using devices",
	}
	i := 0
	expect := func(w string) {
		t.Helper()
		if i >= len(lines) || lines[i] != w {
			got := "<eof>"
			if i < len(lines) {
				got = lines[i]
			}
			t.Fatalf("%s line %d:\n got %q\nwant %q\noutput:\n%s", prog, i+1, got, w, out)
		}
		i++
	}
	for _, w := range want {
		expect(w)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	// nccl-tests numbers rank proc*gpus+g on device localRank*gpus+g: one host, so device = rank. A process's ranks
	// share its pid; processes differ.
	pids := map[string]int{}
	for r := 0; r < np*gpus; r++ {
		m := rankRe.FindStringSubmatch(lines[i])
		if m == nil || m[1] != fmt.Sprint(r) || m[3] != host || m[4] != fmt.Sprint(r) {
			t.Fatalf("%s line %d: rank line %q (want rank %d on %s device %d)", prog, i+1, lines[i], r, host, r)
		}
		if p, seen := pids[m[2]]; seen && p != r/gpus || !seen && len(pids) != r/gpus {
			t.Fatalf("%s line %d: pid %s for rank %d: want one pid per process of %d ranks", prog, i+1, m[2], r, gpus)
		}
		pids[m[2]] = r / gpus
		i++
	}
	for _, w := range []string{"#", colsTop, colsNames, colsUnits} {
		expect(w)
	}
	for _, size := range sizes {
		l := lines[i]
		m := rowRe.FindStringSubmatch(l)
		wantLen := 118 // "  %6g" for #wrong; nccl-tests prints "    N/A" (one char shorter) when it does not check
		if inPlaceNA {
			wantLen = 117
		}
		if m == nil || len(l) != wantLen {
			t.Fatalf("%s line %d: row %q does not have the nccl-tests layout (len %d)", prog, i+1, l, len(l))
		}
		f := strings.Fields(l)
		if f[0] != fmt.Sprint(size) || f[2] != "float" || f[3] != redop {
			t.Fatalf("%s line %d: row %q, want size %d float %s", prog, i+1, l, size, redop)
		}
		if f[8] != "0" {
			t.Errorf("%s line %d: out-of-place #wrong %s, want 0", prog, i+1, f[8])
		}
		if wantIn := map[bool]string{true: "N/A", false: "0"}[inPlaceNA]; f[12] != wantIn {
			t.Errorf("%s line %d: in-place #wrong %s, want %s", prog, i+1, f[12], wantIn)
		}
		i++
	}
	expect("# Out of bounds values : 0 OK")
	if !avgRe.MatchString(lines[i]) {
		t.Fatalf("%s line %d: %q is not the Avg bus bandwidth line", prog, i+1, lines[i])
	}
	i++
	for _, w := range []string{"#", "# Collective test concluded: " + prog, "#", "", ""} {
		expect(w)
	}
	if i != len(lines) {
		t.Fatalf("%s: %d extra lines after the footer", prog, len(lines)-i)
	}
}

func allReduceFormat(t *testing.T, dir string) {
	out, err := mpirun(t, 2, filepath.Join(dir, "all_reduce_perf"), "-b", "1K", "-e", "1M", "-f", "4", "-n", "2", "-w", "1", "-c", "1")
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	checkOutput(t, out, "all_reduce_perf", "sum", 2, 1, 1<<20, []int64{1024, 4096, 16384, 65536, 262144, 1048576}, false)
	// What gpuaccept's own parser makes of it, exactly as of a real run.
	r, err := parse.NCCLTests(out)
	if err != nil || !r.OK || r.Collective != "all_reduce" || len(r.Ranks) != 2 || len(r.Rows) != 6 || r.Rows[5].Size != 1048576 {
		t.Fatalf("parse: ok=%v collective=%q ranks=%d rows=%d, %v", r.OK, r.Collective, len(r.Ranks), len(r.Rows), err)
	}
}

func otherCollectives(t *testing.T, dir string) {
	// 2 ranks: all_gather etc. align count/nranks down to 16 bytes, which 1K..1M by 4 keeps exact.
	sizes := []int64{1024, 4096, 16384, 65536, 262144, 1048576}
	for _, tc := range collectives[1:] {
		out, err := mpirun(t, 2, filepath.Join(dir, tc.prog), "-b", "1K", "-e", "1M", "-f", "4", "-n", "2", "-w", "1", "-c", "1")
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.prog, err, out)
		}
		checkOutput(t, out, tc.prog, tc.redop, 2, 1, 1<<20, sizes, tc.na)
	}
}

func allTypesAndOpsValidate(t *testing.T, dir string) {
	out, err := mpirun(t, 3, filepath.Join(dir, "all_reduce_perf"), "-b", "1K", "-e", "64K", "-f", "8", "-n", "1", "-w", "0", "-c", "1", "-d", "all", "-o", "all")
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		rows++
		if f := strings.Fields(l); f[8] != "0" || f[12] != "0" {
			t.Errorf("wrong elements: %q", l)
		}
	}
	if want := 8 * 5 * 3; rows != want { // types x ops x sizes (1K, 8K, 64K)
		t.Errorf("%d rows, want %d", rows, want)
	}
	if !strings.Contains(out, "# Out of bounds values : 0 OK\n") {
		t.Errorf("no clean Out of bounds line:\n%s", out)
	}
}

// threadsRefused: -t other than 1 (and -g 0) fail with nccl-tests' message.
func threadsRefused(t *testing.T, dir string) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-t", "2", "-g", "3"}, "Invalid number of GPUs: 6 requested but only 3 were found."},
		{[]string{"-g", "0"}, "Invalid number of GPUs: 0 requested but only 0 were found."},
	} {
		args := append([]string{filepath.Join(dir, "all_reduce_perf"), "-b", "1K", "-e", "1K"}, tc.args...)
		out, err := mpirun(t, 1, args...)
		if err == nil {
			t.Fatalf("%v succeeded:\n%s", tc.args, out)
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: want %q, got %v", tc.args, tc.msg, err)
		}
	}
}

// The five collectives, as otherCollectives and devicesPerProcess run them.
var collectives = []struct {
	prog, redop string
	na          bool // in-place #wrong is N/A (not checked by nccl-tests)
}{
	{"all_reduce_perf", "sum", false},
	{"all_gather_perf", "none", false},
	{"reduce_scatter_perf", "sum", false},
	{"alltoall_perf", "none", true},
	{"sendrecv_perf", "sum", true},
}

// devicesPerProcess: -g 4 in one process and -g 2 in each of two processes are 4 ranks on one host; every
// collective gets exact results in every local rank's buffer, and gpuaccept's parser reads 4 ranks on 1 host.
func devicesPerProcess(t *testing.T, dir string) {
	sizes := []int64{1024, 4096, 16384, 65536} // 4 ranks: count/4 stays 16-byte aligned
	for _, cfg := range []struct{ np, gpus int }{{1, 4}, {2, 2}} {
		for _, tc := range collectives {
			out, err := mpirun(t, cfg.np, filepath.Join(dir, tc.prog), "-g", fmt.Sprint(cfg.gpus), "-b", "1K", "-e", "64K", "-f", "4", "-n", "2", "-w", "1", "-c", "1")
			if err != nil {
				t.Fatalf("%s -np %d -g %d: %v\n%s", tc.prog, cfg.np, cfg.gpus, err, out)
			}
			checkOutput(t, out, tc.prog, tc.redop, cfg.np, cfg.gpus, 64<<10, sizes, tc.na)
			r, err := parse.NCCLTests(out)
			hosts := map[string]bool{}
			for _, rk := range r.Ranks {
				hosts[rk.Host] = true
			}
			if err != nil || !r.OK || r.Collective != strings.TrimSuffix(tc.prog, "_perf") || len(r.Ranks) != 4 || len(hosts) != 1 || len(r.Rows) != len(sizes) {
				t.Fatalf("%s -np %d -g %d: parse: ok=%v collective=%q ranks=%d hosts=%d rows=%d, %v", tc.prog, cfg.np, cfg.gpus,
					r.OK, r.Collective, len(r.Ranks), len(hosts), len(r.Rows), err)
			}
		}
	}
}

// devicesAllTypesAndOps: the reductions over local buffers are exact for every type and op too.
func devicesAllTypesAndOps(t *testing.T, dir string) {
	for _, prog := range []string{"all_reduce_perf", "reduce_scatter_perf"} {
		out, err := mpirun(t, 2, filepath.Join(dir, prog), "-g", "2", "-b", "1K", "-e", "8K", "-f", "8", "-n", "1", "-w", "0", "-c", "1", "-d", "all", "-o", "all")
		if err != nil {
			t.Fatalf("%s: %v\n%s", prog, err, out)
		}
		rows := 0
		for _, l := range strings.Split(out, "\n") {
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			rows++
			if f := strings.Fields(l); len(f) != 13 || f[8] != "0" || f[12] != "0" {
				t.Errorf("%s: wrong elements: %q", prog, l)
			}
		}
		if want := 8 * 5 * 2; rows != want { // types x ops x sizes (1K, 8K)
			t.Errorf("%s: %d rows, want %d", prog, rows, want)
		}
		if !strings.Contains(out, "# Out of bounds values : 0 OK\n") {
			t.Errorf("%s: no clean Out of bounds line:\n%s", prog, out)
		}
	}
}

var (
	// NCCL's INFO line (src/debug.cc): "host:pid:tid [dev] NCCL INFO ".
	infoRe   = regexp.MustCompile(`^(\S+):(\d+):(\d+) \[(\d+)\] NCCL INFO (.*)$`)
	tuningRe = regexp.MustCompile(`^(\d+) Bytes -> Algo 1 proto 2 time (\d+\.\d{6})$`)
)

// ncclDebugLines: the NCCL_ALGO and TUNING lines appear exactly when NCCL would print them and the stand-in
// knows them to be true, in NCCL's format; the rest of the output is unchanged; the parser keeps them all.
func ncclDebugLines(t *testing.T, dir string) {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	sizes := []int64{1024, 4096, 16384, 65536}
	for _, tc := range []struct {
		name     string
		env      []string
		np, gpus int
		prog     string
		algo     string // the value the NCCL_ALGO lines must show
		envLines int    // NCCL_ALGO lines: one per rank, or none
		tuning   bool   // two TUNING lines after each row, from rank 0
	}{
		{"no NCCL_DEBUG", []string{"NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 1, "all_reduce_perf", "", 0, false},
		{"NCCL_DEBUG=WARN", []string{"NCCL_DEBUG=WARN", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 1, "all_reduce_perf", "", 0, false},
		{"INFO without NCCL_ALGO", []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 1, "all_reduce_perf", "", 0, false},
		{"INFO, default INIT,ENV", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring"}, 2, 1, "all_reduce_perf", "Ring", 2, false},
		{"ENV,TUNING", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=env,Tuning"}, 2, 1, "all_reduce_perf", "Ring", 2, true},
		{"ALL, lower case", []string{"NCCL_DEBUG=info", "NCCL_ALGO=ring", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 1, "all_reduce_perf", "ring", 2, true},
		{"TUNING without ENV", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=TUNING"}, 2, 1, "all_reduce_perf", "", 0, true},
		{"^TUNING", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=^TUNING"}, 2, 1, "all_reduce_perf", "Ring", 2, false},
		{"^INIT", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=^INIT"}, 2, 1, "all_reduce_perf", "Ring", 2, true},
		{"NCCL_ALGO=Tree: no ring forced", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Tree", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 1, "all_reduce_perf", "Tree", 2, false},
		{"Open MPI told recursive doubling", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL",
			"OMPI_MCA_coll_tuned_use_dynamic_rules=1", "OMPI_MCA_coll_tuned_allreduce_algorithm=3"}, 2, 1, "all_reduce_perf", "Ring", 2, false},
		{"han ranked above tuned", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL", "OMPI_MCA_coll_han_priority=40"},
			2, 1, "all_reduce_perf", "Ring", 2, false},
		{"one rank: no communicator to tune", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 1, 1, "all_reduce_perf", "", 0, false},
		{"-g 2 in two processes: not a ring", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 2, "all_reduce_perf", "Ring", 4, false},
		{"-g 4 in one process", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 1, 4, "all_reduce_perf", "Ring", 4, false},
		{"all_gather: not Open MPI's allreduce", []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 2, 1, "all_gather_perf", "Ring", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := mpirunEnv(t, tc.env, tc.np, filepath.Join(dir, tc.prog), "-g", fmt.Sprint(tc.gpus), "-b", "1K", "-e", "64K", "-f", "4", "-n", "2", "-w", "1", "-c", "1")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			lines := strings.Split(out, "\n")
			var rest, infos []string
			envDevs := map[string]bool{}
			tuning := map[int64][]float64{}
			rank0Pid, rowSize, headerSeen := "", int64(-1), false
			rowTimes := map[int64][2]string{}
			for _, l := range lines {
				if m := rankRe.FindStringSubmatch(l); m != nil && m[1] == "0" {
					rank0Pid = m[2]
				}
				if l == colsTop {
					headerSeen = true
				}
				m := infoRe.FindStringSubmatch(l)
				if f := strings.Fields(l); m == nil && len(f) == 13 && !strings.HasPrefix(l, "#") {
					rowSize, _ = strconv.ParseInt(f[0], 10, 64)
					rowTimes[rowSize] = [2]string{f[5], f[9]}
				}
				if m == nil {
					if strings.Contains(l, "NCCL") && !strings.HasPrefix(l, "# nccl-tests") {
						t.Errorf("unexpected NCCL line %q", l)
					}
					rest = append(rest, l)
					continue
				}
				infos = append(infos, l)
				if m[1] != host || m[2] != m[3] {
					t.Errorf("%q: want host %s and tid = pid (main thread)", l, host)
				}
				if m[5] == "NCCL_ALGO set by environment to "+tc.algo {
					if envDevs[m[4]] {
						t.Errorf("device %s twice: %q", m[4], l)
					}
					envDevs[m[4]] = true
					if m[2] == rank0Pid && headerSeen {
						t.Errorf("rank 0's %q after the table header", l)
					}
					continue
				}
				tm := tuningRe.FindStringSubmatch(m[5])
				if tm == nil || m[2] != rank0Pid || m[4] != "0" {
					t.Errorf("unexpected NCCL INFO line %q (rank 0 pid %s)", l, rank0Pid)
					continue
				}
				size, _ := strconv.ParseInt(tm[1], 10, 64)
				us, _ := strconv.ParseFloat(tm[2], 64)
				if size != rowSize {
					t.Errorf("%q does not follow the row of its size (last row: %d)", l, rowSize)
				}
				tuning[size] = append(tuning[size], us)
			}
			if len(envDevs) != tc.envLines {
				t.Errorf("%d NCCL_ALGO lines (devices %v), want %d:\n%s", len(envDevs), envDevs, tc.envLines, out)
			}
			for d := 0; d < tc.envLines; d++ {
				if !envDevs[fmt.Sprint(d)] {
					t.Errorf("no NCCL_ALGO line for device %d:\n%s", d, out)
				}
			}
			for _, size := range sizes {
				got := tuning[size]
				if !tc.tuning {
					if len(got) != 0 {
						t.Errorf("size %d: TUNING lines %v, want none:\n%s", size, got, out)
					}
					continue
				}
				if len(got) != 2 {
					t.Errorf("size %d: %d TUNING lines, want 2 (out-of-place, in-place):\n%s", size, len(got), out)
					continue
				}
				for i, us := range got { // the row's time column, unrounded
					if !sameTime(rowTimes[size][i], us) {
						t.Errorf("size %d: TUNING time %f, row shows %s", size, us, rowTimes[size][i])
					}
				}
			}
			// Without the INFO lines the output is exactly what it is without NCCL_DEBUG.
			checkOutput(t, strings.Join(rest, "\n"), tc.prog, map[bool]string{true: "sum", false: "none"}[tc.prog == "all_reduce_perf"],
				tc.np, tc.gpus, 64<<10, sizes, false)
			// The parser keeps every INFO line (once: it drops repeats) as the algorithm record.
			r, err := parse.NCCLTests(out)
			if err != nil || !r.OK || len(r.Ranks) != tc.np*tc.gpus {
				t.Fatalf("parse: ok=%v ranks=%d, %v", r.OK, len(r.Ranks), err)
			}
			var want []string
			seen := map[string]bool{}
			for _, l := range infos {
				if !seen[l] {
					seen[l] = true
					want = append(want, l)
				}
			}
			if strings.Join(r.Algorithms, "\n") != strings.Join(want, "\n") {
				t.Errorf("parser's algorithms:\n%s\nwant:\n%s", strings.Join(r.Algorithms, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	// Open MPI's ring falls back to recursive doubling when count < processes: 4 bytes of float is 1 element.
	t.Run("count below processes", func(t *testing.T) {
		out, err := mpirunEnv(t, []string{"NCCL_DEBUG=INFO", "NCCL_ALGO=Ring", "NCCL_DEBUG_SUBSYS=ALL"}, 2,
			filepath.Join(dir, "all_reduce_perf"), "-b", "4", "-e", "8", "-f", "2", "-n", "2", "-w", "1", "-c", "1")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Contains(out, " 4 Bytes -> ") || strings.Count(out, " 8 Bytes -> Algo 1 proto 2 time ") != 2 {
			t.Errorf("want TUNING lines for 8 bytes (2 elements) only:\n%s", out)
		}
	})
}

// sameTime: a time printed by nccl-tests' getFloatStr (2, 1 or 0 decimals) is us rounded.
func sameTime(printed string, us float64) bool {
	v, err := strconv.ParseFloat(printed, 64)
	if err != nil {
		return false
	}
	decimals := 0
	if _, frac, ok := strings.Cut(printed, "."); ok {
		decimals = len(frac)
	}
	return math.Abs(v-us) <= 0.5*math.Pow(10, -float64(decimals))+1e-9
}

// TestStandin builds the five binaries once into t.TempDir() and runs them with mpirun on this machine (no lab).
func TestStandin(t *testing.T) {
	needMPI(t)
	dir := build(t)
	t.Run("all_reduce format", func(t *testing.T) { allReduceFormat(t, dir) })
	t.Run("other collectives", func(t *testing.T) { otherCollectives(t, dir) })
	t.Run("all types and ops validate", func(t *testing.T) { allTypesAndOpsValidate(t, dir) })
	t.Run("threads refused", func(t *testing.T) { threadsRefused(t, dir) })
	t.Run("devices per process", func(t *testing.T) { devicesPerProcess(t, dir) })
	t.Run("devices: all types and ops validate", func(t *testing.T) { devicesAllTypesAndOps(t, dir) })
	t.Run("NCCL debug lines", func(t *testing.T) { ncclDebugLines(t, dir) })
	t.Run("small messages", func(t *testing.T) { smallMessages(t, dir) })
}

// smallMessages: the all-reduce phase's latency sweep (-b 8 -e 64K -f 2,
// 100 iterations) prints every size from 8 B to 64 KiB in the genuine
// format, each with a positive out-of-place time: a real MPI_Allreduce's,
// so its latency is what the links (tc-shaped in the lab) give.
func smallMessages(t *testing.T, dir string) {
	out, err := mpirun(t, 2, filepath.Join(dir, "all_reduce_perf"), "-b", "8", "-e", "64K", "-f", "2", "-n", "100", "-w", "10", "-c", "1", "-g", "1")
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	var sizes []int64
	for b := int64(8); b <= 64<<10; b *= 2 {
		sizes = append(sizes, b)
	}
	r, err := parse.NCCLTests(out)
	if err != nil || !r.OK || len(r.Ranks) != 2 || len(r.Rows) != len(sizes) || r.Params["minBytes"] != "8" {
		t.Fatalf("parse: ok=%v ranks=%d rows=%d params %v, %v\n%s", r.OK, len(r.Ranks), len(r.Rows), r.Params, err, out)
	}
	for i, row := range r.Rows {
		if row.Size != sizes[i] || row.Count != sizes[i]/4 || row.OOP.TimeUS <= 0 || row.OOP.Wrong == nil || *row.OOP.Wrong != 0 {
			t.Errorf("row %d: %+v, want %d B with a positive out-of-place time and 0 wrong", i, row, sizes[i])
		}
	}
}
