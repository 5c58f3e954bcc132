package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpuaccept/orchestrator/workload"
)

// sseServer answers completions as vLLM streams them: a token every 5 ms.
func sseServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range req.MaxTokens {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\" t%d\"}],\"usage\":null}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":%d}}\n\n"+
			"data: [DONE]\n\n", req.MaxTokens)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type levelsDoc struct {
	Levels []workload.Level `json:"levels"`
}

func TestLoadgenRun(t *testing.T) {
	s := sseServer(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "requests.jsonl.gz")
	res := gpuaccept(t, dir, "loadgen", "run", "--url", s.URL, "--model", "m", "--levels",
		"concurrency:1,rate:20", "--duration", "500ms", "--warmup", "100ms", "--output-tokens", "4",
		"--input-tokens", "16:0.5", "--metrics-path", "none", "--goodput", "ttft=1s", "--log", logPath)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var doc levelsDoc
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		t.Fatalf("stdout is one JSON document: %v\n%s", err, res.stdout)
	}
	if len(doc.Levels) != 2 || doc.Levels[0].Name != "concurrency:1" || doc.Levels[1].Rate != 20 ||
		doc.Levels[0].Completed == 0 || doc.Levels[0].Goodput == nil || doc.Levels[1].SendLag == nil {
		t.Fatalf("%s", res.stdout)
	}
	if !strings.Contains(res.stderr, "loadgen: concurrency:1:") {
		t.Errorf("no progress on stderr: %s", res.stderr)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(gz)
	if n := bytes.Count(b, []byte("\n")); n < doc.Levels[0].Requests+doc.Levels[1].Requests {
		t.Fatalf("the log has %d lines for %d+%d requests", n, doc.Levels[0].Requests, doc.Levels[1].Requests)
	}
}

func TestLoadgenUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "p.jsonl")
	if err := os.WriteFile(bad, []byte("{\"prompt\": \"a\"}\n{\"prompt\": 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"loadgen", "run", "--url", "http://127.0.0.1:1", "--model", "m"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--levels", "concurrency:0"}, "--levels"},
		{[]string{"--levels", "rate:1", "--prompts", bad}, bad + ":2:"},
		{[]string{"--levels", "rate:1", "--prompts", filepath.Join(dir, "none.jsonl")}, "--prompts"},
		{[]string{"--levels", "rate:1", "--goodput", "ttft=soon"}, "--goodput"},
		{[]string{"--levels", "rate:1", "--input-tokens", "0"}, "--input-tokens"},
		{[]string{"--levels", "rate:1", "--metrics-path", "metrics"}, "--metrics-path"},
		{[]string{"--levels", "rate:1", "--duration", "0s"}, "--duration"},
		{[]string{"--levels", "rate:1", "--no-such-flag"}, "no-such-flag"},
	} {
		res := gpuaccept(t, dir, append(append([]string{}, base...), c.args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, c.want) || res.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 naming %q", c.args, res.code, res.stderr,
				res.stdout, c.want)
		}
	}
	if res := gpuaccept(t, dir, "loadgen", "run", "--url", "ftp://x", "--model", "m", "--levels", "rate:1"); res.code != 2 ||
		!strings.Contains(res.stderr, "--url") {
		t.Errorf("a URL not http: exit %d %s", res.code, res.stderr)
	}
	for _, u := range []string{"http://10.0.0.7:8000", "http://faster.example:8000", "http://[2001:db8::1]:8000"} {
		if res := gpuaccept(t, dir, "loadgen", "ready", "--url", u, "--model", "m"); res.code != 2 ||
			!strings.Contains(unwrapped(res.stderr), "a loopback address") {
			t.Errorf("%s, not on the node: exit %d %s", u, res.code, res.stderr)
		}
	}
	for _, u := range []string{"http://127.0.1.3:8000", "http://localhost:8000", "http://[::1]:8000"} {
		if err := checkURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// SIGTERM mid-level: the generator stops, prints what it measured (the cut
// level marked partial) and exits 130, promptly.
func TestLoadgenSIGTERM(t *testing.T) {
	s := sseServer(t)
	cmd := exec.CommandContext(t.Context(), binary, "loadgen", "run", "--url", s.URL, "--model", "m",
		"--levels", "concurrency:2,concurrency:4,concurrency:8", "--duration", "700ms", "--warmup", "0s",
		"--output-tokens", "20", "--metrics-path", "none")
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(&errb, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the second level to start, then for some of it to run.
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "loadgen: concurrency:4: ") {
				close(started)
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatalf("the second level never started: %s", errb.String())
	}
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	pw.Close()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, errb.String())
	}
	if el := time.Since(sent); el > 3*time.Second {
		t.Fatalf("%s from SIGTERM to exit: requests in flight were not cancelled", el)
	}
	var doc levelsDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(doc.Levels) != 2 || doc.Levels[0].Partial || !doc.Levels[1].Partial || doc.Levels[1].Seconds >= 0.7 {
		t.Fatalf("want concurrency:2 whole and concurrency:4 cut: %s", out.String())
	}
	if doc.Levels[1].Failed+doc.Levels[1].TimedOut != 0 {
		t.Fatalf("requests the generator cancelled counted as the server's failures: %+v", doc.Levels[1])
	}
}

func TestLoadgenReady(t *testing.T) {
	s := sseServer(t)
	res := gpuaccept(t, t.TempDir(), "loadgen", "ready", "--url", s.URL, "--model", "m", "--timeout", "5s")
	var r struct {
		Error  string   `json:"error"`
		Health *float64 `json:"health_seconds"`
		Ready  *float64 `json:"ready_seconds"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &r); res.code != 0 || err != nil || r.Health == nil || r.Ready == nil ||
		strings.Count(res.stdout, "\n") != 1 {
		t.Fatalf("exit %d: %q %v", res.code, res.stdout, err)
	}
	res = gpuaccept(t, t.TempDir(), "loadgen", "ready", "--url", s.URL, "--model", "m", "--health-path", "/x",
		"--timeout", "600ms")
	if err := json.Unmarshal([]byte(res.stdout), &r); res.code != 1 || err != nil || r.Error == "" {
		t.Fatalf("never ready: exit %d: %q", res.code, res.stdout)
	}
}
