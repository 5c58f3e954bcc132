package loadgen

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer answers /v1/completions as vLLM's OpenAI server streams them,
// with known timings, and keeps the truth: when each request arrived and
// when each of its token events was flushed onto the wire.
type fakeServer struct {
	ttft, tokenDelay time.Duration
	noUsage          bool
	// status, when set, answers every request with it.
	status int
	// hook, when set, writes the response instead (a hostile server).
	hook func(w http.ResponseWriter, r *http.Request)
	// failEvery: every n-th request's stream breaks after its first token.
	failEvery int64
	metrics   string
	// noTruth: keep nothing per request (the benchmark's server).
	noTruth bool

	n     atomic.Int64
	mu    sync.Mutex
	truth []truth
}

type truth struct {
	sent time.Time
	ttft float64   // ms, from when the client's transport took the request
	itl  []float64 // ms
}

// sentHeader carries when the generator's transport took the request, so
// that the truth's TTFT starts where the generator's does.
const sentHeader = "X-Test-Sent"

// stamp is a transport that writes the moment it took each request.
type stamp struct{ rt http.RoundTripper }

func (s stamp) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(sentHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	return s.rt.RoundTrip(r)
}

func stamped(rt http.RoundTripper) http.RoundTripper { return stamp{rt} }

func (f *fakeServer) start(t testing.TB) *httptest.Server {
	s := httptest.NewServer(f.mux())
	t.Cleanup(s.Close)
	return s
}

func (f *fakeServer) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", f.completions)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, f.metrics)
	})
	return mux
}

func (f *fakeServer) completions(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	n := f.n.Add(1)
	if f.hook != nil {
		f.hook(w, r)
		return
	}
	if f.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"error":{"message":"overloaded","type":"ServiceUnavailableError","param":null,"code":%d}}`, f.status)
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || !req.StreamOptions.IncludeUsage ||
		!req.IgnoreEOS || req.MaxTokens < 1 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	// As vLLM's server (starlette's StreamingResponse): the headers go out
	// at once, the first token after the prefill.
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	id := fmt.Sprintf("cmpl-%d", n)
	var last time.Time
	sent := arrived
	if ns, err := strconv.ParseInt(r.Header.Get(sentHeader), 10, 64); err == nil {
		sent = time.Unix(0, ns)
	}
	tr := truth{sent: sent}
	sleepTo := arrived.Add(f.ttft)
	for i := range req.MaxTokens {
		time.Sleep(time.Until(sleepTo))
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"text_completion\",\"created\":1733390000,\"model\":%q,"+
			"\"choices\":[{\"index\":0,\"text\":\" tok%d\",\"logprobs\":null,\"finish_reason\":null,"+
			"\"stop_reason\":null}],\"usage\":null}\n\n", id, req.Model, i)
		fl.Flush()
		now := time.Now()
		if i == 0 {
			tr.ttft = ms(now.Sub(sent))
		} else {
			tr.itl = append(tr.itl, ms(now.Sub(last)))
		}
		last = now
		if f.failEvery > 0 && n%f.failEvery == 0 {
			return // the stream breaks: no [DONE]
		}
		sleepTo = now.Add(f.tokenDelay)
	}
	if !f.noUsage {
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"text_completion\",\"created\":1733390000,\"model\":%q,"+
			"\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n",
			id, req.Model, 7, 7+req.MaxTokens, req.MaxTokens)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
	if !f.noTruth {
		f.mu.Lock()
		f.truth = append(f.truth, tr)
		f.mu.Unlock()
	}
}
