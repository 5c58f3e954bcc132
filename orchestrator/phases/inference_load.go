package phases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/remote"
)

// upload puts the load generator (this gpuaccept, or the inventory's
// build for the nodes' architecture) and the buyer's prompt set in the
// window's private directory on the node, each checked there against its
// sha256 (the generator again before every run: only the copy this
// window sent runs).
func (s *infNode) upload(ctx context.Context) error {
	bin := firstNonEmpty(s.in.Loadgen, s.w.Executable)
	if bin == "" {
		return errors.New("the gpuaccept binary to upload as the load generator is unknown: set phases.workload.inference.loadgen")
	}
	if err := s.checkLoadgenArch(ctx, bin); err != nil {
		return err
	}
	v, err := s.w.Shared("loadgen-sha256:"+bin, func() (any, error) { return hashFile(bin) })
	if err != nil {
		return orchestrator.Unmeasured("gpuaccept", "the load generator: %v: the load test not measured", err)
	}
	a := v.(*Archive)
	s.loadgen, s.sum = s.state+"/gpuaccept-loadgen", a.SHA256
	if err := s.put(ctx, bin, a, s.loadgen, 0o700); err != nil {
		return fmt.Errorf("upload the load generator: %w", err)
	}
	if p := s.in.Prompts; p != "" {
		v, err := s.w.Shared("prompts-sha256:"+p, func() (any, error) { return hashFile(p) })
		if err != nil {
			return fmt.Errorf("the prompt set: %w", err)
		}
		s.prompts = s.state + "/prompts.jsonl"
		if err := s.put(ctx, p, v.(*Archive), s.prompts, 0o600); err != nil {
			return fmt.Errorf("upload the prompt set: %w", err)
		}
	}
	return nil
}

// put sends the local file a describes to path on the node.
func (s *infNode) put(ctx context.Context, local string, a *Archive, path string, mode os.FileMode) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = s.e.UploadFrom(ctx, f, a.Bytes, path, remote.TransferOptions{Mode: mode, SHA256: a.SHA256})
	return err
}

// lg is the shell command that runs the uploaded generator with args
// (each already a shell word) after checking its sha256: exit 96 when
// the copy is missing or not the one this window sent.
func (s *infNode) lg(args ...string) string {
	return fmt.Sprintf(`f=%s; { printf '%%s  %%s\n' %s "$f" | sha256sum -c >/dev/null 2>&1 || { echo "gpuaccept: $f is missing or is not the load generator this window uploaded (sha256 %s)" >&2; exit 96; }; } && "$f" loadgen %s`,
		remote.Quote(s.loadgen), s.sum, s.sum, strings.Join(args, " "))
}

// url is server i's address as a shell word: the node's loopback, or
// $GPUACCEPT_LOOPBACK where the node sets it (simulated nodes that share
// one machine each listen on an address of their own in 127/8).
func (s *infNode) url(i int) string {
	return fmt.Sprintf(`http://"${%s:-127.0.0.1}":%d`, loopbackEnv, s.servers[i].Port)
}

// loopbackEnv is standins.LoopbackEnv, which the demo sets on each node
// (a test holds the two equal; the phases do not import the stand-ins).
const loopbackEnv = "GPUACCEPT_LOOPBACK"

// ready waits for server i: its health endpoint, then one completion.
// The times count from the container's start on the node's clock (the
// generator's --since); where the node gave no such time, from the
// coordinator's start of it, plus the generator's own count from its
// start, which loses the exec's latency in between.
func (s *infNode) ready(ctx context.Context, i int) {
	sv := &s.servers[i]
	to := s.in.ReadyTimeout
	rctx, cancel := context.WithTimeout(ctx, to+30*time.Second)
	defer cancel()
	issued := time.Now()
	args := []string{"ready", "--url", s.url(i), "--model", remote.Quote(s.in.Model),
		"--health-path", remote.Quote(s.in.HealthPath), "--timeout", to.String()}
	if s.since[i] != "" {
		args = append(args, "--since", s.since[i])
	}
	out, err := runOn(rctx, s.w, s.n, s.lg(args...))
	var r struct {
		Health *float64 `json:"health_seconds"`
		Ready  *float64 `json:"ready_seconds"`
		Error  string   `json:"error"`
	}
	perr := decodeJSON(out, &r)
	offset := issued.Sub(s.started[i]).Seconds()
	if s.since[i] != "" {
		offset = 0
	}
	if r.Health != nil && *r.Health >= 0 {
		h := offset + *r.Health
		sv.HealthSecs = &h
	}
	if err == nil && perr == nil && r.Ready != nil && *r.Ready >= 0 {
		rs := offset + *r.Ready
		sv.ReadySecs = &rs
		s.w.Progress.Node(s.n.Name, "inference: server %d (port %d) ready in %.1f s", i, sv.Port, rs)
		return
	}
	why := r.Error
	switch {
	case why != "":
	case err != nil:
		why = lgError(err)
	case perr != nil:
		why = "the load generator's answer: " + perr.Error()
	default:
		why = "the load generator said neither ready nor why not"
	}
	sv.Error = fmt.Sprintf("server %d (port %d) not ready: %s", i, sv.Port, clipText(redact.Shown(why), 400))
	sv.LogTail = s.logTail(ctx, i)
}

