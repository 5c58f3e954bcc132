package phases

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote/fake"
)

// infServer is how a fake node's server and the generator's answers
// about it behave.
type infServer struct {
	// ttft is the p95 TTFT the generator reports, run by run (the last
	// repeats).
	ttft []float64
	// failed requests of the 200 each level sends.
	failed     int
	neverReady bool
	// gpus the node has, memUsed of each in use (MiB, of 81559); no
	// nvidia-smi when gpus is 0.
	gpus    int
	memUsed float64
}

// infHost answers the inference phase on h as a node with podman, the
// workload's image and (unless gpus is 0) nvidia-smi, whose generator
// reports s's figures. It records the commands the phase ran.
type infHost struct {
	mu    sync.Mutex
	runs  int
	ready []string
	start []string
	load  []string
}

func answerInference(t *testing.T, h *fake.Host, s infServer) *infHost {
	t.Helper()
	ih := &infHost{}
	tools := []string{"podman"}
	if s.gpus > 0 {
		tools = append(tools, "nvidia-smi")
	}
	answerTools(h, tools...)
	h.Reply(`^uname -m$`, fake.Reply{Stdout: "x86_64\n"})
	h.Reply(`^podman images -q --no-trunc && echo '-- added'`, fake.Reply{Stdout: "sha256:0aa0\n-- added\n"})
	h.Reply(`^echo 'podman sha256:[0-9a-f]+' >> '?/var/tmp/gpuaccept-[^ ]+/images'?$`, fake.Reply{})
	h.Reply(`^podman pull `, fake.Reply{Stdout: "Writing manifest to image destination\n"})
	h.Reply(`^podman image inspect `, fake.Reply{Stdout: `[{"Id": "sha256:` + other + `", "RepoDigests": ["registry.example/vllm@sha256:` + pin + `"]}]`})
	h.Reply(`^podman rm -f \S+( \S+)* 2>&1$`, fake.Reply{Stdout: "4f3c2b1a\n"})
	h.On(`^podman rm -f \S+ >/dev/null 2>&1; printf 'gpuaccept-started %s\\n' "\$\(date \+%s\.%N\)"; podman run -d `, func(c *fake.Call) fake.Reply {
		ih.mu.Lock()
		ih.start = append(ih.start, c.Command)
		ih.mu.Unlock()
		return fake.Reply{Stdout: "gpuaccept-started 1765000000.250000000\n4f3c2b1a\n"}
	})
	h.Reply(`^podman logs --tail 40 `, fake.Reply{Stdout: "INFO loading weights\nERROR CUDA out of memory \x1b[31mred\n"})
	mem := func() string {
		var b strings.Builder
		for range s.gpus {
			fmt.Fprintf(&b, "%g, 81559\n", s.memUsed)
		}
		return b.String()
	}
	h.On(`^nvidia-smi --query-gpu=memory.used,memory.total`, func(*fake.Call) fake.Reply { return fake.Reply{Stdout: mem()} })
	h.On(`^while :; do nvidia-smi `, func(*fake.Call) fake.Reply { return fake.Reply{Stdout: mem() + "--\n", Hang: true} })
	h.On(`"\$f" loadgen ready `, func(c *fake.Call) fake.Reply {
		if reply, ok := loadgenCheck(t, c); !ok {
			return reply
		}
		ih.mu.Lock()
		ih.ready = append(ih.ready, c.Command)
		ih.mu.Unlock()
		if s.neverReady {
			return fake.Reply{Stdout: `{"error": "GET /health: connection refused for 10m0s", "health_seconds": null}` + "\n", Exit: 1}
		}
		return fake.Reply{Stdout: `{"health_seconds": 12.5, "ready_seconds": 13.25}` + "\n"}
	})
	h.On(`"\$f" loadgen run `, func(c *fake.Call) fake.Reply {
		if reply, ok := loadgenCheck(t, c); !ok {
			return reply
		}
		ih.mu.Lock()
		ih.runs++
		run := ih.runs
		ih.load = append(ih.load, c.Command)
		ih.mu.Unlock()
		ttft := s.ttft[min(run, len(s.ttft))-1]
		var out struct {
			Levels []workload.Level `json:"levels"`
		}
		for _, c := range []int{1, 4} {
			d := func(p95 float64) workload.Dist {
				return workload.Dist{N: 200, Mean: p95 / 2, Min: p95 / 4, P50: p95 / 2, P90: p95 * 0.9, P95: p95, P99: p95 * 1.2, Max: p95 * 1.5}
			}
			l := workload.Level{Name: fmt.Sprintf("concurrency:%d", c), Concurrency: c, Seconds: 1, Requests: 200,
				Completed: 200 - s.failed, Failed: s.failed, RequestsPerSec: 50 * float64(c), OutputTokensPerSec: 3000 * float64(c),
				TTFT: d(ttft * float64(c) / 4), TPOT: d(20), ITL: d(22), E2EL: d(2000)}
			if s.failed > 0 {
				l.Errors = map[string]int{"http 500": s.failed}
			}
			out.Levels = append(out.Levels, l)
		}
		b, _ := json.Marshal(out)
		return fake.Reply{Stdout: string(b) + "\n"}
	})
	h.On(`^head -c \d+ -- `, func(c *fake.Call) fake.Reply {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, `{"level":"concurrency:4","start_s":0.01,"ttft_ms":210,"error":"token=hf_abcdefghijklmnopqrstuvwxyz0123"}`+"\n")
		zw.Close()
		return fake.Reply{Stdout: b.String()}
	})
	return ih
}

