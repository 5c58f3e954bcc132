package remote

import (
	"strings"
	"testing"
)

func TestTailKeepsTheLastBytes(t *testing.T) {
	for _, c := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"under the bound", []string{"ab", "cd"}, "abcd"},
		{"grown past it", []string{"abc", "def"}, "cdef"},
		{"one write larger than it", []string{"ab", "0123456789"}, "6789"},
		{"exactly it", []string{"wxyz"}, "wxyz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tail := NewTail(4)
			for _, w := range c.writes {
				if n, err := tail.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := tail.String(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if got := NewStderrTail(); got.max != StderrTailBytes {
		t.Errorf("the stderr tail keeps %d bytes", got.max)
	}
	big := NewStderrTail()
	big.Write([]byte(strings.Repeat("x", 1<<20) + "last words\n"))
	if s := big.String(); len(s) != StderrTailBytes || !strings.HasSuffix(s, "last words\n") {
		t.Errorf("a MiB of stderr kept as %d bytes", len(s))
	}
}
