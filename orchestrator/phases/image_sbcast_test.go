package phases

import (
	"strings"
	"testing"
)

// What a node says of its sbcast copy is read only as SIZE SUM, each
// word bounded: anything else is no figure (it is the node's, and gets
// printed).
func TestSbcastSaid(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct {
		out, size, sum string
	}{
		{"1024 " + sum + "\n", "1024", sum},
		{"1024 " + strings.ToUpper(sum), "", ""},
		{"1024 " + sum[:63], "", ""},
		{"-1x " + sum, "", ""},
		{strings.Repeat("9", 21) + " " + sum, "", ""},
		{"1024 " + sum + " extra", "", ""},
		{"", "", ""},
		{"\x1b[2J " + sum, "", ""},
	} {
		size, s := sbcastSaid([]byte(c.out))
		if size != c.size || s != c.sum {
			t.Errorf("%q: %q %q, want %q %q", c.out, size, s, c.size, c.sum)
		}
	}
	if size, s := sbcastSaid(nil); size != "" || s != "" {
		t.Errorf("no output: %q %q", size, s)
	}
}

func FuzzSbcastSaid(f *testing.F) {
	f.Add([]byte("1024 " + strings.Repeat("0", 64)))
	f.Fuzz(func(t *testing.T, b []byte) {
		size, sum := sbcastSaid(b)
		if (size == "") != (sum == "") || len(size) > 20 || (sum != "" && len(sum) != 64) {
			t.Fatalf("%q: %q %q", b, size, sum)
		}
	})
}
