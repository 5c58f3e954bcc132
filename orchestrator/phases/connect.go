package phases

import (
	"context"
	"net"
	"strconv"
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
	// Via: how the node was reached and how it proved who it is, in the
	// transport's words ("over SSH, host key verified").
	Via string `json:"via,omitempty"`
	// Cause: why the node could not be reached, and whether that is on
	// the buyer's side (recorded with the failure).
	Cause *remote.Cause `json:"cause,omitempty"`
}

// Connect dials every node by its transport, which checks who the node
// is where it can (SSH's host keys). Gating: a node that cannot be
// reached takes no further part. It runs again on --resume, because
// connections do not outlive the coordinator.
var Connect = orchestrator.Phase{
	Name:      "connect",
	Gating:    true,
	AlwaysRun: true,
	Own:       func(inv *inventory.Inventory) bool { return inv.ReachBoundGiven() },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		// As long as the slowest node's transport may take to reach it,
		// and its first command (hostname).
		return inv.ReachWithin() + 30*time.Second
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		c, err := w.Connect(ctx, n)
		if err != nil {
			cause := remote.CauseOf(err)
			return Reached{Cause: &cause}, err
		}
		out, err := runOn(ctx, w, n, "hostname")
		if err != nil {
			return nil, err
		}
		host, via := hostnameOf(out), n.Config.Via()
		w.Progress.Node(n.Name, "reached %s: %s at %s", via, host, c.Addr())
		return Reached{Addr: c.Addr(), Hostname: host, Via: via}, nil
	},
	Judge: func(w *orchestrator.Window) []record.Verdict {
		var vs []record.Verdict
		for _, n := range w.Nodes {
			v := record.NewVerdict("CONN-001", n.Name)
			var reached Reached
			r, ok := w.Result("connect", n.Index, &reached)
			switch {
			case !ok:
				v.Status, v.Detail = record.Skip, "not attempted"
			case r.Outcome == record.OK && reached.Via != "":
				// The transport's words: whether it proved who the node
				// is (a host key) is the buyer's to read.
				v.Status, v.Measured = record.Pass, "reached "+reached.Via
			case r.Outcome == record.OK:
				// A journal from before the transport said how.
				v.Status, v.Measured = record.Pass, "connected"
			case reached.Cause != nil && reached.Cause.Buyer:
				// The buyer's names, keys or jump hosts: the provider was
				// never tested, so nothing is held against it.
				v.Status, v.Measured, v.Detail = record.Skip, "not reached: "+reached.Cause.Kind, r.Error
				v.Incomplete = "not reached for a reason on the buyer's side (" + reached.Cause.Kind + "): " + buyerSide(w, n, reached.Cause.Kind, r.Error)
			default:
				v.Status, v.Measured, v.Detail = record.Fail, string(r.Outcome), r.Error
			}
			vs = append(vs, v)
		}
		return vs
	},
}

// buyerSide says what the buyer must fix, in words that are the same for
// every node with the same cause (so that the result says it once for
// all): the node's name and address taken out, and for a host key (whose
// fingerprint is each node's own, in its verdict's detail) what to do.
func buyerSide(w *orchestrator.Window, n *orchestrator.Node, kind, err string) string {
	switch kind {
	case "unknown host key":
		return "its host key is in none of ssh.known_hosts; confirm the fingerprint (in CONN-001's detail) " +
			"with the provider, then add it (ssh-keyscan) or set ssh.accept_new: true"
	case "host key changed":
		return "its host key is not the one ssh.known_hosts holds, so gpuaccept refused to connect; " +
			"ask the provider why (both fingerprints are in CONN-001's detail)"
	}
	inv := w.Inv.Nodes[n.Index]
	port := inv.Port
	if port == 0 {
		port = 22
	}
	return firstLine(record.Impersonal(trimNode(err, n.Name), n.Name,
		net.JoinHostPort(inv.Address, strconv.Itoa(port)), inv.Address))
}

// hostnameOf is what `hostname` printed, as much of it as a host name can
// be (its first line, at most 255 bytes): a node may print anything.
func hostnameOf(out []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	s = strings.TrimSpace(s)
	if len(s) > 255 {
		s = s[:255] + "…"
	}
	return s
}

// buyerUnreached: the node was never reached, for the buyer's own reason.
func buyerUnreached(w *orchestrator.Window, n *orchestrator.Node) bool {
	var reached Reached
	r, ok := w.Result("connect", n.Index, &reached)
	return ok && r.Outcome != record.OK && reached.Cause != nil && reached.Cause.Buyer
}

// trimNode drops the node's name that starts an error: a reason line
// names the nodes itself.
func trimNode(err, node string) string { return strings.TrimPrefix(err, node+": ") }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
