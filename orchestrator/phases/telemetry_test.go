package phases

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/telemetry"
	"gpuaccept/remote/fake"
	"gpuaccept/scripts"
)

// idleRows are the genuine H200's idle rows as the sampler's query asks
// for them (nounits): each cell by its header's name, its unit dropped.
func idleRows(t testing.TB) []string {
	t.Helper()
	rows, err := genuineIdleRows()
	if err != nil {
		t.Fatalf("genuine sample missing (want the shared samples at /work/shared/samples): %v", err)
	}
	return rows
}

var genuineIdleRows = sync.OnceValues(func() ([]string, error) {
	b, err := os.ReadFile("../../../shared/samples/nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-idle.txt")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	head := strings.Split(lines[0], ", ")
	at, unit := map[string]int{}, map[int]bool{}
	for i, h := range head {
		name, _, u := strings.Cut(h, " [")
		if _, ok := at[name]; !ok {
			at[name], unit[i] = i, u
		}
	}
	var rows []string
	for _, l := range lines[1:] {
		cells := strings.Split(l, ", ")
		out := make([]string, len(telemetry.Fields))
		for i, f := range telemetry.Fields {
			out[i] = "[N/A]"
			if k, ok := at[f]; ok && k < len(cells) {
				out[i] = cells[k]
				if v, _, _ := strings.Cut(cells[k], " "); unit[k] {
					out[i] = v
				}
			}
		}
		rows = append(rows, strings.Join(out, ", "))
	}
	return rows, nil
})

// fakeSampler answers telemetry.sh on h as a sound node's sampler does:
// its sources, ready, the genuine idle rows every interval, until the
// command is cancelled. running counts the samplers running on h.
// fakeFleet gives every host one.
func fakeSampler(h *fake.Host, running *atomic.Int32) {
	rows, _ := genuineIdleRows() // TestTelemetrySinkBounds fails without them
	onScript(h, "telemetry.sh", func(c *fake.Call, args []string) fake.Reply {
		if running != nil {
			running.Add(1)
			defer running.Add(-1)
		}
		fmt.Fprint(c.Stdout, "note source nvidia-smi\nnote source dmesg\nnote source ib 1\nnote ready\n")
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, r := range rows {
				fmt.Fprintf(c.Stdout, "gpu %s\n", r)
			}
			fmt.Fprint(c.Stdout, "ib mlx5_0:1 state=4: ACTIVE symbol_error=0 link_downed=0 port_rcv_errors=0\n")
			select {
			case <-c.Ctx.Done():
				return fake.Reply{Signal: "TERM"}
			case <-tick.C:
			}
		}
	})
}

func readTelemetry(t *testing.T, path string) *telemetry.Series {
	t.Helper()
	s, err := telemetry.ReadFile(path)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	return s
}

