package loadgen

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

func TestGoodput(t *testing.T) {
	f := &fakeServer{ttft: 20 * time.Millisecond, tokenDelay: 2 * time.Millisecond}
	s := f.start(t)
	for _, c := range []struct {
		targets string
		want    float64
	}{{"ttft=5s,tpot=1s,itl=1s,e2el=10s", 1}, {"ttft=1ms", 0}, {"e2el=5ms", 0}, {"itl=1us", 0}} {
		g, err := ParseGoodput(c.targets)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(s.URL, inventory.Level{Concurrency: 2})
		cfg.Goodput = g
		lv := runOne(t, cfg)
		if lv.Goodput == nil || *lv.Goodput != c.want {
			t.Errorf("%s: goodput %v, want %v", c.targets, lv.Goodput, c.want)
		}
	}
	if lv := runOne(t, testConfig(s.URL, inventory.Level{Concurrency: 1})); lv.Goodput != nil {
		t.Error("no target: no goodput")
	}
	for _, bad := range []string{"ttft", "ttft=fast", "speed=1s", "ttft=-1s"} {
		if _, err := ParseGoodput(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRequestLog(t *testing.T) {
	f := &fakeServer{ttft: time.Millisecond, tokenDelay: time.Millisecond, failEvery: 4}
	s := f.start(t)
	var buf bytes.Buffer
	cfg := testConfig(s.URL, inventory.Level{Concurrency: 2})
	cfg.Log = NewRequestLog(&buf)
	lv := runOne(t, cfg)
	if err := cfg.Log.Close(); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var measured, warm, failed int
	sc := bufio.NewScanner(gz)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Level != "concurrency:2" || l.Start < 0 || l.InputTokens != 7 && l.Error == "" {
			t.Fatalf("%s", sc.Bytes())
		}
		switch {
		case l.Warmup:
			warm++
		case l.Error != "":
			failed++
			if l.TTFT == nil || l.E2EL != nil || !strings.HasPrefix(l.Error, "stream ended early") {
				t.Fatalf("a broken stream has its TTFT, no E2EL: %s", sc.Bytes())
			}
		default:
			measured++
			if l.TTFT == nil || l.E2EL == nil || l.TPOT == nil || l.OutputTokens != 5 {
				t.Fatalf("%s", sc.Bytes())
			}
		}
	}
	if warm == 0 || measured != lv.Completed || failed != lv.Failed {
		t.Fatalf("log: %d warm-up, %d completed, %d failed; level %d completed, %d failed", warm, measured, failed,
			lv.Completed, lv.Failed)
	}
}

func TestReady(t *testing.T) {
	t.Run("slow start", func(t *testing.T) {
		addr := portNobodyIsGiven(t)
		// The port refuses for 300 ms, then /health says 503 for 300 ms
		// more (weights loading), then the server answers.
		f := &fakeServer{ttft: time.Millisecond}
		up := time.Now().Add(600 * time.Millisecond)
		mux := f.mux()
		outer := http.NewServeMux()
		outer.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
			if time.Now().Before(up) {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		outer.Handle("/", mux)
		s := httptest.NewUnstartedServer(outer)
		go func() {
			time.Sleep(300 * time.Millisecond)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return // the port went to another: the test fails below on time
			}
			s.Listener = l
			s.Start()
		}()
		t.Cleanup(func() { time.Sleep(350 * time.Millisecond); s.Close() })
		r := Ready(t.Context(), "http://"+addr, "m", "/health", 10*time.Second, time.Time{})
		if r.Error != "" || r.HealthSecs == nil || r.ReadySecs == nil || *r.HealthSecs < 0.6 || *r.ReadySecs < *r.HealthSecs {
			t.Fatalf("%+v", r)
		}
	})
	// Counted from the server's start on this machine's clock, not from
	// Ready's own: a server up at once, started 2 s before, was ready in
	// 2 s; a since in the future counts from now.
	t.Run("since", func(t *testing.T) {
		s := (&fakeServer{ttft: time.Millisecond}).start(t)
		r := Ready(t.Context(), s.URL, "m", "/health", 10*time.Second, time.Now().Add(-2*time.Second))
		if r.Error != "" || r.HealthSecs == nil || r.ReadySecs == nil || *r.HealthSecs < 2 || *r.ReadySecs < 2 || *r.ReadySecs > 5 {
			t.Fatalf("%+v", r)
		}
		r = Ready(t.Context(), s.URL, "m", "/health", 10*time.Second, time.Now().Add(time.Hour))
		if r.Error != "" || r.ReadySecs == nil || *r.ReadySecs > 5 {
			t.Fatalf("a since to come: %+v", r)
		}
	})
	t.Run("never ready", func(t *testing.T) {
		s := (&fakeServer{status: 500}).start(t)
		r := Ready(t.Context(), s.URL, "m", "/health", time.Second, time.Time{})
		if r.HealthSecs == nil || r.ReadySecs != nil || !strings.Contains(r.Error, "no completion answered") ||
			!strings.Contains(r.Error, "http 500") {
			t.Fatalf("healthy, but the completion fails: %+v", r)
		}
		r = Ready(t.Context(), s.URL, "m", "/nope", 700*time.Millisecond, time.Time{})
		if r.HealthSecs != nil || !strings.Contains(r.Error, "GET /nope: not 200") {
			t.Fatalf("never healthy: %+v", r)
		}
	})
}

// portNobodyIsGiven returns a free local address whose port lies below the
// kernel's ephemeral range, so that while it is closed no other process's
// connection or ":0" listener is handed it (under a loaded CI one was).
func portNobodyIsGiven(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	for range 200 {
		port := 10000 + rand.IntN(max(low-10000, 1000))
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}
