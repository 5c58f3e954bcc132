package phases

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// The window's own SSH server in each of its pods (transport kubernetes):
// mpirun starts its daemons over SSH, and a pod has no server of its own.

// podHostKeys are the host keys of the window's SSH servers in its pods,
// by node: made by the coordinator, so that every node's known_hosts
// holds each pod's before any server starts (a pod has no host key the
// coordinator verified). Made once per window run; a resumed window makes
// new ones and restarts the servers with them.
func podHostKeys(w *orchestrator.Window) (map[string]remote.WindowKey, error) {
	v, err := w.Shared("podhostkeys", func() (any, error) {
		keys := map[string]remote.WindowKey{}
		if !podSSHDNeeded(w) {
			// No port opened for nothing: the image relay does not reach
			// pods, and one pod runs its collectives alone.
			return keys, nil
		}
		for _, m := range w.Nodes {
			if podImager(m) == nil {
				continue
			}
			k, err := remote.NewWindowKey("gpuaccept-pod-" + w.RunID())
			if err != nil {
				return nil, err
			}
			keys[m.Name] = k
		}
		return keys, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string]remote.WindowKey), nil
}

// podSSHDNeeded: mpirun will launch collectives over more than one node,
// which reaches pods only through the window's server in each.
func podSSHDNeeded(w *orchestrator.Window) bool {
	a := w.Inv.Phases.AllReduce
	return a.Launcher == "mpirun" && (a.Enabled || w.Inv.Phases.Burnin.ClusterAllReduce) && len(w.Nodes) > 1
}

// podSSHPort is the port of the window's SSH server in n's pod: one of the
// window's own (two windows on one cluster differ), and one per node,
// since pods share their node's network and a test cluster may run nodes
// on one machine (pods 1,400 apart share a port, on nodes of their own).
// It stays in 20000-29399: clear of the kubelet's and kube-proxy's
// (10248-10260), the torchrun rendezvous ports (29500-31499), NodePorts
// (30000-32767) and the ephemeral range above.
func podSSHPort(w *orchestrator.Window, n *orchestrator.Node) int {
	h := fnv.New32a()
	h.Write([]byte(w.RunID()))
	return 20000 + int(h.Sum32()%8000) + n.Index%1400
}

// podSSHDWithin bounds starting a pod's server and the login that checks
// it (podsshd.sh waits 10 s for the server, the login 10 s to connect).
const podSSHDWithin = 30 * time.Second

// podKeyUnmeasured is why a pod's key or server is not there, from err,
// when that is a tool or a server the pod's image lacks or refuses; ""
// when err is nil, or says that the pushed script or the window's
// directory is not the window's (exit 96, 3: a node to fail).
func podKeyUnmeasured(err error) string {
	var exit *remote.ExitError
	if !errors.As(err, &exit) || exit.Status == 96 || exit.Status == 3 {
		return ""
	}
	return remote.Shorten(lastLine(exit.StderrTail), 200)
}

// startPodSSHD gives n's pod its host key (its one 0600 file, never on a
// command line or stdin) and starts the window's SSH server there, taking
// only the window's key as windowkey.sh authorized it. A pod whose image
// has no sshd, or whose server does not start, is a pod the collectives
// cannot reach: NOT MEASURED there, not a failed node.
func startPodSSHD(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, e remote.Executor, hk remote.WindowKey, line string) (*PodSSHD, error) {
	host, port := w.FabricHost(n), podSSHPort(w, n)
	sd := &PodSSHD{Address: host, Port: port, HostKey: hk.Fingerprint}
	mine := ".gpuaccept/" + w.RunID() + "/ssh/ssh_host_ed25519_key"
	if _, err := e.UploadFrom(ctx, bytes.NewReader(hk.PrivatePEM), int64(len(hk.PrivatePEM)), mine, remote.TransferOptions{Mode: 0o600}); err != nil {
		return nil, fmt.Errorf("the pod's SSH host key: %w", err)
	}
	cmd := toolCmd(w.RunID(), n.Name, "podsshd.sh", "\""+nodeDir(w)+"\"", fmt.Sprint(port), remote.Quote(host), remote.Quote(line))
	sctx, cancel := context.WithTimeout(ctx, podSSHDWithin)
	defer cancel()
	out, err := runOn(sctx, w, n, cmd)
	said := strings.TrimSpace(string(out))
	switch why := podKeyUnmeasured(err); {
	case why != "":
		sd.Unmeasured = strings.TrimPrefix(why, "podsshd: ")
	case err != nil && sctx.Err() != nil && ctx.Err() == nil:
		sd.Unmeasured = fmt.Sprintf("the pod's sshd did not answer within %s", podSSHDWithin)
	case err != nil:
		return nil, err
	case strings.HasPrefix(said, "unreachable "):
		sd.Unmeasured = remote.Shorten(strings.TrimPrefix(said, "unreachable "), 200)
	case !strings.HasPrefix(said, "sshd "):
		return nil, fmt.Errorf("podsshd.sh did not say its server started: %.200q", said)
	}
	if sd.Unmeasured != "" {
		w.Progress.Line("windowkey: %s: %s (collectives over it not measured)", n.Name, sd.Unmeasured)
	}
	return sd, nil
}
