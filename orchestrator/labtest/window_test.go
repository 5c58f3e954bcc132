package labtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

// nodeSetup says what each lab host's GPU tools answer, and how slowly.
type nodeSetup struct {
	profile  string
	slowSMI  time.Duration // nvidia-smi waits this long first
	slowDiag time.Duration // dcgmi diag waits this long first
	// telemetry plants events in what the host's telemetry shows (standins.SimTelemetryEnv's syntax, e.g.
	// "xid:79@20:gpu=2"); "" plants none.
	telemetry string
}

// prepare installs the stand-ins on every host and writes the inventory.
func prepare(t *testing.T, l *lab.Lab, nodes map[string]nodeSetup) string {
	t.Helper()
	for _, h := range l.Hosts {
		s, ok := nodes[h.Name]
		if !ok {
			s = nodeSetup{profile: "h100"}
		}
		bin := l.BinDir(h.Name)
		entries, _ := os.ReadDir(bin)
		for _, e := range entries {
			os.Remove(filepath.Join(bin, e.Name()))
		}
		if err := standins.Install(bin, s.profile, []string{binary, "standin"}); err != nil {
			t.Fatal(err)
		}
		tel := standins.Telemetry{State: l.StandinState(h.Name), Plant: s.telemetry}
		if err := standins.InstallTelemetry(bin, s.profile, []string{binary, "standin"}, tel); err != nil {
			t.Fatal(err)
		}
		// A slow tool is the genuine stand-in behind a sleep, so a test can
		// act while a phase is in flight.
		slow := func(tool, when string, d time.Duration) {
			if d == 0 {
				return
			}
			script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in %s) sleep %g;; esac\nexec %s standin --profile %s %s \"$@\"\n",
				when, d.Seconds(), remote.Quote(binary), s.profile, tool)
			if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		slow("nvidia-smi", "*", s.slowSMI)
		slow("dcgmi", "diag", s.slowDiag)
	}
	var names []string
	for _, h := range l.Hosts {
		names = append(names, h.Name)
	}
	return writeInventory(t, l, names, "", "")
}

// writeInventory writes an inventory over the given hosts; quoteExtra and
// phasesExtra are YAML lines (indented two spaces) added to those sections.
func writeInventory(t *testing.T, l *lab.Lab, hosts []string, quoteExtra, phasesExtra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `provider: lab
region: local
window: %s
simulated: true
ssh:
  user: root
  identity_files: [%s]
  known_hosts: [%s]
  config: none
  keepalive_interval: 1s
  keepalive_misses: 3
nodes:
`, labWindow, l.ClientKey, l.KnownHosts)
	for _, h := range hosts {
		fmt.Fprintf(&b, "  - name: %s\n    address: %s\n", h, l.Host(h).Addr)
	}
	b.WriteString(`quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  form_factor: SXM
` + quoteExtra + `acceptance:
  tolerance: 0.9
phases:
  diag:
    level: 1
` + phasesExtra)
	path := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type result struct {
	code           int
	stdout, stderr string
}

func gpuaccept(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("gpuaccept %v: %v", args, err)
	}
	res := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	// Shown only when the test fails: what the CLI said last, so that a
	// window that left no run.json says why.
	tail := res.stderr
	if len(tail) > 4000 {
		tail = "..." + tail[len(tail)-4000:]
	}
	t.Logf("gpuaccept %s: exit %d; stderr ends:\n%s", strings.Join(args, " "), res.code, tail)
	return res
}

// runWindow runs a window on inv into a runs directory of its own and
// reads its run.json back.
func runWindow(t *testing.T, inv string) (result, *record.Run) {
	t.Helper()
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	return res, readRun(t, runDir(t, runs))
}

