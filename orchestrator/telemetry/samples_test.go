package telemetry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The genuine outputs, beside the module (/work/shared/samples).
const samplesRoot = "../../../shared/samples"

func sample(tb testing.TB, dir, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(samplesRoot, dir, name))
	if err != nil {
		tb.Fatalf("genuine sample missing (want the shared samples at /work/shared/samples): %v", err)
	}
	return string(b)
}

// project turns a --format=csv capture (header with units, then rows)
// into rows of Fields, nounits style: the header names each cell; a field
// the capture did not ask for is "[N/A]". The every-field captures hold
// some fields twice (aliases): the first is taken.
func project(tb testing.TB, capture string) []string {
	tb.Helper()
	lines := strings.Split(strings.TrimRight(capture, "\n"), "\n")
	head := strings.Split(lines[0], ", ")
	at := map[string]int{}
	for i, h := range head {
		name, _, _ := strings.Cut(h, " [")
		if _, ok := at[name]; !ok {
			at[name] = i
		}
	}
	var rows []string
	for _, l := range lines[1:] {
		cells := strings.Split(l, ", ")
		if len(cells) != len(head) {
			tb.Fatalf("capture row has %d cells, header %d", len(cells), len(head))
		}
		out := make([]string, len(Fields))
		for i, f := range Fields {
			out[i] = "[N/A]"
			if k, ok := at[f]; ok {
				out[i] = cells[k]
			}
		}
		rows = append(rows, strings.Join(out, ", "))
	}
	return rows
}
