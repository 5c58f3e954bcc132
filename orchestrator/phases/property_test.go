package phases

// Property tests of the window over fake hosts: seeded schedules of
// faults (unreachable at connect, a non-zero exit, a hang past the
// deadline, a connection dropped mid-phase, garbage output, huge output)
// over the phases on 1-8 nodes, and what must hold whatever the schedule:
// no panic, a bundle verify accepts, an outcome consistent with the
// faults, and a journal cut anywhere that --resume finishes with the
// verdicts of the uninterrupted window.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/reports"
)

type faultKind int

const (
	unreachable faultKind = iota
	exitFault
	hang
	drop
	garbage
	huge
)

func (k faultKind) String() string {
	return [...]string{"unreachable", "exit", "hang", "drop", "garbage", "huge"}[k]
}

// propertyPhases are the phases a schedule faults (the failure test, whose
// job runs on its own clock, has its own tests).
var propertyPhases = []string{"connect", "tools", "preflight", "diag", "windowkey", "image", "staging", "intranode",
	"allreduce", "bisect", ckptWritePhase, ckptRestorePhase, "teardown"}

// failing are the phases in which an exit, a hang or a drop on any node
// must cost the window its acceptance: every node still in the window
// runs their command, and a node that fails them fails a verdict or is
// quarantined.
var failing = []string{"connect", "tools", "preflight", "diag", "windowkey", "image", "staging", "intranode", ckptWritePhase, ckptRestorePhase}

type fault struct {
	node  string
	phase string
	kind  faultKind
}

type schedule struct {
	nodes  int
	faults []fault
	cut    float64 // where the journal is cut for the resume, as a fraction
}

func (s schedule) String() string {
	var f []string
	for _, x := range s.faults {
		f = append(f, fmt.Sprintf("%s %s %s", x.node, x.phase, x.kind))
	}
	return fmt.Sprintf("%d node(s), faults [%s], journal cut at %.2f", s.nodes, strings.Join(f, "; "), s.cut)
}

func scheduleOf(seed uint64) schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := schedule{nodes: 1 + r.IntN(8), cut: r.Float64()}
	for range r.IntN(4) {
		k := faultKind(r.IntN(6))
		phase := propertyPhases[r.IntN(len(propertyPhases))]
		if k == unreachable {
			phase = "connect"
		}
		s.faults = append(s.faults, fault{node: fmt.Sprintf("h%d", 1+r.IntN(s.nodes)), phase: phase, kind: k})
	}
	return s
}

const propertyInventory = gpuQuote + `  allreduce:
    enabled: true
    min_bytes: 64MiB
    max_bytes: 256MiB
    repeats: 1
    timeout: 1m
  staging:
    enabled: true
    dir: /scratch
    fio: false
    sources:
      - {name: data, size: 16KiB}
      - {name: weights, path: /shared/weights}
  checkpoint: {enabled: true, dir: /ckpt, size: 1MiB, shards: 2}
image:
  reference: registry.example/train@sha256:` + pin + `
  runtime: podman
`

// soundFleet is a fleet whose every host answers every phase as a sound
// node does.
func soundFleet(inv *inventory.Inventory) *fake.Fleet {
	f := fakeFleet(inv)
	model := fabricHosts(len(inv.Nodes), "")
	store := &ckptStore{shards: map[string][]string{}}
	for _, n := range inv.Nodes {
		h := f.Host(n.Name)
		answerAsStandin(h, "h100")
		answerWindowKey(h, nil)
		answerImagePull(h, pin)
		answerFabric(h, model, n.Address)
		store.answer(h, false)
		onScript(h, "stage.sh", func(c *fake.Call, a []string) fake.Reply {
			if a[0] == "prepare" {
				return fake.Reply{Stdout: "avail 900000000000\n"}
			}
			return fake.Reply{Stdout: "staged bytes=2000000 files=2 seconds=0.020 sha256=" + strings.Repeat("5", 64) + " checksum=after tool=cp hasher=openssl\n"}
		})
	}
	return f
}