// loadgenCheck: the generator run is the one the window uploaded.
func loadgenCheck(t *testing.T, c *fake.Call) (fake.Reply, bool) {
	m := regexp.MustCompile(`^f='?([^' ;]+)'?; \{ printf '%s  %s\\n' ([0-9a-f]{64}) "\$f"`).FindStringSubmatch(c.Command)
	if m == nil {
		t.Errorf("the generator run without its check: %s", c.Command)
		return fake.Reply{Exit: 96}, false
	}
	if f, ok := c.Host.File(m[1]); !ok || f.SHA256 != m[2] {
		return fake.Reply{Exit: 96, Stderr: "gpuaccept: " + m[1] + " is missing\n"}, false
	}
	return fake.Reply{}, true
}

// infInventory: nodes running one server each (more with servers)
// against the targets (YAML lines of acceptance.workload).
func infInventory(t *testing.T, nodes int, targets, more string) *inventory.Inventory {
	t.Helper()
	return fakeInventory(t, nodes, `quote:
  gpus_per_node: 2
acceptance:
  workload:
`+targets+`phases:
  workload:
    enabled: true
    kind: inference
    image: registry.example/vllm@sha256:`+pin+`
    inference:
      model: m
      command: [vllm, serve, m, --port, "{port}"]
      levels: [concurrency:1, concurrency:4]
      duration: 1s
      warmup: 0s
`+more)
}

// runInference runs connect, tools, inference and teardown over f with a
// small x86-64 Linux program as the gpuaccept to upload.
func runInference(t *testing.T, inv *inventory.Inventory, f *fake.Fleet) (*record.Run, string) {
	t.Helper()
	return runInferenceWith(t, inv, f, tinyELF(t, elf.EM_X86_64))
}

