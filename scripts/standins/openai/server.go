// Package openai is an OpenAI-compatible server stand-in that answers as vLLM 0.11's OpenAI API server does:
// GET /health (200, empty), GET /v1/models, POST /v1/completions and /v1/chat/completions (streamed SSE chunks
// byte for byte in vLLM's shape, the usage chunk under stream_options.include_usage, "data: [DONE]";
// non-streamed too; errors as vLLM's error JSON) and GET /metrics (Prometheus text, vLLM's metric names). Its
// timings are set, not measured: a request waits in a FIFO queue while Capacity sequences decode, prefill takes
// input tokens / PrefillTokensPerS, then one token (one chunk) comes every TokenDelay; every request decodes
// max_tokens (ignore_eos or not), so its length is deterministic. ErrorRate of the requests fail as ErrorKind
// says, drawn from a source seeded by Seed. --overrides re-reads the tunables every second. Nothing here runs a
// model: reports of windows that use it are simulated.
//
// Run it as `standin openai-server FLAGS` or `gpuaccept standin openai-server FLAGS` (Main); the lab's test
// image carries the standalone binary at /usr/local/bin/standin.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Server is one stand-in server. It is an http.Handler; Run listens on the configured address.
type Server struct {
	cfg Config
	eng *engine
	mux *http.ServeMux

	logMu sync.Mutex
	log   io.Writer

	now   func() time.Time // the chunks' created field; tests fix it
	newID func() string    // vLLM's random_uuid(): 32 hex digits; tests fix it
}

// New makes a server of cfg that logs to log.
func New(cfg Config, log io.Writer) *Server {
	s := &Server{cfg: cfg, eng: newEngine(cfg.Tunables, cfg.Seed), mux: http.NewServeMux(), log: log,
		now: time.Now, newID: randomUUID}
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("POST /v1/completions", s.completions)
	s.mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("GET /metrics", s.metrics)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // uuid4, as Python's uuid.uuid4().hex
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// logf writes one line in vLLM's log layout ("INFO 12-05 07:11:52 [file] message"), the file being
// [standin] so that nobody takes it for a real server's log.
func (s *Server) logf(format string, a ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "INFO %s [standin] %s\n", time.Now().Format("01-02 15:04:05"), fmt.Sprintf(format, a...))
}

// Run is the server's life until ctx ends: it "loads the model" for ReadyAfter (no port open, as vLLM's API
// server starts only once the engine is up), then listens and serves; with NeverReady it only logs, once a
// second, that it is still loading. The end of ctx (SIGTERM, SIGINT) is a clean stop: nil.
func (s *Server) Run(ctx context.Context) error {
	s.logf("gpuaccept stand-in for vLLM's OpenAI API server (simulated: no model runs), model %s", s.cfg.Model)
	go s.watchOverrides(ctx)
	if s.cfg.NeverReady {
		t0 := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				s.logf("stopped before the engine was ready")
				return nil
			case <-tick.C:
				s.logf("still loading the model weights after %.0fs (--never-ready: they never load)",
					time.Since(t0).Seconds())
			}
		}
	}
	s.logf("loading the model weights (ready in %v)", s.cfg.ReadyAfter)
	if !sleepUntil(ctx, time.Now().Add(s.cfg.ReadyAfter)) {
		s.logf("stopped before the engine was ready")
		return nil
	}
	addr := net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("openai-server: listen %s: %w", addr, err)
	}
	s.logf("Uvicorn running on http://%s (Press CTRL+C to quit)", ln.Addr())
	s.logf("Application startup complete.")
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then closes every connection: requests in flight see their context end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("openai-server: %w", err)
	case <-ctx.Done():
	}
	// requests' contexts derive from ctx: streams in flight end at once, so a short grace is enough
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("openai-server: %w", err)
	}
	s.logf("Shutting down: stopped on a signal")
	return nil
}

// watchOverrides applies --overrides every second. A file that cannot be read or is wrong keeps the tunables
// in force and is logged once per distinct problem.
func (s *Server) watchOverrides(ctx context.Context) {
	if s.cfg.Overrides == "" {
		return
	}
	lastErr := ""
	apply := func() {
		t, err := readOverrides(s.cfg.Overrides, s.cfg.Tunables)
		if err != nil {
			if err.Error() != lastErr {
				lastErr = err.Error()
				s.logf("overrides ignored: %v", err)
			}
			return
		}
		lastErr = ""
		if t != s.eng.tunables() {
			s.eng.setTunables(t)
			s.logf("tunables now: prefill %g tokens/s, token delay %v, capacity %d, error rate %g (%s)",
				t.PrefillTokensPerS, t.TokenDelay, t.Capacity, t.ErrorRate, t.ErrorKind)
		}
	}
	apply()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			apply()
		}
	}
}

// Main is `standin openai-server ARGS`: exit 0 after SIGTERM or SIGINT, 2 on a usage error, 1 when it cannot
// listen.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "standin openai-server: %v\n%s\n", err, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := New(cfg, stderr).Run(ctx); err != nil {
		fmt.Fprintf(stderr, "standin %v\n", err)
		return 1
	}
	return 0
}