// appendInventory adds YAML to the end of an inventory file.
func appendInventory(t *testing.T, inv, yaml string) {
	t.Helper()
	f, err := os.OpenFile(inv, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(yaml); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// runDir is the one run directory under runs.
func runDir(t *testing.T, runs string) string {
	t.Helper()
	entries, err := os.ReadDir(runs)
	if err != nil || len(entries) != 1 {
		t.Fatalf("want one run directory in %s, got %v (%v)", runs, entries, err)
	}
	return filepath.Join(runs, entries[0].Name())
}

func readRun(t *testing.T, dir string) *record.Run {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r record.Run
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func verdict(r *record.Run, id, node string) record.Verdict {
	for _, v := range r.Verdicts {
		if v.ID == id && v.Node == node {
			return v
		}
	}
	return record.Verdict{ID: id, Node: node, Status: "absent"}
}

// nothingLeft checks every host for processes of ours.
func nothingLeft(t *testing.T, l *lab.Lab) {
	t.Helper()
	for _, h := range l.Hosts {
		ps, err := l.Ps(t.Context(), h.Name)
		if err != nil {
			t.Fatal(err)
		}
		if left := ours(ps); left != "" {
			t.Errorf("%s: left running:\n%s", h.Name, left)
		}
	}
}

// ours picks out of a host's process list what the window runs there:
// guards, stand-ins and the slow tools' sleeps (sshd is the lab's, and so
// is the sleep of a job's extern step, which slurmstepd starts under
// PrologFlags=Contain for as long as the job holds the host).
func ours(ps string) string {
	var left []string
	for _, line := range strings.Split(ps, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		args := strings.Join(f[3:], " ")
		if args == "sleep 100000000" {
			continue
		}
		if strings.Contains(args, "gpuaccept-guard") || strings.Contains(args, " standin ") ||
			strings.HasPrefix(args, "sleep ") || strings.Contains(args, "/usr/local/bin/") ||
			strings.Contains(args, "_perf") || strings.Contains(args, "orted") || strings.Contains(args, "mpirun") ||
			strings.Contains(args, "torch.distributed.run") || strings.Contains(args, "ddp_train.py") ||
			strings.Contains(args, "telemetry.sh") || strings.Contains(args, "gemm.py") {
			left = append(left, line)
		}
	}
	return strings.Join(left, "\n")
}

// slowRunning: a slow tool's sleep is in progress on the host.
func slowRunning(t *testing.T, l *lab.Lab, host string, d time.Duration) bool {
	ps, _ := l.Ps(t.Context(), host)
	for _, line := range strings.Split(ps, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[3] == "sleep" && f[4] == fmt.Sprint(d.Seconds()) {
			return true
		}
	}
	return false
}

func TestWindowNamesTheOddNodes(t *testing.T) {
	l := needLab(t)
	inv := prepare(t, l, map[string]nodeSetup{"h3": {profile: "h100-other-driver"}, "h4": {profile: "h100-diag-fail"}})
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	if res.code != 1 {
		t.Fatalf("exit %d, want 1 (not accepted)\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	dir := runDir(t, runs)
	r := readRun(t, dir)
	want := []struct {
		id, node string
		status   record.Status
	}{
		{"GPU-001", "h1", record.Pass}, {"GPU-002", "h1", record.Pass}, {"GPU-004", "h1", record.Pass},
		{"GPU-005", "h1", record.Pass}, {"NODE-001", "h1", record.Pass}, {"DIAG-001", "h1", record.Pass},
		{"GPU-005", "h3", record.Fail}, {"NODE-001", "h3", record.Fail}, {"GPU-002", "h3", record.Fail},
		{"GPU-004", "h3", record.Pass}, // one H100 SXM5, no NVLink peer: told by its board and power limit
		{"DIAG-001", "h4", record.Fail}, {"NODE-001", "h4", record.Pass}, {"WIN-001", "h4", record.Fail},
	}
	for _, w := range want {
		if v := verdict(r, w.id, w.node); v.Status != w.status {
			t.Errorf("%s %s: %s, want %s (%+v)", w.id, w.node, v.Status, w.status, v)
		}
	}
	if v := verdict(r, "NODE-001", "h3"); !strings.Contains(v.Detail, "590.48.01") {
		t.Errorf("NODE-001 h3 does not name the odd driver: %q", v.Detail)
	}
	for _, want := range []string{"NOT ACCEPTED", "SIMULATED", "h3", "h4"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.stdout)
		}
	}
	if v := gpuaccept(t, "verify", dir); v.code != 0 {
		t.Fatalf("verify: exit %d: %s%s", v.code, v.stdout, v.stderr)
	}
	for _, f := range []string{"raw/h4/diag.log.gz", "raw/h3/preflight.log.gz", "report.md", "junit.xml", "MANIFEST.sha256", orchestrator.SealedJournalFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("bundle lacks %s", f)
		}
	}
	nothingLeft(t, l)
}

func TestNodeKilledDuringPreflightIsQuarantined(t *testing.T) {
	l := needLab(t)
	inv := prepare(t, l, map[string]nodeSetup{"h2": {profile: "h100", slowSMI: 5 * time.Second}})
	t.Cleanup(func() {
		if err := l.Start(context.Background(), "h2"); err != nil {
			t.Errorf("restart h2: %v", err)
		}
	})
	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "h2's slow nvidia-smi running", func() bool { return slowRunning(t, l, "h2", 5*time.Second) })
	if err := l.Kill(t.Context(), "h2"); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out.String(), errb.String())
	}
	dir := runDir(t, runs)
	r := readRun(t, dir)
	if n := r.Nodes[1]; !n.Quarantined || !strings.Contains(n.Reason, "preflight") {
		t.Fatalf("h2 not quarantined by preflight: %+v", n)
	}
	for _, h := range []string{"h1", "h3", "h4"} {
		if v := verdict(r, "DIAG-001", h); v.Status != record.Pass {
			t.Errorf("%s did not complete the window: DIAG-001 %s %s", h, v.Status, v.Detail)
		}
	}
	if v := verdict(r, "WIN-001", "h2"); v.Status != record.Fail {
		t.Errorf("WIN-001 h2 = %s", v.Status)
	}
	// The journal is intact: every line parses, the quarantine is in it,
	// every phase is done and the window ended.
	types := journalTypes(t, dir)
	for _, want := range []string{"start", "quarantine", "done:connect", "done:preflight", "done:diag", "done:teardown", "end"} {
		if !slices.Contains(types, want) {
			t.Errorf("journal lacks %s: %v", want, types)
		}
	}
}

