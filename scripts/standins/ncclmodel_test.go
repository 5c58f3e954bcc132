package standins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gpuaccept/orchestrator/parse"
)

// demoFabric is the demo's model: gpu-03's inter-node links at half rate.
const demoFabric = "gpu-01=370/450,gpu-02=370/450,gpu-03=185/450,gpu-04=370/450"

// fabricEnv is a demo node's environment (PATH stays so that mpirun can tell a missing executable).
func fabricEnv(node string, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), FabricEnv + "=" + demoFabric, FabricNodeEnv + "=" + node}, extra...)
}

type fabricRun struct {
	stdout, stderr string
	code           int
}

func fabric(env []string, tool string, args ...string) fabricRun {
	var o, e bytes.Buffer
	code := FabricMain(tool, args, env, &o, &e)
	return fabricRun{o.String(), e.String(), code}
}

// mpirunLine is the contract's cluster-wide command line, split as bash would.
func mpirunLine(np int, hosts, binary string, sweep ...string) []string {
	args := []string{"--allow-run-as-root", "-np", strconv.Itoa(np), "-H", hosts,
		"-x", "GPUACCEPT_RUN", "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,TUNING",
		"--mca", "btl_tcp_if_include", "eth0", "--tag-output", binary}
	return append(args, sweep...)
}

var sweep = []string{"-b", "1M", "-e", "1G", "-f", "4", "-n", "20", "-w", "5", "-c", "1", "-g", "1"}

// wantBusBW is the model's busbw for a run at size, from first principles: the link rate times the efficiency
// latency/(latency + wire time), as the doc promises.
func wantBusBW(t *testing.T, program string, gbs, latency float64, ranks int, size int64) float64 {
	t.Helper()
	c, ok := collectiveOf(program)
	if !ok {
		t.Fatalf("%s: no collective", program)
	}
	n := int64(ranks)
	s := c.counts(size/4, 4, n)
	wire := c.algBytes(s.param, 4, n) * c.busFactor(n)
	if wire == 0 {
		return 0
	}
	wireTime := wire / (gbs * 1e9)
	return gbs * wireTime / (latency + wireTime)
}

