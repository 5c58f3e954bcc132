package slurm

import (
	"strings"
	"testing"
)

func TestParseConstraint(t *testing.T) {
	for expr, want := range map[string]string{
		"h100": "all h100", "h100&ib": "all h100 ib", "h100|h200": "any h100 h200", " nvlink ": "all nvlink",
		"hbm3.80g&cpu_gen-4": "all hbm3.80g cpu_gen-4",
		"[rack1|rack2]":      "", "ib*2": "", "[rack1*2&rack2*4]": "", "(a|b)&c": "", "a&b|c": "", "": "", "a&&b": "", "a b": "",
		"!slow": "", "a|": "",
	} {
		w, ok := ParseConstraint(expr)
		got := ""
		if ok {
			got = map[bool]string{false: "all ", true: "any "}[w.Any] + strings.Join(w.Features, " ")
		}
		if got != want {
			t.Errorf("%q: %q, want %q", expr, got, want)
		}
	}
}

func TestWantedLacks(t *testing.T) {
	all := Wanted{Features: []string{"h100", "ib"}}
	anyOf := Wanted{Features: []string{"h100", "h200"}, Any: true}
	for _, c := range []struct {
		w      Wanted
		active string
		want   string
	}{
		{all, "h100,ib,nvlink", ""}, {all, "h100", "ib"}, {all, "", "h100 ib"}, {all, "h1000,ib", "h100"},
		{anyOf, "h200", ""}, {anyOf, "a100,ib", "h100 h200"}, {anyOf, " h100 , ib", ""},
	} {
		if got := strings.Join(c.w.Lacks(c.active), " "); got != c.want {
			t.Errorf("%+v of %q: %q, want %q", c.w, c.active, got, c.want)
		}
	}
}

// FuzzParseConstraint: whatever the inventory says, the reader returns,
// and what it reads are features alone.
func FuzzParseConstraint(f *testing.F) {
	for _, s := range []string{"h100&ib", "a|b", "[r1|r2]", "a*2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, ok := ParseConstraint(s)
		if !ok {
			return
		}
		for _, x := range w.Features {
			if !feature.MatchString(x) {
				t.Fatalf("%q read %q as a feature", s, x)
			}
		}
		_ = w.Lacks(s)
	})
}
