package kube

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// Whatever the writes' sizes, the stream arrives byte for byte less its
// end line, and the line is seen, with its status, exactly when it was sent
// whole; the mark without a status after it is the command's output.
func FuzzEndWriter(f *testing.F) {
	f.Add("out\n", true, uint8(0), uint8(3))
	f.Add("no newline", true, uint8(137), uint8(1))
	f.Add("\n\ngpuaccept-end-x\n", false, uint8(2), uint8(2))
	f.Add("gpuaccept-end-01", true, uint8(255), uint8(16))
	f.Add("gpuaccept-end-0123 x\n", true, uint8(9), uint8(5))
	f.Add("gpuaccept-end-0123 1234\n", false, uint8(9), uint8(4))
	f.Add("", true, uint8(1), uint8(7))
	f.Fuzz(func(t *testing.T, in string, marked bool, status, chunk uint8) {
		const mark = "gpuaccept-end-0123"
		for rest := in; ; {
			_, after, found := strings.Cut(rest, mark+" ")
			if !found {
				break
			}
			line, _, ok := strings.Cut(after, "\n")
			if st, err := strconv.Atoi(line); ok && err == nil && len(line) <= 3 && st <= 255 {
				return // a random mark and a status is in no command's output
			}
			rest = after
		}
		sent := in
		if marked {
			sent += mark + " " + strconv.Itoa(int(status)) + "\n"
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
		if got.String() != in || seen != marked || marked && w.status != int(status) {
			t.Fatalf("%q (marked %v, status %d): got %q, seen %v, status %d", in, marked, status, got.String(), seen, w.status)
		}
	})
}

func TestEndMarksDiffer(t *testing.T) {
	a, b := newEndMark(), newEndMark()
	if a == b || !strings.HasPrefix(a, "gpuaccept-end-") || len(a) != len("gpuaccept-end-")+24 {
		t.Errorf("%q %q", a, b)
	}
}