// tinyELF is an ELF header of machine and nothing else: what the phase
// reads of the generator before it uploads it.
func tinyELF(t *testing.T, machine elf.Machine) string {
	t.Helper()
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(h[16:], uint16(elf.ET_EXEC))
	le.PutUint16(h[18:], uint16(machine))
	le.PutUint32(h[20:], 1)
	le.PutUint16(h[52:], 64) // header size
	le.PutUint16(h[54:], 56) // program header entry size
	le.PutUint16(h[58:], 64) // section header entry size
	exe := filepath.Join(t.TempDir(), "gpuaccept")
	if err := os.WriteFile(exe, h, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func runInferenceWith(t *testing.T, inv *inventory.Inventory, f *fake.Fleet, exe string) (*record.Run, string) {
	t.Helper()
	rec, dir, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, Inference, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test", Executable: exe})
	if err != nil {
		t.Fatalf("window: %v", err)
	}
	return rec, dir
}

// TestInferenceNamesTheSlowNode: h2's p95 TTFT misses the target on the
// run and on its retest: WORK-002 fails on h2 with both runs recorded,
// the cluster line names h2, h1 passes; the servers ran as asked, their
// request logs reached the bundle scrubbed, and teardown was told to
// sweep the window's containers.
func TestInferenceNamesTheSlowNode(t *testing.T) {
	inv := infInventory(t, 2, "    ttft: 800ms\n    error_rate: 0.01\n    memory_headroom: 0.1\n    ready_within: 5m\n", "")
	f := fakeFleet(inv)
	h1 := answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}, gpus: 2, memUsed: 60000})
	h2 := answerInference(t, f.Host("h2"), infServer{ttft: []float64{912, 950}, gpus: 2, memUsed: 60000})
	r, dir := runInference(t, inv, f)

	if v := verdictOf(t, r, "WORK-002", "h1"); v.Status != record.Pass || v.Measured != "p95 TTFT 300 ms" ||
		v.Quoted != "≤ 800 ms at p95, concurrency:4" || v.Retest != nil {
		t.Errorf("WORK-002 h1: %+v", v)
	}
	v := verdictOf(t, r, "WORK-002", "h2")
	if v.Status != record.Fail || v.Measured != "p95 TTFT 950 ms" || v.Value == nil || *v.Value != 950 || v.Unit != record.UnitMilliseconds {
		t.Errorf("WORK-002 h2: %+v", v)
	}
	if v.Retest == nil || len(v.Retest.Runs) != 2 || v.Retest.Runs[0].Failed == "" || !v.Retest.Failed() || strings.Contains(v.Detail, "run 1") {
		t.Errorf("WORK-002 h2's retest: %+v (detail %q)", v.Retest, v.Detail)
	}
	for _, v := range r.Verdicts {
		if strings.HasPrefix(v.ID, "WORK-") && v.Node == "" {
			t.Errorf("%s has a cluster line, which would repeat the worst node's failure: %+v", v.ID, v)
		}
	}
	if h1.runs != 1 || h2.runs != 2 {
		t.Errorf("load runs: h1 %d, h2 %d; want 1 and 2 (one retest)", h1.runs, h2.runs)
	}
	for _, id := range []string{"WORK-001", "WORK-006", "WORK-010"} {
		if v := verdictOf(t, r, id, "h1"); v.Status != record.Pass {
			t.Errorf("%s h1: %+v", id, v)
		}
	}
	// Counted on the node's clock from its start: the generator was told
	// when (--since), and its figure is the figure.
	if v := verdictOf(t, r, "WORK-001", "h1"); v.Value == nil || *v.Value != 13.25 {
		t.Errorf("WORK-001 h1: ready %v s, want the generator's 13.25 s after the start", v.Value)
	}
	if len(h1.ready) == 0 || !strings.Contains(h1.ready[0], " --since 1765000000.250000000") {
		t.Errorf("the generator was not told the server's start: %q", h1.ready)
	}
	if v := verdictOf(t, r, "WORK-010", "h1"); !strings.HasPrefix(v.Measured, "26.4% free: peak 120000 of 163118 MiB") {
		t.Errorf("WORK-010 h1: %+v", v)
	}
	for _, id := range []string{"WORK-004", "WORK-005", "WORK-007"} {
		if v := verdictOf(t, r, id, "h1"); v.Status != record.Skip || v.Value == nil && id != "WORK-007" || v.Incomplete != "" {
			t.Errorf("%s h1 without a target: %+v", id, v)
		}
	}
	if res := r.Result(); res.Outcome != record.OutcomeNotAccepted || len(res.Failed) != 1 || res.Failed[0] != "WORK-002" {
		t.Errorf("window: %+v", res)
	}

	start := h1.start[0]
	for _, want := range []string{"podman run -d --network host --name gpuaccept-" + r.ID + "-h1-inf0 --label gpuaccept.window=" + r.ID,
		"sha256:" + other + " vllm serve m --port 8000 2>&1"} {
		if !strings.Contains(start, want) {
			t.Errorf("the server started with\n%s\nwant %s", start, want)
		}
	}
	if !strings.Contains(start, " --device nvidia.com/gpu=all sha256:") {
		t.Errorf("one server, not given every GPU: %s", start)
	}
	load := h1.load[0]
	for _, want := range []string{"--levels concurrency:1,concurrency:4", "--duration 1s", "--warmup 0s", "--input-tokens 512", "--output-tokens 128",
		"--goodput ttft=800ms", `--url http://"${GPUACCEPT_LOOPBACK:-127.0.0.1}":8000`, "--metrics-path /metrics"} {
		if !strings.Contains(load, want) {
			t.Errorf("the generator ran with\n%s\nwant %s", load, want)
		}
	}
	var res workload.Inference
	if err := jsonOf(resultOf(t, r, "inference", 1), &res); err != nil || len(res.Runs) != 2 || res.Servers[0].RequestLog != "raw/h2/workload-requests-0.run2.jsonl.gz" {
		t.Fatalf("h2's record: %+v (%v)", res, err)
	}
	for _, rel := range []string{"raw/h1/workload-requests-0.jsonl.gz", "raw/h2/workload-requests-0.run2.jsonl.gz"} {
		b := gunzip(t, filepath.Join(dir, rel))
		if !strings.Contains(b, `"ttft_ms":210`) || strings.Contains(b, "hf_abcdefghijklmnopqrstuvwxyz0123") {
			t.Errorf("%s: %q", rel, b)
		}
	}
	for _, h := range []string{"h1", "h2"} {
		if n := f.Host(h).Ran(`(?s)^GPUACCEPT_TEARDOWN_CONTAINERS=1 bash -c .* teardown `); n != 1 {
			t.Errorf("%s: teardown swept the window's containers %d times", h, n)
		}
		if n := f.Host(h).Ran(`^podman rm -f 'gpuaccept-[^ ]+-inf0' 2>&1$|^podman rm -f gpuaccept-\S+-inf0 2>&1$`); n != 1 {
			t.Errorf("%s: the server was removed %d times", h, n)
		}
	}
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInferenceRetestThatPassesCounts: a TTFT that misses once and then
// meets the target twice (the retest and its confirmation) passes, the
// history saying the first run failed.
func TestInferenceRetestThatPassesCounts(t *testing.T) {
	inv := infInventory(t, 1, "    ttft: 800ms\n", "")
	f := fakeFleet(inv)
	answerInference(t, f.Host("h1"), infServer{ttft: []float64{900, 500, 500}, gpus: 2, memUsed: 1000})
	r, _ := runInference(t, inv, f)
	v := verdictOf(t, r, "WORK-002", "h1")
	if v.Status != record.Pass || v.Retest == nil || v.Retest.Failed() || len(v.Retest.Runs) != 3 {
		t.Errorf("WORK-002 h1: %+v retest %+v", v, v.Retest)
	}
}

