package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
)

// An inventory that names its nodes and has a Slurm login node (its
// collectives under srun) rents nodes Slurm schedules, though no job is
// the window's: Slurm's view of them is read as for an allocation's nodes
// (a node drained, or whose GRES says fewer GPUs than it has, is named:
// SLURM-002, SLURM-003), at the window's start and again at its end.

// namedSlurmNodes says whether the window reads Slurm's view of its named
// nodes.
func (w *Window) namedSlurmNodes() bool {
	return w.Inv.Slurm.Enabled() && !w.Inv.Slurm.Allocates() && len(w.Nodes) > 0
}

// readSlurmNodes reads every node Slurm lists and finds each of the
// window's among them: by the name the collectives give srun (its fabric
// host), its inventory name, or its address, as Slurm's NodeName,
// NodeHostName or NodeAddr.
func (w *Window) readSlurmNodes(ctx context.Context) {
	s := &record.SlurmAllocation{Command: "scontrol -a show node -o", Requested: time.Now().UTC(), Named: true}
	w.rec.Slurm = s
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	login, err := w.SlurmLogin(ctx)
	var nodes []slurm.Node
	if err == nil {
		nodes, err = slurm.Describe(ctx, login.Exec(), "")
	}
	if err != nil {
		s.ReadError = clipText(err.Error(), 300)
		w.Progress.Line("slurm: the nodes not looked up in Slurm: %s", clipText(err.Error(), 200))
		return
	}
	byName, byHost, byAddr := map[string]slurm.Node{}, map[string]slurm.Node{}, map[string]slurm.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
		if n.HostName != "" {
			byHost[n.HostName] = n
		}
		if n.Addr != "" {
			byAddr[n.Addr] = n
		}
	}
	lookup := func(keys ...string) (slurm.Node, bool) {
		for _, key := range keys {
			for _, by := range []map[string]slurm.Node{byName, byHost, byAddr} {
				if n, ok := by[key]; ok && key != "" {
					return n, true
				}
			}
		}
		return slurm.Node{}, false
	}
	var found []string
	for i, in := range w.Inv.Nodes {
		if i >= len(w.Nodes) {
			break
		}
		sn, ok := lookup(w.FabricHost(w.Nodes[i]), in.Name, in.Address)
		if !ok {
			s.Unlisted = append(s.Unlisted, in.Name)
			continue
		}
		rn := record.SlurmNode{Name: in.Name, Addr: sn.Addr, State: sn.State, Reason: sn.Reason, GRES: sn.GRES, Features: sn.Features}
		if sn.Name != in.Name {
			rn.SlurmName = sn.Name
		}
		s.Nodes = append(s.Nodes, rn)
		found = append(found, sn.Name)
		if bad := outOfService(sn.State); bad != "" {
			w.Progress.Line("slurm: %s is %s%s", in.Name, bad, reasonText(sn.Reason))
		}
	}
	s.NodeList = hostlist.Compress(found)
	line := fmt.Sprintf("slurm: %d of the window's %d node(s) as Slurm lists them", len(s.Nodes), len(w.Nodes))
	if len(s.Unlisted) > 0 {
		line += fmt.Sprintf("; Slurm lists none of %s by name, host name or address", clipText(strings.Join(s.Unlisted, ", "), 200))
	}
	w.Progress.Line("%s", line)
}

// readNamedEnd reads the named nodes' states again at the window's end.
func (w *Window) readNamedEnd() {
	s := w.rec.Slurm
	if s == nil || !s.Named || s.ReadError != "" || len(s.Nodes) == 0 || s.EndReadError != "" || s.Nodes[0].StateAtEnd != "" {
		// Not read, or read already (after teardown; again for a panic).
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login, err := w.SlurmLogin(ctx)
	if err != nil {
		s.EndReadError = clipText(err.Error(), 300)
		return
	}
	w.readEndStates(ctx, login.Exec())
}

// judgeSlurmNodes is SLURM-002 and SLURM-003 for each named node: NOT
// MEASURED for one Slurm could not be asked about, or lists by nothing
// of its.
func (w *Window) judgeSlurmNodes() []record.Verdict {
	s := w.rec.Slurm
	var out []record.Verdict
	notMeasured := func(name, why string) {
		for _, id := range []string{"SLURM-002", "SLURM-003"} {
			v := record.NewVerdict(id, name)
			v.Status, v.Measured, v.Detail = record.Skip, "not measured", clipText(why, 300)
			v.Incomplete = clipText("NOT MEASURED: "+why, 300)
			out = append(out, v)
		}
	}
	if s.ReadError != "" {
		for _, n := range w.rec.Nodes {
			notMeasured(n.Name, "Slurm not asked about the node: "+s.ReadError)
		}
		return out
	}
	for _, name := range s.Unlisted {
		notMeasured(name, "Slurm lists no node by its name, host name or address ("+s.Command+" on the login node)")
	}
	// Read again when a window resumed (not journaled): its first look is
	// then that one.
	first := "at the window's start"
	if len(w.rec.Resumed) > 0 {
		first = "when the window resumed"
	}
	for _, n := range s.Nodes {
		v := stateVerdict(n, s.EndReadError, first)
		if n.SlurmName != "" {
			v.Measured = clipText(cmp.Or(v.Measured, "-")+" (Slurm's "+n.SlurmName+")", 200)
		}
		out = append(out, v, gresVerdict(n, w.Inv.Quote, w.rec.NodeFacts(n.Name)))
	}
	return out
}
