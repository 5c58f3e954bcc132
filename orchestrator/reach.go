package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// Reach is how gpuaccept reaches an inventory's nodes, the one factory
// the window and `gpuaccept exec` share: each node's remote.Config from
// the inventory's section for its transport, dialled by the executor that
// transport names. What transports share between nodes (SSH's host keys)
// is made once, and only when some node needs it. Neither the window nor
// its callers learn which transport reached a node.
type Reach struct {
	inv  *inventory.Inventory
	keys *remote.HostKeys
	dial remote.Dialer

	mu     sync.Mutex
	logins *remote.Logins // the login node's connections, shared by every node srun reaches
	// run marks every pod that transport kubernetes makes (KubeRunLabel):
	// a resumed window finds its pods by it, and ReleasePods deletes by it.
	run string
}

// KubeRunLabel is the label that marks a window's pods with its run ID.
const KubeRunLabel = "gpuaccept/run"

// ForRun marks the pods that reaching a node by transport kubernetes
// makes as run's: a window's ID, or a one-off name for `exec` and `check
// --connect`, which release them before they return.
func (r *Reach) ForRun(run string) { r.run = labelValue(run) }

// labelValue is run as a label's value, at most 63 characters: a run ID
// with a long window name is longer, and is then cut and given a hash of
// the whole, so that two runs stay two values.
func labelValue(run string) string {
	if len(run) <= 63 {
		return run
	}
	sum := sha256.Sum256([]byte(run))
	return strings.TrimRight(run[:50], "-_.") + "-" + hex.EncodeToString(sum[:6])
}

// kubePods is the settings that find and delete the run's pods, nil when
// no node is reached by transport kubernetes.
func (r *Reach) kubePods() *remote.KubeConfig {
	for _, n := range r.inv.Nodes {
		if c := r.Config(n); c.Kube != nil {
			return c.Kube
		}
	}
	return nil
}

// ReleasePods deletes every pod of the run in the cluster and waits until
// the API lists none (bounded by ctx); it returns the pods it deleted.
// Nothing to do without a node reached by transport kubernetes.
func (r *Reach) ReleasePods(ctx context.Context) ([]string, error) {
	k := r.kubePods()
	if k == nil {
		return nil, nil
	}
	if r.run == "" {
		return nil, errors.New("kubernetes: no run to find the pods by")
	}
	return remote.DeleteKubePods(ctx, *k)
}

// NewReach reaches inv's nodes with dial (remote.DialNode when nil; tests
// give a fake fleet's). Its error is the known hosts' that cannot be read,
// before any node is dialled.
func NewReach(inv *inventory.Inventory, dial remote.Dialer) (*Reach, error) {
	keys, err := inv.HostKeys()
	if err != nil {
		return nil, err
	}
	if dial == nil {
		dial = remote.DialNode
	}
	return &Reach{inv: inv, keys: keys, dial: dial}, nil
}

// Config is how to reach n. Nodes that srun reaches share the window's
// connections to the login node.
func (r *Reach) Config(n inventory.Node) remote.Config {
	c := r.inv.NodeConfig(n, r.keys)
	if c.Kube != nil && r.run != "" {
		c.Kube.Labels = map[string]string{KubeRunLabel: r.run}
	}
	if c.Srun != nil {
		r.mu.Lock()
		if r.logins == nil {
			r.logins = remote.NewLogins(c.Srun.Login)
		}
		c.Srun.Logins = r.logins
		r.mu.Unlock()
	}
	return c
}

// SrunSteps is how many job steps the nodes srun reached took: shared by
// the nodes' commands, and commands' own; ok false when srun reached none.
func (r *Reach) SrunSteps() (shared, own int, ok bool) {
	r.mu.Lock()
	logins := r.logins
	r.mu.Unlock()
	if logins == nil {
		return 0, 0, false
	}
	shared, own = logins.Steps()
	return shared, own, true
}

// LoginConfig is how to reach the Slurm login node.
func (r *Reach) LoginConfig() remote.Config { return r.inv.LoginConfig(r.keys) }

// Dial reaches the node cfg describes.
func (r *Reach) Dial(ctx context.Context, cfg remote.Config) (remote.Executor, error) {
	return r.dial(ctx, cfg)
}

// FanOut is how many nodes are worked on at once (0: all): the
// transport's width.
func (r *Reach) FanOut() int { return r.inv.FanOut() }
