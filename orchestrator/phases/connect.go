package phases

import (
	"context"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// Reached is what connect learns about a node.
type Reached struct {
	Addr     string `json:"addr"`
	Hostname string `json:"hostname"`
}

// Connect dials every node, host keys checked. Gating: a node that cannot
// be reached takes no further part. It runs again on --resume, because
// connections do not outlive the coordinator.
var Connect = orchestrator.Phase{
	Name:      "connect",
	Gating:    true,
	AlwaysRun: true,
	Deadline: func(inv *inventory.Inventory) time.Duration {
		// Every hop may take its full connect and handshake time.
		hops := time.Duration(len(inv.SSH.Jump) + 1)
		return hops*(orDefault(inv.SSH.ConnectTimeout, remote.DefaultConnectTimeout)+
			orDefault(inv.SSH.HandshakeTimeout, remote.DefaultHandshakeTimeout)) + 30*time.Second
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		c, err := w.Connect(ctx, n)
		if err != nil {
			return nil, err
		}
		out, err := runOn(ctx, w, n, "hostname")
		if err != nil {
			return nil, err
		}
		w.Progress.Node(n.Name, "connected to %s (%s)", c.Addr(), strings.TrimSpace(string(out)))
		return Reached{Addr: c.Addr(), Hostname: strings.TrimSpace(string(out))}, nil
	},
	Judge: func(w *orchestrator.Window) []record.Verdict {
		var vs []record.Verdict
		for _, n := range w.Nodes {
			v := record.NewVerdict("CONN-001", n.Name)
			r, ok := w.Result("connect", n.Index, nil)
			switch {
			case !ok:
				v.Status, v.Detail = record.Skip, "not attempted"
			case r.Outcome == record.OK:
				v.Status, v.Measured = record.Pass, "connected"
			default:
				v.Status, v.Measured, v.Detail = record.Fail, string(r.Outcome), r.Error
			}
			vs = append(vs, v)
		}
		return vs
	},
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
