package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/telemetry"
)

// gpuaccept status reads a run directory, never the nodes: after the
// window (the demo's bundle), and in the middle of one (the same journal
// cut after the all-reduce, as a coordinator that is still running leaves
// it); a directory without a journal is bad input.
func TestStatusOfADemoRun(t *testing.T) {
	work := t.TempDir()
	if res := gpuaccept(t, work, "demo", "--runs-dir", "runs"); res.code != 1 {
		t.Fatalf("demo exit %d\n%s", res.code, res.stderr)
	}
	runs, _ := os.ReadDir(filepath.Join(work, "runs"))
	if len(runs) != 1 {
		t.Fatalf("%d run directories", len(runs))
	}
	dir := filepath.Join(work, "runs", runs[0].Name())

	res := gpuaccept(t, work, "status", dir)
	t.Logf("ended:\n%s", res.stdout)
	if res.code != 0 {
		t.Fatalf("status exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{runs[0].Name() + " (SIMULATED): ended (completed)", "nodes: 4, 1 quarantined",
		"gpu-04: diag: ", "last samples:", "4 nodes gpu-[01-04]: "} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("status lacks %q", want)
		}
	}
	fits(t, res.stdout)

	// The same window as it stood after the all-reduce: the bisection
	// under way, the phases after it still to run.
	cut := filepath.Join(work, "cut")
	if err := os.CopyFS(cut, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cut, orchestrator.SealedJournalFile)); err != nil {
		t.Fatal(err)
	}
	var kept bytes.Buffer
	for _, line := range journalLines(t, filepath.Join(dir, orchestrator.SealedJournalFile)) {
		kept.Write(line)
		kept.WriteByte('\n')
		var e struct{ Type, Phase string }
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == "done" && e.Phase == "allreduce" {
			break
		}
	}
	if err := os.WriteFile(filepath.Join(cut, orchestrator.JournalFile), kept.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	res = gpuaccept(t, work, "status", cut)
	t.Logf("cut after the all-reduce:\n%s", res.stdout)
	if res.code != 0 {
		t.Fatalf("status exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{": bisect for ", "phases done", "at most ", " left (the bounds of the phases to run)",
		"nodes: 4, 1 quarantined", "last samples:"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("status of the cut journal lacks %q", want)
		}
	}
	if strings.Contains(res.stdout, "ended") {
		t.Errorf("a journal without its end reads as ended")
	}
	fits(t, res.stdout)

	// A torn last line (the coordinator writing it as status reads) is
	// not an error.
	f, err := os.OpenFile(filepath.Join(cut, orchestrator.JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"result","at":"2026-`)
	f.Close()
	if res := gpuaccept(t, work, "status", cut); res.code != 0 || !strings.Contains(res.stdout, ": bisect for ") {
		t.Errorf("a torn last line: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	empty := filepath.Join(work, "empty")
	os.Mkdir(empty, 0o755)
	res = gpuaccept(t, work, "status", empty)
	if res.code != 2 || !strings.Contains(res.stderr, empty) || !strings.Contains(res.stderr, "no journal") {
		t.Errorf("a directory without a journal: exit %d: %s", res.code, res.stderr)
	}
}

func journalLines(t *testing.T, path string) [][]byte {
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
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// fits: every line of out within 100 columns.
func fits(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
}

// At a thousand nodes the last samples are the fleet's line and its
// outliers, not a thousand lines: nodes alike share a host range, at most
// eight groups are shown, and a node without a sample is named.
func TestStatusLastSamplesAtAThousandNodes(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	f := func(x float64) *float64 { return &x }
	var names []string
	series := map[string]*telemetry.Series{}
	for i := 1; i <= 1000; i++ {
		n := fmt.Sprintf("gpu-%04d", i)
		names = append(names, n)
		temp, power, util := 71+float64(i%4), 690+float64(i%11), 99.0
		switch {
		case i == 17:
			temp = 93 // hot
		case i == 400 || i == 401:
			util, power = 0, 80 // idle under load
		case i == 999:
			continue // no sample yet
		}
		s := &telemetry.Series{}
		for g := range 8 {
			s.GPUs = append(s.GPUs, telemetry.GPUSample{At: now.Add(-3 * time.Second), Index: g,
				TempC: f(temp), PowerW: f(power), SMClockMHz: f(1980), UtilPct: f(util)})
		}
		series[n] = s
	}
	var b bytes.Buffer
	printLastSamples(&b, names, series, now)
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"996 nodes gpu-[0001-0016,0018-0399,…]: 71-74 °C, 690-700 W, SM 1980 MHz, 99% busy, 3s ago",
		"gpu-0017: 93 °C, ",
		"2 nodes gpu-[0400-0401]: 71-72 °C, 80 W, SM 1980 MHz, 0% busy",
		"gpu-0999: no sample",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q", want)
		}
	}
	if n := strings.Count(out, "\n"); n > 12 {
		t.Errorf("%d lines for 1,000 nodes", n)
	}
	fits(t, out)
}
