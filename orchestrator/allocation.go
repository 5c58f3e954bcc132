package orchestrator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
)

// The window's own Slurm allocation (slurm.allocate): asked for on the
// login node before the first phase, its nodes the window's, given back
// when the window ends (interrupted too: a rented allocation left to its
// time limit bills for nothing). Its job ID is journaled as soon as Slurm
// names it, so a coordinator lost while it waits, or later, leaves a
// window that --resume continues on the same job.

// Journal keys of the allocation (entry type "slurm").
const (
	slurmJobKey        = "job"
	slurmAllocationKey = "allocation"
	slurmCancelledKey  = "cancelled"
)

// allocationMargin is what the job's time limit adds to the window's
// bound: the login node's own steps, teardown's last commands.
const allocationMargin = 15 * time.Minute

// slurmSpec is the salloc the inventory asks for, for the window runID
// whose phases are phases.
func slurmSpec(inv *inventory.Inventory, runID string, phases []Phase) slurm.Spec {
	a := inv.Slurm.Allocate
	s := slurm.Spec{Name: "gpuaccept-" + runID, Partition: inv.Slurm.Partition, Account: inv.Slurm.Account, QOS: a.QOS,
		Constraint: a.Constraint, Nodes: a.Nodes, NodeList: a.NodeList, Exclusive: inventory.On(a.Exclusive), GRES: a.GRES, Time: a.Time.Duration(), Extra: a.Args}
	if s.Time == 0 {
		n := a.Nodes
		if names, err := hostlist.Expand(a.NodeList); err == nil && a.NodeList != "" {
			n = len(names)
		}
		// Sized as the allocation's nodes will be: n of them, each
		// reached through the login node.
		sized := *inv
		sized.Nodes = make([]inventory.Node, n)
		for i := range sized.Nodes {
			sized.Nodes[i] = inv.AllocatedNode(fmt.Sprintf("n%d", i), "allocated", "1")
		}
		s.Time = Bound(&sized, phases).Total + allocationMargin
	}
	return s
}

// SlurmCommand is the salloc line a window of inv would run (for
// `check`'s plan), "" when it holds no allocation.
func SlurmCommand(inv *inventory.Inventory, phases []Phase) string {
	if !inv.Slurm.Allocates() {
		return ""
	}
	return slurmSpec(inv, "<run id>", phases).Command()
}

// CheckAllocation reaches inv's Slurm login node, reads the partition's
// limits and holds the window's ask to them (SLURM-004's record), then
// asks its Slurm whether it would grant the window's allocation,
// submitting nothing (`check --connect`): the login node, the partition,
// account, QoS, GRES and node count are tried before the window. The
// answer is Slurm's; part is nil only when the login node was not
// reached.
func CheckAllocation(ctx context.Context, inv *inventory.Inventory, phases []Phase) (said string, part *record.SlurmPartition, err error) {
	reach, err := NewReach(inv, nil)
	if err != nil {
		return "", nil, err
	}
	login, err := reach.Dial(ctx, reach.LoginConfig())
	if err != nil {
		return "", nil, err
	}
	defer login.Close()
	spec := slurmSpec(inv, "check", phases)
	part = PartitionLimits(ctx, login, spec)
	said, err = slurm.TestOnly(ctx, login, spec)
	return said, part, err
}

// CheckPyxis is check --connect's question for image.runtime pyxis: does
// the login node's srun list --container-image? Without Pyxis the image
// phase will be NOT MEASURED (the window INCOMPLETE) and run without the container.
func CheckPyxis(ctx context.Context, inv *inventory.Inventory) (bool, error) {
	reach, err := NewReach(inv, nil)
	if err != nil {
		return false, err
	}
	login, err := reach.Dial(ctx, reach.LoginConfig())
	if err != nil {
		return false, err
	}
	defer login.Close()
	return slurm.Pyxis(ctx, login)
}