// TestTelemetrySinkBounds: a line past 8 KiB (a node sending 1 MiB in one
// line) is cut and counted, a node that floods past the file's limit has
// its lines counted and not kept, a node cannot forge a start line, and
// each open appends to the file (a resumed window), in gzip members of its own.
func TestTelemetrySinkBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raw", "h1", telemetry.FileName)
	clock := time.UnixMilli(1_764_900_000_000)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	row := "gpu " + idleRows(t)[0] + "\n"

	s, err := openTelemetrySink(path, time.Second, len(telemetry.Fields), 1<<20, now)
	if err != nil {
		t.Fatal(err)
	}
	// In pieces, as a stream arrives: a row split across writes.
	s.Write([]byte(row[:10]))
	s.Write([]byte(row[10:] + "note ready\n"))
	s.Write([]byte("kern " + strings.Repeat("x", 1<<20) + "\n"))
	s.Write([]byte("start interval=1 fields=1\n"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readTelemetry(t, path)
	if len(got.Starts) != 1 || len(got.GPUs) != 1 || len(got.Kernel) != 1 || len(got.Kernel[0].Line) > maxTelemetryLine {
		t.Fatalf("first member: %d starts, %d gpu rows, %d kernel lines", len(got.Starts), len(got.GPUs), len(got.Kernel))
	}
	if got.Dropped != 2 { // the cut line and the forged start
		t.Errorf("dropped %d, want 2 (a cut line, a forged start)", got.Dropped)
	}

	// The second start: members of its own, and a flood past the limit.
	s, err = openTelemetrySink(path, time.Second, len(telemetry.Fields), 1<<20, now)
	if err != nil {
		t.Fatal(err)
	}
	flood := bytes.Repeat([]byte(row), 20_000) // ~10 MiB
	for i := 0; i < len(flood); i += 32 << 10 {
		s.Write(flood[i:min(i+32<<10, len(flood))])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Size() > 1<<20 {
		t.Errorf("file %d bytes past its 1 MiB limit", st.Size())
	}
	got = readTelemetry(t, path)
	if len(got.Starts) != 2 {
		t.Errorf("%d starts, want 2 (a member per start)", len(got.Starts))
	}
	if kept := int64(len(got.GPUs) - 1); got.Dropped+kept != 20_000+2 || got.Dropped < 10_000 {
		t.Errorf("flood of 20,000 rows: %d kept, %d dropped", kept, got.Dropped)
	}
	if !slices.ContainsFunc(got.Notes, func(n string) bool { return strings.Contains(n, "max_mib_per_node") }) {
		t.Errorf("no note says the limit was reached: %q", got.Notes)
	}
	// Members are whole gzip streams: gzip -t reads the file.
	f, _ := os.Open(path)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err == nil {
		_, err = io.Copy(io.Discard, zr)
	}
	if err != nil {
		t.Errorf("gzip: %v", err)
	}
}

// TestTelemetrySinkFlushes: what arrived is readable while the stream
// runs, before the member is closed (gpuaccept status reads it so).
func TestTelemetrySinkFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), telemetry.FileName)
	clock := time.Now()
	now := func() time.Time { return clock }
	s, err := openTelemetrySink(path, time.Second, len(telemetry.Fields), 1<<20, now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Write([]byte("gpu " + idleRows(t)[0] + "\n"))
	clock = clock.Add(telemetryFlushEvery)
	s.Write([]byte("note later\n"))
	got, _ := telemetry.ReadFile(path)
	if got == nil || len(got.GPUs) != 1 || len(got.Starts) != 1 {
		t.Fatalf("read while open: %+v", got)
	}
	// A kernel line is in the file at once: a coordinator killed in the
	// next 30 s must not lose an Xid.
	s.Write([]byte("kern NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n"))
	if got, _ := telemetry.ReadFile(path); got == nil || len(got.Kernel) != 1 {
		t.Errorf("a kernel line waited for the next flush: %+v", got)
	}
	// After Close, what a stream's copier still hands over is not written.
	s.Close()
	before, _ := os.ReadFile(path)
	s.Write([]byte("gpu " + idleRows(t)[0] + "\n"))
	clock = clock.Add(telemetryFlushEvery)
	s.Write([]byte("note later\n"))
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a write after Close reached the file")
	}
}

// TestTelemetryPhaseRunsUntilTeardown: the sampler starts on every node,
// streams beside the phases after it, ends before teardown; the file is
// in the bundle with a member per start; the judge reads it.
func TestTelemetryPhaseRunsUntilTeardown(t *testing.T) {
	inv := fakeInventory(t, 2, "telemetry:\n  interval: 1s\n")
	f := fakeFleet(inv)
	var running atomic.Int32
	for _, n := range inv.Nodes {
		fakeSampler(f.Host(n.Name), &running)
	}
	var during, atTeardown atomic.Int32
	wait := orchestrator.Phase{Name: "allreduce", PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		time.Sleep(400 * time.Millisecond)
		during.Store(running.Load())
		return nil, nil
	}}
	td := Teardown
	body := td.PerNode
	td.PerNode = func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		atTeardown.Store(running.Load())
		return body(ctx, w, n)
	}
	rec, dir, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, Telemetry, wait, td},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if during.Load() != 2 || atTeardown.Load() != 0 || running.Load() != 0 {
		t.Errorf("samplers running: %d during the load phase (want 2), %d at teardown, %d after (want 0)",
			during.Load(), atTeardown.Load(), running.Load())
	}
	for _, n := range inv.Nodes {
		var start TelemetryStart
		r, ok := resultData(rec, "telemetry", n.Name, &start)
		if !ok || r.Outcome != record.OK || !slices.Contains(start.Sources, "nvidia-smi") || start.Interval != time.Second {
			t.Errorf("%s: telemetry %+v %+v", n.Name, r, start)
		}
		s := readTelemetry(t, filepath.Join(dir, start.File))
		if len(s.GPUs) < 3 || len(s.Starts) != 1 {
			t.Errorf("%s: %d rows, %d starts", n.Name, len(s.GPUs), len(s.Starts))
		}
		if len(rec.Telemetry[n.Name]) == 0 {
			t.Errorf("%s: no summary in run.json", n.Name)
		}
	}
	health := 0
	for _, v := range rec.Verdicts {
		if strings.HasPrefix(v.ID, "HEALTH-01") && v.ID >= "HEALTH-011" {
			health++
			if v.Status == record.Fail || v.Incomplete != "" {
				t.Errorf("%s %s: %s %s %s", v.ID, v.Node, v.Status, v.Detail, v.Incomplete)
			}
		}
	}
	if health != 12 {
		t.Errorf("%d HEALTH-011..016 verdicts, want 12", health)
	}
}

