package openai

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkStreamChunk is the server's cost of one streamed token chunk over loopback (JSON, write, flush) with
// no token delay: what bounds how many streams a core of a lab host serves at a given token rate.
func BenchmarkStreamChunk(b *testing.B) {
	s, ts := newTestServer(b, testTunables())
	s.cfg.MaxModelLen = 1 << 30 // one stream of b.N tokens
	b.ResetTimer()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"a","stream":true,"max_tokens":`+strconv.Itoa(max(b.N, 1))+`}`))
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n / int64(max(b.N, 1)))
}
