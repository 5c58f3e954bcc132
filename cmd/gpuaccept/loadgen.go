package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gpuaccept/loadgen"
	"gpuaccept/orchestrator/workload"
)

// newLoadgenCmd is the load generator the inference phase uploads to every
// node and runs there over loopback: stdout is JSON only, progress goes to
// stderr.
func newLoadgenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "loadgen",
		Short:  "Drive an OpenAI-compatible server and measure it (run on the nodes by the inference phase)",
		Hidden: true,
	}
	cmd.AddCommand(newLoadgenReadyCmd(), newLoadgenRunCmd())
	return cmd
}

func newLoadgenReadyCmd() *cobra.Command {
	var (
		base, model, healthPath string
		timeout                 time.Duration
		since                   float64
	)
	cmd := &cobra.Command{
		Use:   "ready --url URL --model M [--health-path /health] [--timeout 10m] [--since UNIXTIME]",
		Short: "Wait until the server's health endpoint and one completion answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkURL(base); err != nil {
				return exitWith(exitBadInput, err)
			}
			if !strings.HasPrefix(healthPath, "/") {
				return exitWith(exitBadInput, fmt.Errorf("--health-path %q: must be an absolute path", healthPath))
			}
			if timeout <= 0 {
				return exitWith(exitBadInput, fmt.Errorf("--timeout %s: must be above 0", timeout))
			}
			if since < 0 {
				return exitWith(exitBadInput, fmt.Errorf("--since %g: must be a Unix time in seconds", since))
			}
			var from time.Time
			if since > 0 {
				from = time.Unix(0, int64(since*1e9))
			}
			r := loadgen.Ready(contextOf(cmd), base, model, healthPath, timeout, from)
			if err := writeJSONLine(cmd.OutOrStdout(), r); err != nil {
				return exitWith(1, err)
			}
			if r.Error != "" {
				if contextOf(cmd).Err() != nil {
					return exitWith(exitInterrupted, nil)
				}
				return exitWith(1, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&base, "url", "", "the server's base URL (http://127.0.0.1:8000)")
	f.StringVar(&model, "model", "", "the served model's name")
	f.StringVar(&healthPath, "health-path", "/health", "answers 200 once the server is up")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long the server may take")
	f.Float64Var(&since, "since", 0, "count the times from this Unix time in seconds, this machine's clock (the server's start), not from now")
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

type loadgenRunFlags struct {
	base, model, levels, prompts, input, output, metrics, goodput, log string
	duration, warmup, requestTimeout                                   time.Duration
	seed                                                               uint64
	retries                                                            int
}

func newLoadgenRunCmd() *cobra.Command {
	var o loadgenRunFlags
	cmd := &cobra.Command{
		Use:   "run --url URL --model M --levels concurrency:1,rate:8 [flags]",
		Short: "Measure a sweep of load levels; stdout {\"levels\": [...]}",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return loadgenRun(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.base, "url", "", "the server's base URL (http://127.0.0.1:8000)")
	f.StringVar(&o.model, "model", "", "the served model's name")
	f.StringVar(&o.levels, "levels", "", "concurrency:N (closed loop) or rate:R (Poisson), comma-separated")
	f.DurationVar(&o.duration, "duration", time.Minute, "measured time of each level")
	f.DurationVar(&o.warmup, "warmup", 10*time.Second, "warm-up before each level (in no figure)")
	f.StringVar(&o.prompts, "prompts", "", `JSONL prompt set: {"prompt","max_tokens"} or {"input_tokens","output_tokens"}`)
	f.StringVar(&o.input, "input-tokens", "512", "synthetic prompt length N[:SPREAD]")
	f.StringVar(&o.output, "output-tokens", "128", "tokens to generate N[:SPREAD]")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the prompts and the arrivals")
	f.DurationVar(&o.requestTimeout, "request-timeout", time.Minute, "bound of one request, stream included")
	f.IntVar(&o.retries, "retries", 0, "retries of a request whose connection failed")
	f.StringVar(&o.metrics, "metrics-path", "/metrics", "Prometheus endpoint scraped each second, or none")
	f.StringVar(&o.goodput, "goodput", "", "targets of a good request: ttft=800ms,tpot=50ms,itl=100ms,e2el=5s")
	f.StringVar(&o.log, "log", "", "request log, gzip JSONL (one line per request)")
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("levels")
	return cmd
}

// loadgenConfig checks the flags; every error names its flag or file.
func loadgenConfig(o loadgenRunFlags) (loadgen.Config, error) {
	cfg := loadgen.Config{URL: o.base, Model: o.model, Duration: o.duration, Warmup: o.warmup, Seed: o.seed,
		RequestTimeout: o.requestTimeout, Retries: o.retries, MetricsPath: o.metrics}
	var err error
	if err = checkURL(o.base); err != nil {
		return cfg, err
	}
	if strings.TrimSpace(o.model) == "" {
		return cfg, errors.New("--model: required")
	}
	if cfg.Levels, err = loadgen.ParseLevels(o.levels); err != nil {
		return cfg, fmt.Errorf("--levels: %w", err)
	}
	switch {
	case o.duration <= 0:
		return cfg, fmt.Errorf("--duration %s: must be above 0", o.duration)
	case o.warmup < 0:
		return cfg, fmt.Errorf("--warmup %s: must not be negative", o.warmup)
	case o.requestTimeout <= 0:
		return cfg, fmt.Errorf("--request-timeout %s: must be above 0", o.requestTimeout)
	case o.retries < 0 || o.retries > 10:
		return cfg, fmt.Errorf("--retries %d: must be 0..10", o.retries)
	}
	if cfg.Input, err = loadgen.ParseLengths(o.input); err != nil {
		return cfg, fmt.Errorf("--input-tokens: %w", err)
	}
	if cfg.Output, err = loadgen.ParseLengths(o.output); err != nil {
		return cfg, fmt.Errorf("--output-tokens: %w", err)
	}
	if o.prompts != "" {
		if cfg.Prompts, err = loadgen.LoadPrompts(o.prompts, cfg.Output.Mean); err != nil {
			return cfg, fmt.Errorf("--prompts: %w", err)
		}
	}
	switch {
	case o.metrics == "none":
		cfg.MetricsPath = ""
	case !strings.HasPrefix(o.metrics, "/") || strings.ContainsAny(o.metrics, " \t\r\n?#"):
		return cfg, fmt.Errorf("--metrics-path %q: an absolute path (/metrics) or none", o.metrics)
	}
	if cfg.Goodput, err = loadgen.ParseGoodput(o.goodput); err != nil {
		return cfg, fmt.Errorf("--goodput: %w", err)
	}
	return cfg, nil
}

func loadgenRun(cmd *cobra.Command, o loadgenRunFlags) error {
	cfg, err := loadgenConfig(o)
	if err != nil {
		return exitWith(exitBadInput, err)
	}
	stderr := cmd.ErrOrStderr()
	cfg.Progress = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	var logFile *os.File
	if o.log != "" {
		if logFile, err = os.OpenFile(o.log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return exitWith(exitBadInput, fmt.Errorf("--log: %w", err))
		}
		defer logFile.Close()
		cfg.Log = loadgen.NewRequestLog(logFile)
	}
	ctx := contextOf(cmd)
	levels, runErr := loadgen.Run(ctx, cfg)
	if cfg.Log != nil {
		if err := cfg.Log.Close(); err != nil {
			fmt.Fprintf(stderr, "loadgen: --log %s: %v\n", o.log, err)
		}
		if err := logFile.Close(); err != nil {
			fmt.Fprintf(stderr, "loadgen: --log %s: %v\n", o.log, err)
		}
	}
	if levels == nil {
		levels = []workload.Level{}
	}
	if err := writeJSONLine(cmd.OutOrStdout(), struct {
		Levels []workload.Level `json:"levels"`
	}{levels}); err != nil {
		return exitWith(1, err)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "loadgen: stopped: %d levels measured\n", len(levels))
		return exitWith(exitInterrupted, nil)
	}
	return nil
}

// checkURL: the server's base URL, http or https, nothing after the host
// but a path.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" ||
		u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--url %q: want the server's base URL, http://HOST:PORT", s)
	}
	// The generator measures the server on its own node: a node's
	// environment that pointed it elsewhere (another, faster machine)
	// would have the window measure what it was not given.
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--url %q: the load generator drives a server on its own node: a loopback address (127.0.0.0/8, ::1, localhost), not %q", s, host)
	}
	return nil
}

// writeJSONLine writes v as one line: what the inference phase reads.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
