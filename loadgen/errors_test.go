package loadgen

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

func TestFailuresAreCountedByKind(t *testing.T) {
	t.Run("http status", func(t *testing.T) {
		f := &fakeServer{status: 503}
		s := f.start(t)
		cfg := testConfig(s.URL, inventory.Level{Concurrency: 2})
		cfg.Retries = 3 // the server answered: never retried
		lv := runOne(t, cfg)
		if lv.Requests == 0 || lv.Failed != lv.Requests || lv.Errors["http 503"] != lv.Requests || lv.Retried != 0 {
			t.Fatalf("%+v", lv)
		}
		if lv.TTFT.N != 0 || lv.RequestsPerSec != 0 {
			t.Fatalf("failed requests in the figures: %+v", lv)
		}
	})
	t.Run("broken streams", func(t *testing.T) {
		f := &fakeServer{ttft: time.Millisecond, tokenDelay: time.Millisecond, failEvery: 3}
		s := f.start(t)
		lv := runOne(t, testConfig(s.URL, inventory.Level{Concurrency: 3}))
		broken := lv.Errors["stream ended early"]
		if broken == 0 || broken != lv.Failed || lv.Completed+lv.Failed != lv.Requests || lv.Completed < broken {
			t.Fatalf("%+v", lv)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := &fakeServer{ttft: 2 * time.Second}
		s := f.start(t)
		cfg := testConfig(s.URL, inventory.Level{Concurrency: 2})
		cfg.RequestTimeout, cfg.Duration, cfg.Warmup = 150*time.Millisecond, 400*time.Millisecond, 0
		start := time.Now()
		lv := runOne(t, cfg)
		if lv.Requests == 0 || lv.TimedOut != lv.Requests || lv.Errors["timeout"] != lv.Requests || lv.Failed != 0 {
			t.Fatalf("%+v", lv)
		}
		if el := time.Since(start); el > 1500*time.Millisecond {
			t.Fatalf("a level of 0.4 s with 0.15 s requests took %s", el)
		}
	})
	t.Run("connection refused, retried", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + l.Addr().String()
		l.Close() // nothing listens there now
		cfg := testConfig(url, inventory.Level{Concurrency: 1})
		cfg.Retries = 2
		lv := runOne(t, cfg)
		if lv.Requests == 0 || lv.Failed != lv.Requests || lv.Errors["connect"] != lv.Requests ||
			lv.Retried != 2*lv.Requests {
			t.Fatalf("%+v", lv)
		}
	})
	t.Run("error event mid-stream", func(t *testing.T) {
		f := &fakeServer{hook: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"+
				"data: {\"error\":{\"message\":\"engine dead\",\"type\":\"InternalServerError\",\"code\":500}}\n\n"+
				"data: [DONE]\n\n")
		}}
		s := f.start(t)
		lv := runOne(t, testConfig(s.URL, inventory.Level{Concurrency: 1}))
		if lv.Requests == 0 || lv.Errors["stream error"] != lv.Requests {
			t.Fatalf("%+v", lv)
		}
	})
}

// A hostile server cannot make the generator hold a line without end, read
// a stream for ever or keep tokens past what it asked for.
func TestHostileServerIsBounded(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		hook       func(w http.ResponseWriter, r *http.Request)
	}{
		{"huge line", "line too long", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\""+strings.Repeat("a", 3<<20))
		}},
		{"endless tokens", "too many tokens", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for r.Context().Err() == nil {
				if _, err := fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n"); err != nil {
					return
				}
			}
		}},
		{"endless keep-alives", "timeout", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for r.Context().Err() == nil {
				if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				time.Sleep(time.Millisecond)
			}
		}},
		{"endless blank", "response too large", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			b := []byte(":" + strings.Repeat("p", 60<<10) + "\n")
			for r.Context().Err() == nil {
				if _, err := w.Write(b); err != nil {
					return
				}
			}
		}},
		{"not JSON", "bad chunk", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: <html>\x1b[31m</html>\n\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := (&fakeServer{hook: c.hook}).start(t)
			cfg := testConfig(s.URL, inventory.Level{Concurrency: 1})
			cfg.RequestTimeout, cfg.Warmup, cfg.Duration = 2*time.Second, 0, 100*time.Millisecond
			if c.kind != "timeout" {
				cfg.RequestTimeout = 20 * time.Second // what bounds it is not the clock
			}
			start := time.Now()
			lv := runOne(t, cfg)
			if lv.Requests == 0 || lv.Errors[c.kind] != lv.Requests || lv.Completed != 0 {
				t.Fatalf("want every request failed %q: %+v", c.kind, lv)
			}
			if el := time.Since(start); el > cfg.RequestTimeout+2*time.Second {
				t.Fatalf("took %s", el)
			}
		})
	}
}