func TestParseFabric(t *testing.T) {
	hosts, err := ParseFabric(" gpu-01=370/450, gpu-02=185.5/900/4 , gpu-03=370/450/8/80/5.5")
	want := []FabricHost{{Name: "gpu-01", InterGBs: 370, IntraGBs: 450, GPUs: 8}, {Name: "gpu-02", InterGBs: 185.5, IntraGBs: 900, GPUs: 4},
		{Name: "gpu-03", InterGBs: 370, IntraGBs: 450, GPUs: 8, InterUs: 80, IntraUs: 5.5}}
	if err != nil || !slices.Equal(hosts, want) {
		t.Fatalf("ParseFabric: %v %v", hosts, err)
	}
	if s := FormatFabric(want); s != "gpu-01=370/450,gpu-02=185.5/900/4,gpu-03=370/450/8/80/5.5" {
		t.Errorf("FormatFabric: %q", s)
	}
	if back, err := ParseFabric(FormatFabric(want)); err != nil || !slices.Equal(back, want) {
		t.Errorf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{"", ",", "gpu-01", "gpu-01=370", "gpu-01=370/0", "gpu-01=-1/450", "gpu-01=x/450",
		"gpu-01=370/450/0", "gpu-01=370/450/8/1", "gpu-01=370/450/8/0/5", "gpu-01=370/450/8/30/x", "gpu-01=370/450/8/30/5/1", "=370/450", "gpu-01:8=370/450", "a=1/1,a=2/2", "a=NaN/1", "a=Inf/1"} {
		if _, err := ParseFabric(bad); err == nil {
			t.Errorf("ParseFabric(%q): no error", bad)
		}
	}
}

// The fixed lines of the output are those of genuine nccl-tests 2.18.2, and a row printed by the model's code
// from a genuine row's numbers is that row, byte for byte.
func TestFabricLayoutMatchesGenuine(t *testing.T) {
	b, err := os.ReadFile("../../../shared/samples/nccl-tests/cscs-all-reduce-2.18.2-2node-gh200-unalign.txt")
	if err != nil {
		t.Fatalf("want the shared samples next to the module (/work/shared/samples): %v", err)
	}
	genuine := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	r := fabric(fabricEnv("gpu-01"), MPIRun, "--allow-run-as-root", "-np", "2", "-H", "gpu-01:1,gpu-02:1",
		"all_reduce_perf", "-b", "1048576", "-e", "134217728", "-f", "2", "-c", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	model := strings.Split(r.stdout, "\n")
	// Same number of lines (the model adds nccl-tests' closing blank line, which the sample's source trimmed).
	if len(model) != len(genuine)+2 || model[len(model)-2] != "" || model[len(model)-1] != "" {
		t.Fatalf("%d lines, genuine %d:\n%s", len(model), len(genuine), r.stdout)
	}
	rankRe := regexp.MustCompile(`^#  Rank  ([01]) Group  0 Pid +\d+ on +(\S+) device  0 \[0000:00:00\] gpuaccept-model-standin$`)
	for i, g := range genuine {
		m := model[i]
		switch {
		case i == 0:
			if m != "# nccl-tests version 2.18.2 nccl-headers=0 nccl-library=0" {
				t.Errorf("version line %q", m)
			}
		case strings.HasPrefix(g, "#  Rank"):
			// Same columns as the genuine line: host right-aligned in 10, pid in 6.
			if !rankRe.MatchString(m) || len(m) != len("#  Rank  0 Group  0 Pid  15784 on     gpu-01 device  0 [0000:00:00] gpuaccept-model-standin") {
				t.Errorf("rank line %q (genuine %q)", m, g)
			}
		case strings.HasPrefix(g, "# Avg bus bandwidth"):
			if !regexp.MustCompile(`^# Avg bus bandwidth    : \d+(\.\d+)? $`).MatchString(m) {
				t.Errorf("avg line %q", m)
			}
		case strings.HasPrefix(g, "#"):
			if m != g {
				t.Errorf("line %d:\n got %q\nwant %q", i+1, m, g)
			}
		default: // a row: same sizes and columns; the model's numbers are its own
			gf, mf := strings.Fields(g), strings.Fields(m)
			if len(m) != len(g) || !slices.Equal(gf[:5], mf[:5]) || mf[8] != "0" || mf[12] != "0" {
				t.Errorf("row %q, genuine %q", m, g)
			}
			var buf bytes.Buffer
			fmt.Fprintf(&buf, "%12d  %12d  %8s  %6s  %6s", atoi64(t, gf[0]), atoi64(t, gf[1]), gf[2], gf[3], fmt.Sprintf("%6d", -1))
			for _, half := range [][]string{gf[5:8], gf[9:12]} {
				writeRowHalf(&buf, atof(half[0]), atof(half[1]), atof(half[2]), true)
			}
			if buf.String() != g {
				t.Errorf("genuine numbers through the model's row code:\n got %q\nwant %q", buf.String(), g)
			}
		}
	}
}

func atoi64(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Every collective, across 2 and 4 hosts and inside one, parses with gpuaccept's own parser as a sound run of
// the planned ranks, and its busbw at the largest size is the model's.
func TestFabricCollectives(t *testing.T) {
	type setup struct {
		name    string
		node    string   // where the command runs
		mpirun  []string // "" for intra-node
		hosts   []string // host of each rank
		gbs     float64
		latency float64
	}
	rep := func(h string, n int) []string { return slices.Repeat([]string{h}, n) }
	setups := []setup{
		{"2 hosts", "gpu-01", []string{"16", "gpu-01:8,gpu-02:8"}, append(rep("gpu-01", 8), rep("gpu-02", 8)...), 370, interLatency},
		{"4 hosts, gpu-03 degraded", "gpu-01", []string{"32", "gpu-01:8,gpu-02:8,gpu-03:8,gpu-04:8"},
			slices.Concat(rep("gpu-01", 8), rep("gpu-02", 8), rep("gpu-03", 8), rep("gpu-04", 8)), 185, interLatency},
		{"3 healthy hosts", "gpu-02", []string{"24", "gpu-01:8,gpu-02:8,gpu-04:8"},
			slices.Concat(rep("gpu-01", 8), rep("gpu-02", 8), rep("gpu-04", 8)), 370, interLatency},
		{"pair with gpu-03", "gpu-03", []string{"2", "gpu-03:1,gpu-01:1"}, []string{"gpu-03", "gpu-01"}, 185, interLatency},
		{"intra gpu-03", "gpu-03", nil, rep("gpu-03", 8), 450, intraLatency},
		{"intra gpu-01, 2 GPUs", "gpu-01", nil, rep("gpu-01", 2), 450, intraLatency},
	}
	for _, prog := range perfTools {
		for _, s := range setups {
			t.Run(prog+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				var r fabricRun
				if s.mpirun != nil {
					np, _ := strconv.Atoi(s.mpirun[0])
					r = fabric(fabricEnv(s.node), MPIRun, mpirunLine(np, s.mpirun[1], "/opt/nccl-tests/build/"+prog, sweep...)...)
				} else {
					args := slices.Clone(sweep)
					args[len(args)-1] = strconv.Itoa(len(s.hosts)) // -g G
					r = fabric(fabricEnv(s.node), prog, args...)
				}
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				n, err := parse.NCCLTests(r.stdout)
				if err != nil || !n.OK {
					t.Fatalf("parse: ok=%v %v\n%s", n.OK, err, r.stdout)
				}
				coll, _ := collectiveOf(prog)
				if n.Collective != collNames[coll] || n.Version != "2.18.2" || n.NCCLVersion != "" || n.OutOfBounds != 0 {
					t.Errorf("collective %q version %q nccl %q oob %d", n.Collective, n.Version, n.NCCLVersion, n.OutOfBounds)
				}
				if len(n.Ranks) != len(s.hosts) {
					t.Fatalf("%d ranks, want %d", len(n.Ranks), len(s.hosts))
				}
				perHost := map[string]int{}
				for i, rk := range n.Ranks {
					if rk.Rank != i || rk.Host != s.hosts[i] || rk.Device != perHost[rk.Host] || rk.Name != ModelDeviceName {
						t.Errorf("rank %+v, want rank %d on %s device %d", rk, i, s.hosts[i], perHost[rk.Host])
					}
					perHost[rk.Host]++
				}
				sizes := []int64{1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}
				if len(n.Rows) != len(sizes) {
					t.Fatalf("%d rows", len(n.Rows))
				}
				for i, row := range n.Rows {
					// all_gather and friends align per-rank blocks to 16 bytes, so the printed size may be smaller.
					if row.Size > sizes[i] || row.Size < sizes[i]-int64(16*len(s.hosts)) || row.Type != "float" {
						t.Errorf("row %d: size %d type %s", i, row.Size, row.Type)
					}
					wantNA := coll == collAllToAll || coll == collSendRecv
					if row.OOP.Wrong == nil || *row.OOP.Wrong != 0 || (row.IP.Wrong == nil) != wantNA {
						t.Errorf("row %d: #wrong %v / %v", i, row.OOP.Wrong, row.IP.Wrong)
					}
				}
				last := n.Rows[len(n.Rows)-1]
				want := wantBusBW(t, prog, s.gbs, s.latency, len(s.hosts), 1<<30)
				model, err := FabricBusBW(mustParseFabric(t), prog, s.hosts, 1<<30)
				if err != nil || math.Abs(model-want) > 1e-9*want {
					t.Errorf("FabricBusBW %v (%v), want %v", model, err, want)
				}
				for _, got := range []float64{last.OOP.BusBW, last.IP.BusBW} {
					if math.Abs(got-want) > 0.011*want+0.01 {
						t.Errorf("busbw at 1 GiB %.2f, model %.2f (link %g GB/s)", got, want, s.gbs)
					}
				}
				if want < 0.97*s.gbs || want > s.gbs {
					t.Errorf("model busbw %.2f at 1 GiB is not near the link's %g", want, s.gbs)
				}
				// The small sizes are latency-bound.
				if first := n.Rows[0].OOP.BusBW; first > 0.9*last.OOP.BusBW {
					t.Errorf("busbw at 1 MiB %.2f, at 1 GiB %.2f: no latency", first, last.OOP.BusBW)
				}
			})
		}
	}
}

func mustParseFabric(t *testing.T) []FabricHost {
	f, err := ParseFabric(demoFabric)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A healthy set reaches ~370 GB/s at large sizes, any set with gpu-03 about half; gpu-03's NVLink is sound.
func TestFabricDegradedNode(t *testing.T) {
	f := mustParseFabric(t)
	for _, tc := range []struct {
		hosts []string
		want  float64
	}{
		{[]string{"gpu-01", "gpu-02"}, 370},
		{[]string{"gpu-02", "gpu-04"}, 370},
		{[]string{"gpu-01", "gpu-03"}, 185},
		{[]string{"gpu-03", "gpu-04"}, 185},
		{[]string{"gpu-01", "gpu-02", "gpu-03", "gpu-04"}, 185},
		{[]string{"gpu-03", "gpu-03"}, 450},
	} {
		for _, prog := range perfTools {
			got, err := FabricBusBW(f, prog, tc.hosts, 8<<30)
			if err != nil || got < 0.995*tc.want || got > tc.want {
				t.Errorf("%s over %v at 8 GiB: %.2f (%v), want ~%g", prog, tc.hosts, got, err, tc.want)
			}
		}
	}
	if _, err := FabricBusBW(f, "broadcast_perf", []string{"gpu-01"}, 1); err == nil {
		t.Error("broadcast_perf: no error")
	}
	if _, err := FabricBusBW(f, "all_reduce_perf", []string{"gpu-09"}, 1); err == nil {
		t.Error("unknown host: no error")
	}
}

func TestFabricJSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ar.json")
	args := mpirunLine(16, "gpu-02:8,gpu-03:8", "all_reduce_perf", append(slices.Clone(sweep), "-J", file)...)
	text := fabric(fabricEnv("gpu-02"), MPIRun, args...)
	if text.code != 0 || !strings.Contains(text.stdout, "[1,0]<stdout>:# Writing JSON output to "+file+"\n") {
		t.Fatalf("exit %d stderr %q\n%s", text.code, text.stderr, text.stdout)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("not JSON:\n%s", b)
	}
	for _, want := range []string{`{"version":1,"start_time":"`, `"nccl_version":0,"config":{"nthreads":1,"ngpus":1,"minimum_bytes":1048576,`,
		`"step_factor":4,`, `"blocking_collectives":"false"`, `"device_info":"gpuaccept-model-standin"`, `"root":"    -1"`,
		`"out_of_bounds":{"count":0,"okay":"true"}`, `"okay":"unchecked"}`, `"errors":[""],"end_time":"`, `"NCCL_DEBUG=INFO"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	fromJSON, err := parse.NCCLTests(string(b))
	if err != nil || !fromJSON.OK {
		t.Fatalf("parse JSON: %v", err)
	}
	fromText, err := parse.NCCLTests(text.stdout)
	if err != nil {
		t.Fatal(err)
	}
	if fromJSON.Collective != "all_reduce" || len(fromJSON.Ranks) != 16 || fromJSON.Ranks[8].Host != "gpu-03" || len(fromJSON.Rows) != len(fromText.Rows) {
		t.Fatalf("JSON: %q %d ranks %d rows", fromJSON.Collective, len(fromJSON.Ranks), len(fromJSON.Rows))
	}
	for i, r := range fromJSON.Rows {
		tr := fromText.Rows[i]
		if r.Size != tr.Size || math.Abs(r.OOP.BusBW-tr.OOP.BusBW) > 0.006 || math.Abs(r.IP.TimeUS-tr.IP.TimeUS) > 0.06*max(1, tr.IP.TimeUS/1e4) {
			t.Errorf("row %d: JSON %+v, text %+v", i, r, tr)
		}
	}
	if math.Abs(fromJSON.AvgBusBW-fromText.AvgBusBW) > 1e-3*fromText.AvgBusBW {
		t.Errorf("avg busbw JSON %v text %v", fromJSON.AvgBusBW, fromText.AvgBusBW)
	}
	// As nccl-tests: an existing file is never overwritten (FILE.0, FILE.1, ...); only .json is written.
	again := fabric(fabricEnv("gpu-02"), "sendrecv_perf", "-b", "1K", "-e", "1K", "-g", "2", "-J", file)
	if again.code != 0 || !strings.HasPrefix(again.stdout, "# Writing JSON output to "+file+".0\n") {
		t.Errorf("second run: %q", again.stdout)
	}
	if b, err := os.ReadFile(file + ".0"); err != nil || !json.Valid(b) {
		t.Errorf("%s.0: %v", file, err)
	}
	txt := fabric(fabricEnv("gpu-02"), "sendrecv_perf", "-b", "1K", "-e", "1K", "-J", filepath.Join(dir, "out.txt"))
	if strings.Contains(txt.stdout, "JSON") {
		t.Errorf("-J out.txt: %q", txt.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err == nil {
		t.Error("-J out.txt wrote a file")
	}
	bad := fabric(fabricEnv("gpu-02"), "sendrecv_perf", "-b", "1K", "-e", "1K", "-J", filepath.Join(dir, "no", "x.json"))
	if !strings.HasPrefix(bad.stdout, "# skipping json output; "+filepath.Join(dir, "no", "x.json")+" not accessible\n") || bad.code != 0 {
		t.Errorf("unwritable -J: %q", bad.stdout)
	}
	// A host with too few GPUs: the JSON is closed as nccl-tests leaves it, and the text parser sees the failure.
	short := filepath.Join(dir, "short.json")
	fail := fabric(fabricEnv("gpu-01"), "all_reduce_perf", "-g", "9", "-J", short)
	if fail.code != 1 || fail.stderr != "gpu-01: Invalid number of GPUs: 9 requested but only 8 were found.\nPlease check the number of processes and GPUs per process.\n" {
		t.Errorf("-g 9: exit %d stderr %q", fail.code, fail.stderr)
	}
	if b, err := os.ReadFile(short); err != nil || !json.Valid(b) {
		t.Errorf("aborted JSON: %v\n%s", err, b)
	}
	if _, err := parse.NCCLTests(fail.stdout + fail.stderr); err == nil {
		t.Error("the failed run parses as a success")
	}
}

// Same seed, same numbers; another seed, other numbers; with a runs file, each repeat of a run differs and a
// fresh file replays the same sequence.
func TestFabricDeterminism(t *testing.T) {
	args := mpirunLine(32, "gpu-01:8,gpu-02:8,gpu-03:8,gpu-04:8", "all_gather_perf", sweep...)
	run := func(extra ...string) string {
		r := fabric(fabricEnv("gpu-01", extra...), MPIRun, args...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		return r.stdout
	}
	base := run()
	if run() != base || run(FabricSeedEnv+"=1") != base {
		t.Error("same seed (the default is 1), different output")
	}
	seed7 := run(FabricSeedEnv + "=7")
	if seed7 == base || run(FabricSeedEnv+"=7") != seed7 {
		t.Error("seed 7: not different from seed 1, or not reproducible")
	}
	busbw := func(out string) []float64 {
		n, err := parse.NCCLTests(out)
		if err != nil {
			t.Fatal(err)
		}
		var bw []float64
		for _, r := range n.Rows {
			bw = append(bw, r.OOP.BusBW, r.IP.BusBW)
		}
		return bw
	}
	a, b := busbw(base), busbw(seed7)
	differ := 0
	for i := range a {
		if a[i] != b[i] {
			differ++
		}
		if math.Abs(a[i]-b[i]) > 0.021*a[i]+0.011 {
			t.Errorf("value %d: %v vs %v: more than the jitter", i, a[i], b[i])
		}
	}
	if differ < len(a)/2 {
		t.Errorf("only %d of %d values differ between seeds", differ, len(a))
	}

	sequence := func(file string) []string {
		var outs []string
		for range 3 {
			outs = append(outs, run(FabricRunsEnv+"="+file))
		}
		return outs
	}
	dir := t.TempDir()
	first := sequence(filepath.Join(dir, "runs-a"))
	if first[0] != base || first[1] == first[0] || first[2] == first[1] || first[2] == first[0] {
		t.Error("repeats with a runs file: the first is not the plain run, or repeats do not differ")
	}
	if !slices.Equal(sequence(filepath.Join(dir, "runs-b")), first) {
		t.Error("a fresh runs file does not replay the same sequence")
	}
	// Another job on the same node does not shift this one's sequence.
	fresh := filepath.Join(dir, "runs-c")
	fabric(fabricEnv("gpu-01", FabricRunsEnv+"="+fresh), "all_reduce_perf", "-b", "1K", "-e", "1K", "-g", "8")
	if got := sequence(fresh); !slices.Equal(got, first) {
		t.Error("another job in the runs file changed this job's sequence")
	}
	log, _ := os.ReadFile(fresh)
	if want := "all_reduce gpu-01:8\n" + strings.Repeat("all_gather gpu-01:8,gpu-02:8,gpu-03:8,gpu-04:8\n", 3); string(log) != want {
		t.Errorf("runs file:\n%s\nwant:\n%s", log, want)
	}
	if r := fabric(fabricEnv("gpu-01", FabricSeedEnv+"=x"), "all_reduce_perf"); r.code != ExitNotSimulated || r.stdout != "" {
		t.Errorf("bad seed: %+v", r)
	}
	if r := fabric(fabricEnv("gpu-01", FabricRunsEnv+"="+filepath.Join(dir, "no", "runs")), "all_reduce_perf"); r.code != ExitNotSimulated || r.stdout != "" {
		t.Errorf("unwritable runs file: %+v", r)
	}
}

func TestFabricNCCLInfo(t *testing.T) {
	base := []string{"--allow-run-as-root", "-np", "2", "-H", "gpu-01:1,gpu-03:1", "-x", "NCCL_ALGO=Ring"}
	run := func(prog string, x ...string) (string, parse.NCCL) {
		args := slices.Concat(base, x, []string{prog, "-b", "1K", "-e", "1M", "-f", "32", "-g", "1"})
		r := fabric(fabricEnv("gpu-01"), MPIRun, args...)
		n, err := parse.NCCLTests(r.stdout)
		if r.code != 0 || err != nil || !n.OK {
			t.Fatalf("%v: exit %d %v\n%s", args, r.code, err, r.stdout)
		}
		return r.stdout, n
	}
	algoLine := regexp.MustCompile(`(?m)^gpu-01:(\d+):(\d+) \[0\] NCCL INFO NCCL_ALGO set by environment to Ring$`)
	tuning := regexp.MustCompile(`(?m)^gpu-01:\d+:\d+ \[0\] NCCL INFO (\d+) Bytes -> Algo 1 proto 2 time (\d+\.\d{6})$`)

	out, n := run("all_reduce_perf", "-x", "NCCL_DEBUG=INFO")
	if m := algoLine.FindStringSubmatch(out); m == nil || len(tuning.FindAllString(out, -1)) != 0 || len(n.Algorithms) != 1 {
		t.Errorf("NCCL_DEBUG=INFO (default subsystems INIT,ENV): want the NCCL_ALGO line only:\n%s", out)
	} else if !strings.Contains(out, "#  Rank  0 Group  0 Pid "+fmt.Sprintf("%6s", m[1])+" on     gpu-01 device  0") {
		t.Errorf("the INFO line's pid is not rank 0's:\n%s", out)
	}
	// NCCL prints NCCL_ALGO under the ENV subsystem: INIT,TUNING leaves it out, as real NCCL does.
	out, n = run("all_reduce_perf", "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,TUNING")
	if algoLine.MatchString(out) || len(tuning.FindAllString(out, -1)) != 3 || len(n.Algorithms) != 3 {
		t.Errorf("INIT,TUNING: want 3 tuner lines and no NCCL_ALGO line:\n%s", out)
	}
	out, _ = run("reduce_scatter_perf", "-x", "NCCL_DEBUG=info", "-x", "NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING")
	m := tuning.FindAllStringSubmatch(out, -1)
	if !algoLine.MatchString(out) || len(m) != 3 || m[0][1] != "1024" || m[2][1] != "1048576" {
		t.Errorf("INIT,ENV,TUNING:\n%s", out)
	}
	// The tuner's lines come during the warm-up, before the first row.
	if strings.Index(out, "Bytes -> Algo") > strings.Index(out, "\n        1024 ") {
		t.Errorf("tuner lines after the rows:\n%s", out)
	}
	for _, p2p := range []string{"alltoall_perf", "sendrecv_perf"} {
		if out, _ := run(p2p, "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=ALL"); !algoLine.MatchString(out) || tuning.MatchString(out) {
			t.Errorf("%s (point-to-point: no tuner lines):\n%s", p2p, out)
		}
	}
	if out, _ := run("all_reduce_perf", "-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=^ENV"); algoLine.MatchString(out) || !tuning.MatchString(out) {
		t.Errorf("^ENV:\n%s", out)
	}
	if out, _ := run("all_reduce_perf", "-x", "NCCL_DEBUG=WARN", "-x", "NCCL_DEBUG_SUBSYS=ALL"); strings.Contains(out, "NCCL INFO") {
		t.Errorf("NCCL_DEBUG=WARN:\n%s", out)
	}
	// From the node's own environment too (no -x), when run directly.
	r := fabric(fabricEnv("gpu-04", "NCCL_ALGO=Tree", "NCCL_DEBUG=INFO"), "all_reduce_perf", "-b", "8", "-e", "8", "-g", "8")
	if !strings.Contains(r.stdout, "\ngpu-04:") || !strings.Contains(r.stdout, "NCCL INFO NCCL_ALGO set by environment to Tree\n") {
		t.Errorf("direct run:\n%s", r.stdout)
	}
}

func TestFabricMPIRunChecks(t *testing.T) {
	env := fabricEnv("gpu-01")
	// Open MPI's slot check: more ranks than -H slots.
	r := fabric(env, MPIRun, "--allow-run-as-root", "-np", "17", "-H", "gpu-01:8,gpu-02:8", "./all_reduce_perf", "-b", "8")
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, ompiRule+"There are not enough slots available in the system to satisfy the 17\nslots that were requested by the application:\n\n  ./all_reduce_perf\n\n") ||
		!strings.HasSuffix(r.stderr, "launch.\n"+ompiRule) {
		t.Errorf("slots: exit %d\n%s", r.code, r.stderr)
	}
	if r := fabric(env, MPIRun, "--allow-run-as-root", "--oversubscribe", "-np", "17", "-H", "gpu-01:8,gpu-02:8", "all_reduce_perf"); r.code != ExitNotSimulated {
		t.Errorf("oversubscribe: %+v", r)
	}
	// Fewer ranks than slots: mapped by slot, as Open MPI does — all on the first host here.
	r = fabric(env, MPIRun, "--allow-run-as-root", "-np", "4", "-H", "gpu-01:8,gpu-02:8", "all_reduce_perf", "-b", "8", "-e", "8")
	if n, err := parse.NCCLTests(r.stdout); err != nil || len(n.Ranks) != 4 || n.Ranks[3].Host != "gpu-01" {
		t.Errorf("-np 4: %v\n%s", err, r.stdout)
	}
	// No -np: every slot; a host given twice adds up; --map-by node round-robins.
	r = fabric(env, MPIRun, "--allow-run-as-root", "-H", "gpu-01:2,gpu-02", "-H", "gpu-02", "--map-by", "node", "--bind-to", "none", "all_reduce_perf", "-b", "8", "-e", "8")
	n, err := parse.NCCLTests(r.stdout)
	var got []string
	for _, rk := range n.Ranks {
		got = append(got, fmt.Sprintf("%s/%d", rk.Host, rk.Device))
	}
	if err != nil || !slices.Equal(got, []string{"gpu-01/0", "gpu-02/0", "gpu-01/1", "gpu-02/1"}) {
		t.Errorf("map-by node: %v %v", got, err)
	}
	// A host outside the model: mpirun cannot start its daemon there.
	r = fabric(env, MPIRun, "--allow-run-as-root", "-np", "2", "-H", "gpu-01:1,gpu-09:1", "all_reduce_perf")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, `"gpu-09" is not a host of the simulated fabric`) ||
		!strings.Contains(r.stderr, ompiRule+"ORTE was unable to reliably start one or more daemons.\n") {
		t.Errorf("unknown host: exit %d\n%s", r.code, r.stderr)
	}
	// Not an nccl-tests binary: not found, or found but not modelled.
	r = fabric(env, MPIRun, "--allow-run-as-root", "-np", "2", "-H", "gpu-01:1,gpu-02:1", "/nonexistent/broadcast_perf", "-b", "8")
	if r.code != 1 || !strings.Contains(r.stderr, "mpirun was unable to find the specified executable file") ||
		!strings.Contains(r.stderr, "Node:       gpu-01\nExecutable: /nonexistent/broadcast_perf\n") {
		t.Errorf("missing executable: exit %d\n%s", r.code, r.stderr)
	}
	if r := fabric(env, MPIRun, "--allow-run-as-root", "-np", "1", "-H", "gpu-01", "sh", "-c", "true"); r.code != ExitNotSimulated || !strings.Contains(r.stderr, "not simulated") {
		t.Errorf("sh: %+v", r)
	}
	if r := fabric(env, MPIRun, "--allow-run-as-root", "-np", "1", "-H", "gpu-01"); r.code != 1 || !strings.Contains(r.stderr, "No executable was specified") {
		t.Errorf("no executable: %+v", r)
	}
	for _, args := range [][]string{
		{"--allow-run-as-root", "--hostfile", "h", "all_reduce_perf"},
		{"--allow-run-as-root", "-np", "2", "all_reduce_perf"},
		{"--allow-run-as-root", "-np", "x", "-H", "gpu-01", "all_reduce_perf"},
		{"--allow-run-as-root", "-H", "gpu-01:0", "all_reduce_perf"},
		{"--allow-run-as-root", "-H", "gpu-01", "--map-by", "ppr:1:node", "all_reduce_perf"},
		{"--allow-run-as-root", "-H"},
	} {
		if r := fabric(env, MPIRun, args...); r.code != ExitNotSimulated || !strings.Contains(r.stderr, modelLabel) {
			t.Errorf("%v: %+v", args, r)
		}
	}
	// The binary failing: Open MPI's epilogue, and its exit status.
	r = fabric(env, MPIRun, "--allow-run-as-root", "-np", "2", "-H", "gpu-01:1,gpu-02:1", "all_reduce_perf", "-g", "9")
	if r.code != 1 || !strings.Contains(r.stderr, "gpu-01: Invalid number of GPUs: 9 requested but only 8 were found.\n") ||
		!regexp.MustCompile(`mpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n  Process name: \[\[\d+,1\],0\]\n  Exit code:    1\n`).MatchString(r.stderr) {
		t.Errorf("-g 9: exit %d\n%s", r.code, r.stderr)
	}
	// Two processes on a host with -g 4 use devices 0-3 and 4-7; -g 5 would need 10.
	r = fabric(env, MPIRun, "--allow-run-as-root", "-np", "2", "-H", "gpu-02:2", "all_reduce_perf", "-b", "8", "-e", "8", "-g", "4")
	if n, err := parse.NCCLTests(r.stdout); err != nil || len(n.Ranks) != 8 || n.Ranks[7].Device != 7 || n.Ranks[4].PID == n.Ranks[3].PID {
		t.Errorf("-np 2 -g 4: %v\n%s", err, r.stdout)
	}
	// Without the model in the environment.
	if r := fabric([]string{"PATH=/bin"}, MPIRun, "--allow-run-as-root", "-H", "gpu-01", "all_reduce_perf"); r.code != ExitNotSimulated || !strings.Contains(r.stderr, FabricEnv) {
		t.Errorf("no fabric: %+v", r)
	}
	if r := fabric([]string{FabricEnv + "=" + demoFabric}, "all_reduce_perf"); r.code != ExitNotSimulated || !strings.Contains(r.stderr, FabricNodeEnv) {
		t.Errorf("no node: %+v", r)
	}
	if r := fabric(fabricEnv("gpu-07"), "all_reduce_perf"); r.code != ExitNotSimulated || !strings.Contains(r.stderr, `"gpu-07" is not in`) {
		t.Errorf("node outside the model: %+v", r)
	}
	if r := fabric(env, "broadcast_perf"); r.code != ExitNotSimulated {
		t.Errorf("broadcast_perf: %+v", r)
	}
}

func TestFabricMPIRunAsRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 0 }
	args := []string{"-np", "2", "-H", "gpu-01:1,gpu-02:1", "all_reduce_perf", "-b", "8", "-e", "8"}
	r := fabric(fabricEnv("gpu-01"), MPIRun, args...)
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, ompiRule+"mpirun has detected an attempt to run as root.\n") {
		t.Errorf("root without the flag: %+v", r)
	}
	if r := fabric(fabricEnv("gpu-01", "OMPI_ALLOW_RUN_AS_ROOT=1"), MPIRun, args...); r.code != 1 {
		t.Errorf("one variable of two: %+v", r)
	}
	if r := fabric(fabricEnv("gpu-01", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"), MPIRun, args...); r.code != 0 {
		t.Errorf("both variables: %+v", r)
	}
	if r := fabric(fabricEnv("gpu-01"), MPIRun, append([]string{"--allow-run-as-root"}, args...)...); r.code != 0 {
		t.Errorf("--allow-run-as-root: %+v", r)
	}
	// The phase's own way of passing it.
	geteuid = func() int { return 1000 }
	if r := fabric(fabricEnv("gpu-01"), MPIRun, args...); r.code != 0 {
		t.Errorf("not root: %+v", r)
	}
}

func TestFabricTagOutput(t *testing.T) {
	r := fabric(fabricEnv("gpu-01"), MPIRun, mpirunLine(8, "gpu-03:4,gpu-04:4", "alltoall_perf", "-b", "8", "-e", "64", "-f", "2", "-c", "0")...)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "[1,0]<stdout>:") {
			t.Fatalf("untagged line %q", l)
		}
	}
	if lines[len(lines)-1] != "[1,0]<stdout>:" {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
	n, err := parse.NCCLTests(r.stdout)
	if err != nil || !n.OK || len(n.Ranks) != 8 || len(n.Rows) != 4 || n.Rows[0].OOP.Wrong != nil {
		t.Errorf("parse: %v %+v", err, n)
	}
	if n.Params["validation"] != "0" || n.Rows[0].Size != 0 || n.Rows[3].Size != 0 {
		// 8..64 bytes over 8 ranks: blocks aligned down to 16 bytes are empty, as in nccl-tests.
		t.Errorf("params %v rows %+v", n.Params, n.Rows)
	}
	r = fabric(fabricEnv("gpu-01"), MPIRun, "--allow-run-as-root", "--tag-output", "-H", "gpu-01", "all_reduce_perf", "-g", "9")
	if !strings.HasPrefix(r.stderr, "[1,0]<stderr>:gpu-01: Invalid number of GPUs") {
		t.Errorf("stderr not tagged: %q", r.stderr)
	}
}

func TestFabricPerfOptions(t *testing.T) {
	env := fabricEnv("gpu-02")
	rows := func(out string) (n int) {
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				n++
			}
		}
		return n
	}
	r := fabric(env, "all_reduce_perf", "-b", "1K", "-e", "64K", "-f", "8", "-d", "all", "-o", "all", "-g", "2")
	if n := rows(r.stdout); r.code != 0 || n != len(ncclTypes)*len(ncclOps)*3 {
		t.Errorf("-d all -o all: %d rows, exit %d", n, r.code)
	}
	if n, err := parse.NCCLTests(r.stdout); err != nil || !n.OK {
		t.Errorf("-d all -o all: %v", err)
	}
	r = fabric(env, "all_gather_perf", "--minbytes=1K", "--maxb", "4K", "--stepbytes", "1K", "-d", "half", "-o", "max", "-c", "0", "-C", "1", "-z", "1", "-N", "2")
	out := r.stdout
	for _, want := range []string{"step: 1024(bytes)", "validation: 0", "# Blocking Enabled:", "  cputime  ", "      half    none      -1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := rows(out); n != 8 || strings.Count(out, "N/A") != 16 {
		t.Errorf("-N 2 over 4 sizes, -c 0: %d rows\n%s", n, out)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"-h"}, 0, "USAGE: all_reduce_perf \n", ""},
		{[]string{"--help"}, 0, "USAGE: all_reduce_perf \n", ""},
		{[]string{"-q"}, 0, "invalid option '?'\nUSAGE:", "all_reduce_perf: invalid option -- 'q'\n"},
		{[]string{"--bogus"}, 0, "invalid option '?'\n", "all_reduce_perf: unrecognized option '--bogus'\n"},
		{[]string{"--m", "1"}, 0, "invalid option '?'\n", "all_reduce_perf: option '--m' is ambiguous\n"},
		{[]string{"-b"}, 0, "invalid option '?'\n", "all_reduce_perf: option requires an argument -- 'b'\n"},
		{[]string{"-b", "2M", "-e", "1M"}, 255, "", "invalid sizes for 'minbytes' and 'maxbytes': 2097152 > 1048576\n"},
		{[]string{"-b", "1X"}, 255, "", "invalid size specified for 'minbytes'\n"},
		{[]string{"-e", "-1"}, 255, "", "invalid size specified for 'maxbytes'\n"},
		{[]string{"-N", "0"}, ExitNotSimulated, "", modelLabel},
		{[]string{"-b", "0", "-e", "1G", "-i", "1"}, ExitNotSimulated, "", modelLabel},
		{[]string{"-b", "1K", "-e", "1K", "-N", "1000000"}, ExitNotSimulated, "", modelLabel},
		{[]string{"-d", "nope", "-b", "8", "-e", "8"}, 0, "invalid type nope, defaulting to float .. \n# nccl-tests", ""},
		{[]string{"-o", "nope", "-b", "8", "-e", "8"}, 0, "invalid op nope, defaulting to sum .. \n# nccl-tests", ""},
	} {
		r := fabric(env, "all_reduce_perf", tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stdout, tc.stdout) || !strings.HasPrefix(r.stderr, tc.stderr) || (tc.stderr == "" && r.stderr != "") {
			t.Errorf("%v: exit %d\nstdout %.200q\nstderr %q", tc.args, r.code, r.stdout, r.stderr)
		}
	}
	r = fabric(append(env, "NCCL_TESTS_MIN_BW=1000"), "all_reduce_perf", "-b", "1M", "-e", "1M", "-g", "8")
	if r.code != 5 || !regexp.MustCompile(`\n# Avg bus bandwidth    : [\d.]+ FAILED\n`).MatchString(r.stdout) {
		t.Errorf("NCCL_TESTS_MIN_BW=1000: exit %d\n%s", r.code, r.stdout)
	}
	if n, _ := parse.NCCLTests(r.stdout); n.OK {
		t.Error("a FAILED average parses as OK")
	}
	r = fabric(append(env, "NCCL_TESTS_MIN_BW=1"), "all_reduce_perf", "-b", "1M", "-e", "1M", "-g", "8")
	if r.code != 0 || !strings.Contains(r.stdout, " OK\n#\n# Collective") {
		t.Errorf("NCCL_TESTS_MIN_BW=1: exit %d\n%s", r.code, r.stdout)
	}
	r = fabric(env, "all_reduce_perf", "-b", "8", "-e", "8", "-S", "1")
	if !regexp.MustCompile(`\n +8 +2 +float +sum +-1 .* 0 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "#wrong           timestamp\n") || !strings.Contains(r.stdout, "  %Y-%m-%d %H:%M:%S\n") {
		t.Errorf("-S 1:\n%s", r.stdout)
	}
}

func TestFabricHelpers(t *testing.T) {
	for in, want := range map[string]int64{"8": 8, "1K": 1024, "1k": 1024, "2M": 2 << 20, "8G": 8 << 30, "0.5M": 512 << 10,
		" 4 K": 4096, "1e3": 1000, "x": -1, "": -1, "1T": -1, "-5": -1} {
		if got := parseSize(in); got != want {
			t.Errorf("parseSize(%q) = %d, want %d", in, got, want)
		}
	}
	for in, want := range map[string]int64{"8": 8, "0x10": 16, "010": 8, "-3": -3, "12abc": 12, "abc": 0, "": 0, " +7": 7,
		"99999999999999999999": math.MaxInt64} {
		if got := strtol(in); got != want {
			t.Errorf("strtol(%q) = %d, want %d", in, got, want)
		}
	}
	for _, tc := range []struct {
		v     float64
		width int
		want  string
	}{{339.61, 7, " 339.61"}, {11003.2, 7, "11003.2"}, {43787.46, 7, "43787.5"}, {1234567, 7, "1234567"}, {12345678, 7, "1.2e+07"},
		{3.09, 6, "  3.09"}, {370.9, 6, "370.90"}, {1234.5, 6, "1234.5"}, {0, 6, "  0.00"}, {1234567, 6, " 1e+06"}} {
		if got := floatStr(tc.v, tc.width); got != tc.want {
			t.Errorf("floatStr(%v, %d) = %q, want %q", tc.v, tc.width, got, tc.want)
		}
	}
	for v, want := range map[float64]string{14.9966123: "14.9966", 0: "0", 370: "370", 1234567: "1.23457e+06", 0.000012: "1.2e-05"} {
		if got := formatG(v); got != want {
			t.Errorf("formatG(%v) = %q, want %q", v, got, want)
		}
	}
	if l := layout([]string{"a", "a", "b", "a"}); l != "a:2,b:1,a:1" {
		t.Errorf("layout: %q", l)
	}
	for i := range 1000 {
		if j := jitter(uint64(i), "k", 1, 2); j < -jitterAmp || j >= jitterAmp {
			t.Fatalf("jitter %v", j)
		}
	}
}

// A whole sweep is fast: the model sleeps a thousandth of the time it
// models, at most 0.1 s. A benchmark, not a timed assertion (one failed CI
// on a loaded machine at 0.42 s): go test -bench FabricSweep.
func BenchmarkFabricSweep(b *testing.B) {
	for b.Loop() {
		r := fabric(fabricEnv("gpu-01"), MPIRun, mpirunLine(32, "gpu-01:8,gpu-02:8,gpu-03:8,gpu-04:8", "all_reduce_perf",
			"-b", "1M", "-e", "8G", "-f", "2", "-n", "20", "-w", "5", "-c", "1", "-g", "1")...)
		if r.code != 0 {
			b.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
}

// The wrappers InstallFabric writes run the model through PATH, as a node's shell runs the phase's commands.
func TestInstallFabric(t *testing.T) {
	bin := standinBinary(t)
	dir := filepath.Join(t.TempDir(), "bin")
	if err := Install(dir, "h100", []string{bin}); err != nil {
		t.Fatal(err)
	}
	if err := InstallFabric(dir, []string{bin}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, MPIRun))
	if want := "#!/bin/sh\n# gpuaccept stand-in for mpirun (simulated fabric model, demo only)\nexec '" + bin + "' 'mpirun' \"$@\"\n"; string(b) != want {
		t.Errorf("wrapper:\n%s\nwant:\n%s", b, want)
	}
	// Install of another profile keeps them (it only manages the GPU tools), and the GPU tools still work.
	if err := Install(dir, "h100-no-dcgm", []string{bin}); err != nil {
		t.Fatal(err)
	}
	for _, tool := range FabricTools() {
		if fi, err := os.Stat(filepath.Join(dir, tool)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v", tool, err)
		}
	}
	env := append(fabricEnv("gpu-03"), "PATH="+dir+":/usr/bin:/bin")
	pidRe := regexp.MustCompile(`Pid +\d+|gpu-0\d:\d+:\d+`)
	for _, line := range []string{
		`ROOT=; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root; mpirun $ROOT -np 16 -H gpu-03:8,gpu-04:8 -x GPUACCEPT_RUN -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,TUNING -x NCCL_ALGO=Ring all_reduce_perf -b 1048576 -e 8589934592 -f 2 -n 20 -w 5 -c 1 -g 1`,
		`mpirun --allow-run-as-root -np 2 -H gpu-03:1,gpu-01:1 --tag-output /opt/nccl-tests/build/sendrecv_perf -b 1M -e 64M -f 2 -n 20 -w 5 -c 1 -g 1`,
		`all_gather_perf -b 1M -e 1G -f 2 -n 20 -w 5 -c 1 -g 8`,
		`nvidia-smi -L | head -1`,
	} {
		cmd := exec.Command("bash", "-c", line)
		cmd.Env = env
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, e.String())
		}
		if strings.HasPrefix(line, "nvidia-smi") {
			if !strings.HasPrefix(o.String(), "GPU 0: NVIDIA H100 80GB HBM3") {
				t.Errorf("nvidia-smi -L: %q", o.String())
			}
			continue
		}
		// The same as the model answers in process, but for the pids.
		fields := strings.Fields(line[strings.LastIndex(line, "; ")+1:])
		fields = slices.DeleteFunc(fields, func(s string) bool { return s == "$ROOT" })
		if fields[0] == MPIRun && fields[1] != "--allow-run-as-root" {
			fields = slices.Insert(fields, 1, "--allow-run-as-root")
		}
		want := fabric(env, fields[0], fields[1:]...)
		if pidRe.ReplaceAllString(o.String(), "") != pidRe.ReplaceAllString(want.stdout, "") || e.String() != want.stderr {
			t.Errorf("%s through the wrappers differs from FabricMain:\n%s\nwant:\n%s", line, o.String(), want.stdout)
		}
		n, err := parse.NCCLTests(o.String())
		if err != nil || !n.OK || n.Ranks[0].Host != "gpu-03" {
			t.Fatalf("%s: %v", line, err)
		}
		// gpu-03's links are at half rate; its NVLink is not.
		var hosts []string
		for _, rk := range n.Ranks {
			hosts = append(hosts, rk.Host)
		}
		last := n.Rows[len(n.Rows)-1]
		model, err := FabricBusBW(mustParseFabric(t), fields[len(fields)-15], hosts, last.Size)
		if err != nil || math.Abs(last.OOP.BusBW-model) > 0.011*model {
			t.Errorf("%s: busbw %.2f at the largest size, model %.2f (%v)", line, last.OOP.BusBW, model, err)
		}
		if link := map[bool]float64{true: 450, false: 185}[len(slices.Compact(hosts)) == 1]; model < 0.9*link || model > link {
			t.Errorf("%s: model busbw %.2f, link %g", line, model, link)
		}
	}
	if err := InstallFabric(t.TempDir(), nil); err == nil {
		t.Error("InstallFabric with no argv0: no error")
	}
	// Through Command too (the standalone binary's entry point).
	var o, e bytes.Buffer
	if code := Command([]string{"--profile", "h100", "sendrecv_perf", "-h"}, &o, &e); code != 0 || !strings.HasPrefix(o.String(), "USAGE: sendrecv_perf") {
		t.Errorf("Command sendrecv_perf -h: %d %q %q", code, o.String(), e.String())
	}
}

// The model's getent resolves its hosts as glibc's does (ahosts: a line per socket type, the name on the
// first), goes on past a name it does not hold and exits 2 for it.
func TestGetent(t *testing.T) {
	var o, e bytes.Buffer
	code := FabricMain(Getent, []string{"ahosts", "gpu-01", "nowhere", "gpu-03"}, fabricEnv("gpu-01"), &o, &e)
	want := "127.0.0.1       STREAM gpu-01\n127.0.0.1       DGRAM  \n127.0.0.1       RAW    \n" +
		"127.0.0.1       STREAM gpu-03\n127.0.0.1       DGRAM  \n127.0.0.1       RAW    \n"
	if code != 2 || o.String() != want {
		t.Errorf("exit %d\n%q\nwant\n%q", code, o.String(), want)
	}
	o.Reset()
	if code := FabricMain(Getent, []string{"passwd", "root"}, fabricEnv("gpu-01"), &o, &e); code != ExitNotSimulated {
		t.Errorf("getent passwd: exit %d", code)
	}
}