// TestInferenceServerNeverReady: the server never answers; WORK-001
// fails naming it with its log's end (escaped), the figures it could not
// measure are not judged, and the container is removed.
func TestInferenceServerNeverReady(t *testing.T) {
	inv := infInventory(t, 2, "    ttft: 800ms\n", "      ready_timeout: 10m\n")
	f := fakeFleet(inv)
	answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}, gpus: 2})
	h2 := answerInference(t, f.Host("h2"), infServer{neverReady: true, gpus: 2})
	r, _ := runInference(t, inv, f)
	v := verdictOf(t, r, "WORK-001", "h2")
	if v.Status != record.Fail || v.Measured != "server 0 (port 8000) not ready" ||
		!strings.Contains(v.Detail, "connection refused") || !strings.Contains(v.Detail, "ERROR CUDA out of memory") || strings.Contains(v.Detail, "\x1b") {
		t.Errorf("WORK-001 h2: %+v", v)
	}
	if v := verdictOf(t, r, "WORK-002", "h2"); v.Status != record.Skip {
		t.Errorf("WORK-002 h2: %+v", v)
	}
	if len(h2.load) != 0 {
		t.Errorf("a server that never got ready took load: %v", h2.load)
	}
	if n := f.Host("h2").Ran(`^podman rm -f \S+ 2>&1$`); n != 1 {
		t.Errorf("h2's server removed %d times", n)
	}
	if got := resultOf(t, r, "inference", 1); got.Outcome != record.Failed || !strings.Contains(got.Error, "no server got ready") {
		t.Errorf("h2's result: %s %s", got.Outcome, got.Error)
	}
}

