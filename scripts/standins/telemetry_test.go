package standins

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gpuaccept/orchestrator/parse"
)

// telFields is the sampler's query: every field of the genuine telemetry capture, in its order.
func telFields(t *testing.T) string {
	t.Helper()
	tc, err := loadTelCapture()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(tc.names, ",")
}

// The nounits rule, held against the genuine pair: the with-units idle capture under the rule is the nounits
// capture, except the two cells that moved between the two commands (61 ms apart).
func TestNoUnitsRuleOnIdlePair(t *testing.T) {
	withUnits, err := parseCSVSample(sample(telIdleCSV))
	if err != nil {
		t.Fatal(err)
	}
	genuine := strings.Split(strings.TrimSuffix(string(sample(telNoUnitCSV)), "\n"), ", ")
	if len(genuine) != len(withUnits.names) {
		t.Fatalf("nounits row has %d cells, header %d", len(genuine), len(withUnits.names))
	}
	var differ []string
	for k, cell := range withUnits.rows[0] {
		if noUnits(cell, withUnits.units[k]) != genuine[k] {
			differ = append(differ, withUnits.names[k])
		}
	}
	if want := []string{"timestamp", "power.draw.instant"}; !slices.Equal(differ, want) {
		t.Errorf("cells that differ after the rule: %v, want only %v", differ, want)
	}
}

