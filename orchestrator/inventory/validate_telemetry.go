package inventory

import (
	"strings"
	"time"
)

// Telemetry and burn-in defaults and bounds.
const (
	DefaultTelemetryInterval = 5 * time.Second
	DefaultTelemetryMaxMiB   = 256
	DefaultComputeSeconds    = 60
	DefaultComputeSize       = 8192
	DefaultComputePython     = "python3"
	// A sample a second at most: nvidia-smi's own loop takes ~100 ms for
	// eight GPUs, and a thousand nodes' lines must stay within what one
	// coordinator writes.
	minTelemetryInterval = time.Second
	maxTelemetryInterval = 10 * time.Minute
	minBurnin            = time.Minute
	maxBurnin            = 30 * 24 * time.Hour
)

// telemetry checks the telemetry section and fills its defaults.
func (v *validator) telemetry() {
	t := &v.inv.Telemetry
	switch {
	case !v.given("telemetry.interval"):
		t.Interval = DefaultTelemetryInterval
	case t.Interval < minTelemetryInterval || t.Interval > maxTelemetryInterval:
		v.problem("telemetry.interval", "must be %s to %s, got %s", minTelemetryInterval, maxTelemetryInterval, t.Interval)
	}
	switch {
	case !v.given("telemetry.max_mib_per_node"):
		t.MaxMiBPerNode = DefaultTelemetryMaxMiB
	case t.MaxMiBPerNode < 1 || t.MaxMiBPerNode > 1<<16:
		v.problem("telemetry.max_mib_per_node", "must be 1 to 65536 (MiB the coordinator keeps of one node's samples), got %d", t.MaxMiBPerNode)
	}
}

// burnin checks phases.burnin and fills its defaults.
func (v *validator) burnin(b *Burnin) {
	const k = "phases.burnin."
	switch {
	case b.Duration == 0 && b.Enabled:
		v.problem(k+"duration", "required with phases.burnin.enabled: how long to load the GPUs, %s to %s (e.g. 30m, 24h)", minBurnin, maxBurnin)
	case b.Duration != 0 && (b.Duration < minBurnin || b.Duration > maxBurnin):
		v.problem(k+"duration", "must be %s to %s, got %s", minBurnin, maxBurnin, b.Duration)
	}
	c := &b.Compute
	switch {
	case !v.given(k + "compute.seconds"):
		c.Seconds = DefaultComputeSeconds
	case c.Seconds < 5 || c.Seconds > 3600:
		v.problem(k+"compute.seconds", "must be 5 to 3600, got %d", c.Seconds)
	}
	switch {
	case !v.given(k + "compute.size"):
		c.Size = DefaultComputeSize
	case c.Size < 1024 || c.Size > 32768:
		v.problem(k+"compute.size", "must be 1024 to 32768 (the matrices' dimension), got %d", c.Size)
	}
	if c.Python == "" {
		c.Python = DefaultComputePython
	}
	for _, x := range []struct {
		key string
		a   *Auto
	}{{"gpu_burn", &b.GPUBurn}, {"dcgm_stress", &b.DCGMStress}} {
		key, a := x.key, x.a
		switch norm := Auto(strings.ToLower(strings.TrimSpace(string(*a)))); norm {
		case "":
			*a = AutoDefault
		case AutoDefault, AutoOn, AutoOff:
			*a = norm
		default:
			v.problem(k+key, "must be auto (where the node has it), true or false, got %q", short(string(*a)))
		}
	}
}