// TestTelemetryLostConnection: a node whose connection drops mid-window
// ends its stream (the executor's guard ends the sampler there); the
// window goes on and tears down; what came before is kept.
func TestTelemetryLostConnection(t *testing.T) {
	inv := fakeInventory(t, 1, "telemetry:\n  interval: 1s\n")
	f := fakeFleet(inv)
	h := f.Host("h1")
	rows := idleRows(t)
	onScript(h, "telemetry.sh", func(c *fake.Call, args []string) fake.Reply {
		fmt.Fprintf(c.Stdout, "note source nvidia-smi\nnote ready\ngpu %s\n", rows[0])
		time.Sleep(200 * time.Millisecond)
		return fake.Reply{Drop: true}
	})
	wait := orchestrator.Phase{Name: "allreduce", PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		time.Sleep(500 * time.Millisecond)
		return nil, nil
	}}
	rec, dir, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, Telemetry, wait, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := resultData(rec, "teardown", "h1", nil); !ok || r.Outcome != record.OK {
		t.Errorf("teardown after a lost connection: %+v", r)
	}
	s := readTelemetry(t, filepath.Join(dir, "raw", "h1", telemetry.FileName))
	if len(s.GPUs) != 1 {
		t.Errorf("%d rows kept, want the 1 sent before the drop", len(s.GPUs))
	}
}

// TestTelemetryWithoutNvidiaSmi: a node without nvidia-smi is NOT
// MEASURED (never failed, never quarantined); its HEALTH verdicts SKIP
// with the reason, the window INCOMPLETE.
func TestTelemetryWithoutNvidiaSmi(t *testing.T) {
	inv := fakeInventory(t, 1, "")
	f := fakeFleet(inv)
	onScript(f.Host("h1"), "telemetry.sh", func(c *fake.Call, args []string) fake.Reply {
		fmt.Fprint(c.Stdout, "note missing nvidia-smi: not found on the node\nnote source dmesg\nnote ready\n")
		<-c.Ctx.Done()
		return fake.Reply{Signal: "TERM"}
	})
	rec := runFake(t, inv, f, Telemetry)
	if rec.Result().Outcome != record.OutcomeIncomplete {
		t.Errorf("outcome %s, want INCOMPLETE", rec.Result().Outcome)
	}
	r, _ := resultData(rec, "telemetry", "h1", nil)
	if r.Outcome != record.NotMeasured || rec.Nodes[0].Quarantined {
		t.Fatalf("telemetry on a node without nvidia-smi: %s (%s), quarantined %v", r.Outcome, r.Error, rec.Nodes[0].Quarantined)
	}
	for _, v := range rec.Verdicts {
		if slices.Contains([]string{"HEALTH-011", "HEALTH-013", "HEALTH-016"}, v.ID) {
			if v.Status != record.Skip || !strings.Contains(v.Incomplete, "nvidia-smi") {
				t.Errorf("%s: %s %q, want SKIP naming nvidia-smi", v.ID, v.Status, v.Incomplete)
			}
		}
		if v.Status == record.Fail {
			t.Errorf("%s failed: %s", v.ID, v.Detail)
		}
	}
}

