package slurm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuaccept/orchestrator/parse"
	"gpuaccept/remote"
)

// ReadPartition is the partition a job asking for name runs in, as
// scontrol shows it on the login node: name's, or the cluster's default
// partition when name is "" (salloc without --partition). -a: a hidden
// partition, or one the user's groups may not use, is shown all the same
// (its limits are what the window would meet). An error carries what
// scontrol said ("Partition gpu not found").
func ReadPartition(ctx context.Context, login Login, name string) (parse.SlurmPartition, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := "scontrol -a show partition -o"
	if name != "" {
		cmd += " " + remote.Quote(name)
	}
	var out capWriter
	// scontrol's refusal is on stderr: its words are the evidence.
	err := login.Run(ctx, remote.Cmd{Command: cmd + " 2>&1", Stdout: &out})
	what := partitionName(name)
	ps := parse.SlurmPartitions(out.String())
	if err != nil {
		return parse.SlurmPartition{}, fmt.Errorf("%s: scontrol show partition %s: %s: %w", login.Name(), what, said(out.String()), err)
	}
	for _, p := range ps {
		if name == "" && p.Default || name != "" && p.Name == name {
			return clean(p), nil
		}
	}
	return parse.SlurmPartition{}, fmt.Errorf("%s: scontrol show partition %s: no such partition in what it printed (%s)", login.Name(), what, said(out.String()))
}

func partitionName(name string) string {
	if name == "" {
		return "(the default)"
	}
	return Printable(name, 80)
}

// said is the last words a command printed, one line, printable and
// short: what a buyer reads of scontrol's refusal.
func said(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 2 {
		lines = lines[len(lines)-2:]
	}
	if len(lines) == 0 {
		return "nothing said"
	}
	return Printable(strings.Join(lines, "; "), 200)
}

// clean is p with every field printable and bounded: the login node's
// words go into the evidence.
func clean(p parse.SlurmPartition) parse.SlurmPartition {
	for _, f := range []*string{&p.Name, &p.State, &p.MaxTime, &p.DefaultTime, &p.MaxNodes, &p.MinNodes, &p.TotalNodes,
		&p.AllowAccounts, &p.DenyAccounts, &p.AllowQOS, &p.DenyQOS, &p.QOS} {
		*f = Printable(*f, 200)
	}
	return p
}

// Limits holds s to partition p's limits: cuts are the limits that would
// stop the window running as planned, each naming the limit and its value
// (MaxTime 00:30:00 against the 2h15m asked); unread the limits p states
// in words that could not be read, which are then not judged. A limit
// Slurm may still enforce beyond these (the partition's QOS, AllowGroups,
// the account's associations) is scontrol's to show, not this.
func Limits(p parse.SlurmPartition, s Spec) (cuts, unread []string) {
	if p.State != "UP" {
		cut := "State " + orNone(p.State)
		if why, ok := stateSays[p.State]; ok {
			cut += ": the partition " + why
		}
		cuts = append(cuts, cut)
	}
	if asked := s.Minutes(); asked > 0 {
		switch max, unl, err := parse.SlurmMinutes(p.MaxTime); {
		case err != nil:
			unread = append(unread, "MaxTime "+orNone(p.MaxTime))
		case !unl && max < asked:
			cuts = append(cuts, fmt.Sprintf("MaxTime %s (%s) is shorter than the %s the window asks for", p.MaxTime,
				MinutesText(max), MinutesText(asked)))
		}
	}
	if n := s.Count(); n > 0 {
		for _, l := range []struct {
			key, value string
			cut        func(limit int) bool
			says       string
		}{
			{"MaxNodes", p.MaxNodes, func(l int) bool { return n > l }, "at most %d node(s) a job, not the %d the window asks for"},
			{"MinNodes", p.MinNodes, func(l int) bool { return n < l }, "at least %d node(s) a job, not the %d the window asks for"},
			{"TotalNodes", p.TotalNodes, func(l int) bool { return n > l }, "%d node(s) in the partition, fewer than the %d the window asks for"},
		} {
			switch limit, unl, err := parse.SlurmCount(l.value); {
			case err != nil:
				unread = append(unread, l.key+" "+orNone(l.value))
			case !unl && l.cut(limit):
				cuts = append(cuts, fmt.Sprintf("%s %s: "+l.says, l.key, l.value, limit, n))
			}
		}
	}
	cuts = append(cuts, listed("account", s.Account, "AllowAccounts", p.AllowAccounts, "DenyAccounts", p.DenyAccounts)...)
	cuts = append(cuts, listed("QOS", s.QOS, "AllowQos", p.AllowQOS, "DenyQos", p.DenyQOS)...)
	return cuts, unread
}

// stateSays is what a partition's state other than UP does to a job.
var stateSays = map[string]string{"DOWN": "takes jobs but starts none", "DRAIN": "takes no new job",
	"INACTIVE": "takes no job and starts none"}

// listed is what a partition's allow and deny lists say of the window's
// account (or QOS) what: nothing when the window names none (the user's
// default, which scontrol does not show) or the lists let it in.
func listed(what, asked, allowKey, allow, denyKey, deny string) []string {
	if asked == "" {
		return nil
	}
	// Slurm keeps account names in lower case, and matches them so.
	in := func(list string) bool {
		return slices.ContainsFunc(strings.Split(list, ","), func(x string) bool { return strings.EqualFold(x, asked) })
	}
	var cuts []string
	if allow != "" && allow != "ALL" && !in(allow) {
		cuts = append(cuts, fmt.Sprintf("%s %s: not the window's %s %s", allowKey, allow, what, asked))
	}
	if deny != "" && in(deny) {
		cuts = append(cuts, fmt.Sprintf("%s %s: the window's %s %s among them", denyKey, deny, what, asked))
	}
	return cuts
}

// MinutesText is a count of minutes as a duration reads ("2h15m",
// "30m", "24h").
func MinutesText(m int) string {
	s := strings.TrimSuffix((time.Duration(m) * time.Minute).String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// orNone is a limit's word as scontrol printed it, "(not shown)" when it
// printed none.
func orNone(s string) string {
	if s == "" {
		return "(not shown)"
	}
	return s
}