// TestInferenceWithoutRuntimeOrSMI: a node without podman or docker is
// NOT MEASURED (not failed, not quarantined); one without nvidia-smi
// measures everything but the memory, whose target then leaves the
// window INCOMPLETE.
func TestInferenceWithoutRuntimeOrSMI(t *testing.T) {
	inv := infInventory(t, 2, "    error_rate: 0.01\n    memory_headroom: 0.1\n", "")
	f := fakeFleet(inv)
	answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}})
	answerInference(t, f.Host("h2"), infServer{ttft: []float64{300}})
	answerTools(f.Host("h2"))
	r, _ := runInference(t, inv, f)
	if v := verdictOf(t, r, "WORK-010", "h1"); v.Status != record.Skip || v.Incomplete == "" || v.Value != nil {
		t.Errorf("WORK-010 h1 without nvidia-smi: %+v", v)
	}
	if v := verdictOf(t, r, "WORK-006", "h1"); v.Status != record.Pass || v.Measured != "0% failed (0 of 200)" {
		t.Errorf("WORK-006 h1: %+v", v)
	}
	for _, id := range inferenceIDs {
		if v := verdictOf(t, r, id, "h2"); v.Status != record.Skip || !strings.Contains(v.Incomplete, "neither podman nor docker") {
			t.Errorf("%s h2: %+v", id, v)
		}
	}
	for _, v := range r.Verdicts {
		if v.Status == record.Fail {
			t.Errorf("a missing tool failed %s %s: %s", v.ID, v.Node, v.Detail)
		}
	}
	if r.Nodes[1].Quarantined {
		t.Error("h2 quarantined for lacking podman")
	}
	if res := r.Result(); res.Outcome != record.OutcomeIncomplete {
		t.Errorf("window %s: %q", res.Outcome, res.Incomplete)
	}
}

// TestInferenceLoadgenNodesCannotRun: a generator the node cannot run (a
// macOS build, or one for another architecture) is NOT MEASURED on every
// node, named as what to set, never a failure of the servers.
func TestInferenceLoadgenNodesCannotRun(t *testing.T) {
	notLinux := filepath.Join(t.TempDir(), "gpuaccept")
	os.WriteFile(notLinux, []byte("\xcf\xfa\xed\xfe a Mach-O program"), 0o755)
	for name, exe := range map[string]string{"arm64 build": tinyELF(t, elf.EM_AARCH64), "macOS build": notLinux} {
		inv := infInventory(t, 1, "    ttft: 800ms\n", "")
		f := fakeFleet(inv)
		answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}})
		r, _ := runInferenceWith(t, inv, f, exe)
		for _, id := range inferenceIDs {
			v := verdictOf(t, r, id, "h1")
			if v.Status != record.Skip || !strings.Contains(v.Incomplete, "phases.workload.inference.loadgen") {
				t.Errorf("%s: %s h1: %s %q", name, id, v.Status, v.Incomplete)
			}
		}
		if r.Nodes[0].Quarantined {
			t.Errorf("%s: h1 quarantined", name)
		}
	}
}

