package inventory

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"
)

// Idle guard defaults and bounds.
const (
	DefaultIdleUtilPct      = 5
	DefaultIdleCheckGrace   = 5 * time.Minute
	minIdleAfter            = 10 * time.Second // the message says so
	maxIdleAfter            = 24 * time.Hour
	maxProviderIdleShutdown = 24 * time.Hour
)

// idle checks the idle section and fills its defaults.
func (v *validator) idle() {
	const k = "idle."
	g := &v.inv.Idle
	if v.given(k+"after") && (g.After < minIdleAfter || g.After > maxIdleAfter) {
		v.problem(k+"after", "must be 10s to 24h (how long a node's GPUs may sit idle before it is signalled), got %s", g.After)
	}
	if g.On() && !v.inv.Telemetry.On() {
		v.problem(k+"after", "needs telemetry: the guard reads each GPU's utilisation from the sampler (telemetry.enabled is false)")
	}
	if iv := v.inv.Telemetry.Interval; g.On() && v.inv.Telemetry.On() && iv > 0 && g.After < 2*iv {
		v.problem(k+"after", "must be at least twice telemetry.interval (%s): one idle sample is not a node sitting idle, got %s", iv, g.After)
	}
	switch {
	case !v.given(k + "util_pct"):
		g.UtilPct = DefaultIdleUtilPct
	case !(g.UtilPct > 0 && g.UtilPct <= 100): // NaN too
		v.problem(k+"util_pct", "must be more than 0 and at most 100 (a GPU under it counts as idle), got %g", g.UtilPct)
	}
	switch g.Action = strings.ToLower(strings.TrimSpace(g.Action)); g.Action {
	case "":
		g.Action = IdleSignal
	case IdleSignal, IdleRelease:
	default:
		v.problem(k+"action", "must be %q (say so and go on) or %q (end the window's use of the node, its teardown run at once), got %q",
			IdleSignal, IdleRelease, g.Action)
	}
	for _, key := range []string{"util_pct", "notify", "action"} {
		if v.given(k+key) && !v.given(k+"after") {
			v.problem(k+key, "needs idle.after: the guard is off without it")
		}
	}
	v.shellCommand(k+"notify", g.Notify)
	v.shellCommand(k+"provider_check.signal", g.ProviderCheck.Signal)
	for _, key := range []string{"grace", "signal"} {
		if v.given(k+"provider_check."+key) && !g.ProviderCheck.Enabled {
			v.problem(k+"provider_check."+key, "needs idle.provider_check.enabled: true: the check is off without it")
		}
	}
	pc := &g.ProviderCheck
	const pk = k + "provider_check."
	switch {
	case !v.given(pk + "grace"):
		pc.Grace = DefaultIdleCheckGrace
	case pc.Grace < 0 || pc.Grace > 6*time.Hour:
		v.problem(pk+"grace", "must be 0 to 6h (how long past quote.terms.idle_shutdown_after the node may still answer), got %s", pc.Grace)
	}
	if pc.Enabled {
		switch d := v.inv.Quote.Terms.IdleShutdownAfter; {
		case d == 0:
			v.problem(pk+"enabled", "needs quote.terms.idle_shutdown_after: the time the provider promises to stop or signal an idle node")
		case d > maxProviderIdleShutdown:
			v.problem(pk+"enabled", "holds a node idle for quote.terms.idle_shutdown_after (%s): at most %s", d, maxProviderIdleShutdown)
		}
		if v.inv.PlannedNodes() < 2 && !v.nodesLost && !v.nodesLater {
			v.problem(pk+"enabled", "needs at least 2 nodes: the node it holds idle is lost to the window's other phases")
		}
	}
}

// shellCommand checks a command the coordinator runs with sh -c: sh must
// read it (sh -n runs nothing), so a quote left open is said now, not
// when a node sits idle hours into the window.
func (v *validator) shellCommand(key, command string) {
	if command == "" {
		return
	}
	if strings.ContainsRune(command, 0) {
		v.problem(key, "must not contain a NUL byte")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/sh", "-n", "-c", command).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(string(out))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		v.problem(key, "sh cannot read it (%s): %q", msg, command)
	}
}
