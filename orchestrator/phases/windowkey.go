package phases

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	// Installed is the authorized_keys line as the node wrote it: its
	// options restrict the key to the window's nodes and its time. A
	// from= list past fromKept bytes is kept as its count and sha256
	// (From), the line saying from="…": every node's list names every
	// node, which at 1,000 nodes was 20 MB of run.json. The raw log has
	// the line whole.
	Installed string    `json:"installed,omitempty"`
	From      *FromList `json:"from,omitempty"`
	Expires   time.Time `json:"expires"`
	Config    string    `json:"ssh_config"` // on the node; launchers pass it with -F
	// SSHD is the window's own SSH server in a pod (podsshd.sh), which
	// mpirun reaches the pod by; nil on a host.
	SSHD *PodSSHD `json:"pod_sshd,omitempty"`
}

// PodSSHD is the window's SSH server in a pod: where it listens and the
// fingerprint of the host key the coordinator gave it, or why there is
// none (the image has no sshd, or it would not start), which leaves the
// collectives over the pod NOT MEASURED.
type PodSSHD struct {
	Address    string `json:"address,omitempty"`
	Port       int    `json:"port,omitempty"`
	HostKey    string `json:"host_key_fingerprint,omitempty"`
	Unmeasured string `json:"not_measured,omitempty"`
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
	Serves:    []string{"allreduce", "bisect", "image", burninPhase},
	ServesIf: func(inv *inventory.Inventory, name string) bool {
		return name != burninPhase || inv.Phases.Burnin.ClusterAllReduce
	},
	Enabled: func(inv *inventory.Inventory) bool {
		mpirun := inv.Phases.AllReduce.Enabled && inv.Phases.AllReduce.Launcher == "mpirun"
		relay := inv.Image.Reference != "" && inventory.On(inv.Phases.ImagePh.Enabled) && inv.Image.Mode == "push" &&
			inv.Image.Relay == "chain" && len(inv.Nodes) > 1
		// The machine gpuaccept runs on, alone: no peer logs in to it, and
		// its user's authorized_keys is the buyer's own, not to be touched.
		return (mpirun || relay) && !onlyLocal(inv)
	},
	Deadline: func(*inventory.Inventory) time.Duration { return time.Minute },
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		v, err := w.Shared("windowkey", func() (any, error) { return remote.NewWindowKey(KeyMark(w.RunID())) })
		if err != nil {
			return nil, err
		}
		key := v.(remote.WindowKey)
		hostKeys, err := podHostKeys(w)
		if err != nil {
			return nil, err
		}
		known, portLines, peers := peerHosts(w, hostKeys)
		dir := nodeDir(w)
		// A little past the window's own end: a node whose teardown is
		// never reached closes the key itself.
		expires := w.Deadline().Add(30 * time.Minute).UTC().Truncate(time.Second)
		// The peers' host keys and ports on stdin: at 1,000 nodes they are
		// past the 128 KiB one argument may be (the bench found it).
		cmd := toolCmd(w.RunID(), n.Name, "windowkey.sh", "\""+dir+"\"", remote.Quote(key.AuthorizedKey), "-", "-",
			fmt.Sprint(expires.Unix()), remote.Quote(strings.Join(peers, ",")))
		pod := podImager(n) != nil
		if pod {
			// A pod's home is its own: no lock against other nodes is
			// needed where its image has no flock.
			cmd = "export GPUACCEPT_POD=1; " + cmd
		}
		out, err := runIn(ctx, w, n, cmd, strings.NewReader(known+"\n@@ports\n"+portLines+"\n"))
		if why := podKeyUnmeasured(err); pod && why != "" {
			// A pod takes the key only for mpirun, which podsUnreached
			// then leaves NOT MEASURED over it: a tool its image lacks
			// does not take the pod out of the window.
			return KeyInstalled{Fingerprint: key.Fingerprint, AuthorizedKey: key.AuthorizedKey,
				SSHD: &PodSSHD{Unmeasured: "the window's key was not installed: " + why}}, nil
		}
		if err != nil {
			return nil, err
		}
		// The private half goes as its one 0600 file, over SFTP into the
		// 0700 directory the script made: never on a command's stdin
		// (the guard passes stdin through temporary files), never in argv.
		e, err := execOf(n)
		if err != nil {
			return nil, err
		}
		// Homes may be one export for every node, and every node writes
		// the same key: each uploads under a name of its own, then renames
		// it into place (the same bytes, whichever rename is last).
		mine := keyFile(w) + "." + n.Name
		if _, err := e.UploadFrom(ctx, bytes.NewReader(key.PrivatePEM), int64(len(key.PrivatePEM)), mine, remote.TransferOptions{Mode: 0o600}); err != nil {
			return nil, fmt.Errorf("the window's private key: %w", err)
		}
		if _, err := runOn(ctx, w, n, "cd && mv -f -- "+remote.Quote(mine)+" "+remote.Quote(keyFile(w))); err != nil {
			return nil, fmt.Errorf("the window's private key: %w", err)
		}
		installed := ""
		for _, line := range strings.Split(string(out), "\n") {
			if l, ok := strings.CutPrefix(line, "authorized "); ok && strings.HasSuffix(l, " "+key.AuthorizedKey) {
				installed = l
			}
		}
		if installed == "" {
			return nil, fmt.Errorf("windowkey.sh did not say which line it installed: %.200q", strings.TrimSpace(string(out)))
		}
		ki := KeyInstalled{Fingerprint: key.Fingerprint, AuthorizedKey: key.AuthorizedKey, Expires: expires, Config: dir + "/ssh/config"}
		if hk, ok := hostKeys[n.Name]; ok {
			if ki.SSHD, err = startPodSSHD(ctx, w, n, e, hk, installed); err != nil {
				return nil, err
			}
		}
		ki.Installed, ki.From = elideFrom(installed)
		return ki, nil
	},
}

