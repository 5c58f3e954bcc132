package telemetry

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzRead: whatever a node sends and however the file was cut, Read
// never panics, keeps no more lines than its bounds let in, no line past
// its length bound, and Judge and Summarise take what it gives.
// Seeded with the genuine rows and kernel lines.
func FuzzRead(f *testing.F) {
	if _, err := os.Stat(samplesRoot); err != nil {
		f.Skip("no shared samples beside the module: nothing to seed with")
	}
	row := nounitsIdle(f)
	var text strings.Builder
	text.WriteString(line(0, TagStart, "interval=5000 fields=47"))
	for _, r := range append(project(f, sample(f, "nvidia-smi",
		"h200-580.159.04-query-gpu-telemetry-csv-bf16-gemm-load.txt")), row) {
		text.WriteString(line(time.Second, TagGPU, r))
	}
	text.WriteString(line(2*time.Second, TagIB, "mlx5_0:1 state=4: ACTIVE symbol_error=3 link_downed=0"))
	text.WriteString(line(3*time.Second, TagNote, DroppedNote(3, "over max_mib_per_node")))
	f.Add([]byte(text.String()), false)
	f.Add(members(f, text.String(), text.String()[:len(text.String())-7]), true)
	entries, _ := os.ReadDir(filepath.Join(samplesRoot, "kernel"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".txt") {
			var k strings.Builder
			for _, l := range strings.Split(sample(f, "kernel", e.Name()), "\n") {
				k.WriteString(line(time.Minute, TagKernel, l))
			}
			f.Add([]byte(k.String()), false)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		in := data
		if !raw {
			in = members(t, string(data))
		}
		const maxBytes, maxLine = 4096, 512
		s, err := read(bytes.NewReader(in), maxBytes, maxLine)
		if err != nil {
			return
		}
		kept := len(s.Starts) + len(s.GPUs) + len(s.Kernel) + len(s.IB) + len(s.Notes) + s.Bad
		if !raw {
			// No more lines than the first maxBytes+1 unpacked bytes hold.
			if n := bytes.Count(data[:min(len(data), maxBytes+1)], []byte("\n")); kept > n {
				t.Fatalf("%d lines kept from %d within the bound", kept, n)
			}
		}
		for _, k := range s.Kernel {
			if len(k.Line) > 243 {
				t.Fatalf("kernel line of %d bytes kept", len(k.Line))
			}
		}
		for _, n := range s.Notes {
			if len(n) > maxNote {
				t.Fatalf("note of %d bytes kept", len(n))
			}
		}
		spans := []Span{{Phase: "load", Start: time.UnixMilli(0), End: time.UnixMilli(1e13), Load: true}}
		Summarise(s, spans)
		for _, v := range Judge("n", s, spans, 1590) {
			if utf8.RuneCountInString(v.Detail) > Width {
				t.Fatalf("%s detail of %d columns", v.ID, utf8.RuneCountInString(v.Detail))
			}
		}
	})
}