// allocate asks for the window's allocation and makes its nodes the
// window's. Not granted, the window is aborted (INCOMPLETE) with
// squeue's reason and SLURM-001 says it.
func (w *Window) allocate(ctx context.Context, j *journal, phases []Phase) {
	spec := slurmSpec(w.Inv, w.rec.ID, phases)
	w.rec.Slurm = &record.SlurmAllocation{Command: spec.Command(), Requested: time.Now().UTC()}
	w.Progress.Line("slurm: asking for the window's allocation: %s", spec.Command())
	login, err := w.SlurmLogin(ctx)
	if err != nil {
		w.notAllocated(err.Error())
		return
	}
	w.readPartition(ctx, login.Exec(), spec)
	within := w.Inv.Slurm.AllocateTimeout
	a, err := slurm.Allocate(ctx, login.Exec(), spec, within, func(id string) {
		w.rec.Slurm.JobID = id
		w.Progress.Line("slurm: job %s asked for; waiting up to %s for it", id, within)
		w.journal(j, entry{Type: "slurm", Key: slurmJobKey, Value: id})
	})
	if err != nil {
		w.notAllocated(err.Error())
		return
	}
	w.granted(a, time.Now().UTC())
	w.journalAllocation(j, a)
}

// journalAllocation keeps the granted nodes in the journal, in the
// window's order, for a resumed window.
func (w *Window) journalAllocation(j *journal, a slurm.Allocation) {
	if b, err := json.Marshal(a); err == nil {
		w.journal(j, entry{Type: "slurm", Key: slurmAllocationKey, Value: string(b)})
	}
}

// notAllocated ends a window that got no allocation before its first
// phase.
func (w *Window) notAllocated(why string) {
	w.rec.Slurm.NotGranted = why
	w.rec.Aborted = "no Slurm allocation: " + why
	// The slurm package's errors already name it ("slurm: job 8 not
	// allocated ...").
	w.Progress.Line("slurm: %s", strings.TrimPrefix(why, "slurm: "))
}

// SlurmJob is the job of the window's own allocation once Slurm granted
// it (the collectives run as its steps), "" without one.
func (w *Window) SlurmJob() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.rec.Slurm; s != nil && !s.Granted.IsZero() && s.Cancelled.IsZero() {
		return s.JobID
	}
	return ""
}

// granted makes a's nodes the window's: each by its Slurm name (which
// the fabric knows it by) at its NodeAddr, reached through the login
// node (by SSH, or by srun steps of the job).
func (w *Window) granted(a slurm.Allocation, at time.Time) {
	s := w.rec.Slurm
	s.JobID, s.NodeList, s.Granted = a.JobID, a.NodeList, at
	s.Nodes = nil
	inv := *w.Inv
	inv.Nodes = nil
	for _, n := range a.Nodes {
		s.Nodes = append(s.Nodes, record.SlurmNode{Name: n.Name, Addr: n.Addr, State: n.State, Reason: n.Reason, GRES: n.GRES, Features: n.Features})
		inv.Nodes = append(inv.Nodes, inv.AllocatedNode(n.Name, n.Addr, a.JobID))
	}
	if inv.Transport == inventory.TransportSrun {
		args, why := stepGRES(inv.Slurm.StepArgs, a.Nodes)
		inv.Slurm.StepArgs = args
		if why != "" {
			w.Progress.Line("slurm: %s", why)
		}
	}
	w.Inv = &inv
	w.Nodes, w.rec.Nodes = nil, nil
	for i, n := range inv.Nodes {
		w.Nodes = append(w.Nodes, &Node{Index: i, Name: n.Name, Config: w.reach.Config(n)})
		w.rec.Nodes = append(w.rec.Nodes, record.Node{Index: i, Name: n.Name, Address: n.Address})
	}
	w.reach.inv = &inv
	w.Progress.Addresses(inv.Nodes)
	w.idle = newIdleGuard(w)
	w.Progress.Line("slurm: job %s granted: %s (%d node(s))", a.JobID, a.NodeList, len(a.Nodes))
}

