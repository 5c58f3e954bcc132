package orchestrator

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/slurm"
)

// The partition's limits (SLURM-004): read through the login node before
// the window asks for its allocation, and held to what it asks. Slurm
// itself does not say: under EnforcePartLimits=NO (its default) a job past
// a limit is queued and waits for ever (PartitionTimeLimit), and sbatch
// --test-only answers that it would start; on the lab's Slurm 22.05 a
// job asking 60 minutes of a partition with MaxTime 30 was "to start at"
// a time a minute away.

// PartitionLimits reads the partition spec asks for and holds spec to its
// limits: the record the window keeps, and check --connect shows.
func PartitionLimits(ctx context.Context, login slurm.Login, spec slurm.Spec) *record.SlurmPartition {
	rec := &record.SlurmPartition{Name: spec.Partition, AskedMinutes: spec.Minutes(), AskedNodes: spec.Count()}
	p, err := slurm.ReadPartition(ctx, login, spec.Partition)
	if err != nil {
		rec.ReadError = clipText(err.Error(), 300)
		return rec
	}
	rec.Name, rec.State, rec.MaxTime, rec.DefaultTime = p.Name, p.State, p.MaxTime, p.DefaultTime
	rec.MaxNodes, rec.MinNodes, rec.TotalNodes = p.MaxNodes, p.MinNodes, p.TotalNodes
	rec.AllowAccounts, rec.DenyAccounts, rec.AllowQOS, rec.DenyQOS, rec.QOS = p.AllowAccounts, p.DenyAccounts, p.AllowQOS, p.DenyQOS, p.QOS
	rec.Cuts, rec.Unread = slurm.Limits(p, spec)
	return rec
}

// readPartition keeps the partition's limits in the window's record and
// says a limit that would cut the window before it asks (the job would
// wait out slurm.allocate_timeout, or be cut short).
func (w *Window) readPartition(ctx context.Context, login slurm.Login, spec slurm.Spec) {
	p := PartitionLimits(ctx, login, spec)
	w.rec.Slurm.Partition = p
	switch {
	case p.ReadError != "":
		w.Progress.Line("slurm: the partition's limits not read: %s", clipText(p.ReadError, 200))
	case len(p.Cuts) > 0:
		w.Progress.Line("slurm: partition %s would not let the window run as planned: %s", p.Name, clipText(strings.Join(p.Cuts, "; "), 300))
	}
}

// partitionVerdict is SLURM-004: the partition lets the window's job run
// as asked; nil for a record made before the partition was read.
//
// A limit the window asks past is the buyer's ask, not the provider's
// fault, unless it is the partition's state: the window is INCOMPLETE
// (change what the inventory asks), not NOT ACCEPTED. And once Slurm
// granted the job, it let the window past the limits read (a QOS with
// PartitionTimeLimit or PartitionMaxNodes, an admin): they are said, not
// failed.
func partitionVerdict(p *record.SlurmPartition, granted bool) []record.Verdict {
	if p == nil {
		return nil
	}
	v := record.NewVerdict("SLURM-004", "")
	name := p.Name
	if name == "" {
		name = "(the default)"
	}
	if p.ReadError != "" {
		v.Status, v.Measured, v.Detail = record.Skip, "not measured", p.ReadError
		v.Incomplete = clipText("NOT MEASURED: the limits of Slurm partition "+name+": "+p.ReadError, 300)
		return []record.Verdict{v}
	}
	v.Measured = clipText(PartitionSummary(p), 200)
	asked := AskedText(p)
	var state, asks []string
	for _, c := range p.Cuts {
		if strings.HasPrefix(c, "State ") {
			state = append(state, c)
		} else {
			asks = append(asks, c)
		}
	}
	switch {
	case len(p.Cuts) > 0 && granted:
		v.Status, v.Detail = record.Pass, clipText("Slurm granted the job past the limits read (a QOS or the site lifts them): "+
			strings.Join(p.Cuts, "; "), 400)
	case len(state) > 0:
		v.Status, v.Detail = record.Fail, clipText(strings.Join(p.Cuts, "; "), 400)
	case len(asks) > 0:
		v.Status, v.Measured, v.Detail = record.Skip, "asked past its limits", clipText(strings.Join(asks, "; "), 400)
		v.Incomplete = clipText("the window asks partition "+name+" past its limits ("+strings.Join(asks, "; ")+
			"): change what slurm.allocate, slurm.account or slurm.qos ask", 400)
	case len(p.Unread) > 0:
		v.Status, v.Detail = record.Skip, clipText("not judged: "+strings.Join(p.Unread, ", ")+" not read", 300)
		v.Incomplete = clipText("NOT MEASURED: Slurm partition "+name+" states "+strings.Join(p.Unread, ", ")+" in words not read", 300)
	default:
		v.Status, v.Detail = record.Pass, clipText("lets the window run as asked: "+asked, 300)
	}
	return []record.Verdict{v}
}

// PartitionSummary is the partition's limits in one line, as scontrol
// words them.
func PartitionSummary(p *record.SlurmPartition) string {
	s := fmt.Sprintf("partition %s: %s, MaxTime %s, MaxNodes %s", p.Name, p.State, p.MaxTime, p.MaxNodes)
	if p.MinNodes != "" && p.MinNodes != "0" && p.MinNodes != "1" {
		s += ", MinNodes " + p.MinNodes
	}
	return s + ", TotalNodes " + p.TotalNodes
}

// AskedText is what the window asked of the partition, in words.
func AskedText(p *record.SlurmPartition) string {
	s := fmt.Sprintf("%d node(s)", p.AskedNodes)
	if p.AskedMinutes > 0 {
		s += " for " + slurm.MinutesText(p.AskedMinutes)
	}
	return s
}
