package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzParse: no input panics or hangs; every rejection is an *Error whose
// problems have a message and a line inside the file; every acceptance
// satisfies the invariants later stages rely on.
// maxFuzzInput bounds a fuzz input: the fuzzer minimises every input that
// finds new coverage for up to a minute, and large ones made that the
// whole run.
const maxFuzzInput = 8 << 10

func FuzzParse(f *testing.F) {
	for _, pattern := range []string{filepath.Join(examplesDir, "*.yaml"), filepath.Join(testdataDir, "*.yaml")} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data[:min(len(data), maxFuzzInput)])
		}
	}
	for _, s := range []string{
		minimal,
		"a: &a [*a]\n",
		"provider: x\nnodes: &n [*n]\n",
		"? [a, b]\n: c\n",
		"provider: !!binary aGVsbG8=\n",
		"quote: {busbw_size: 1e18}\nprovider: x\n",
		"{provider: x, ssh: {user: u}, nodes: [{name: a, address: b, labels: {x.y: z}}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("input over maxFuzzInput")
		}
		inv, err := parse("fuzz.yaml", data, noEnv)
		if err == nil {
			checkInvariants(t, inv)
			return
		}
		if inv != nil {
			t.Fatal("an inventory and an error")
		}
		var ie *Error
		if !errors.As(err, &ie) || len(ie.Problems) == 0 {
			t.Fatalf("err = %v (%T), want *Error with problems", err, err)
		}
		lines := countLines(data) + 1
		for _, p := range ie.Problems {
			if p.Message == "" || p.Line < 0 || p.Line > lines {
				t.Fatalf("problem %+v in a file of %d lines", p, lines)
			}
		}
	})
}

// countLines counts lines the way the YAML library does.
func countLines(data []byte) int {
	n := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if isLineBreak(data, i, r) {
			n++
		}
		i += size
	}
	return n
}