// stepGRES are the step options of transport srun for nodes: a step sees
// only the GPUs it asks for (Slurm 22.05: an exclusive job holds every
// GPU of its nodes, and a step without --gres is given none), so each step
// asks for the nodes' GPUs, unless slurm.step_args asks itself. Slurm
// grants a step no more than the job's smallest node holds: where the
// nodes' GRES differ no count fits all, and the steps ask for none (why
// says so; SLURM-003 names the node that differs).
func stepGRES(given []string, nodes []slurm.Node) (args []string, why string) {
	for _, a := range given {
		opt, _, _ := strings.Cut(a, "=")
		if opt == "--gres" || strings.HasPrefix(opt, "--gpus") || opt == "-G" {
			return given, ""
		}
	}
	counts := map[int][]string{}
	for _, n := range nodes {
		c, _ := GRESGPUs(n.GRES)
		counts[c] = append(counts[c], n.Name)
	}
	switch {
	case len(counts) == 1:
		for c := range counts {
			if c > 0 {
				return append(slices.Clone(given), fmt.Sprintf("--gres=gpu:%d", c)), ""
			}
		}
		return given, ""
	case len(counts) > 1:
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(counts)) {
			parts = append(parts, fmt.Sprintf("%s gpu:%d", hostlist.Compress(counts[c]), c))
		}
		return given, "the nodes' GRES differ (" + strings.Join(parts, ", ") + "): no GPU count fits every node's steps, " +
			"which ask for none and may see no GPU (set slurm.step_args)"
	}
	return given, ""
}

// releaseAllocation gives the job back at the window's end, once its
// teardown ran, and waits until squeue no longer lists it.
func (w *Window) releaseAllocation(j *journal) {
	s := w.rec.Slurm
	if s != nil && s.Named {
		w.readNamedEnd()
		return
	}
	if s == nil || s.JobID == "" || !s.Cancelled.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	login, err := w.SlurmLogin(ctx)
	if err == nil {
		w.readEndStates(ctx, login.Exec())
		err = slurm.Cancel(ctx, login.Exec(), s.JobID)
		w.RemoveLoginScratch(context.Background(), login)
	}
	if err != nil {
		s.CancelError = clipText(err.Error(), 300)
		w.Progress.Line("slurm: job %s NOT given back: %s; scancel %s on the login node", s.JobID, clipText(err.Error(), 200), s.JobID)
		return
	}
	s.Cancelled = time.Now().UTC()
	w.journal(j, entry{Type: "slurm", Key: slurmCancelledKey, Value: s.JobID})
	if shared, own, ok := w.srunSteps(); ok {
		// What the window cost slurmctld: a step per command would be one
		// per node for every command of a phase.
		w.Progress.Line("slurm: job %s given back; its commands ran in %d shared job steps, %d of their own", s.JobID, shared, own)
		return
	}
	w.Progress.Line("slurm: job %s given back", s.JobID)
}

func (w *Window) srunSteps() (shared, own int, ok bool) {
	if w.reach == nil {
		return 0, 0, false
	}
	return w.reach.SrunSteps()
}

// LoginScratch is the window's directory on the Slurm login node, for what
// it passes on to the nodes (the image archive sbcast sends): beside the
// nodes' own, under image.dir, so a login node that is also a node of the
// job keeps the two apart.
func (w *Window) LoginScratch() string {
	return strings.TrimRight(cmp.Or(w.Inv.Image.Dir, "/var/tmp"), "/") + "/gpuaccept-" + w.RunID() + "-login"
}

// RemoveLoginScratch removes LoginScratch from the login node when it is
// the window's own directory (not a link, owned by the window's user):
// after sbcast, and again when the job is given back, for a coordinator
// killed between the two. Bounded by a minute of its own: a slow removal
// holds up nothing but itself.
func (w *Window) RemoveLoginScratch(ctx context.Context, login *Node) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dir := w.LoginScratch()
	cmd := "d=" + remote.Quote(dir) + `; if [ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ]; then rm -rf -- "$d"; fi`
	e := login.Exec()
	if e == nil {
		return
	}
	if err := e.Run(ctx, remote.Cmd{Command: cmd}); err != nil {
		w.Progress.Line("slurm: the login node's %s not removed: %s", dir, clipText(err.Error(), 200))
	}
}

