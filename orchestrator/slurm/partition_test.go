package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/parse"
)

func TestLimits(t *testing.T) {
	open := parse.SlurmPartition{Name: "gpu", State: "UP", MaxTime: "UNLIMITED", MaxNodes: "UNLIMITED", MinNodes: "0", TotalNodes: "8",
		AllowAccounts: "ALL", AllowQOS: "ALL"}
	spec := Spec{Partition: "gpu", Nodes: 4, Time: 2*time.Hour + 15*time.Minute}
	with := func(f func(*parse.SlurmPartition)) parse.SlurmPartition { p := open; f(&p); return p }
	for _, c := range []struct {
		name   string
		p      parse.SlurmPartition
		s      Spec
		cuts   []string
		unread []string
	}{
		{"open", open, spec, nil, nil},
		{"max time as long as asked", with(func(p *parse.SlurmPartition) { p.MaxTime = "02:15:00" }), spec, nil, nil},
		{"max time shorter", with(func(p *parse.SlurmPartition) { p.MaxTime = "02:14:00" }), spec,
			[]string{"MaxTime 02:14:00 (2h14m) is shorter than the 2h15m the window asks for"}, nil},
		{"a part of a minute is a whole", with(func(p *parse.SlurmPartition) { p.MaxTime = "00:30:00" }),
			Spec{Nodes: 1, Time: 30*time.Minute + time.Second}, []string{"MaxTime 00:30:00 (30m) is shorter than the 31m the window asks for"}, nil},
		{"days", with(func(p *parse.SlurmPartition) { p.MaxTime = "1-00:00:00" }), Spec{Nodes: 1, Time: 25 * time.Hour},
			[]string{"MaxTime 1-00:00:00 (24h) is shorter than the 25h the window asks for"}, nil},
		{"down", with(func(p *parse.SlurmPartition) { p.State = "DOWN" }), spec, []string{"State DOWN: the partition takes jobs but starts none"}, nil},
		{"drain", with(func(p *parse.SlurmPartition) { p.State = "DRAIN" }), spec, []string{"State DRAIN: the partition takes no new job"}, nil},
		{"unknown state", with(func(p *parse.SlurmPartition) { p.State = "" }), spec, []string{"State (not shown)"}, nil},
		{"max nodes", with(func(p *parse.SlurmPartition) { p.MaxNodes = "2" }), spec,
			[]string{"MaxNodes 2: at most 2 node(s) a job, not the 4 the window asks for"}, nil},
		{"max nodes by nodelist", with(func(p *parse.SlurmPartition) { p.MaxNodes = "2" }), Spec{NodeList: "gpu[01-03]", Time: time.Hour},
			[]string{"MaxNodes 2: at most 2 node(s) a job, not the 3 the window asks for"}, nil},
		{"min nodes", with(func(p *parse.SlurmPartition) { p.MinNodes = "8" }), spec,
			[]string{"MinNodes 8: at least 8 node(s) a job, not the 4 the window asks for"}, nil},
		{"total nodes", with(func(p *parse.SlurmPartition) { p.TotalNodes = "3" }), spec,
			[]string{"TotalNodes 3: 3 node(s) in the partition, fewer than the 4 the window asks for"}, nil},
		{"account not allowed", with(func(p *parse.SlurmPartition) { p.AllowAccounts = "acme,beta" }), Spec{Account: "gamma", Nodes: 1},
			[]string{"AllowAccounts acme,beta: not the window's account gamma"}, nil},
		{"account allowed", with(func(p *parse.SlurmPartition) { p.AllowAccounts = "acme,beta" }), Spec{Account: "beta", Nodes: 1}, nil, nil},
		{"no account named", with(func(p *parse.SlurmPartition) { p.AllowAccounts = "acme" }), Spec{Nodes: 1}, nil, nil},
		{"account denied", with(func(p *parse.SlurmPartition) { p.AllowAccounts, p.DenyAccounts = "", "bad,worse" }), Spec{Account: "worse", Nodes: 1},
			[]string{"DenyAccounts bad,worse: the window's account worse among them"}, nil},
		{"qos", with(func(p *parse.SlurmPartition) { p.AllowQOS = "normal" }), Spec{QOS: "high", Nodes: 1},
			[]string{"AllowQos normal: not the window's QOS high"}, nil},
		{"unreadable", with(func(p *parse.SlurmPartition) { p.MaxTime, p.MaxNodes, p.TotalNodes = "soon", "", "4" }), spec,
			nil, []string{"MaxTime soon", "MaxNodes (not shown)"}},
		{"everything at once", parse.SlurmPartition{State: "INACTIVE", MaxTime: "00:10:00", MaxNodes: "1", MinNodes: "0", TotalNodes: "2",
			AllowAccounts: "ALL", AllowQOS: "ALL"}, spec, []string{"State INACTIVE: the partition takes no job and starts none",
			"MaxTime 00:10:00 (10m) is shorter than the 2h15m the window asks for",
			"MaxNodes 1: at most 1 node(s) a job, not the 4 the window asks for",
			"TotalNodes 2: 2 node(s) in the partition, fewer than the 4 the window asks for"}, nil},
	} {
		cuts, unread := Limits(c.p, c.s)
		if strings.Join(cuts, "\n") != strings.Join(c.cuts, "\n") || strings.Join(unread, "\n") != strings.Join(c.unread, "\n") {
			t.Errorf("%s:\n got cuts %q unread %q\nwant cuts %q unread %q", c.name, cuts, unread, c.cuts, c.unread)
		}
	}
}

