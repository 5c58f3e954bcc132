package inventory

import (
	"strings"
	"time"
)

// workloadInference checks phases.workload.inference and fills its
// defaults.
func (v *validator) workloadInference(in *WorkloadInference) {
	const k = "phases.workload.inference."
	if v.inv.Transport == TransportSrun {
		v.problem("phases.workload.kind", "inference starts a server that runs on past the command that starts it, which a Slurm step does not outlive (transport srun): not yet measurable that way")
	}
	if strings.TrimSpace(in.Model) == "" {
		v.problem(k+"model", "required: the served model's name, as requests ask for it (vLLM's --served-model-name, else the model path)")
	}
	if in.Port == 0 {
		in.Port = DefaultInferencePort
	} else if in.Port < 1 || in.Port > 65535 {
		v.problem(k+"port", "must be a TCP port 1..65535, got %d", in.Port)
	}
	for _, p := range []struct {
		key string
		p   *string
		def string
	}{{"health_path", &in.HealthPath, "/health"}, {"metrics_path", &in.MetricsPath, "/metrics"}} {
		switch {
		case *p.p == "":
			*p.p = p.def
		case *p.p == "none" && p.key == "metrics_path":
		case !strings.HasPrefix(*p.p, "/") || strings.ContainsAny(*p.p, " \t\r\n?#"):
			v.problem(k+p.key, "must be an absolute URL path such as %s, got %q", p.def, short(*p.p))
		}
	}
	if in.ServersPerNode < 0 {
		v.problem(k+"servers_per_node", "must not be negative, got %d", in.ServersPerNode)
	} else if in.ServersPerNode == 0 {
		in.ServersPerNode = 1
	}
	if len(in.Levels) == 0 {
		in.Levels = append([]string(nil), DefaultLevels...)
	}
	for _, l := range in.Levels {
		if _, err := ParseLevel(l); err != nil {
			v.problem(k+"levels", "%v", err)
		}
	}
	for _, d := range []struct {
		key string
		d   *time.Duration
		def time.Duration
	}{{"duration", &in.Duration, time.Minute}, {"warmup", &in.Warmup, 10 * time.Second},
		{"request_timeout", &in.RequestTimeout, time.Minute}, {"ready_timeout", &in.ReadyTimeout, 10 * time.Minute}} {
		v.nonNegativeDuration(k+d.key, *d.d)
		if *d.d == 0 && !v.given(k+d.key) || *d.d == 0 && d.key != "warmup" {
			*d.d = d.def
		}
	}
	if in.Retries < 0 || in.Retries > 10 {
		v.problem(k+"retries", "must be 0..10, got %d", in.Retries)
	}
	if in.Prompts != "" {
		in.Prompts = v.path(k+"prompts", in.Prompts)
		if in.InputTokens.Mean > 0 || in.OutputTokens.Mean > 0 {
			v.problem(k+"prompts", "give the prompt set or input_tokens/output_tokens, not both")
		}
	}
	for _, s := range []struct {
		key string
		l   *LengthSpread
		def int
	}{{"input_tokens", &in.InputTokens, 512}, {"output_tokens", &in.OutputTokens, 128}} {
		if s.l.Mean < 0 {
			v.problem(k+s.key+".mean", "must not be negative, got %d", s.l.Mean)
		}
		if s.l.Spread < 0 || s.l.Spread >= 1 {
			v.problem(k+s.key+".spread", "must be a fraction 0 ≤ x < 1 (0.2: lengths uniform within ±20%% of the mean), got %g", s.l.Spread)
		}
		if s.l.Mean == 0 && in.Prompts == "" {
			s.l.Mean = s.def
		}
	}
	if in.Loadgen != "" {
		in.Loadgen = v.path(k+"loadgen", in.Loadgen)
	}
}
