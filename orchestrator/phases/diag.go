package phases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// Diag runs DCGM's diagnostic at the inventory's level on every node at
// once (JSON output; DCGM versions that answer in text are parsed too),
// with the host's dcgmi or else in phases.diag.image. A failed test fails
// the node; warnings are kept; a node with neither is NOT MEASURED.
var Diag = orchestrator.Phase{
	Name:   "diag",
	Gating: true,
	Enabled: func(inv *inventory.Inventory) bool {
		return inventory.On(inv.Phases.Diag.Enabled)
	},
	// The level sets the bound too: phases.deadline (30m, say) must not
	// cut a level 3 diagnostic (~30 min on 8 GPUs), which would fail and
	// quarantine healthy nodes.
	Own: func(inv *inventory.Inventory) bool { return inv.Phases.Diag.Timeout > 0 || inv.Phases.Diag.Level >= 2 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		// dcgmi diag -r 3 takes ~30 min on 8 GPUs, -r 4 hours.
		def := map[int]time.Duration{1: 5 * time.Minute, 2: 15 * time.Minute, 3: 60 * time.Minute, 4: 4 * time.Hour}[inv.Phases.Diag.Level]
		return orDefault(inv.Phases.Diag.Timeout, orDefault(def, 5*time.Minute))
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		level := max(w.Inv.Phases.Diag.Level, 1)
		// The host's dcgmi where there is one, else DCGM's pinned image;
		// else not measured (diag_image.go).
		has, err := nodeHas(ctx, w, n, "dcgmi", "podman", "docker")
		if err != nil {
			return nil, err
		}
		cmd, image := fmt.Sprintf("dcgmi diag -r %d -j", level), ""
		if !has["dcgmi"] {
			if cmd, err = diagInImage(ctx, w, n, has, level); err != nil {
				return nil, err
			}
			image = w.Inv.Phases.Diag.Image
		}
		out, err := runOn(ctx, w, n, cmd)
		var exit *remote.ExitError
		if err != nil && !errors.As(err, &exit) {
			return nil, err
		}
		// dcgmi exits non-zero when a test fails; its report says which.
		if why := hostEngineUnreachable(string(out)); why != "" && err != nil {
			// DCGM is installed but its host engine is not running (and
			// dcgmi could not start one of its own): the node's setup,
			// not a GPU fault.
			if image != "" {
				return nil, orchestrator.Unmeasured("dcgmi", "dcgmi in %s could not reach DCGM's host engine (%s): DCGM diagnostic not measured", image, why)
			}
			return nil, orchestrator.Unmeasured("dcgmi", "dcgmi could not reach DCGM's host engine (%s): start nv-hostengine (systemctl start nvidia-dcgm) or set phases.diag.image: DCGM diagnostic not measured", why)
		}
		d, perr := parse.DCGMDiag(string(out))
		if perr != nil {
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("dcgmi diag output not understood: %w", perr)
		}
		run := DiagRun{Diag: d, Image: image}
		if !d.OK {
			return run, fmt.Errorf("dcgmi diag -r %d failed: %s", level, strings.Join(failedTests(d), ", "))
		}
		return run, nil
	},
	Judge: func(w *orchestrator.Window) []record.Verdict {
		var vs []record.Verdict
		for _, n := range w.Nodes {
			v := record.NewVerdict("DIAG-001", n.Name)
			var run DiagRun
			r, ok := w.Result("diag", n.Index, &run)
			d := run.Diag
			switch {
			case !inventory.On(w.Inv.Phases.Diag.Enabled):
				v.Status, v.Detail = record.Skip, "disabled in the inventory"
			case !ok:
				reason := "not run"
				if q, why := n.Quarantined(); q {
					reason = why
				}
				v.Status, v.Detail = record.Skip, reason
			case r.Outcome == record.Skipped:
				v.Status, v.Detail = record.Skip, r.Error
			case r.Outcome == record.NotMeasured:
				notMeasured(&v, r.Error)
			case len(r.Data) == 0:
				v.Status, v.Detail = record.Fail, r.Error
			case !d.OK:
				v.Status, v.Measured, v.Detail = record.Fail, "failed", strings.Join(failedTests(d), ", ")
			case len(warnings(d)) > 0:
				v.Status, v.Measured, v.Detail = record.Warn, "passed with warnings", strings.Join(warnings(d), "; ")
			default:
				v.Status, v.Measured = record.Pass, fmt.Sprintf("%d tests passed", len(d.Tests))
			}
			if run.Image != "" && v.Status != record.Skip {
				v.Detail = strings.TrimPrefix(v.Detail+"; run in "+run.Image, "; ")
			}
			vs = append(vs, v)
		}
		return vs
	},
}

// DiagRun is a node's diag result: DCGM's report, and the pinned image
// it ran in where the node had no dcgmi of its own.
type DiagRun struct {
	parse.Diag
	Image string `json:"image,omitempty"`
}

func failedTests(d parse.Diag) []string {
	var out []string
	for _, t := range d.Tests {
		if t.Status == "Fail" {
			name := t.Name
			var gpus []string
			for _, g := range t.GPUs {
				if g.Status == "Fail" {
					gpus = append(gpus, fmt.Sprint(g.GPU))
				}
			}
			if len(gpus) > 0 {
				name += " (GPU " + strings.Join(gpus, ",") + ")"
			}
			out = append(out, name)
		}
	}
	out = append(out, d.Errors...)
	if len(out) == 0 {
		out = append(out, "reported failure")
	}
	return out
}

func warnings(d parse.Diag) []string {
	var out []string
	for _, t := range d.Tests {
		if t.Status == "Warn" {
			out = append(out, t.Name)
		}
		for _, g := range t.GPUs {
			for _, w := range g.Warnings {
				out = append(out, fmt.Sprintf("%s GPU %d: %s", t.Name, g.GPU, w))
			}
		}
	}
	return out
}

// hostEngineUnreachable is dcgmi's own words when it could not connect to
// nv-hostengine ("Error: Unable to connect to host engine. Host engine
// connection invalid/disconnected."), else "".
func hostEngineUnreachable(out string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if l := strings.ToLower(line); strings.Contains(l, "unable to connect to host engine") || strings.Contains(l, "unable to establish a connection to the specified host") {
			return clip(strings.TrimPrefix(line, "Error: "), 120)
		}
	}
	return ""
}
