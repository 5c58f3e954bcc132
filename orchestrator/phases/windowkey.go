package phases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// KeyInstalled is what the evidence keeps of the window's key on a node:
// never the private half.
type KeyInstalled struct {
	Fingerprint   string `json:"fingerprint"`
	AuthorizedKey string `json:"authorized_key"`
	Config        string `json:"ssh_config"` // on the node; launchers pass it with -F
}

// WindowKey installs a key pair made for this window on every node, so
// that mpirun (and the image relay) can ssh between them without the buyer's own keys leaving
// the coordinator; teardown removes it. Nodes trust each other's host keys
// as the coordinator verified them. It runs again on --resume (the pair is
// not journaled, and every node must hold the same one).
var WindowKey = orchestrator.Phase{
	Name:      "windowkey",
	Gating:    true,
	AlwaysRun: true,
	Enabled: func(inv *inventory.Inventory) bool {
		mpirun := inv.Phases.AllReduce.Enabled && inv.Phases.AllReduce.Launcher == "mpirun"
		relay := inv.Image.Reference != "" && inventory.On(inv.Phases.ImagePh.Enabled) && inv.Image.Mode == "push" &&
			inv.Image.Relay == "chain" && len(inv.Nodes) > 1
		return mpirun || relay
	},
	Deadline: func(*inventory.Inventory) time.Duration { return time.Minute },
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		v, err := w.Shared("windowkey", func() (any, error) { return remote.NewWindowKey(KeyMark(w.RunID())) })
		if err != nil {
			return nil, err
		}
		key := v.(remote.WindowKey)
		known, portLines := peerHosts(w)
		dir := nodeDir(w)
		cmd := toolCmd(w.RunID(), n.Name, "windowkey.sh", "\""+dir+"\"", remote.Quote(key.AuthorizedKey), remote.Quote(known), remote.Quote(portLines))
		if _, err := runIn(ctx, w, n, cmd, strings.NewReader(string(key.PrivatePEM))); err != nil {
			return nil, err
		}
		return KeyInstalled{Fingerprint: key.Fingerprint, AuthorizedKey: key.AuthorizedKey, Config: dir + "/ssh/config"}, nil
	},
}

// KeyMark is the comment that marks the window's line in authorized_keys.
func KeyMark(runID string) string { return "gpuaccept-window-" + runID }

// nodeDir is the window's directory on a node (as a shell word to expand).
func nodeDir(w *orchestrator.Window) string { return "$HOME/.gpuaccept/" + w.RunID() }

// peerHosts gives every connected node's host key under the names the
// others use for it, and ssh_config Port lines for nodes not on 22.
func peerHosts(w *orchestrator.Window) (known, ports string) {
	var k, p []string
	for _, m := range w.Nodes {
		hk, ok := m.Exec().(remote.HostKeyed)
		if !ok {
			continue
		}
		host := w.FabricHost(m)
		names := []string{host}
		if m.Config.Port != 0 && m.Config.Port != 22 {
			names = append(names, fmt.Sprintf("[%s]:%d", host, m.Config.Port))
			p = append(p, fmt.Sprintf("Host %s\n  Port %d", host, m.Config.Port))
		}
		if line := hk.KnownHostsLine(names...); line != "" {
			k = append(k, line)
		}
	}
	return strings.Join(k, "\n"), strings.Join(p, "\n")
}