// ReadPartition asks scontrol on the login node, -a so that a hidden
// partition is shown; without a name it is the default partition; a
// partition scontrol does not show is an error in its own words, the node's
// bytes made printable.
func TestReadPartition(t *testing.T) {
	lab := "PartitionName=lab AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL Default=YES QoS=N/A DefaultTime=NONE " +
		"MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 Nodes=h[1-4] State=UP TotalCPUs=8 TotalNodes=4"
	gpu := "PartitionName=gpu AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL Default=NO QoS=N/A DefaultTime=NONE " +
		"MaxNodes=2 MaxTime=00:30:00 MinNodes=0 Nodes=h[1-4] State=UP TotalCPUs=8 TotalNodes=4"
	f := &fakeLogin{out: "Welcome\n" + lab + "\n" + gpu + "\n"}
	p, err := ReadPartition(t.Context(), f, "")
	if err != nil || p.Name != "lab" || f.last != "scontrol -a show partition -o 2>&1" {
		t.Errorf("the default: %+v %v (ran %q)", p, err, f.last)
	}
	p, err = ReadPartition(t.Context(), f, "gpu")
	if err != nil || p.Name != "gpu" || p.MaxTime != "00:30:00" || f.last != "scontrol -a show partition -o gpu 2>&1" {
		t.Errorf("gpu: %+v %v (ran %q)", p, err, f.last)
	}
	f = &fakeLogin{out: "Partition nope not found\n", err: errors.New("exit 1")}
	if _, err := ReadPartition(t.Context(), f, "nope"); err == nil ||
		err.Error() != "slurm-login: scontrol show partition nope: Partition nope not found: exit 1" {
		t.Errorf("not found: %v", err)
	}
	f = &fakeLogin{out: lab + "\n"}
	if _, err := ReadPartition(t.Context(), f, "gpu"); err == nil || !strings.Contains(err.Error(), "no such partition in what it printed") {
		t.Errorf("another partition's record: %v", err)
	}
	f = &fakeLogin{out: strings.Replace(gpu, "MaxTime=00:30:00", "MaxTime=00:30\x07\u009b:00", 1)}
	if p, err := ReadPartition(t.Context(), f, "gpu"); err != nil || p.MaxTime != "00:30:00" {
		t.Errorf("control bytes: %+v %v", p, err)
	}
}