// readEndStates reads the allocation's nodes again before the job is
// given back: a node Slurm drained (or found down) while the window held
// it shows it only now; at the grant it was in service. SLURM-002 judges
// both.
func (w *Window) readEndStates(ctx context.Context, login slurm.Login) {
	s := w.rec.Slurm
	if len(s.Nodes) == 0 {
		return
	}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, cmp.Or(n.SlurmName, n.Name))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nodes, err := slurm.Describe(ctx, login, hostlist.Compress(names))
	if err != nil {
		s.EndReadError = clipText(err.Error(), 300)
		w.Progress.Line("slurm: the nodes' states not read again at the window's end: %s", clipText(err.Error(), 200))
		return
	}
	by := map[string]slurm.Node{}
	for _, n := range nodes {
		by[n.Name] = n
	}
	for i := range s.Nodes {
		n, ok := by[cmp.Or(s.Nodes[i].SlurmName, s.Nodes[i].Name)]
		if !ok {
			continue
		}
		s.Nodes[i].StateAtEnd, s.Nodes[i].ReasonAtEnd = n.State, n.Reason
		if bad := outOfService(n.State); bad != "" && outOfService(s.Nodes[i].State) == "" {
			first := "when granted"
			if s.Named {
				first = "at the window's start"
			}
			w.Progress.Line("slurm: %s is %s now%s, in service %s", s.Nodes[i].Name, bad, reasonText(n.Reason), first)
		}
	}
}

// resumeAllocation finds the job an earlier try of this window held:
// still running (and still the window's: its name), its nodes are the
// window's again, in the journal's order (the results are theirs by
// index) and with the states they had when granted (SLURM-002 judges the
// grant, and the states read again at the window's end). A job no longer running is given back if Slurm still holds it,
// and the window cannot go on.
func (w *Window) resumeAllocation(ctx context.Context, e []entry, phases []Phase) error {
	spec := slurmSpec(w.Inv, w.rec.ID, phases)
	var id string
	var held *slurm.Allocation
	s := &record.SlurmAllocation{Command: spec.Command(), Requested: w.rec.Started}
	for _, x := range e {
		switch x.Key {
		case slurmJobKey:
			id, s.Requested = x.Value, x.At
		case slurmAllocationKey:
			var a slurm.Allocation
			if json.Unmarshal([]byte(x.Value), &a) == nil && a.JobID != "" {
				held, id, s.Granted = &a, a.JobID, x.At
			}
		case slurmCancelledKey:
			return fmt.Errorf("the window's Slurm job %s was given back when it ended; start a new window", x.Value)
		}
	}
	login, err := w.SlurmLogin(ctx)
	if err != nil {
		return err
	}
	if id == "" {
		// Lost before Slurm named the job: one may hold nodes under the
		// window's name all the same. The window asks again once its
		// journal is open.
		_ = slurm.CancelByName(ctx, login.Exec(), spec.Name)
		return nil
	}
	now, err := slurm.Find(ctx, login.Exec(), id, spec.Name)
	var nr *slurm.NotRunning
	switch {
	case errors.As(err, &nr) && !nr.Ended():
		if cerr := slurm.Cancel(ctx, login.Exec(), id); cerr != nil {
			return fmt.Errorf("the window's Slurm job %s is %s, not running, and could not be given back (%v): scancel %s on the login node", id, nr.State, cerr, id)
		}
		return fmt.Errorf("the window's Slurm job %s was %s, not running: given back; start a new window", id, nr.State)
	case err != nil:
		return fmt.Errorf("the window's Slurm job: %w; start a new window", err)
	case held != nil && now.NodeList != held.NodeList:
		_ = slurm.Cancel(ctx, login.Exec(), id)
		return fmt.Errorf("the window's Slurm job %s holds %s now, not %s as journaled: given back; start a new window", id, now.NodeList, held.NodeList)
	}
	if held != nil {
		now.Nodes = held.Nodes
	} else {
		s.Granted = time.Now().UTC()
		w.slurmUnjournaled = &now
	}
	w.rec.Slurm = s
	// Read again, not journaled: the limits as they stand when the
	// window goes on are the ones that may still cut it.
	w.readPartition(ctx, login.Exec(), spec)
	w.granted(now, s.Granted)
	return nil
}