// TestTelemetryResumeAppends: a resumed window starts the sampler again
// and appends a member: both starts are in the file.
func TestTelemetryResumeAppends(t *testing.T) {
	inv := fakeInventory(t, 1, "telemetry:\n  interval: 1s\n")
	f := fakeFleet(inv)
	fakeSampler(f.Host("h1"), nil)
	ctx, cancel := context.WithCancel(t.Context())
	stop := orchestrator.Phase{Name: "allreduce", PerNode: func(c context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		time.Sleep(300 * time.Millisecond)
		cancel() // the coordinator is lost here
		return nil, c.Err()
	}}
	ps := []orchestrator.Phase{Connect, Tools, Telemetry, stop, Teardown}
	_, dir, err := orchestrator.Start(ctx, inv, ps, orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ps[3] = orchestrator.Phase{Name: "allreduce", PerNode: func(context.Context, *orchestrator.Window, *orchestrator.Node) (any, error) {
		time.Sleep(300 * time.Millisecond)
		return nil, nil
	}}
	load := func(string) (*inventory.Inventory, error) { return inv, nil }
	if _, _, err := orchestrator.Resume(t.Context(), dir, load, ps, orchestrator.Options{Dial: f.Dial, Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	s := readTelemetry(t, filepath.Join(dir, "raw", "h1", telemetry.FileName))
	if len(s.Starts) != 2 || len(s.GPUs) < 4 {
		t.Errorf("after a resume: %d starts (want 2), %d rows", len(s.Starts), len(s.GPUs))
	}
}

// resultData is the last result of phase on node in rec, its data decoded
// into v (when set).
func resultData(rec *record.Run, phase, node string, v any) (record.PhaseResult, bool) {
	for j := len(rec.Phases) - 1; j >= 0; j-- {
		if p := rec.Phases[j]; p.Phase == phase && p.Node == node {
			if v != nil && len(p.Data) > 0 {
				json.Unmarshal(p.Data, v)
			}
			return p, true
		}
	}
	return record.PhaseResult{}, false
}

// TestTelemetryScriptPassesKernelLinesAsTheyCome runs telemetry.sh for real
// with a dmesg that follows as the real one does (the ring first, then new
// lines, never an end): a new Xid must reach stdout while the follower is
// still open, the ring's old NVIDIA line must not, and closing stdin ends
// every process the script started. (tail -n +N held the follower's lines
// until its input ended, so no Xid came before teardown killed it.)
func TestTelemetryScriptPassesKernelLinesAsTheyCome(t *testing.T) {
	bin := t.TempDir()
	mark := filepath.Join(bin, "followed")
	dmesg := `#!/bin/bash
echo '[    1.000000] Linux version 6.8.0'
echo '[    2.000000] NVRM: Xid (PCI:0000:18:00): 79, old line from before the window'
case "$1" in -w|--follow) ;; *) exit 0 ;; esac
echo $$ > ` + mark + `
sleep 0.5
echo '[   10.000000] usb 1-1: new device'
echo '[   11.000000] NVRM: Xid (PCI:0000:53:00): 94, pid=1, Contained: SM (0x1). RST: No, D-RST: No'
exec sleep 600
`
	if err := os.WriteFile(filepath.Join(bin, "dmesg"), []byte(dmesg), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", scripts.Telemetry, "telemetry", "1000", "--query-gpu=index")
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin", "GPUACCEPT_SYSFS_IB="+filepath.Join(bin, "no-ib"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(20 * time.Second)
	var got []string
	for xid := false; !xid; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the script ended before the new Xid came:\n%s", strings.Join(got, "\n"))
			}
			got = append(got, l)
			xid = strings.HasPrefix(l, "kern ") && strings.Contains(l, "): 94,")
		case <-deadline:
			t.Fatalf("no kern line for the new Xid in 20 s while dmesg still follows:\n%s", strings.Join(got, "\n"))
		}
	}
	for _, l := range got {
		if strings.Contains(l, "old line") || strings.Contains(l, "usb") {
			t.Errorf("passed on %q: only the NVIDIA lines that came after the start", l)
		}
	}
	if !slices.Contains(got, "note source dmesg") || !slices.Contains(got, "note missing nvidia-smi: not found on the node") {
		t.Errorf("notes: %q", got)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the script after its stdin closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the script did not end within 10 s of its stdin closing")
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatalf("dmesg was never asked to follow: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The follower (exec'd into its sleep, same PID) ends with the script.
	// Killed, it may stay a zombie until whoever inherited it reaps it: gone
	// all the same.
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		_, rest, _ := strings.Cut(string(b), ") ")
		return !strings.HasPrefix(rest, "Z")
	}
	for end := time.Now().Add(3 * time.Second); alive() && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if alive() {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the following dmesg (pid %d) outlived the script", pid)
	}
}

// TestTelemetryAfterATornMember: a coordinator killed mid-write leaves the
// file's last gzip member without its end; the member a resumed window
// appends must still be read (a reader stops at a tear, and the lab's
// killed-then-resumed window lost every row the resumed sampler sent).
func TestTelemetryAfterATornMember(t *testing.T) {
	path := filepath.Join(t.TempDir(), telemetry.FileName)
	clock := time.Now()
	now := func() time.Time { return clock }
	row := "gpu " + idleRows(t)[0] + "\n"
	first, err := openTelemetrySink(path, time.Second, len(telemetry.Fields), 1<<20, now)
	if err != nil {
		t.Fatal(err)
	}
	first.Write([]byte(row))
	clock = clock.Add(telemetryFlushEvery)
	first.Write([]byte(row)) // flushed: a whole member
	// Killed while it wrote its next member: that member's data is in the
	// file (one row, then a torn line), its trailer is not.
	var member bytes.Buffer
	zw := gzip.NewWriter(&member)
	fmt.Fprintf(zw, "%d %s%d gpu a torn last li", clock.UnixMilli(), row, clock.UnixMilli())
	zw.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(member.Bytes()[:member.Len()-8])
	f.Close()
	if got, _ := telemetry.ReadFile(path); got == nil || len(got.GPUs) != 3 {
		t.Fatalf("the killed coordinator's part: %+v", got)
	}
	for round := 2; round <= 3; round++ {
		clock = clock.Add(time.Minute)
		s, err := openTelemetrySink(path, time.Second, len(telemetry.Fields), 1<<20, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte(row))
		if round == 3 {
			s.Close() // the last one ends whole
		} else {
			clock = clock.Add(telemetryFlushEvery)
			s.Write([]byte("note flushed\n"))
		}
		got, err := telemetry.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Starts) != round || len(got.GPUs) != round+2 || got.Bad != 0 {
			t.Errorf("after resume %d: %d starts, %d rows, %d bad; want %d, %d, 0", round-1, len(got.Starts),
				len(got.GPUs), got.Bad, round, round+2)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".telemetry-mend-*"))
	if len(left) > 0 {
		t.Errorf("mending left %v", left)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("a mended file's mode: %v %v, want 0644 as the sink makes it", fi.Mode(), err)
	}
	// A whole file is left byte for byte as it was.
	before, _ := os.ReadFile(path)
	if err := mendTornTelemetry(path); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a whole file was rewritten")
	}
	// A tail of zeros (a crash before the data reached the disk) is a tear too.
	whole, _ := os.ReadFile(path)
	os.WriteFile(path, append(slices.Clone(whole), make([]byte, 4096)...), 0o644)
	if err := mendTornTelemetry(path); err != nil {
		t.Errorf("a tail of zeros: %v", err)
	}
	if got, err := telemetry.ReadFile(path); err != nil || len(got.GPUs) != 5 {
		t.Errorf("a tail of zeros mended: %v, %+v", err, got)
	}
	// A file torn inside its first header reads as empty and is mended to one.
	os.WriteFile(path, []byte{0x1f, 0x8b}, 0o644)
	if err := mendTornTelemetry(path); err != nil {
		t.Fatal(err)
	}
	if got, err := telemetry.ReadFile(path); err != nil || len(got.Starts) != 0 {
		t.Errorf("a torn header mended: %+v %v", got, err)
	}
}
