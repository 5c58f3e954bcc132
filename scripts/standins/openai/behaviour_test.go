package openai

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run Main in a child process (the SIGTERM test): the child is this test binary.
func TestMain(m *testing.M) {
	if os.Getenv("OPENAI_STANDIN_MAIN") == "1" {
		os.Exit(Main(strings.Fields(os.Getenv("OPENAI_STANDIN_ARGS")), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestErrorKinds(t *testing.T) {
	tun := testTunables()
	tun.ErrorRate = 1
	t.Run("http", func(t *testing.T) {
		tun.ErrorKind = ErrorHTTP
		_, ts := newTestServer(t, tun)
		resp, b, err := post(t, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":5,"stream":true}`)
		want := `{"error":{"message":"gpuaccept stand-in: simulated engine error (--error-rate)",` +
			`"type":"InternalServerError","param":null,"code":500}}` + "\n"
		if err != nil || resp.StatusCode != 500 || string(b) != want {
			t.Errorf("got %d %v %q, want 500 %q", resp.StatusCode, err, b, want)
		}
	})
	t.Run("stream", func(t *testing.T) {
		tun.ErrorKind = ErrorStream
		_, ts := newTestServer(t, tun)
		resp, b, err := post(t, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":5,"stream":true}`)
		n := strings.Count(string(b), `"text_completion"`)
		if err != nil || resp.StatusCode != 200 || strings.Contains(string(b), "[DONE]") || n < 1 || n > 4 {
			t.Errorf("got %d %v, %d chunks:\n%s\nwant a clean end after 1-4 token chunks, no [DONE]",
				resp.StatusCode, err, n, b)
		}
	})
	t.Run("abort", func(t *testing.T) {
		tun.ErrorKind = ErrorAbort
		_, ts := newTestServer(t, tun)
		resp, b, err := post(t, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":5,"stream":true}`)
		n := strings.Count(string(b), `"text_completion"`)
		if !errors.Is(err, io.ErrUnexpectedEOF) || resp.StatusCode != 200 || n < 1 || n > 4 {
			t.Errorf("got %d %v, %d chunks:\n%s\nwant an unexpected EOF after 1-4 token chunks",
				resp.StatusCode, err, n, b)
		}
	})
}

// TestErrorRateSeeded: the share of failures follows --error-rate, and the same seed fails the same requests.
func TestErrorRateSeeded(t *testing.T) {
	tun := testTunables()
	tun.ErrorRate = 0.3
	pattern := func() string {
		_, ts := newTestServer(t, tun)
		var b strings.Builder
		for range 200 {
			resp, _, _ := post(t, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":1}`)
			b.WriteString(strconv.Itoa(resp.StatusCode / 100))
		}
		return b.String()
	}
	a, b := pattern(), pattern()
	if a != b {
		t.Errorf("the same seed gave other failures:\n%s\n%s", a, b)
	}
	if n := strings.Count(a, "5"); n < 35 || n > 85 {
		t.Errorf("%d of 200 failed at --error-rate 0.3", n)
	}
}

func metricValue(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", series)
	return 0
}

const lbl = `{engine="0",model_name="test-model"}`

// TestCapacityQueue: past --capacity, requests wait; /metrics shows the running and waiting counts, the queue
// time and the KV-cache share.
func TestCapacityQueue(t *testing.T) {
	// The counts hold only while the six posted one after another are all in
	// before the first two end. On a loaded machine the posts can take longer
	// than a request lasts (CI saw three waiting at 600 ms and at 1.6 s a
	// request): a round whose posts and first read took longer than a request
	// is not a reading of the queue, and runs again with slower tokens.
	for delay := 400 * time.Millisecond; ; delay *= 2 {
		if capacityRound(t, delay) {
			return
		}
		if delay >= 3200*time.Millisecond {
			t.Fatalf("six requests could not be posted within one request's time even at %v a token", delay)
		}
		t.Logf("the posts took longer than a request at %v a token; again at %v", delay, 2*delay)
	}
}

// capacityRound posts six 5-token streams at capacity 2 with delay a token and
// checks /metrics; false when the machine was too slow for it to say anything.
func capacityRound(t *testing.T, delay time.Duration) bool {
	tun := testTunables()
	tun.Capacity = 2
	tun.TokenDelay = delay
	_, ts := newTestServer(t, tun)
	defer ts.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	t0 := time.Now()
	for range 6 {
		// a stream's headers come before its queue (as vLLM's): once Post returns, the request is on its
		// way in, not yet in; the metrics are read once all six are
		resp, err := http.Post(ts.URL+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"a","max_tokens":5,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				t.Errorf("%d %v %s", resp.StatusCode, err, b)
			}
		}()
	}
	var waiting, running, kv float64
	for {
		waiting = metricValue(t, ts.URL, "vllm:num_requests_waiting"+lbl)
		running = metricValue(t, ts.URL, "vllm:num_requests_running"+lbl)
		kv = metricValue(t, ts.URL, "vllm:kv_cache_usage_perc"+lbl)
		// a request lasts its first token and four delays after it
		if time.Since(t0) >= 4*delay {
			return false
		}
		if waiting+running >= 6 {
			break
		}
		time.Sleep(delay / 40)
	}
	if waiting != 4 {
		t.Errorf("vllm:num_requests_waiting %v with 6 requests at capacity 2, want 4", waiting)
	}
	if running != 2 {
		t.Errorf("running %v, want 2", running)
	}
	if kv != 1 {
		t.Errorf("kv_cache_usage_perc %v with a full batch, want 1", kv)
	}
	wg.Wait()
	if n := metricValue(t, ts.URL, "vllm:request_queue_time_seconds_count"+lbl); n != 6 {
		t.Errorf("queue time count %v, want 6", n)
	}
	// two waited one request's time (4 delays), two waited two: 24 delays in all when the six arrive
	// together, less by how much later than the first each arrived; without a queue it would be about 0
	want := 24 * delay.Seconds()
	if sum := metricValue(t, ts.URL, "vllm:request_queue_time_seconds_sum"+lbl); sum < 0.68*want || sum > 1.67*want {
		t.Errorf("queue time sum %v s, want about %.1f", sum, want)
	}
	if n := metricValue(t, ts.URL, `vllm:request_success_total{engine="0",finished_reason="length",model_name="test-model"}`); n != 6 {
		t.Errorf("request_success length %v, want 6", n)
	}
	if n := metricValue(t, ts.URL, "vllm:generation_tokens_total"+lbl); n != 30 {
		t.Errorf("generation tokens %v, want 30", n)
	}
	if r := metricValue(t, ts.URL, "vllm:num_requests_running"+lbl); r != 0 {
		t.Errorf("running %v after all ended, want 0", r)
	}
	return true
}

// TestTimings: TTFT is prefill (input tokens / rate), then one chunk every token delay, as the client sees it.
func TestTimings(t *testing.T) {
	tun := testTunables()
	tun.PrefillTokensPerS = 1000
	tun.TokenDelay = 20 * time.Millisecond
	_, ts := newTestServer(t, tun)
	prompt := strings.Repeat("w ", 60) // 60 tokens: 60 ms of prefill
	t0 := time.Now()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"`+prompt+`","max_tokens":6,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var at []time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `data: {"id"`) {
			at = append(at, time.Since(t0))
		}
	}
	if len(at) != 6 {
		t.Fatalf("%d chunks, want 6", len(at))
	}
	if at[0] < 60*time.Millisecond || at[0] > 300*time.Millisecond {
		t.Errorf("TTFT %v, want about 60 ms", at[0])
	}
	if itl := (at[5] - at[0]) / 5; itl < 19*time.Millisecond || itl > 80*time.Millisecond {
		t.Errorf("mean inter-token latency %v, want about 20 ms", itl)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOverridesReread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "overrides.json")
	cfg := Config{Model: "m", MaxModelLen: 4096, Overrides: path, Tunables: testTunables()}
	var log syncBuffer
	s := New(cfg, &log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.watchOverrides(ctx) }()
	defer func() { cancel(); <-done }()

	write := func(b string) {
		if err := os.WriteFile(path+".tmp", []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"token_delay": "25ms", "capacity": 3, "prefill_tokens_per_s": 500, "error_rate": 0.5, "error_kind": "abort"}`)
	want := Tunables{PrefillTokensPerS: 500, TokenDelay: 25 * time.Millisecond, Capacity: 3, ErrorRate: 0.5,
		ErrorKind: ErrorAbort}
	eventually(t, 3*time.Second, "overrides applied", func() bool { return s.eng.tunables() == want })

	write(`{"capacity": 0}`)
	eventually(t, 3*time.Second, "a bad override logged", func() bool {
		return strings.Contains(log.String(), "overrides ignored") && strings.Contains(log.String(), "capacity 0")
	})
	if got := s.eng.tunables(); got != want {
		t.Errorf("a bad override changed the tunables to %+v", got)
	}
	write(`{"token_dely": "1s"}`)
	eventually(t, 3*time.Second, "an unknown key logged", func() bool {
		return strings.Contains(log.String(), `unknown field "token_dely"`)
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the flags back once the file is gone", func() bool {
		return s.eng.tunables() == cfg.Tunables
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestNeverReady(t *testing.T) {
	port := freePort(t)
	cfg, err := ParseArgs([]string{"--port", strconv.Itoa(port), "--never-ready", "--ready-after", "0s"})
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cfg, &log).Run(ctx) }()
	eventually(t, 3*time.Second, "a still-loading log line", func() bool {
		return strings.Contains(log.String(), "still loading the model weights after 1s")
	})
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		c.Close()
		t.Error("--never-ready: the port is listened on")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--capacity", "0"}, {"--bogus"}, {"--error-kind", "boom"},
		{"--error-rate", "1.5"}, {"--prefill-tokens-per-s", "0"}, {"extra"}, {"--port", "70000"}} {
		var stderr bytes.Buffer
		if rc := Main(args, io.Discard, &stderr); rc != 2 || !strings.Contains(stderr.String(), "usage:") {
			t.Errorf("%v: exit %d, %q; want 2 and the usage", args, rc, stderr.String())
		}
	}
}

// TestReadyAfterAndSIGTERM runs Main in a child process: the port opens only after --ready-after, and SIGTERM
// (podman stop) ends it with status 0 while a stream is in flight.
func TestReadyAfterAndSIGTERM(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "OPENAI_STANDIN_MAIN=1",
		"OPENAI_STANDIN_ARGS=--port "+port+" --model m --ready-after 800ms --token-delay 1s")
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://127.0.0.1:" + port
	time.Sleep(200 * time.Millisecond)
	if resp, err := http.Get(base + "/health"); err == nil {
		resp.Body.Close()
		if time.Since(t0) < 800*time.Millisecond {
			t.Fatal("/health answered before --ready-after")
		}
	}
	eventually(t, 10*time.Second, "/health 200", func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if took := time.Since(t0); took < 800*time.Millisecond {
		t.Errorf("ready after %v, want 800 ms or more", took)
	}
	streaming := make(chan error, 1)
	go func() {
		resp, err := http.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"a","max_tokens":100,"stream":true}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		streaming <- err
	}()
	eventually(t, 5*time.Second, "a stream in flight", func() bool {
		return metricValue(t, base, `vllm:num_requests_running{engine="0",model_name="m"}`) == 1
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5 s after SIGTERM\n%s", stderr.String())
	}
	select {
	case <-streaming:
	case <-time.After(5 * time.Second):
		t.Error("the stream in flight did not end with the server")
	}
	if !strings.Contains(stderr.String(), "Application startup complete.") {
		t.Errorf("log:\n%s", stderr.String())
	}
}

func TestArgsRoundTrip(t *testing.T) {
	c, err := ParseArgs([]string{"--host", "0.0.0.0", "--port", "9000", "--model", "org/model 7B", "--ready-after",
		"1.5s", "--prefill-tokens-per-s", "1234.5", "--token-delay", "25ms", "--capacity", "8", "--error-rate",
		"0.05", "--error-kind", "abort", "--never-ready", "--overrides", "/tmp/o.json", "--seed", "7",
		"--max-model-len", "8192"})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseArgs(c.Args())
	if err != nil || back != c {
		t.Errorf("ParseArgs(Args()) = %+v, %v; want %+v", back, err, c)
	}
	if d, _ := ParseArgs(nil); d.Port != 8000 || d.Capacity != 32 || d.TokenDelay != 10*time.Millisecond ||
		d.PrefillTokensPerS != 20000 || d.ReadyAfter != 2*time.Second || d.Host != "127.0.0.1" {
		t.Errorf("defaults %+v differ from the contract's", d)
	}
}