// load is one run of the sweep on every server that got ready, all at
// once (the node's whole load), with the node's GPU memory sampled
// throughout; each server's request log comes into the bundle.
func (s *infNode) load(ctx context.Context, run int) ([]workload.Server, error) {
	out := append([]workload.Server(nil), s.servers...)
	lctx, cancel := context.WithTimeout(ctx, infRunBound(s.w.Inv))
	defer cancel()
	var sampler *memSampler
	sctx, stopSampling := context.WithCancel(lctx)
	defer stopSampling()
	if s.smi {
		sampler = s.sample(sctx)
	}
	var wg sync.WaitGroup
	for i := range out {
		if out[i].ReadySecs == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.drive(lctx, run, &out[i])
		}()
	}
	wg.Wait()
	stopSampling()
	if sampler != nil {
		sampler.wait()
		for i := range out {
			if out[i].ReadySecs != nil {
				out[i].GPUMemPeakMiB, out[i].GPUMemTotalMiB = sampler.peak(out[i].GPUs)
			}
		}
	}
	for i := range out {
		if out[i].ReadySecs == nil {
			continue
		}
		rel, err := s.fetchLog(ctx, s.logPath(i, run), requestLogName(i, run))
		if err != nil {
			out[i].Error = join(out[i].Error, "request log: "+err.Error())
		}
		out[i].RequestLog = rel
	}
	return out, ctx.Err()
}

// logPath is server i's request log of run on the node.
func (s *infNode) logPath(i, run int) string {
	return fmt.Sprintf("%s/requests-%d-run%d.jsonl.gz", s.state, i, run)
}

// requestLogName is its name in the bundle: the first run's as the
// evidence types name it, a retest's beside it.
func requestLogName(i, run int) string {
	if run <= 1 {
		return fmt.Sprintf("workload-requests-%d.jsonl.gz", i)
	}
	return fmt.Sprintf("workload-requests-%d.run%d.jsonl.gz", i, run)
}

// drive runs the generator's sweep against server sv and records its
// levels; a run cut short keeps the levels measured until then.
func (s *infNode) drive(ctx context.Context, run int, sv *workload.Server) {
	i := sv.Index
	args := []string{"run", "--url", s.url(i), "--model", remote.Quote(s.in.Model),
		"--levels", remote.Quote(strings.Join(s.in.Levels, ",")),
		"--duration", s.in.Duration.String(), "--warmup", s.in.Warmup.String(),
		"--seed", "1", "--request-timeout", s.in.RequestTimeout.String(), "--retries", fmt.Sprint(s.in.Retries),
		"--metrics-path", remote.Quote(s.in.MetricsPath), "--log", remote.Quote(s.logPath(i, run))}
	if s.prompts != "" {
		args = append(args, "--prompts", remote.Quote(s.prompts))
	} else {
		args = append(args, "--input-tokens", lengthArg(s.in.InputTokens.Mean, s.in.InputTokens.Spread),
			"--output-tokens", lengthArg(s.in.OutputTokens.Mean, s.in.OutputTokens.Spread))
	}
	if g := goodputArg(s.w.Inv.Acceptance.Workload); g != "" {
		args = append(args, "--goodput", remote.Quote(g))
	}
	out, err := runOn(ctx, s.w, s.n, s.lg(args...))
	var r struct {
		Levels []workload.Level `json:"levels"`
	}
	perr := decodeJSON(out, &r)
	sv.Levels = cleanLevels(r.Levels, len(s.in.Levels))
	switch {
	case err != nil:
		sv.Error = fmt.Sprintf("load generator: %s", clipText(redact.Shown(lgError(err)), 400))
	case perr != nil:
		sv.Error = "load generator: its answer: " + perr.Error()
	case len(sv.Levels) == 0:
		sv.Error = "load generator: no level measured"
	}
	if len(sv.Levels) > 0 {
		l := sv.Levels[len(sv.Levels)-1]
		s.w.Progress.Node(s.n.Name, "inference: server %d %s: %.3g requests/s, %.4g output tokens/s, p50 TTFT %.4g ms",
			i, clipText(l.Name, 40), l.RequestsPerSec, l.OutputTokensPerSec, l.TTFT.P50)
	}
}

