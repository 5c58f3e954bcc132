package openai

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func testTunables() Tunables {
	return Tunables{PrefillTokensPerS: 1e9, TokenDelay: 0, Capacity: 32, ErrorKind: ErrorHTTP}
}

// newTestServer serves a stand-in of t with fixed ids and created time, so its bytes are a golden's.
func newTestServer(t testing.TB, tun Tunables) (*Server, *httptest.Server) {
	t.Helper()
	cfg := Config{Model: "test-model", MaxModelLen: 4096, Seed: 1, Tunables: tun}
	s := New(cfg, io.Discard)
	s.now = func() time.Time { return time.Unix(1761553358, 0) }
	n := 0
	var mu sync.Mutex
	s.newID = func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%032x", n)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func post(t *testing.T, url, body string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestStreamGolden(t *testing.T) {
	_, ts := newTestServer(t, testTunables())
	for _, c := range []struct{ name, path, body string }{
		{"completion-stream.golden", "/v1/completions", `{"model":"test-model","prompt":"one two three four",` +
			`"max_tokens":3,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0}`},
		{"chat-stream.golden", "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user",` +
			`"content":"one two"}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`},
		{"completion-continuous.golden", "/v1/completions", `{"prompt":"one two","max_tokens":2,"stream":true,` +
			`"stream_options":{"continuous_usage_stats":true}}`},
		{"completion.golden", "/v1/completions", `{"model":"test-model","prompt":"one two","max_tokens":2}`},
		{"chat.golden", "/v1/chat/completions", `{"messages":[{"role":"user","content":"one"}],"max_tokens":2}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b, err := post(t, ts.URL+c.path, c.body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v: %s", resp.StatusCode, err, b)
			}
			ct := resp.Header.Get("Content-Type")
			if strings.HasSuffix(c.name, "stream.golden") && ct != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type %q, want starlette's text/event-stream; charset=utf-8", ct)
			}
			golden(t, c.name, b)
		})
	}
}

// genuine is a completion chunk and a chat chunk as vLLM 0.11 sent them (vllm-project/vllm pull request 27561,
// after the fix; pull request 45678's chat chunk, whose continuous usage this request did not ask for, less its
// usage field), their ids shortened.
const (
	genuineCompletionChunk = `{"id":"cmpl-d1eb817714c94cb2b5fb559b5d2fd7fa","object":"text_completion",` +
		`"created":1761553358,"model":"/home/jovyan/qwen3-8b","choices":[{"index":0,"text":" Sir","logprobs":null,` +
		`"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}],"usage":null}`
	genuineChatChunk = `{"id":"chatcmpl-95f70ae00614b063","object":"chat.completion.chunk","created":1782114956,` +
		`"model":"/model/DeepSeek-V4-Flash","choices":[{"index":0,"delta":{"content":" fast"},"logprobs":null,` +
		`"finish_reason":null,"token_ids":null}]}`
)

// shape is a JSON value's keys in order and the kinds of its values, recursively: what must match vLLM's.
func shape(t *testing.T, s string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		switch v := tok.(type) {
		case json.Delim:
			var b strings.Builder
			b.WriteString(string(v))
			for dec.More() {
				if v == '{' {
					k, _ := dec.Token()
					b.WriteString(k.(string) + ":")
				}
				b.WriteString(walk() + " ")
			}
			end, _ := dec.Token()
			return b.String() + end.(json.Delim).String()
		case string:
			return "str"
		case json.Number:
			return "num"
		case bool:
			return "bool"
		}
		return "null"
	}
	return walk()
}

func TestChunkShapeMatchesVLLM(t *testing.T) {
	_, ts := newTestServer(t, testTunables())
	firstData := func(path, body string, skip int) string {
		_, b, err := post(t, ts.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		events := strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n")
		return strings.TrimPrefix(events[skip], "data: ")
	}
	got := firstData("/v1/completions", `{"prompt":"a","max_tokens":2,"stream":true}`, 0)
	if g, w := shape(t, got), shape(t, genuineCompletionChunk); g != w {
		t.Errorf("completion chunk shape\n got %s\nwant %s", g, w)
	}
	got = firstData("/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":3,"stream":true}`, 1)
	if g, w := shape(t, got), shape(t, genuineChatChunk); g != w {
		t.Errorf("chat chunk shape\n got %s\nwant %s", g, w)
	}
}

func TestNoUsageChunkUnlessAsked(t *testing.T) {
	_, ts := newTestServer(t, testTunables())
	_, b, err := post(t, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":2,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"choices":[]`) || strings.Count(string(b), "data: ") != 3 ||
		!strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("without stream_options: want 2 token chunks and [DONE], no usage chunk:\n%s", b)
	}
}

func TestBadRequests(t *testing.T) {
	_, ts := newTestServer(t, testTunables())
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"model":"other","prompt":"a"}`, 404,
			`{"error":{"message":"The model ` + "`other`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`},
		{`{"prompt":"a","stream_options":{"include_usage":true}}`, 400,
			`{"error":{"message":"Stream options can only be defined when ` + "`stream=True`" + `.","type":"BadRequestError","param":null,"code":400}}`},
		{`{"prompt":"a b","max_tokens":4095}`, 400, `maximum context length is 4096 tokens. However, you requested 4097 tokens (2 in the messages, 4095 in the completion)`},
		{`{"prompt":"a","max_tokens":0}`, 400, `max_tokens must be at least 1, got 0.`},
		{`{"prompt":{}}`, 400, `"type":"BadRequestError"`},
		{`not json`, 400, `"code":400`},
	} {
		resp, b, err := post(t, ts.URL+"/v1/completions", c.body)
		if err != nil || resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %v %s; want %d with %s", c.body, resp.StatusCode, err, b, c.status, c.want)
		}
	}
}

func TestHealthAndModels(t *testing.T) {
	_, ts := newTestServer(t, testTunables())
	resp, err := http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 0 {
		t.Errorf("/health: %d %q, want 200 and no body", resp.StatusCode, b)
	}
	resp, err = http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	golden(t, "models.golden", b)
}