func TestCoordinatorKilledThenResumed(t *testing.T) {
	l := needLab(t)
	setups := map[string]nodeSetup{"h4": {profile: "h100-diag-fail"}}
	inv := prepare(t, l, setups)
	baseline := t.TempDir()
	if res := gpuaccept(t, "run", inv, "--runs-dir", baseline); res.code != 1 {
		t.Fatalf("baseline exit %d\n%s", res.code, res.stderr)
	}
	want := readRun(t, runDir(t, baseline)).Verdicts

	// The same nodes, but diag takes long enough to kill the coordinator
	// in the middle of it.
	for _, h := range []string{"h1", "h2", "h3", "h4"} {
		s := setups[h]
		if s.profile == "" {
			s.profile = "h100"
		}
		s.slowDiag = 6 * time.Second
		setups[h] = s
	}
	inv = prepare(t, l, setups)
	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "diag running on h1", func() bool { return slowRunning(t, l, "h1", 6*time.Second) })
	cmd.Process.Kill()
	_ = cmd.Wait()
	// Nobody waits for the diag any more: the guards end it on every node.
	waitFor(t, 10*time.Second, "no process of ours left after the coordinator died", func() bool {
		for _, h := range l.Hosts {
			if ps, _ := l.Ps(t.Context(), h.Name); ours(ps) != "" {
				return false
			}
		}
		return true
	})
	dir := runDir(t, runs)
	if types := journalTypes(t, dir); slices.Contains(types, "done:diag") || slices.Contains(types, "end") {
		t.Fatalf("the coordinator was killed too late: %v", types)
	}
	res := gpuaccept(t, "run", "--resume", dir)
	if res.code != 1 {
		t.Fatalf("resume exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	r := readRun(t, dir)
	if len(r.Resumed) != 1 {
		t.Errorf("resumed %d times, want 1", len(r.Resumed))
	}
	if got := verdictKeys(r.Verdicts); !slices.Equal(got, verdictKeys(want)) {
		t.Errorf("verdicts after resume differ from an uninterrupted run:\n got %v\nwant %v", got, verdictKeys(want))
	}
	nothingLeft(t, l)
	if v := gpuaccept(t, "verify", dir); v.code != 0 {
		t.Fatalf("verify after resume: %s%s", v.stdout, v.stderr)
	}
}

func TestInterruptStopsEverything(t *testing.T) {
	l := needLab(t)
	setups := map[string]nodeSetup{}
	for _, h := range l.Hosts {
		setups[h.Name] = nodeSetup{profile: "h100", slowDiag: 30 * time.Second}
	}
	inv := prepare(t, l, setups)
	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "diag running on h4", func() bool { return slowRunning(t, l, "h4", 30*time.Second) })
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, errb.String())
	}
	t.Logf("stopped %s after Ctrl-C", time.Since(start).Round(time.Millisecond))
	r := readRun(t, runDir(t, runs))
	if !r.Interrupted {
		t.Error("run.json does not record the interruption")
	}
	torn := 0
	for _, p := range r.Phases {
		if p.Phase == "teardown" {
			if p.Outcome == record.OK {
				torn++
			} else {
				t.Logf("teardown on %s: %s %s", p.Node, p.Outcome, p.Error)
			}
		}
	}
	if torn != len(l.Hosts) {
		t.Errorf("teardown ran on %d hosts, want %d", torn, len(l.Hosts))
	}
	nothingLeft(t, l)
}