// loopRows runs the loop for about d and returns its rows, split into cells.
func loopRows(t *testing.T, profile, format string, interval, d time.Duration) [][]string {
	t.Helper()
	p, err := lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := parseSMILog(p.queryText())
	if err != nil {
		t.Fatal(err)
	}
	c := smiCall{queryGPU: telFields(t), hasQueryGPU: true, format: format, hasFormat: true}
	var out, errb syncBuffer
	stop := make(chan struct{})
	done := make(chan int)
	go func() { done <- runSMILoop(p, l, c, interval, nil, &out, &errb, stop) }()
	time.Sleep(d)
	close(stop)
	if code := <-done; code != 0 || errb.String() != "" {
		t.Fatalf("loop: exit %d, stderr %q", code, errb.String())
	}
	var rows [][]string
	for line := range strings.Lines(out.String()) {
		rows = append(rows, strings.Split(strings.TrimSuffix(line, "\n"), ", "))
	}
	return rows
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wantRow checks a row against a genuine capture row under nounits: every cell but the timestamp and the
// identity cells (the profile's own GPU) as captured.
func wantRow(t *testing.T, what string, row []string, capture string, gpu int) {
	t.Helper()
	c, err := parseCSVSample(sample(capture))
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != len(c.names) {
		t.Fatalf("%s: %d cells, want %d", what, len(row), len(c.names))
	}
	for k, name := range c.names {
		want := noUnits(c.rows[0][k], c.units[k])
		switch name {
		case "timestamp":
			if _, err := time.ParseInLocation("2006/01/02 15:04:05.000", row[k], time.Local); err != nil {
				t.Errorf("%s: timestamp %q not in nvidia-smi's format: %v", what, row[k], err)
			}
			continue
		case "index":
			want = fmt.Sprint(gpu)
		case "name", "pci.bus_id", "driver_version", "memory.total":
			continue
		}
		if row[k] != want {
			t.Errorf("%s: %s = %q, want %q", what, name, row[k], want)
		}
	}
}

func TestLoopPrintsGenuineRowsAtTheInterval(t *testing.T) {
	t.Setenv(StateEnv, t.TempDir())
	t.Setenv(SimTelemetryEnv, "")
	rows := loopRows(t, "h100", "csv,noheader,nounits", 100*time.Millisecond, 350*time.Millisecond)
	if len(rows) < 3*8 || len(rows)%8 != 0 {
		t.Fatalf("%d rows in 350 ms at 100 ms for 8 GPUs: want whole ticks, at least 3", len(rows))
	}
	var stamps []time.Time
	for i, row := range rows {
		wantRow(t, fmt.Sprintf("row %d", i), row, telIdleCSV, i%8)
		if i%8 == 0 {
			ts, _ := time.ParseInLocation("2006/01/02 15:04:05.000", row[0], time.Local)
			stamps = append(stamps, ts)
		}
	}
	for i := 1; i < len(stamps); i++ {
		if d := stamps[i].Sub(stamps[i-1]); d < 90*time.Millisecond || d > 250*time.Millisecond {
			t.Errorf("tick %d came %v after the one before, want about 100ms", i, d)
		}
	}
	// The identity cells are the profile's: the same as its one-shot query.
	var b bytes.Buffer
	Main("h100", NvidiaSMI, []string{"--query-gpu=index,name,pci.bus_id,driver_version,memory.total",
		"--format=csv,noheader,nounits"}, &b, &bytes.Buffer{})
	first := strings.Split(strings.Split(b.String(), "\n")[0], ", ")
	tc, _ := loadTelCapture()
	for j, f := range []string{"index", "name", "pci.bus_id", "driver_version", "memory.total"} {
		if got := rows[0][tc.col(f)]; got != first[j] {
			t.Errorf("%s = %q, the one-shot query says %q", f, got, first[j])
		}
	}
}

// Every spelling of the loop real nvidia-smi accepts; a header in loop mode is in no sample.
func TestLoopSpellings(t *testing.T) {
	t.Setenv(StateEnv, t.TempDir())
	bin := standinBinary(t)
	q := "--query-gpu=" + telFields(t)
	for _, loop := range [][]string{{"-lms", "200"}, {"--loop-ms=200"}, {"--loop-ms", "200"}, {"-l", "1"},
		{"--loop=1"}, {"--loop", "1"}} {
		args := append([]string{"--profile", "h100", NvidiaSMI, q, "--format=csv,noheader,nounits"}, loop...)
		out, _ := runFor(t, bin, args, 700*time.Millisecond)
		if n := strings.Count(out, "\n"); n < 8 || n%8 != 0 {
			t.Errorf("%v: %d lines, want whole ticks of 8", loop, n)
		}
	}
	for _, bad := range [][]string{{"-lms", "0"}, {"-l", "x"}, {"-lms"}} {
		var o, e bytes.Buffer
		if code := Main("h100", NvidiaSMI, append([]string{q, "--format=csv,noheader"}, bad...), &o, &e); code != ExitNotSimulated {
			t.Errorf("%v: exit %d, want not simulated", bad, code)
		}
	}
	var o, e bytes.Buffer
	if code := Main("h100", NvidiaSMI, []string{q, "--format=csv", "-lms", "100"}, &o, &e); code != ExitNotSimulated {
		t.Errorf("a looping query with its header: exit %d, want not simulated", code)
	}
}

// runFor starts the stand-in binary, lets it run for d, sends SIGTERM and returns its stdout and stderr. The
// stand-in must end at once, saying nothing.
func runFor(t *testing.T, bin string, args []string, d time.Duration) (string, string) {
	t.Helper()
	cmd := execCommand(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	sent := time.Now()
	terminate(cmd)
	err := cmd.Wait()
	if took := time.Since(sent); took > 2*time.Second {
		t.Errorf("%v: took %v to end after SIGTERM", args, took)
	}
	if !killedByTerm(err) {
		t.Errorf("%v: ended with %v, want killed by SIGTERM", args, err)
	}
	if errb.Len() != 0 {
		t.Errorf("%v: stderr %q, want nothing", args, errb.String())
	}
	return out.String(), errb.String()
}

// The load rows while a stand-in all_reduce_perf runs on the node, the idle rows once it ended.
func TestLoopLoadRowsWhileAllReduceRuns(t *testing.T) {
	needMPIHere(t)
	state := t.TempDir()
	t.Setenv(StateEnv, state)
	t.Setenv(SimTelemetryEnv, "")
	dir := t.TempDir()
	if out, err := execCommand("bash", "nccl/build.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}
	// Without -x: the rank finds the state directory in its environment, as this test's child.
	cmd := execCommand("mpirun", "--allow-run-as-root", "-np", "1", filepath.Join(dir, "all_reduce_perf"),
		"-b", "1M", "-e", "1M", "-n", "1000000", "-w", "0")
	cmd.Env = append(os.Environ(), "OMPI_MCA_btl=self,tcp", "OMPI_MCA_btl_tcp_if_include=lo",
		"OMPI_MCA_oob_tcp_if_include=lo", "OMPI_MCA_pml=ob1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { terminate(cmd); cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for !busy(state) {
		if time.Now().After(deadline) {
			t.Fatal("all_reduce_perf left no busy marker in 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rows := loopRows(t, "h100", "csv,noheader,nounits", 100*time.Millisecond, 150*time.Millisecond)
	for i, row := range rows {
		wantRow(t, fmt.Sprintf("busy row %d", i), row, telLoadCSV, i%8)
	}
	terminate(cmd)
	cmd.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for busy(state) {
		if time.Now().After(deadline) {
			t.Fatal("the busy marker outlived all_reduce_perf")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, row := range loopRows(t, "h100", "csv,noheader,nounits", 100*time.Millisecond, 50*time.Millisecond) {
		wantRow(t, fmt.Sprintf("idle row %d", i), row, telIdleCSV, i%8)
	}
}

// newLoop is a loop over profile h100 with plan, for ticks at chosen elapsed times.
func newLoop(t *testing.T, planText string) *smiLoop {
	t.Helper()
	p, _ := lookup("h100")
	l, err := parseSMILog(p.queryText())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := loadTelCapture()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := parsePlan(planText)
	if err != nil {
		t.Fatal(err)
	}
	return &smiLoop{p: p, l: l, cap: tc, fields: tc.names, units: false, plan: pl, now: time.Now}
}

// cellsAt is GPU gpu's nounits row at elapsed time el, by field name.
func cellsAt(t *testing.T, lp *smiLoop, el time.Duration, isBusy bool, gpu int) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(lp.tick(time.Now(), el, isBusy)), "\n"), "\n")
	cells := strings.Split(lines[gpu], ", ")
	m := map[string]string{}
	for k, name := range lp.cap.names {
		m[name] = cells[k]
	}
	return m
}

func TestPlantedGPUEventsAtTheirTimes(t *testing.T) {
	lp := newLoop(t, "throttle:hw_thermal_slowdown@10-20:gpu=3, ecc:+2@15:gpu=1, ecc:+5@15:gpu=1:type=corrected,"+
		"remap@30:gpu=2, stall@40-50:gpu=5")
	s := time.Second
	check := func(el time.Duration, isBusy bool, gpu int, want map[string]string) {
		t.Helper()
		got := cellsAt(t, lp, el, isBusy, gpu)
		for f, w := range want {
			if got[f] != w {
				t.Errorf("at %v gpu %d busy %v: %s = %q, want %q", el, gpu, isBusy, f, got[f], w)
			}
		}
	}
	// throttle: the reason's column and its bit, only within [from, to), on that GPU only.
	check(9*s, true, 3, map[string]string{"clocks_event_reasons.hw_thermal_slowdown": "Not Active",
		"clocks_event_reasons.active": "0x0000000000000004"})
	check(10*s, true, 3, map[string]string{"clocks_event_reasons.hw_thermal_slowdown": "Active",
		"clocks_event_reasons.active": "0x0000000000000044", "clocks_event_reasons.sw_power_cap": "Active"})
	check(12*s, false, 3, map[string]string{"clocks_event_reasons.active": "0x0000000000000041"})
	check(12*s, true, 2, map[string]string{"clocks_event_reasons.hw_thermal_slowdown": "Not Active"})
	check(20*s, true, 3, map[string]string{"clocks_event_reasons.hw_thermal_slowdown": "Not Active"})
	// ECC: the totals rise at their moment and stay risen.
	check(14*s, false, 1, map[string]string{"ecc.errors.uncorrected.volatile.total": "0",
		"ecc.errors.corrected.volatile.total": "0"})
	for _, el := range []time.Duration{15 * s, 100 * s} {
		check(el, false, 1, map[string]string{"ecc.errors.uncorrected.volatile.total": "2",
			"ecc.errors.uncorrected.aggregate.total": "2", "ecc.errors.corrected.volatile.total": "5",
			"ecc.errors.corrected.aggregate.total": "5"})
	}
	// remap: an uncorrectable remapped row, pending until a reset.
	check(29*s, false, 2, map[string]string{"remapped_rows.uncorrectable": "0", "remapped_rows.pending": "No"})
	check(31*s, false, 2, map[string]string{"remapped_rows.uncorrectable": "1", "remapped_rows.pending": "Yes"})
	// stall: the load row's utilisation at the idle row's power.
	check(45*s, false, 5, map[string]string{"utilization.gpu": "100", "power.draw": "82.23",
		"power.draw.instant": "81.74", "clocks.current.sm": "1530"})
	check(50*s, false, 5, map[string]string{"utilization.gpu": "0"})
	check(45*s, true, 4, map[string]string{"utilization.gpu": "100", "power.draw": "691.09"})
}

// reKernelPlain is dmesg's default line: "[%5lu.%06lu] " and the message; an Xid as the NVIDIA driver logs it.
var (
	reKernelPlain = regexp.MustCompile(`^\[ *\d+\.\d{6}\] `)
	reXid         = regexp.MustCompile(`NVRM: Xid \(PCI:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\): (\d+), pid=`)
)

func TestKernelLineShapesMatchGenuine(t *testing.T) {
	plain, xids := 0, 0
	for _, name := range []string{"kernel/h200-580.159.04-dmesg-boot-vm-nvrm-no-xid.txt",
		"kernel/gpud-dmesg-ctime-xid119-gsp-rpc-timeout-xe9680.txt", "kernel/gpud-dmesg-iso-xid48-63-94-dbe-rowremap-peermem.txt",
		"kernel/gpud-dmesg-decode-iso-xid13-43-sm-warp-exception-excerpt.txt"} {
		for line := range strings.Lines(string(sample(name))) {
			if reKernelPlain.MatchString(line) {
				plain++
			}
			if strings.Contains(line, "NVRM: Xid") {
				if !reXid.MatchString(line) {
					t.Errorf("%s: genuine Xid line not matched: %q", name, line)
				}
				xids++
			}
		}
	}
	if plain < 100 || xids < 10 {
		t.Fatalf("the genuine samples gave %d plain-stamped lines and %d Xid lines", plain, xids)
	}
}

func TestDmesgPrintsPlantedXidAtItsTime(t *testing.T) {
	state := t.TempDir()
	t.Setenv(StateEnv, state)
	t.Setenv(SimTelemetryEnv, "xid:48@0:gpu=2, xid:94@1.2:gpu=5")
	var out, errb syncBuffer
	// Before the telemetry loop started there is no origin: nothing is due.
	if code := runDmesg("h100", nil, &out, &errb, nil); code != 0 || out.String() != "" {
		t.Fatalf("dmesg before t0: exit %d, stdout %q stderr %q", code, out.String(), errb.String())
	}
	if _, err := origin(state, time.Now()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() { done <- runDmesg("h100", []string{"--follow"}, &out, &errb, stop) }()
	time.Sleep(600 * time.Millisecond)
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Errorf("at 0.6 s: %d lines, want the Xid 48 only:\n%s", n, out.String())
	}
	time.Sleep(1200 * time.Millisecond)
	close(stop)
	if code := <-done; code != 0 {
		t.Fatalf("dmesg --follow: exit %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", out.String())
	}
	for i, want := range []struct {
		code int
		pci  string
	}{{48, "0000:75:00"}, {94, "0000:a8:00"}} {
		line := lines[i]
		m := reXid.FindStringSubmatch(line)
		if !reKernelPlain.MatchString(line) || m == nil || m[1] != fmt.Sprint(want.code) ||
			!strings.Contains(line, "(PCI:"+want.pci+")") {
			t.Errorf("line %d: %q, want Xid %d on %s in dmesg's format", i, line, want.code, want.pci)
		}
		text, _ := xidText(want.code)
		if !strings.HasSuffix(line, ", "+text) {
			t.Errorf("line %d does not end with the genuine Xid %d text %q", i, want.code, text)
		}
	}
	k := parse.ParseKernelLog(out.String())
	if k.Counts["xid 48"] != 1 || k.Counts["xid 94"] != 1 {
		t.Errorf("parse.ParseKernelLog counts %v", k.Counts)
	}
	// A plain dmesg later prints both; -W prints neither (both came before it).
	var plain, fresh bytes.Buffer
	runDmesg("h100", nil, &plain, &errb, nil)
	if plain.String() != out.String() {
		t.Errorf("plain dmesg:\n%s\nwant:\n%s", plain.String(), out.String())
	}
	stop2 := make(chan struct{})
	close(stop2)
	runDmesg("h100", []string{"-W"}, &fresh, &errb, stop2)
	runDmesg("h100", []string{"--follow", "--since", "now"}, &fresh, &errb, stop2)
	runDmesg("h100", []string{"--since=now"}, &fresh, &errb, stop2)
	if fresh.Len() != 0 {
		t.Errorf("dmesg -W / --since now printed old lines: %q", fresh.String())
	}
	var o, e bytes.Buffer
	if code := runDmesg("h100", []string{"--since", "yesterday"}, &o, &e, stop2); code != ExitNotSimulated {
		t.Errorf("--since yesterday: exit %d, want not simulated", code)
	}
}

func TestIBTreeAndLinkDown(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "sys", "class", "infiniband")
	p, _ := lookup("h100")
	if err := writeIBTree(dir, p); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	devs, _ := os.ReadDir(dir)
	if len(devs) != 12 {
		t.Fatalf("%d devices, want the sample's 12", len(devs))
	}
	for _, c := range IBCounters {
		if got := read("mlx5_0/ports/1/counters/" + c); got != "0\n" {
			t.Errorf("%s = %q", c, got)
		}
	}
	if got := read("mlx5_3/ports/1/state"); got != "4: ACTIVE\n" {
		t.Errorf("state %q", got)
	}
	pl, err := parsePlan("linkdown@10-20:port=mlx5_3:1, linkdown@30")
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	for _, step := range []struct {
		el                 time.Duration
		port, state, downs string
	}{
		{5 * s, "mlx5_3", "4: ACTIVE\n", "0\n"},
		{10 * s, "mlx5_3", "1: DOWN\n", "1\n"},
		{25 * s, "mlx5_3", "4: ACTIVE\n", "1\n"},
		{25 * s, "mlx5_0", "4: ACTIVE\n", "0\n"},
		{30 * s, "mlx5_0", "1: DOWN\n", "1\n"},
		{90 * s, "mlx5_0", "1: DOWN\n", "1\n"},
	} {
		applyIB(dir, pl, step.el)
		if got := read(step.port + "/ports/1/state"); got != step.state {
			t.Errorf("at %v: %s state %q, want %q", step.el, step.port, got, step.state)
		}
		if got := read(step.port + "/ports/1/counters/link_downed"); got != step.downs {
			t.Errorf("at %v: %s link_downed %q, want %q", step.el, step.port, got, step.downs)
		}
	}
	// Nothing but sysfs's own files in the tree.
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".") {
			t.Errorf("stray file in the tree: %s", path)
		}
		return nil
	})
	a10, _ := lookup("a10-wrong-model")
	if err := writeIBTree(dir, a10); err != nil || isDir(dir) {
		t.Errorf("a node without IB got a tree (%v)", err)
	}
}

func TestBadPlanIsAnErrorNamingIt(t *testing.T) {
	for spec, want := range map[string]string{
		"throttle:hot@1-2":         `event "throttle:hot@1-2": throttle reason "hot"`,
		"throttle:hw_slowdown@5":   "wants @<from>-<to>",
		"throttle:hw_slowdown@5-2": "ends before it starts",
		"xid:79@1":                 "xid 79: no genuine line",
		"xid:abc@1":                `xid code "abc"`,
		"ecc:2@1":                  "want +N",
		"ecc:+0@1":                 "want +N",
		"remap@1:gpu=x":            `gpu="x"`,
		"remap@1:port=mlx5_0:1":    "is not one of remap's",
		"linkdown@1:port=bad":      `port="bad"`,
		"stall@1":                  "wants @<from>-<to>",
		"burn@1":                   `unknown event "burn"`,
		"remap":                    "no @<time>",
		"remap@-1":                 "time",
		"xid:48@1,throttle:x@1-2":  `event "throttle:x@1-2"`,
		"ecc:+1@1:type=weird":      `type="weird"`,
		"remap@40d":                "time",
	} {
		_, err := parsePlan(spec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), SimTelemetryEnv) {
			t.Errorf("%q: %v, want an error with %q", spec, err, want)
		}
	}
	if pl, err := parsePlan(" xid:48@90s:gpu=7 , linkdown@2m-3m:port=mlx5_0:1,,stall@1.5-2:gpu=0"); err != nil || len(pl) != 3 ||
		pl[0].at != 90*time.Second || pl[1].until != 3*time.Minute || pl[1].port != "mlx5_0:1" || pl[2].at != 1500*time.Millisecond {
		t.Errorf("good plan: %+v, %v", pl, err)
	}
	// The loop and InstallTelemetry refuse it too, and a GPU the node lacks.
	t.Setenv(StateEnv, t.TempDir())
	for _, spec := range []string{"xid:79@1", "remap@1:gpu=8"} {
		t.Setenv(SimTelemetryEnv, spec)
		var o, e bytes.Buffer
		code := Main("h100", NvidiaSMI, []string{"--query-gpu=index", "--format=csv,noheader", "-lms", "100"}, &o, &e)
		if code != ExitNotSimulated || !strings.Contains(e.String(), SimTelemetryEnv) {
			t.Errorf("%s: loop exit %d, stderr %q", spec, code, e.String())
		}
		err := InstallTelemetry(t.TempDir(), "h100", []string{"/bin/true"}, Telemetry{State: t.TempDir(), Plant: spec})
		if err == nil || !strings.Contains(err.Error(), SimTelemetryEnv) {
			t.Errorf("%s: InstallTelemetry: %v", spec, err)
		}
	}
}

func execCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

func terminate(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Signal(syscall.SIGTERM)
	}
}

func killedByTerm(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}

// needMPIHere skips where Open MPI is missing, except as root on Linux (CI installs it), as the nccl tests do.
func needMPIHere(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			if runtime.GOOS == "linux" && os.Geteuid() == 0 {
				t.Fatalf("%s not found: install Open MPI (apt-get install -y libopenmpi-dev openmpi-bin)", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
}

// The wrappers InstallTelemetry writes: nvidia-smi's loop with the plan and state, SIGTERM through the wrapper,
// a dmesg only where Xids are planted, the IB tree.
func TestInstallTelemetry(t *testing.T) {
	bin := standinBinary(t)
	dir, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	if err := Install(dir, "h100", []string{bin}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(StateEnv, "")
	t.Setenv(SimTelemetryEnv, "")
	if err := InstallTelemetry(dir, "h100", []string{bin}, Telemetry{State: state, Plant: "xid:63@0:gpu=1, throttle:sw_thermal_slowdown@0-60:gpu=0"}); err != nil {
		t.Fatal(err)
	}
	out, _ := runFor(t, filepath.Join(dir, NvidiaSMI), []string{"--query-gpu=index,clocks_event_reasons.active",
		"--format=csv,noheader", "-lms", "100"}, 400*time.Millisecond)
	if !strings.HasPrefix(out, "0, 0x0000000000000021\n1, 0x0000000000000001\n") {
		t.Errorf("loop through the wrapper:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(state, t0File)); err != nil {
		t.Errorf("no t0 in the state directory: %v", err)
	}
	b, err := execCommand(filepath.Join(dir, Dmesg)).Output()
	if err != nil || !strings.Contains(string(b), "NVRM: Xid (PCI:0000:64:00): 63, pid='<unknown>', name=<unknown>, Row Remapper") {
		t.Errorf("dmesg wrapper: %v\n%s", err, b)
	}
	follow := execCommand(filepath.Join(dir, Dmesg), "-w")
	var fo bytes.Buffer
	follow.Stdout = &fo
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	terminate(follow)
	if err := follow.Wait(); !killedByTerm(err) || fo.String() != string(b) {
		t.Errorf("dmesg -w: %v, printed %q", err, fo.String())
	}
	if !isDir(filepath.Join(state, "sys", "class", "infiniband", "mlx5_0", "ports", "1", "counters")) {
		t.Error("no IB tree")
	}
	// Again without Xids: the dmesg wrapper goes, the state starts afresh.
	if err := InstallTelemetry(dir, "h100", []string{bin}, Telemetry{State: state}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, Dmesg)); !os.IsNotExist(err) {
		t.Errorf("dmesg wrapper left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, t0File)); !os.IsNotExist(err) {
		t.Errorf("t0 left: %v", err)
	}
}

// A reader that goes away ends the loop as SIGPIPE ends nvidia-smi: at once, without a word.
func TestLoopEndsOnSIGPIPE(t *testing.T) {
	t.Setenv(StateEnv, t.TempDir())
	cmd := execCommand(standinBinary(t), "--profile", "h100", NvidiaSMI, "--query-gpu=index",
		"--format=csv,noheader", "-lms", "50")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	r, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "0\n1\n2\n3\n4\n5\n6\n7\n" {
		t.Errorf("first tick %q, %v", buf, err)
	}
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() ||
			ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE || errb.Len() != 0 {
			t.Errorf("ended with %v, stderr %q; want killed by SIGPIPE, silent", err, errb.String())
		}
	case <-time.After(5 * time.Second):
		terminate(cmd)
		t.Fatal("the loop outlived its reader by 5 s")
	}
}
