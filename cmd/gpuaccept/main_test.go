package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
	"gpuaccept/reports"
)

// The binary under test: the demo's stand-ins call it back, so tests run
// the real executable, not the test binary.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpuaccept-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "gpuaccept")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString(err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

// unwrapped is an error's text as one line a problem: gpuaccept fits what
// it prints to the terminal, and a long temporary path wraps the line.
func unwrapped(s string) string { return strings.ReplaceAll(s, "\n    ", " ") }

type result struct {
	code           int
	stdout, stderr string
}

func gpuaccept(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

func TestDemoWritesAVerifiableBundle(t *testing.T) {
	work := t.TempDir()
	res := gpuaccept(t, work, "demo", "--runs-dir", "runs")
	if res.code != 1 {
		t.Fatalf("demo exit %d, want 1 (gpu-04 fails its diagnostic)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{"SIMULATED", "NOT ACCEPTED", "DIAG-001", "gpu-04"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	for _, want := range []string{"== connect", "== preflight", "== diag", "== teardown", "gpu-04: quarantined"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, res.stderr)
		}
	}
	runs, _ := os.ReadDir(filepath.Join(work, "runs"))
	if len(runs) != 1 {
		t.Fatalf("%d run directories", len(runs))
	}
	dir := filepath.Join(work, "runs", runs[0].Name())
	if v := gpuaccept(t, work, "verify", dir); v.code != 0 || !strings.Contains(v.stdout, "intact") {
		t.Fatalf("verify: %d %s %s", v.code, v.stdout, v.stderr)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "SIMULATED") {
		t.Fatalf("report.md not marked SIMULATED (%v)", err)
	}
	// The fabric: gpu-03's links run at half rate in the demo's model, so
	// the cluster-wide all-reduce misses the quote and the pairwise
	// bisection names gpu-03; the intra-node runs pass.
	var run struct {
		Verdicts []struct{ ID, Node, Status, Measured string }
	}
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil || json.Unmarshal(data, &run) != nil {
		t.Fatalf("run.json: %v", err)
	}
	got := map[string]string{}
	for _, v := range run.Verdicts {
		got[v.ID+" "+v.Node] = v.Status + " " + v.Measured
	}
	// The image: pushed to the three nodes left, loaded by their simulated
	// podman with the pinned ID, started with the GPUs.
	for key, want := range map[string]string{"NCCL-002 ": "FAIL ", "NCCL-004 gpu-03": "FAIL slow: node gpu-03", "NCCL-003 gpu-01": "PASS ", "NCCL-001 ": "PASS ",
		"IMG-003 ": "PASS ", "IMG-001 gpu-02": "PASS image ID sha256:", "IMG-002 gpu-03": "PASS ", "CKPT-001 gpu-01": "PASS", "STAGE-001 gpu-02": "PASS "} {
		if !strings.HasPrefix(got[key], want) {
			t.Errorf("%s = %q, want %q...", key, got[key], want)
		}
	}
	// The cost ledger: every node billed whole minutes at 2.49 USD per
	// GPU-hour (8 GPUs), quarantined gpu-04 and slow gpu-03 not accepted.
	var costed struct{ Ledger *record.Ledger }
	if err := json.Unmarshal(data, &costed); err != nil || costed.Ledger == nil {
		t.Fatalf("run.json has no ledger (%v)", err)
	}
	l := costed.Ledger
	if l.Granularity != "1m" || l.PricePerGPUHour != 2.49 || l.Currency != "USD" || len(l.Nodes) != 4 || l.AcceptedUnits != 2 || l.CostPerUnit == nil {
		t.Errorf("ledger %+v", l)
	}
	for _, n := range l.Nodes {
		wantAccepted := n.Name == "gpu-01" || n.Name == "gpu-02"
		if n.BilledSecs <= 0 || math.Mod(n.BilledSecs, 60) != 0 || n.BilledSecs < n.Secs || n.GPUs != 8 || n.Accepted != wantAccepted {
			t.Errorf("ledger node %+v", n)
		}
	}
	if !strings.Contains(res.stdout, "4 nodes: 2 accepted, ") || !strings.Contains(res.stdout, " USD per accepted node") || !strings.Contains(string(md), "## Cost") {
		t.Errorf("no cost line in the summary or no Cost section in report.md:\n%s", res.stdout)
	}
	// A raw log is gzip in the bundle, and parse reads it as it is.
	if p := gpuaccept(t, work, "parse", "dcgmi", filepath.Join(dir, "raw", "gpu-04", "diag.log.gz")); !strings.Contains(p.stdout, `"tests"`) {
		t.Errorf("parse of a bundle's raw log: exit %d\n%s%s", p.code, p.stdout, p.stderr)
	}
	// Tampering with any evidence is caught and named.
	// (A raw log is gzip: the tamperer unpacks it, edits, packs it again.)
	log := filepath.Join(dir, "raw", "gpu-04", "diag.log.gz")
	r, err := reports.OpenLog(log)
	if err != nil {
		t.Fatal(err)
	}
	data, err = io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Contains(data, []byte("Fail")) {
		t.Fatalf("the diag log as read: %v\n%s", err, data)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(bytes.Replace(data, []byte("Fail"), []byte("Pass"), 1))
	zw.Close()
	if err := os.WriteFile(log, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	v := gpuaccept(t, work, "verify", dir)
	if v.code != 1 || !strings.Contains(v.stdout, "changed: raw/gpu-04/diag.log.gz") {
		t.Fatalf("tampered bundle: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

func TestDemoJSONOutput(t *testing.T) {
	res := gpuaccept(t, t.TempDir(), "demo", "--runs-dir", "runs", "-o", "json")
	if res.code != 1 || !strings.HasPrefix(strings.TrimSpace(res.stdout), "{") || !strings.Contains(res.stdout, `"simulated": true`) {
		t.Fatalf("exit %d, stdout:\n%.300s", res.code, res.stdout)
	}
}

func TestCheckPrintsThePlan(t *testing.T) {
	res := gpuaccept(t, "../..", "check", "inventories/example-8xh100-infiniband.yaml")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"phases:", "connect", "preflight", "diag", "teardown", "quote:"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("provider: x\nnodes:\n  - name: a\n    adress: 10.0.0.1\n"), 0o644)
	for _, args := range [][]string{
		{"check", bad},
		{"run", bad},
		{"run"},
		{"parse", "dcgmi", bad},
		{"parse", "fio", bad},
		{"demo", "-o", "xml"},
		{"nosuchcommand"},
		{"run", "--resume", dir},
		{"exec", bad, "hostname"},
	} {
		if res := gpuaccept(t, dir, args...); res.code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, res.code, res.stderr)
		}
	}
	res := gpuaccept(t, dir, "check", bad)
	if !strings.Contains(res.stderr, bad+":4") || !strings.Contains(res.stderr, "adress") {
		t.Errorf("error does not name file, line and key:\n%s", res.stderr)
	}
}

func TestParseDcgmi(t *testing.T) {
	sample := "../../scripts/standins/samples/deepops-diag-r1-dcgm1x-blacklist-fail-empty-sections.txt"
	if _, err := os.Stat(sample); err != nil {
		t.Skip("sample not found")
	}
	res := gpuaccept(t, ".", "parse", "dcgmi", sample)
	if res.code != 0 || !strings.Contains(res.stdout, `"ok": false`) || !strings.Contains(res.stdout, `"tests"`) {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

func TestCompressNames(t *testing.T) {
	for in, want := range map[string]string{
		"gpu-01,gpu-02,gpu-03,gpu-07": "gpu-[01-03,07]",
		"h1,h2,h3":                    "h[1-3]",
		"h1":                          "h1",
		"a,b":                         "a,b",
		"n9,n10,n11":                  "n[9-11]",
		"x1,y1,x2":                    "x[1-2],y1",
	} {
		if got := hostlist.Compress(strings.Split(in, ",")); got != want {
			t.Errorf("hostlist.Compress(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestNoReachableNodeExitsThree(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inv.yaml")
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "id"), nil, 0o600)
	os.WriteFile(inv, []byte(`provider: nowhere
ssh:
  user: root
  identity_files: [id]
  known_hosts: [known_hosts]
  config: none
  connect_timeout: 2s
nodes:
  - {name: n1, address: 127.0.0.1, port: 1}
`), 0o644)
	res := gpuaccept(t, dir, "run", inv, "--runs-dir", "runs")
	if res.code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "CONN-001") || !strings.Contains(res.stderr, "n1: connect failed") {
		t.Errorf("the unreachable node is not named:\n%s\n%s", res.stdout, res.stderr)
	}
}

func TestParseNCCLTests(t *testing.T) {
	dir := "../../../shared/samples"
	res := gpuaccept(t, ".", "parse", "nccl-tests", filepath.Join(dir, "nccl-tests/a3mega-all-reduce-2node-16xH100.txt"))
	if res.code != 0 || !strings.Contains(res.stdout, `"ok": true`) || !strings.Contains(res.stdout, `"collective": "all_reduce"`) ||
		!strings.Contains(res.stdout, `"avg_busbw": 70.742`) {
		t.Fatalf("exit %d\n%.400s\n%s", res.code, res.stdout, res.stderr)
	}
	// A log cut short is still parsed, marked not ok, and says why.
	res = gpuaccept(t, ".", "parse", "nccl-tests", filepath.Join(dir, "nccl-tests/playground-sendrecv-8xA100-inplace-NA-excerpt.txt"))
	if res.code != 0 || !strings.Contains(res.stdout, `"ok": false`) || res.stderr == "" {
		t.Fatalf("truncated log: exit %d\n%.300s\n%s", res.code, res.stdout, res.stderr)
	}
	res = gpuaccept(t, ".", "parse", "nccl-tests", filepath.Join(dir, "dcgmi/discovery-l-8x-h800.txt"))
	if res.code != 2 || !strings.Contains(res.stderr, "not nccl-tests output") {
		t.Fatalf("not nccl-tests: exit %d %s", res.code, res.stderr)
	}
}

func TestParseNCCLTestsAgainstAQuote(t *testing.T) {
	log := "../../../shared/samples/nccl-tests/a3mega-all-reduce-2node-16xH100.txt"
	res := gpuaccept(t, ".", "parse", "nccl-tests", log, "--quote", "../../inventories/example-8xh100-infiniband.yaml")
	if res.code != 0 || !strings.Contains(res.stdout, `"judgement"`) || !strings.Contains(res.stdout, `"NCCL-002"`) {
		t.Fatalf("exit %d\n%.500s\n%s", res.code, res.stdout, res.stderr)
	}
	// The same log against a quote it does not meet.
	data, err := os.ReadFile("../../inventories/example-8xh100-infiniband.yaml")
	if err != nil {
		t.Fatal(err)
	}
	high := filepath.Join(t.TempDir(), "high.yaml")
	os.WriteFile(high, []byte(strings.Replace(string(data), "inter_busbw_gbs: 370", "inter_busbw_gbs: 700", 1)), 0o644)
	res = gpuaccept(t, ".", "parse", "nccl-tests", log, "--quote", high)
	if res.code != 1 || !strings.Contains(res.stdout, `"status": "FAIL"`) {
		t.Fatalf("a quote the log does not meet: exit %d\n%s", res.code, res.stderr)
	}
}

func TestParseFio(t *testing.T) {
	dir := "../../../shared/samples"
	res := gpuaccept(t, ".", "parse", "fio", filepath.Join(dir, "fio/sb-fio-3.16-randrw-nvme-libaio-group_reporting.json.txt"))
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d\n%.400s\n%s", res.code, res.stdout, res.stderr)
	}
	var got struct {
		Version string `json:"fio_version"`
		OK      bool   `json:"ok"`
		Jobs    []struct {
			Name string `json:"name"`
			Read struct {
				BW    float64  `json:"bw_bytes"`
				P99US *float64 `json:"p99_us"`
			} `json:"read"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%.400s", err, res.stdout)
	}
	if got.Version != "fio-3.16" || !got.OK || len(got.Jobs) != 1 || got.Jobs[0].Name != "rand_read_write" ||
		got.Jobs[0].Read.BW != 348743777 || got.Jobs[0].Read.P99US == nil || *got.Jobs[0].Read.P99US != 2244.608 {
		t.Errorf("unexpected result %+v\n%.600s", got, res.stdout)
	}
	if !strings.Contains(res.stdout, "\n  \"jobs\": [") {
		t.Errorf("output is not indented:\n%.300s", res.stdout)
	}

	// A job that failed is parsed, marked not ok, and stderr says which.
	failed := filepath.Join(t.TempDir(), "failed.json")
	os.WriteFile(failed, []byte(`fio: io_u error on file /dev/nvme0n1: Input/output error: read offset=0, buflen=4096
{"fio version": "fio-3.36", "jobs": [{"jobname": "r", "error": 5, "read": {"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0, "runtime": 0, "total_ios": 0}}]}
`), 0o644)
	res = gpuaccept(t, ".", "parse", "fio", failed)
	if res.code != 0 || !strings.Contains(res.stdout, `"ok": false`) || !strings.Contains(res.stderr, `job "r" error 5`) {
		t.Fatalf("failed job: exit %d\n%.300s\n%s", res.code, res.stdout, res.stderr)
	}

	// Another tool's output (and fio's own text report) is not fio JSON.
	res = gpuaccept(t, ".", "parse", "fio", filepath.Join(dir, "dcgmi/discovery-l-8x-h800.txt"))
	if res.code != 2 || !strings.Contains(res.stderr, "not fio output") {
		t.Fatalf("not fio: exit %d %s", res.code, res.stderr)
	}
}

// The plan of a Slurm inventory says how its nodes are reached and how
// their commands become job steps: shared by default, every node at once;
// a step each with slurm.steps: each, ssh.concurrency at a time.
func TestCheckSaysHowSrunRunsTheCommands(t *testing.T) {
	res := gpuaccept(t, "../..", "check", "inventories/slurm-srun.yaml")
	// The allocation the window will ask for, as salloc will be asked,
	// its time limit included (the window's bound, not salloc's default).
	if res.code != 0 || !strings.Contains(res.stdout, "(no SSH to the nodes), all at once\n") ||
		!strings.Contains(res.stdout, "the commands the nodes start together share one job step (slurm.steps: shared)") ||
		!regexp.MustCompile(`\n  salloc --no-shell .*--partition=gpu[^\n]*\n?.*--nodes=4 --exclusive --time=[0-9]+\n`).MatchString(res.stdout) {
		t.Fatalf("exit %d, plan:\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	b, err := os.ReadFile("../../inventories/slurm-srun.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	each := filepath.Join(dir, "each.yaml")
	text := strings.Replace(string(b), "\nslurm:\n", "\nslurm:\n  steps: each\n", 1)
	if text == string(b) {
		t.Fatal("inventories/slurm-srun.yaml has no slurm: section at the start of a line")
	}
	if err := os.WriteFile(each, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	res = gpuaccept(t, dir, "check", each)
	if res.code != 0 || !strings.Contains(res.stdout, "(no SSH to the nodes), 32 at a time\n") ||
		!strings.Contains(res.stdout, "a job step per command (slurm.steps: each)") {
		t.Fatalf("exit %d, plan with steps: each:\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}

// check of an inventory that names its nodes and gives a Slurm login node
// says the window reads Slurm's view of them, and where.
func TestCheckSaysSlurmsViewOfNamedNodes(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "named.yaml")
	body := "provider: p\nregion: r\nssh: {user: root, config: none}\nnodes:\n  - {name: gpu-01, address: 192.0.2.1, fabric_address: h1}\n" +
		"slurm:\n  login: {address: login.example}\nquote: {gpus_per_node: 8}\n"
	if err := os.WriteFile(inv, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res := gpuaccept(t, dir, "check", inv)
	if res.code != 0 || !strings.Contains(res.stdout, "\nslurm: each node's state and GRES as Slurm lists them (SLURM-002, SLURM-003),\n"+
		"  read on the login node login.example at the window's start and end\n") {
		t.Fatalf("exit %d, plan:\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}
