package nccl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(np)}, args...)
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	// Loopback only; keep Open MPI quiet and off the host's other interfaces.
	cmd.Env = append(os.Environ(), "OMPI_MCA_btl=self,tcp", "OMPI_MCA_btl_tcp_if_include=lo", "OMPI_MCA_oob_tcp_if_include=lo",
		"OMPI_MCA_pml=ob1", "OMPI_MCA_btl_base_warn_component_unused=0")
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
	rankRe    = regexp.MustCompile(`^#  Rank +(\d+) Group  0 Pid +\d+ on +(\S+) device +\d+ \[0000:00:00\] gpuaccept-mpi-standin$`)
	// %12li  %12li  %8s  %6s  %6s then twice "  %7s  %6s  %6s  %6g" (or "    N/A").
	rowRe = regexp.MustCompile(`^ {0,11}\d{1,12}  {0,11}\d{1,12}  +(\S+)  +(\S+)  +-1( +[0-9.e+]+ +[0-9.e+]+ +[0-9.e+]+ +(\d+|N/A)){2}$`)
	avgRe = regexp.MustCompile(`^# Avg bus bandwidth    : [0-9.e+-]+ $`)
)

func checkOutput(t *testing.T, out, prog, redop string, np int, sizes []int64, inPlaceNA bool) {
	t.Helper()
	lines := strings.Split(out, "\n")
	want := []string{
		"# nccl-tests version 2.18.2 nccl-headers=0 nccl-library=0",
		"# Collective test starting: " + prog,
		"# nThread 1 nGpus 1 minBytes 1024 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0",
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
	for r := 0; r < np; r++ {
		m := rankRe.FindStringSubmatch(lines[i])
		if m == nil || m[1] != fmt.Sprint(r) || m[2] != host {
			t.Fatalf("%s line %d: rank line %q (want rank %d on %s)", prog, i+1, lines[i], r, host)
		}
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
	checkOutput(t, out, "all_reduce_perf", "sum", 2, []int64{1024, 4096, 16384, 65536, 262144, 1048576}, false)
	// What gpuaccept's own parser makes of it, exactly as of a real run.
	r, err := parse.NCCLTests(out)
	if err != nil || !r.OK || r.Collective != "all_reduce" || len(r.Ranks) != 2 || len(r.Rows) != 6 || r.Rows[5].Size != 1048576 {
		t.Fatalf("parse: ok=%v collective=%q ranks=%d rows=%d, %v", r.OK, r.Collective, len(r.Ranks), len(r.Rows), err)
	}
}

func otherCollectives(t *testing.T, dir string) {
	// 2 ranks: all_gather etc. align count/nranks down to 16 bytes, which 1K..1M by 4 keeps exact.
	sizes := []int64{1024, 4096, 16384, 65536, 262144, 1048576}
	for _, tc := range []struct {
		prog, redop string
		na          bool
	}{
		{"all_gather_perf", "none", false},
		{"reduce_scatter_perf", "sum", false},
		{"alltoall_perf", "none", true},
		{"sendrecv_perf", "sum", true},
	} {
		out, err := mpirun(t, 2, filepath.Join(dir, tc.prog), "-b", "1K", "-e", "1M", "-f", "4", "-n", "2", "-w", "1", "-c", "1")
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.prog, err, out)
		}
		checkOutput(t, out, tc.prog, tc.redop, 2, sizes, tc.na)
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

func tooManyGPUs(t *testing.T, dir string) {
	out, err := mpirun(t, 1, filepath.Join(dir, "all_reduce_perf"), "-g", "2", "-b", "1K", "-e", "1K")
	if err == nil {
		t.Fatalf("-g 2 succeeded:\n%s", out)
	}
	if !strings.Contains(err.Error(), "Invalid number of GPUs: 2 requested but only 1 were found.") {
		t.Errorf("want nccl-tests' message, got %v", err)
	}
}

// TestStandin builds the five binaries once into t.TempDir() and runs them with mpirun on this machine (no lab).
func TestStandin(t *testing.T) {
	needMPI(t)
	dir := build(t)
	t.Run("all_reduce format", func(t *testing.T) { allReduceFormat(t, dir) })
	t.Run("other collectives", func(t *testing.T) { otherCollectives(t, dir) })
	t.Run("all types and ops validate", func(t *testing.T) { allTypesAndOpsValidate(t, dir) })
	t.Run("too many GPUs", func(t *testing.T) { tooManyGPUs(t, dir) })
}
