package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator"
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

// sbcast writes to every node of the job: a node the phase left out (or
// one the job does not have) is named, and sbcast is not used.
func TestSbcastOnlyOverThePhasesNodes(t *testing.T) {
	nodes := []*orchestrator.Node{{Name: "h2"}, {Name: "h4"}, {Name: "h5"}}
	if extra, missing := sameNodes([]string{"h2", "h4", "h5"}, nodes); extra != "" || missing != "" {
		t.Errorf("the same nodes: %q %q", extra, missing)
	}
	extra, missing := sameNodes([]string{"h2", "h3", "h4", "h5", "h6"}, nodes[:2])
	if extra != "not in the phase: h[3,5-6]" || missing != "" {
		t.Errorf("quarantined nodes: %q %q", extra, missing)
	}
	if extra, missing := sameNodes([]string{"h2"}, nodes[:2]); extra != "" || missing != "not in the job: h4" {
		t.Errorf("a node the job lost: %q %q", extra, missing)
	}
}
