package remote_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"gpuaccept/remote"
)

// Shorten and Clip cut node text (a host's name, an API's reason) to a
// byte budget on a character's start: what they return is valid UTF-8
// wherever s was, within the budget and its mark, and s itself when it
// fits.
func FuzzShortenAndClip(f *testing.F) {
	f.Add("gpu-07: écriture refusée — disque plein", 12)
	f.Add("节点 h3 没有响应", 7)
	f.Add("plain ascii", 4)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 4096 || !utf8.ValidString(s) {
			return
		}
		c := remote.Clip(s, n)
		if !utf8.ValidString(c) || len(strings.TrimSuffix(c, "…")) > n || (len(s) <= n && c != s) {
			t.Errorf("Clip(%q, %d) = %q", s, n, c)
		}
		sh := remote.Shorten(s, n)
		one := strings.Join(strings.Fields(s), " ")
		if !utf8.ValidString(sh) || len(sh) > max(n, 3) || (len(one) <= n && sh != one) {
			t.Errorf("Shorten(%q, %d) = %q", s, n, sh)
		}
	})
}
