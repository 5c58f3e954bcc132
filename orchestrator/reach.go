package orchestrator

import (
	"context"
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