func journalTypes(t *testing.T, dir string) []string {
	t.Helper()
	f, err := orchestrator.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var types []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, slices.Clone(sc.Bytes()))
	}
	for i, line := range lines {
		var e struct{ Type, Phase string }
		if err := json.Unmarshal(line, &e); err != nil {
			if i == len(lines)-1 {
				// Read while the coordinator writes it: the last line is
				// one being written (resume ignores it the same way).
				break
			}
			t.Fatalf("journal line %d: %v", i+1, err)
		}
		if e.Type == "done" {
			e.Type += ":" + e.Phase
		}
		types = append(types, e.Type)
	}
	return types
}

func verdictKeys(vs []record.Verdict) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s", v.ID, v.Node, v.Status, v.Measured))
	}
	slices.Sort(out)
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	lab.Eventually(t, within, what, cond)
}

// startRun starts `gpuaccept run INV --runs-dir RUNS` without waiting, for
// tests that act on the lab while the window runs; stderr is kept.
func startRun(t *testing.T, inv, runs string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &errb
}

// progressHosts lists, sorted and with repeats, the nodes that the progress
// lines containing msg name: "h3: MSG" names h3, "2 nodes h[1-2]: MSG" names
// h1 and h2.
func progressHosts(t *testing.T, stderr, msg string) []string {
	t.Helper()
	var hosts []string
	for _, line := range strings.Split(stderr, "\n") {
		i := strings.Index(line, msg)
		if i < 0 {
			continue
		}
		who := strings.TrimSpace(line[:i])
		if f := strings.Fields(who); len(f) == 3 && f[1] == "nodes" {
			who = f[2]
		}
		names, err := hostlist.Expand(who)
		if err != nil {
			t.Fatalf("progress line %q: %v", line, err)
		}
		hosts = append(hosts, names...)
	}
	slices.Sort(hosts)
	return hosts
}