// FromList is an authorized_keys from= list the record keeps as its
// count and digest.
type FromList struct {
	Patterns int    `json:"patterns"`
	SHA256   string `json:"sha256"` // of the list as written, between the quotes
}

// fromKept is the longest from= list a record keeps as written.
const fromKept = 256

// elideFrom is line with a from= list longer than fromKept bytes replaced
// by "…", and that list's count and digest.
func elideFrom(line string) (string, *FromList) {
	const opt = `from="`
	i := strings.Index(line, opt)
	if i < 0 {
		return line, nil
	}
	start := i + len(opt)
	n := strings.IndexByte(line[start:], '"')
	if n <= fromKept {
		return line, nil
	}
	list := line[start : start+n]
	sum := sha256.Sum256([]byte(list))
	return line[:start] + "…" + line[start+n:], &FromList{Patterns: strings.Count(list, ",") + 1, SHA256: hex.EncodeToString(sum[:])}
}

// KeyMark is the comment that marks the window's line in authorized_keys.
func KeyMark(runID string) string { return "gpuaccept-window-" + runID }

// nodeDir is the window's directory on a node (as a shell word to expand).
func nodeDir(w *orchestrator.Window) string { return "$HOME/.gpuaccept/" + w.RunID() }

// keyFile is the window key's private half on a node, as SFTP names it
// (relative to the login directory).
func keyFile(w *orchestrator.Window) string { return ".gpuaccept/" + w.RunID() + "/ssh/id_ed25519" }

// peerHosts gives every connected node's host key under the names the
// others use for it, ssh_config Port lines for nodes not on 22, and the
// names themselves (the key is usable from these only).
func peerHosts(w *orchestrator.Window, podKeys map[string]remote.WindowKey) (known, ports string, peers []string) {
	var k, p []string
	for _, m := range w.Nodes {
		if pk, ok := podKeys[m.Name]; ok {
			// The window's own server in the pod, on its own port.
			host, port := w.FabricHost(m), podSSHPort(w, m)
			peers = append(peers, host)
			k = append(k, fmt.Sprintf("[%s]:%d %s", host, port, pk.AuthorizedKey))
			p = append(p, fmt.Sprintf("Host %s\n  Port %d", host, port))
			continue
		}
		hk, ok := m.Exec().(remote.HostKeyed)
		if !ok {
			continue
		}
		host := w.FabricHost(m)
		peers = append(peers, host)
		names := []string{host}
		if m.Config.SSHPort() != 0 && m.Config.SSHPort() != 22 {
			names = append(names, fmt.Sprintf("[%s]:%d", host, m.Config.SSHPort()))
			p = append(p, fmt.Sprintf("Host %s\n  Port %d", host, m.Config.SSHPort()))
		}
		if line := hk.KnownHostsLine(names...); line != "" {
			k = append(k, line)
		}
	}
	return strings.Join(k, "\n"), strings.Join(p, "\n"), peers
}

// onlyLocal: the window's one node is the machine gpuaccept runs on.
func onlyLocal(inv *inventory.Inventory) bool { return len(inv.Nodes) == 1 && inv.Nodes[0].Local() }