// inject puts s's faults on the fleet: each applies to every command (and
// upload) of its phase on its node.
func inject(f *fake.Fleet, s schedule) {
	chunk := bytes.Repeat([]byte("garbage \x1b[31m\xff\n"), 1<<16)
	for _, h := range f.Hosts() {
		byPhase := map[string]faultKind{}
		for _, x := range s.faults {
			if x.node != h.Name() {
				continue
			}
			if x.kind == unreachable {
				f.Unreachable(x.node, fmt.Errorf("%s: dial tcp 192.0.2.1:22: connect: no route to host", x.node))
				continue
			}
			byPhase[x.phase] = x.kind
		}
		if len(byPhase) == 0 {
			continue
		}
		h.Intercept(func(c *fake.Call) (fake.Reply, bool) {
			k, ok := byPhase[orchestrator.PhaseOf(c.Ctx)]
			if !ok {
				return fake.Reply{}, false
			}
			switch k {
			case exitFault:
				return fake.Reply{Exit: 3, Stderr: "injected: the command failed\n"}, true
			case hang:
				return fake.Reply{Hang: true}, true
			case drop:
				return fake.Reply{Drop: true}, true
			case garbage:
				return fake.Reply{Stdout: "\x00\x01 \x1b]0;title\x07 {[<not what you wanted>]}\n"}, true
			default: // huge: just past what a phase captures (more only costs
				// the scrubber's and the parsers' time, seconds under -fuzz)
				for range (captureHead+captureTail)/len(chunk) + 1 {
					c.Stdout.Write(chunk)
				}
				return fake.Reply{}, true
			}
		})
		h.FailUploads(func(ctx context.Context, path string) error {
			if k, ok := byPhase[orchestrator.PhaseOf(ctx)]; ok && k != garbage && k != huge {
				return fmt.Errorf("%s: upload %s: injected %s", h.Name(), path, k)
			}
			return nil
		})
	}
}

// quick are the window's phases with deadlines short enough that a hang
// costs seconds, long enough that a sound phase on a loaded machine never
// misses one (a miss would differ between two runs). Under -fuzz they are
// shorter, and shortest (hungDeadline) for the phases s hangs a node in:
// a hang costs its deadline twice (the window and its resume), and at a
// second each the fuzzer ran 15 schedules in 20 s. A sound phase over the
// fake hosts takes milliseconds (without -race, as -fuzz runs).
func quick(s schedule) []orchestrator.Phase {
	d, hung := 3*time.Second, 3*time.Second
	if fuzzing() {
		d, hung = time.Second, hungDeadline
	}
	hangs := map[string]bool{}
	for _, x := range s.faults {
		if x.kind == hang {
			hangs[x.phase] = true
		}
	}
	var out []orchestrator.Phase
	for _, p := range All() {
		// telemetry: its verdicts rest on which real-time samples fell in
		// which phase, which a resumed window does not replay (its resume
		// is TestTelemetryResumeAppends's).
		if p.Name == "failure" || p.Name == "telemetry" {
			continue
		}
		pd := d
		if hangs[p.Name] {
			pd = hung
		}
		p.Deadline = func(*inventory.Inventory) time.Duration { return pd }
		out = append(out, p)
	}
	return out
}

const hungDeadline = 300 * time.Millisecond

