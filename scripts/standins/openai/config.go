package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"
)

// Config is the command line of `standin openai-server`.
type Config struct {
	Host        string
	Port        int
	Model       string
	ReadyAfter  time.Duration // the port is not listened on before this
	NeverReady  bool          // never listen: a server whose weights never load
	Overrides   string        // a JSON file re-read every second (see Tunables)
	Seed        uint64        // the error draws' source
	MaxModelLen int           // prompt + completion tokens a request may ask for
	Tunables
}

// Tunables are what --overrides can change while the server runs.
type Tunables struct {
	PrefillTokensPerS float64
	TokenDelay        time.Duration
	Capacity          int     // sequences decoded at once; more wait in the queue
	ErrorRate         float64 // the share of requests that fail, 0..1
	ErrorKind         string  // http, stream or abort
}

// Error kinds.
const (
	ErrorHTTP   = "http"   // a 500 with vLLM's error JSON, before any token
	ErrorStream = "stream" // the stream ends after some tokens, without data: [DONE]
	ErrorAbort  = "abort"  // the connection is closed mid-stream (no end of the chunked body)
)

func (t Tunables) check() error {
	switch {
	case !(t.PrefillTokensPerS > 0) || math.IsInf(t.PrefillTokensPerS, 0):
		return fmt.Errorf("prefill tokens per second %v: want a number above 0", t.PrefillTokensPerS)
	case t.TokenDelay < 0 || t.TokenDelay > time.Hour:
		return fmt.Errorf("token delay %v: want 0 to 1h", t.TokenDelay)
	case t.Capacity < 1 || t.Capacity > 1<<20:
		return fmt.Errorf("capacity %d: want 1 to %d", t.Capacity, 1<<20)
	case !(t.ErrorRate >= 0 && t.ErrorRate <= 1):
		return fmt.Errorf("error rate %v: want 0 to 1", t.ErrorRate)
	case t.ErrorKind != ErrorHTTP && t.ErrorKind != ErrorStream && t.ErrorKind != ErrorAbort:
		return fmt.Errorf("error kind %q: want http, stream or abort", t.ErrorKind)
	}
	return nil
}

const usage = `usage: standin openai-server [--host 127.0.0.1] [--port 8000] [--model NAME] [--ready-after 2s]
       [--prefill-tokens-per-s 20000] [--token-delay 10ms] [--capacity 32] [--error-rate 0]
       [--error-kind http|stream|abort] [--never-ready] [--overrides FILE] [--seed 1] [--max-model-len 4096]`

// ParseArgs reads the command line; an error is a usage error (exit 2).
func ParseArgs(args []string) (Config, error) {
	c := Config{Tunables: Tunables{}}
	fs := flag.NewFlagSet("openai-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Host, "host", "127.0.0.1", "")
	fs.IntVar(&c.Port, "port", 8000, "")
	fs.StringVar(&c.Model, "model", "gpuaccept-standin", "")
	fs.DurationVar(&c.ReadyAfter, "ready-after", 2*time.Second, "")
	fs.BoolVar(&c.NeverReady, "never-ready", false, "")
	fs.StringVar(&c.Overrides, "overrides", "", "")
	fs.Uint64Var(&c.Seed, "seed", 1, "")
	fs.IntVar(&c.MaxModelLen, "max-model-len", 4096, "")
	fs.Float64Var(&c.PrefillTokensPerS, "prefill-tokens-per-s", 20000, "")
	fs.DurationVar(&c.TokenDelay, "token-delay", 10*time.Millisecond, "")
	fs.IntVar(&c.Capacity, "capacity", 32, "")
	fs.Float64Var(&c.ErrorRate, "error-rate", 0, "")
	fs.StringVar(&c.ErrorKind, "error-kind", ErrorHTTP, "")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case c.Port < 0 || c.Port > 65535:
		return c, fmt.Errorf("--port %d: want 0 to 65535", c.Port)
	case c.Model == "" || len(c.Model) > 256:
		return c, errors.New("--model: want a name of 1 to 256 bytes")
	case c.ReadyAfter < 0:
		return c, fmt.Errorf("--ready-after %v: want 0 or more", c.ReadyAfter)
	case c.MaxModelLen < 1:
		return c, fmt.Errorf("--max-model-len %d: want 1 or more", c.MaxModelLen)
	}
	if err := c.Tunables.check(); err != nil {
		return c, fmt.Errorf("flags: %w", err)
	}
	return c, nil
}

// Overrides is --overrides' JSON: any of the tunables' flag names, with _ for -, e.g.
// {"token_delay": "25ms", "prefill_tokens_per_s": 5000, "error_rate": 0.05, "error_kind": "http", "capacity": 8}.
// A key left out keeps the flag's value, so deleting the file restores the flags. A test writes it (atomically:
// write beside, rename) to slow or break one host's server without restarting it; it applies within a second.
type Overrides struct {
	PrefillTokensPerS *float64 `json:"prefill_tokens_per_s"`
	TokenDelay        *string  `json:"token_delay"`
	Capacity          *int     `json:"capacity"`
	ErrorRate         *float64 `json:"error_rate"`
	ErrorKind         *string  `json:"error_kind"`
}

// maxOverrideBytes bounds what is read of the overrides file: it is a few keys.
const maxOverrideBytes = 64 << 10

// readOverrides applies path's overrides to base. A missing file is no override.
// Args is the command line that gives c back (ParseArgs(c.Args()) == c): what a caller puts after
// `standin openai-server`.
func (c Config) Args() []string {
	a := []string{"--host", c.Host, "--port", strconv.Itoa(c.Port), "--model", c.Model,
		"--ready-after", c.ReadyAfter.String(), "--seed", strconv.FormatUint(c.Seed, 10),
		"--max-model-len", strconv.Itoa(c.MaxModelLen),
		"--prefill-tokens-per-s", strconv.FormatFloat(c.PrefillTokensPerS, 'g', -1, 64),
		"--token-delay", c.TokenDelay.String(), "--capacity", strconv.Itoa(c.Capacity),
		"--error-rate", strconv.FormatFloat(c.ErrorRate, 'g', -1, 64), "--error-kind", c.ErrorKind}
	if c.NeverReady {
		a = append(a, "--never-ready")
	}
	if c.Overrides != "" {
		a = append(a, "--overrides", c.Overrides)
	}
	return a
}

func readOverrides(path string, base Tunables) (Tunables, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return base, nil
	} else if err != nil {
		return base, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxOverrideBytes+1))
	if err != nil {
		return base, err
	}
	if len(b) > maxOverrideBytes {
		return base, fmt.Errorf("%s: over %d bytes", path, maxOverrideBytes)
	}
	var o Overrides
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	t := base
	if o.PrefillTokensPerS != nil {
		t.PrefillTokensPerS = *o.PrefillTokensPerS
	}
	if o.TokenDelay != nil {
		if t.TokenDelay, err = time.ParseDuration(*o.TokenDelay); err != nil {
			return base, fmt.Errorf("%s: token_delay: %w", path, err)
		}
	}
	if o.Capacity != nil {
		t.Capacity = *o.Capacity
	}
	if o.ErrorRate != nil {
		t.ErrorRate = *o.ErrorRate
	}
	if o.ErrorKind != nil {
		t.ErrorKind = *o.ErrorKind
	}
	if err := t.check(); err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