// judgeAllocation is SLURM-001, the allocation granted in time, and for
// each of its nodes SLURM-002, in service when granted and still at the
// window's end, and SLURM-003,
// the GPUs Slurm would schedule on it (its GRES) as many as the quote's
// and as nvidia-smi saw: a node whose GRES says fewer GPUs than it has
// is rented at a price for GPUs no job can get.
func (w *Window) judgeAllocation() []record.Verdict {
	s := w.rec.Slurm
	if s == nil {
		return nil
	}
	if s.Named {
		return w.judgeSlurmNodes()
	}
	v := record.NewVerdict("SLURM-001", "")
	if s.NotGranted != "" {
		v.Status, v.Measured, v.Detail = record.Skip, "not granted", clipText(s.NotGranted, 300)
		v.Incomplete = "no Slurm allocation: " + clipText(s.NotGranted, 200)
		return append([]record.Verdict{v}, partitionVerdict(s.Partition, false)...)
	}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, n.Name)
	}
	v.Status = record.Pass
	v.Measured = fmt.Sprintf("job %s: %s, %d node(s)", s.JobID, hostlist.Compress(names), len(s.Nodes))
	v.Detail = fmt.Sprintf("granted after %s", s.Granted.Sub(s.Requested).Round(time.Second))
	if s.CancelError != "" {
		// Still held, still billed: the buyer must give it back.
		v.Status, v.Detail = record.Warn, clipText(fmt.Sprintf("NOT given back at the window's end (%s): scancel %s on the login node",
			s.CancelError, s.JobID), 300)
	}
	out := append([]record.Verdict{v}, partitionVerdict(s.Partition, true)...)
	constraint := ""
	if a := w.Inv.Slurm.Allocate; a != nil {
		constraint = a.Constraint
	}
	for _, n := range s.Nodes {
		out = append(out, stateVerdict(n, s.EndReadError, "when granted"), gresVerdict(n, w.Inv.Quote, w.rec.NodeFacts(n.Name)),
			featureVerdict(n, constraint))
	}
	return out
}

// stateVerdict is SLURM-002 for node n: out of service when granted, or
// drained (down, failing) while the window held it, with Slurm's reason.
// Either way Slurm itself says the node is not fit to run jobs: rented,
// it is a node the buyer cannot use.
// first says when it was read first: "when granted", or "at the window's
// start" for nodes the inventory named.
func stateVerdict(n record.SlurmNode, endReadError, first string) record.Verdict {
	v := record.NewVerdict("SLURM-002", n.Name)
	v.Measured = n.State
	bad, end := outOfService(n.State), outOfService(n.StateAtEnd)
	switch {
	case bad != "":
		v.Status, v.Detail = record.Fail, clipText(bad+reasonText(n.Reason), 200)
		if end == "" && n.StateAtEnd != "" {
			v.Detail = clipText(bad+reasonText(n.Reason)+" "+first+"; "+n.StateAtEnd+" at the window's end", 200)
		}
	case end != "":
		v.Status, v.Measured = record.Fail, n.StateAtEnd
		during := "while the window held it"
		if first != "when granted" {
			during = "during the window"
		}
		v.Detail = clipText(end+reasonText(n.ReasonAtEnd)+" "+during+" (in service "+first+")", 200)
	case n.StateAtEnd != "":
		v.Status, v.Detail = record.Pass, "in service "+first+" and at the window's end"
	case endReadError != "":
		v.Status, v.Detail = record.Pass, clipText("in service "+first+" (not read again at the window's end: "+endReadError+")", 200)
	default:
		v.Status, v.Detail = record.Pass, "in service "+first
	}
	return v
}