// TestInferenceErrorRate: 5% of requests fail where 0.1% may: WORK-006
// fails with the kinds of failure.
func TestInferenceErrorRate(t *testing.T) {
	inv := infInventory(t, 1, "    error_rate: 0.001\n", "")
	f := fakeFleet(inv)
	answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}, failed: 10, gpus: 2})
	r, _ := runInference(t, inv, f)
	v := verdictOf(t, r, "WORK-006", "h1")
	if v.Status != record.Fail || v.Measured != "5% failed (10 of 200)" || v.Quoted != "≤ 0.1% of requests at concurrency:4" ||
		!strings.Contains(v.Detail, "http 500 ×10") || *v.Value != 5 {
		t.Errorf("WORK-006 h1: %+v", v)
	}
}

// TestInferenceServersSplitTheGPUs: two servers on a node of 8 GPUs get
// four each, on ports 8000 and 8001, and the memory of their own.
func TestInferenceServersSplitTheGPUs(t *testing.T) {
	inv := infInventory(t, 1, "", "      servers_per_node: 2\n")
	f := fakeFleet(inv)
	h := answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}, gpus: 8, memUsed: 40000})
	r, _ := runInference(t, inv, f)
	if len(h.start) != 2 || !strings.Contains(h.start[0], "--device nvidia.com/gpu=0 --device nvidia.com/gpu=1 --device nvidia.com/gpu=2 --device nvidia.com/gpu=3 ") ||
		!strings.Contains(h.start[1], "--device nvidia.com/gpu=4 ") || !strings.Contains(h.start[1], "--port 8001 ") {
		t.Errorf("servers started:\n%s", strings.Join(h.start, "\n"))
	}
	var res workload.Inference
	if err := jsonOf(resultOf(t, r, "inference", 0), &res); err != nil || len(res.Servers) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if s := res.Servers[1]; s.GPUs != "4-7" || s.Port != 8001 || s.GPUMemPeakMiB == nil || *s.GPUMemPeakMiB != 160000 || *s.GPUMemTotalMiB != 4*81559 {
		t.Errorf("server 1: %+v", s)
	}
	if v := verdictOf(t, r, "WORK-005", "h1"); v.Value == nil || *v.Value != 24000 {
		t.Errorf("WORK-005 h1: node throughput is both servers': %+v", v)
	}
}

// TestInferenceContainerThatDoesNotStart: the runtime refuses the
// container (a hostile message with control characters): WORK-001 fails
// with the runtime's words escaped, and no generator runs.
func TestInferenceContainerThatDoesNotStart(t *testing.T) {
	inv := infInventory(t, 1, "", "")
	f := fakeFleet(inv)
	h := answerInference(t, f.Host("h1"), infServer{ttft: []float64{300}, gpus: 2})
	f.Host("h1").Reply(`^podman rm -f \S+ >/dev/null 2>&1; printf .*; podman run -d `,
		fake.Reply{Stdout: "Error: crun: cannot find device nvidia.com/gpu=all\x1b]0;owned\x07\n", Exit: 125})
	r, _ := runInference(t, inv, f)
	v := verdictOf(t, r, "WORK-001", "h1")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "podman run: Error: crun: cannot find device") || strings.ContainsAny(v.Detail, "\x1b\x07") {
		t.Errorf("WORK-001 h1: %+v", v)
	}
	if len(h.ready)+len(h.load) != 0 {
		t.Errorf("the generator ran against a server that never started: %v %v", h.ready, h.load)
	}
}