// lengthArg is a synthetic length as the generator takes it: MEAN or
// MEAN:SPREAD.
func lengthArg(mean int, spread float64) string {
	if spread > 0 {
		return fmt.Sprintf("%d:%s", mean, strconv.FormatFloat(spread, 'g', -1, 64))
	}
	return fmt.Sprint(mean)
}

// goodputArg is the buyer's latency targets as the generator counts
// goodput by them (ttft=800ms,...); "" when none is set.
func goodputArg(t inventory.WorkloadTargets) string {
	var parts []string
	for _, x := range []struct {
		key string
		d   time.Duration
	}{{"ttft", t.TTFT}, {"tpot", t.TPOT}, {"itl", t.ITL}, {"e2el", t.E2EL}} {
		if x.d > 0 {
			parts = append(parts, x.key+"="+x.d.String())
		}
	}
	return strings.Join(parts, ",")
}

// lgError is a failed generator run in words: its exit, and what an
// exit 126 (a binary for another architecture, most likely) means.
func lgError(err error) string {
	var ee *remote.ExitError
	if errors.As(err, &ee) && ee.Status == 126 {
		return err.Error() + " (is phases.workload.inference.loadgen a gpuaccept for the node's architecture?)"
	}
	return err.Error()
}

// decodeJSON reads the JSON document a generator printed (its stdout is
// JSON only; a cut capture leaves it unreadable, which is said).
func decodeJSON(out []byte, v any) error {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return fmt.Errorf("no JSON in %q", clipText(string(out), 120))
	}
	if err := json.NewDecoder(bytes.NewReader(out[i:])).Decode(v); err != nil {
		return fmt.Errorf("unreadable JSON: %v", err)
	}
	return nil
}

// What the record keeps of a level's node text: the generator is ours,
// but it runs on a node that is not.
const (
	maxErrorKinds = 32
	maxKindBytes  = 120
)

// cleanLevels bounds what a node said of its levels: at most the levels
// asked for, a few dozen error kinds, short names with their control
// characters escaped.
func cleanLevels(ls []workload.Level, want int) []workload.Level {
	if len(ls) > want {
		ls = ls[:want]
	}
	for i := range ls {
		l := &ls[i]
		l.Name = clipText(redact.Controls(l.Name), 64)
		if len(l.Errors) > 0 {
			kinds := make([]string, 0, len(l.Errors))
			for k := range l.Errors {
				kinds = append(kinds, k)
			}
			sort.Slice(kinds, func(a, b int) bool {
				if l.Errors[kinds[a]] != l.Errors[kinds[b]] {
					return l.Errors[kinds[a]] > l.Errors[kinds[b]]
				}
				return kinds[a] < kinds[b]
			})
			errs := map[string]int{}
			for j, k := range kinds {
				key := clipText(redact.Shown(k), maxKindBytes)
				if j >= maxErrorKinds {
					key = "other"
				}
				errs[key] += l.Errors[k]
			}
			l.Errors = errs
		}
		if m := l.Metrics; m != nil {
			m.Error = clipText(redact.Shown(m.Error), 200)
		}
	}
	return ls
}

// clipText is remote.Clip: at most n bytes of s, whole characters.
func clipText(s string, n int) string { return remote.Clip(s, n) }

// shownTail is a log's tail as a verdict may show it: whole lines,
// control characters escaped, secrets scrubbed.
func shownTail(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, redact.Shown(strings.TrimRight(l, "\r")))
	}
	return strings.Join(lines, "\n")
}

// runStream runs command on the node with its stdout going to out (and
// the raw log) as it comes, nothing kept in memory: a sampler that runs
// for an hour.
func runStream(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string, out io.Writer) error {
	e, err := execOf(n)
	if err != nil {
		return err
	}
	log, _, err := w.Log(ctx, n)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "$ %s\n", firstLine(command))
	err = e.Run(ctx, remote.Cmd{Command: command, Env: nodeEnv(w, n),
		Stdout: io.MultiWriter(out, log), Stderr: log})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(log, "# %v\n", err)
	}
	return err
}
