package telemetry

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/parse"
)

// t0 is a window's start in the tests: 2026-12-04 15:18:00 UTC.
var t0 = time.UnixMilli(1764861480000).UTC()

// line is one line of the file at t0+d.
func line(d time.Duration, tag, payload string) string {
	return fmt.Sprintf("%d %s %s\n", t0.Add(d).UnixMilli(), tag, payload)
}

// members gzips each text as one member, as the coordinator appends them.
func members(tb testing.TB, texts ...string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	for _, text := range texts {
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write([]byte(text)); err != nil {
			tb.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

func mustRead(t *testing.T, data []byte) *Series {
	t.Helper()
	s, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func nounitsIdle(t testing.TB) string {
	return strings.TrimSpace(sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-telemetry-csv-nounits-idle.txt"))
}

func TestReadMembersAndTags(t *testing.T) {
	row := nounitsIdle(t)
	first := line(0, TagStart, "interval=5000 fields=47") + line(time.Second, TagGPU, row) +
		line(2*time.Second, TagIB, "mlx5_0:1 state=4: ACTIVE symbol_error=0 link_downed=1") +
		line(3*time.Second, TagNote, "journalctl -k: not found") +
		line(4*time.Second, TagNote, DroppedNote(12, "over max_mib_per_node")) +
		line(5*time.Second, "bogus", "x") + "not a line\n" + line(6*time.Second, TagGPU, "0, 1, 2")
	second := line(time.Hour, TagStart, "interval=5000 fields=47") + line(time.Hour+time.Second, TagGPU, row) +
		"17648614" // torn: the coordinator died mid-line
	s := mustRead(t, members(t, first, second))
	if len(s.Starts) != 2 || !s.Starts[1].Equal(t0.Add(time.Hour)) {
		t.Errorf("starts %v", s.Starts)
	}
	if len(s.GPUs) != 2 || *s.GPUs[1].PowerW != 82.23 || !s.GPUs[1].At.Equal(t0.Add(time.Hour+time.Second)) {
		t.Errorf("gpu samples %+v", s.GPUs)
	}
	if len(s.IB) != 1 || s.IB[0].State != "4: ACTIVE" || s.IB[0].Counters["link_downed"] != 1 ||
		s.IB[0].Port != "mlx5_0:1" {
		t.Errorf("ib %+v", s.IB)
	}
	if s.Dropped != 12 || len(s.Notes) != 2 {
		t.Errorf("dropped %d, notes %q", s.Dropped, s.Notes)
	}
	if s.Bad != 3 {
		t.Errorf("bad = %d, want 3 (an unknown tag, no time, a short gpu row)", s.Bad)
	}
}

// A file cut inside a gzip member (the coordinator killed) reads up to
// the tear.
func TestReadTornMember(t *testing.T) {
	row := nounitsIdle(t)
	var text strings.Builder
	for i := range 2000 {
		text.WriteString(line(time.Duration(i)*time.Second, TagGPU, row))
	}
	data := members(t, line(0, TagStart, "interval=1000 fields=47"), text.String())
	s := mustRead(t, data[:len(data)-len(data)/3])
	if len(s.Starts) != 1 || len(s.GPUs) == 0 || len(s.GPUs) >= 2000 || s.Bad != 0 {
		t.Errorf("torn file: %d starts, %d rows, %d bad", len(s.Starts), len(s.GPUs), s.Bad)
	}
	if s, err := Read(bytes.NewReader(nil)); err != nil || s == nil || len(s.GPUs) != 0 {
		t.Errorf("empty file: %v %v", s, err)
	}
	if _, err := Read(strings.NewReader("plain text, not gzip")); err == nil {
		t.Error("a file that is not gzip read without error")
	}
}

func TestReadBounds(t *testing.T) {
	row := nounitsIdle(t)
	long := line(0, TagNote, strings.Repeat("x", MaxLine+10))
	s := mustRead(t, members(t, long+line(time.Second, TagGPU, row)))
	if s.Bad != 1 || len(s.GPUs) != 1 || len(s.Notes) != 0 {
		t.Errorf("a line past %d bytes: bad %d, rows %d, notes %d", MaxLine, s.Bad, len(s.GPUs), len(s.Notes))
	}
	var text strings.Builder
	for i := range 100 {
		text.WriteString(line(time.Duration(i)*time.Second, TagGPU, row))
	}
	s, err := read(bytes.NewReader(members(t, text.String())), 10*int64(len(line(0, TagGPU, row))), MaxLine)
	if err != nil || len(s.GPUs) != 10 || !s.Truncated {
		t.Errorf("bounded to 10 rows: %d rows, truncated %v, %v", len(s.GPUs), s.Truncated, err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	if s, err := ReadFile(filepath.Join(dir, FileName)); s != nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, %v", s, err)
	}
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, members(t, line(0, TagStart, "interval=5000 fields=47")), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadFile(path); err != nil || len(s.Starts) != 1 {
		t.Errorf("ReadFile: %v, %v", s, err)
	}
}

// Every genuine kernel sample, streamed as the sampler passes it on (the
// lines preflight keeps), gives the events ParseKernelLog finds in the
// whole log.
func TestGenuineKernelLines(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(samplesRoot, "kernel"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		n++
		text := sample(t, "kernel", e.Name())
		var file strings.Builder
		for i, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "NVRM:") || strings.Contains(l, "SXid") || strings.Contains(l, "nvidia-nvswitch") {
				file.WriteString(line(time.Duration(i)*time.Millisecond, TagKernel, strings.TrimRight(l, "\r")))
			}
		}
		s := mustRead(t, members(t, file.String()))
		got := map[string]int{}
		for _, k := range s.Kernel {
			if k.Kind != "" {
				got[fmt.Sprintf("%s %d %s", k.Kind, k.Xid, k.BusID)]++
			}
			if k.Kind == "xid" && k.Xid == 79 {
				got[fmt.Sprintf("off-bus 0 %s", k.BusID)]++ // parse counts an Xid 79 twice
			}
		}
		want := map[string]int{}
		for _, k := range parse.ParseKernelLog(text).Events {
			want[fmt.Sprintf("%s %d %s", k.Kind, k.Code, k.Device)]++
		}
		t.Logf("%s: %v", e.Name(), got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n streamed %v\n whole    %v", e.Name(), got, want)
		}
		if s.Bad != 0 {
			t.Errorf("%s: %d bad lines", e.Name(), s.Bad)
		}
	}
	if n < 7 {
		t.Errorf("%d kernel samples, want the 7 of SOURCES.md", n)
	}
}

// Visit passes what Read keeps, row by row, and keeps none of it.
func TestVisitStreams(t *testing.T) {
	row := nounitsIdle(t)
	text := line(0, TagStart, "interval=5000 fields=47") + line(time.Second, TagGPU, row) +
		line(2*time.Second, TagIB, "mlx5_0:1 state=4: ACTIVE symbol_error=0") +
		line(3*time.Second, TagKernel, "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.") +
		line(4*time.Second, TagGPU, row) + line(5*time.Second, TagNote, DroppedNote(3, "over max_mib_per_node"))
	data := members(t, text)
	want := mustRead(t, data)
	var gpus []GPUSample
	var kern []KernelEvent
	s, err := Visit(bytes.NewReader(data), Visitor{
		GPU:    func(g *GPUSample) { gpus = append(gpus, *g) },
		Kernel: func(e *KernelEvent) { kern = append(kern, *e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != len(want.GPUs) || len(kern) != len(want.Kernel) || len(kern) != 1 || kern[0].Xid != want.Kernel[0].Xid {
		t.Errorf("visited %d rows, %d events; Read keeps %d, %d", len(gpus), len(kern), len(want.GPUs), len(want.Kernel))
	}
	if len(s.GPUs)+len(s.Kernel)+len(s.IB) != 0 || len(s.Starts) != 1 || s.Dropped != 3 {
		t.Errorf("Visit kept %d rows, %d events, %d IB; starts %d, dropped %d", len(s.GPUs), len(s.Kernel), len(s.IB), len(s.Starts), s.Dropped)
	}
}
