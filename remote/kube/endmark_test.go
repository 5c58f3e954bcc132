package kube

import (
	"bytes"
	"strings"
	"testing"
)

// Whatever the writes' sizes, the stream arrives byte for byte less its
// end mark, and the mark is seen exactly when it was sent whole.
func FuzzEndWriter(f *testing.F) {
	f.Add("out\n", true, uint8(3))
	f.Add("no newline", true, uint8(1))
	f.Add("\n\ngpuaccept-end-x\n", false, uint8(2))
	f.Add("gpuaccept-end-01", true, uint8(16))
	f.Add("", true, uint8(7))
	f.Fuzz(func(t *testing.T, in string, marked bool, chunk uint8) {
		const mark = "gpuaccept-end-0123"
		if strings.Contains(in, mark) {
			return // a random mark is in no command's output
		}
		sent := in
		if marked {
			sent += mark + "\n"
		}
		var got bytes.Buffer
		w := newEndWriter(&got, mark)
		step := int(chunk%16) + 1
		for i := 0; i < len(sent); i += step {
			w.Write([]byte(sent[i:min(len(sent), i+step)]))
		}
		w.flush()
		seen := false
		select {
		case <-w.seen:
			seen = true
		default:
		}
		if got.String() != in || seen != marked {
			t.Fatalf("%q (marked %v): got %q, seen %v", in, marked, got.String(), seen)
		}
	})
}

func TestEndMarksDiffer(t *testing.T) {
	a, b := newEndMark(), newEndMark()
	if a == b || !strings.HasPrefix(a, "gpuaccept-end-") || len(a) != len("gpuaccept-end-")+24 {
		t.Errorf("%q %q", a, b)
	}
}