func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// fastDir is a directory for a window's bundle on a memory filesystem
// where there is one: the journal syncs every line, 3 ms each on this
// disk, a tenth of a sound window's time.
func fastDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "gpuaccept-property-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// checkWindow runs schedule s and checks every property.
func checkWindow(t *testing.T, s schedule) {
	t.Logf("%s", s)
	dir := fastDir(t)
	inv := fakeInventory(t, s.nodes, propertyInventory)
	f := soundFleet(inv)
	inject(f, s)
	rec, run, err := orchestrator.Start(t.Context(), inv, quick(s), orchestrator.Options{RunsDir: dir, Dial: f.Dial})
	if err != nil {
		t.Fatalf("the window ended in an error of its own: %v", err)
	}
	checkRecord(t, rec, run, s)

	// The coordinator killed anywhere: the journal cut after any whole
	// line, resumed over the same hosts (what they hold, a checkpoint on
	// shared storage, outlives the coordinator; its connections do not),
	// their faults the same.
	jf, err := orchestrator.OpenJournal(run)
	if err != nil {
		t.Fatal(err)
	}
	journal, err := io.ReadAll(jf)
	jf.Close()
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(journal, []byte("\n"))
	keep := 1 + int(s.cut*float64(len(lines)-2))
	again := filepath.Join(fastDir(t), filepath.Base(run))
	if err := os.MkdirAll(again, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(again, orchestrator.JournalFile), bytes.Join(lines[:keep], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.Hosts() {
		h.Drop("the coordinator died")
	}
	resumed, _, err := orchestrator.Resume(t.Context(), again, inventory.Load, quick(s), orchestrator.Options{Dial: f.Dial})
	if err != nil {
		t.Fatalf("resume after %d of %d journal lines: %v", keep, len(lines), err)
	}
	checkRecord(t, resumed, again, s)
	if a, b := statuses(rec), statuses(resumed); !slices.Equal(a, b) {
		t.Errorf("resumed after %d of %d journal lines, the verdicts differ:\nonly uninterrupted %q\nonly resumed       %q", keep, len(lines), minus(a, b), minus(b, a))
	}
}

func checkRecord(t *testing.T, rec *record.Run, dir string, s schedule) {
	t.Helper()
	if rec.Interrupted || rec.Aborted != "" {
		t.Errorf("interrupted %v, aborted %q", rec.Interrupted, rec.Aborted)
	}
	for _, p := range rec.Phases {
		if strings.Contains(p.Error, "panic:") {
			t.Errorf("%s on %q panicked: %.600s", p.Phase, p.Node, p.Error)
		}
	}
	if err := reports.WriteBundle(dir, rec); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	if problems, err := reports.Verify(dir); err != nil || len(problems) > 0 {
		t.Errorf("verify: %v %v", problems, err)
	}
	b, _ := json.Marshal(rec)
	if bytes.ContainsAny(b, "\x1b\x07") {
		t.Error("run.json holds raw control characters")
	}
	hard := false
	for _, x := range s.faults {
		if x.kind <= drop && slices.Contains(failing, x.phase) {
			hard = true
		}
	}
	switch {
	case len(s.faults) == 0 && s.nodes >= 2 && !rec.Accepted():
		t.Errorf("no fault on %d nodes, and not accepted: %v", s.nodes, failedVerdicts(rec))
	case hard && rec.Accepted():
		t.Errorf("a failing fault, and accepted")
	}
}

// statuses is every verdict as "ID node STATUS", in order.
func statuses(rec *record.Run) []string {
	var out []string
	for _, v := range rec.Verdicts {
		out = append(out, v.ID+" "+v.Node+" "+string(v.Status))
	}
	return out
}

// minus is what of a is not in b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func failedVerdicts(rec *record.Run) []string {
	var out []string
	for _, v := range rec.Verdicts {
		if v.Status == record.Fail {
			out = append(out, fmt.Sprintf("%s %s: %s %s", v.ID, v.Node, v.Measured, v.Detail))
		}
	}
	return out
}

// FuzzWindow explores fault schedules; its seeds run with every `go
// test`, a longer exploration with `go test -fuzz FuzzWindow`.
func FuzzWindow(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkWindow(t, scheduleOf(seed)) })
}

// TestDegenerateWindows: the schedules the first real fleet broke on,
// named: every node unreachable (it panicked with an image configured),
// one node, two nodes with one failing, every node failing preflight.
func TestDegenerateWindows(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    schedule
	}{
		{"every node unreachable", schedule{nodes: 3, faults: []fault{{"h1", "connect", unreachable}, {"h2", "connect", unreachable}, {"h3", "connect", unreachable}}, cut: 0.5}},
		{"one node", schedule{nodes: 1, cut: 0.7}},
		{"four sound nodes", schedule{nodes: 4, cut: 0.3}},
		{"two nodes, one failing preflight", schedule{nodes: 2, faults: []fault{{"h2", "preflight", exitFault}}, cut: 0.4}},
		{"every node failing preflight", schedule{nodes: 3, faults: []fault{{"h1", "preflight", exitFault}, {"h2", "preflight", hang}, {"h3", "preflight", drop}}, cut: 0.9}},
		{"the launcher dropping mid-collective", schedule{nodes: 4, faults: []fault{{"h1", "allreduce", drop}}, cut: 0.6}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkWindow(t, tc.s) })
	}
}