// gresVerdict is SLURM-003 for node n: the GPUs its GRES lists as many
// as quoted and as nvidia-smi saw, and the type it gives them (if any)
// naming the same GPU product as the quote's model and nvidia-smi's
// (gres_type.go).
func gresVerdict(n record.SlurmNode, q inventory.Quote, facts json.RawMessage) record.Verdict {
	v := record.NewVerdict("SLURM-003", n.Name)
	gres, ok := GRESGPUs(n.GRES)
	var f struct {
		GPUCount int    `json:"gpu_count"`
		GPUModel string `json:"gpu_model"`
	}
	seen := 0
	if len(facts) > 0 && json.Unmarshal(facts, &f) == nil {
		seen = f.GPUCount
	}
	if !ok {
		v.Status, v.Measured, v.Detail = record.Skip, "no GPU GRES", "Slurm lists no gpu GRES on the node ("+cmp.Or(n.GRES, "none")+"): jobs cannot ask for its GPUs by --gres"
		return v
	}
	v.Measured = fmt.Sprintf("GRES %s: %d GPU(s)", n.GRES, gres)
	quoted := q.GPUsPerNode
	var wrong []string
	if quoted > 0 {
		v.Quoted = fmt.Sprintf("%d", quoted)
		if gres != quoted {
			wrong = append(wrong, fmt.Sprintf("the quote says %d", quoted))
		}
	}
	if seen > 0 && gres != seen {
		wrong = append(wrong, fmt.Sprintf("nvidia-smi saw %d", seen))
	}
	types := GRESTypes(n.GRES)
	wrong = append(wrong, gresTypeContradicts(types, q.GPUModel, "the quote's")...)
	// "mixed: a, b" when the node's GPUs differ: GPU-001 and NODE-001
	// say that; no one model to hold the type to.
	if !strings.HasPrefix(f.GPUModel, "mixed") {
		wrong = append(wrong, gresTypeContradicts(types, f.GPUModel, "nvidia-smi's")...)
	}
	typed := typeAgrees(types, q.GPUModel) || !strings.HasPrefix(f.GPUModel, "mixed") && typeAgrees(types, f.GPUModel)
	switch {
	case len(wrong) > 0:
		v.Status, v.Detail = record.Fail, clipText("Slurm schedules "+fmt.Sprint(gres)+"; "+strings.Join(wrong, ", "), 300)
	case quoted == 0 && seen == 0:
		v.Status, v.Detail = record.Skip, "nothing to hold it to: no quote.gpus_per_node, and nvidia-smi's count not measured (preflight)"
		if typed {
			// The type agreed, the count was held to nothing: a count
			// nothing measured is no pass.
			v.Detail += "; its GRES type names the model's GPU"
		}
	default:
		v.Status, v.Detail = record.Pass, "as quoted and as nvidia-smi saw"
		if seen == 0 {
			v.Detail = "as quoted (nvidia-smi's count not measured)"
		}
		if typed {
			v.Detail += "; its GRES type names the model's GPU"
		}
	}
	return v
}

// GRESGPUs is how many GPUs a node's GRES lists: the sum of its gpu
// entries ("gpu:h100:8(S:0-1)", "gpu:4,gpu:a100:2"); false when none.
func GRESGPUs(gres string) (int, bool) {
	total, found := 0, false
	for _, e := range strings.Split(gres, ",") {
		e = strings.TrimSpace(e)
		if i := strings.IndexByte(e, '('); i >= 0 {
			e = e[:i]
		}
		parts := strings.Split(e, ":")
		if parts[0] != "gpu" {
			continue
		}
		n := 1
		if len(parts) > 1 {
			if c, err := strconv.Atoi(parts[len(parts)-1]); err == nil && c >= 0 && c < 1<<16 {
				n = c
			}
		}
		total, found = total+n, true
	}
	return total, found
}

// outOfService is what a node's Slurm state says is wrong with it: its
// flags (DRAIN of "MIXED+DRAIN") and the symbol sinfo's short states add
// ("*" not responding, "$" maintenance, "@" reboot pending); "" when in
// service.
func outOfService(state string) string {
	var bad []string
	for _, f := range strings.Split(strings.ToUpper(state), "+") {
		for sym, what := range map[byte]string{'*': "NOT_RESPONDING", '$': "MAINT", '@': "REBOOT_REQUESTED"} {
			if strings.IndexByte(f, sym) >= 0 && !slices.Contains(bad, what) {
				bad = append(bad, what)
			}
		}
		f = strings.TrimRight(f, "*~#!%$@^-")
		switch f {
		case "DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "MAINT", "MAINTENANCE",
			"REBOOT_REQUESTED", "REBOOT_ISSUED", "INVALID", "INVALID_REG", "UNKNOWN":
			if !slices.Contains(bad, f) {
				bad = append(bad, f)
			}
		}
	}
	slices.Sort(bad)
	return strings.Join(bad, "+")
}

func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

// clipText is remote.Clip: at most n bytes of s, whole characters.
func clipText(s string, n int) string { return remote.Clip(s, n) }
