package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// Probed is what a probe found on one node.
type Probed struct {
	Node string
	Addr string
	// Out is the command's stdout, at most ProbeOutputLimit bytes: a node
	// may print anything, and as much as it likes.
	Out []byte
	// Err is why the node was not reached or the command failed; Cause
	// classifies a dial's error (host key, authentication, name, jump).
	Err     error
	Cause   remote.Cause
	Dialled bool
	Took    time.Duration
}

// ProbeOutputLimit bounds what a probe keeps of a node's output.
const ProbeOutputLimit = 64 << 10

// Probe reaches every node of inv as a window would (its transport's
// settings, host keys checked where it has them, as many at once as its
// fan-out allows), runs command there
// (read-only: a probe writes nothing on the node) and hangs up. timeout
// bounds each node, dial included. It never fails as a whole: each node
// says what happened to it.
func Probe(ctx context.Context, inv *inventory.Inventory, o Options, command string, timeout time.Duration) ([]Probed, error) {
	w, err := newWindow(inv, "", o)
	if err != nil {
		return nil, err
	}
	defer w.releasePods() // the probe's own pods, on a managed cluster
	res := remote.Each(ctx, len(w.Nodes), remote.FanOut{Limit: w.FanOut(), Timeout: timeout},
		func(ctx context.Context, i int) (Probed, error) {
			n := w.Nodes[i]
			p := Probed{Node: n.Name}
			e, err := w.Connect(ctx, n)
			if err != nil {
				p.Cause = remote.CauseOf(err)
				return p, err
			}
			defer e.Close()
			p.Dialled, p.Addr = true, e.Addr()
			var out bytes.Buffer
			err = e.Run(ctx, remote.Cmd{Command: command, Stdout: &limitedBuffer{b: &out, left: ProbeOutputLimit}})
			p.Out = out.Bytes()
			if err != nil {
				return p, fmt.Errorf("%s: %w", n.Name, err)
			}
			return p, nil
		})
	out := make([]Probed, len(res))
	for i, r := range res {
		out[i] = r.Value
		out[i].Node = w.Nodes[i].Name
		out[i].Err = r.Err
		out[i].Took = r.Elapsed
	}
	return out, nil
}

// limitedBuffer keeps the first left bytes and discards the rest, so that
// the command is never blocked by a full pipe.
type limitedBuffer struct {
	b    *bytes.Buffer
	left int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.left > 0 {
		k := min(len(p), l.left)
		l.b.Write(p[:k])
		l.left -= k
	}
	return len(p), nil
}
