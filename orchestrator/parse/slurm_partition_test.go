package parse

import (
	"strings"
	"testing"
)

// Real lines from the lab's Slurm 22.05 (`scontrol -a show partition -o`),
// as configured and after `scontrol update partitionname=lab maxtime=30
// maxnodes=1 minnodes=1 state=drain allowaccounts=acme,beta`, then
// `maxtime=1-02:03:00 allowaccounts=ALL denyaccounts=bad allowqos=normal`.
const (
	labPartition = "PartitionName=lab AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A " +
		"DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED " +
		"MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=h[1-2] PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO " +
		"OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE " +
		"JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=4,mem=2M,node=2,billing=4"
	labLimited = "PartitionName=lab AllowGroups=ALL AllowAccounts=acme,beta AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A " +
		"DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=1 MaxTime=00:30:00 MinNodes=1 " +
		"LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=h[1-2] PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO " +
		"OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=DRAIN TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE " +
		"JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=4,mem=2M,node=2,billing=4"
	labDenied = "PartitionName=lab AllowGroups=ALL DenyAccounts=bad AllowQos=normal AllocNodes=ALL Default=YES QoS=N/A " +
		"DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=1 MaxTime=1-02:03:00 MinNodes=1 " +
		"LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=h[1-2] PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO " +
		"OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=DRAIN TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE " +
		"JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=4,mem=2M,node=2,billing=4"
)

func TestSlurmPartitions(t *testing.T) {
	out := "Welcome to the cluster\n\n" + labPartition + "\n" + strings.Replace(labLimited, "PartitionName=lab", "PartitionName=gpu", 1) +
		"\n" + strings.Replace(labDenied, "Default=YES", "Default=NO", 1) + "\n"
	ps := SlurmPartitions(out)
	if len(ps) != 3 {
		t.Fatalf("%d partitions: %+v", len(ps), ps)
	}
	want := []SlurmPartition{
		{Name: "lab", Default: true, State: "UP", MaxTime: "UNLIMITED", DefaultTime: "NONE", MaxNodes: "UNLIMITED", MinNodes: "0",
			TotalNodes: "2", AllowAccounts: "ALL", AllowQOS: "ALL", QOS: "N/A"},
		{Name: "gpu", Default: true, State: "DRAIN", MaxTime: "00:30:00", DefaultTime: "NONE", MaxNodes: "1", MinNodes: "1",
			TotalNodes: "2", AllowAccounts: "acme,beta", AllowQOS: "ALL", QOS: "N/A"},
		{Name: "lab", State: "DRAIN", MaxTime: "1-02:03:00", DefaultTime: "NONE", MaxNodes: "1", MinNodes: "1",
			TotalNodes: "2", DenyAccounts: "bad", AllowQOS: "normal", QOS: "N/A"},
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("partition %d\n got %+v\nwant %+v", i, ps[i], want[i])
		}
	}
	if ps := SlurmPartitions("Partition nope not found\n"); len(ps) != 0 {
		t.Errorf("scontrol's refusal read as %+v", ps)
	}
}

func TestSlurmMinutes(t *testing.T) {
	for _, c := range []struct {
		in   string
		min  int
		unl  bool
		fail bool
	}{
		{"UNLIMITED", 0, true, false}, {"INFINITE", 0, true, false}, {"NONE", 0, true, false},
		{"00:30:00", 30, false, false}, {"01:00:00", 60, false, false}, {"1-02:03:00", 26*60 + 3, false, false},
		{"365-00:00:00", 365 * 1440, false, false}, {"00:00:01", 1, false, false}, {"00:30:30", 31, false, false},
		{"30", 30, false, false}, {"30:15", 31, false, false}, {"2-4", 2*1440 + 4*60, false, false}, {"2-4:05", 2*1440 + 245, false, false},
		{"", 0, false, true}, {"-", 0, false, true}, {"1:2:3:4", 0, false, true}, {"ab:00:00", 0, false, true},
		{"1-1-1", 0, false, true}, {"-5", 0, false, true}, {"+5", 0, false, true}, {"9999999999", 0, false, true},
		{"999999999-00:00:00", 0, false, true}, {" 30", 0, false, true},
	} {
		m, unl, err := SlurmMinutes(c.in)
		if (err != nil) != c.fail || m != c.min || unl != c.unl {
			t.Errorf("%q: %d %v %v, want %d %v fail=%v", c.in, m, unl, err, c.min, c.unl, c.fail)
		}
	}
}

func TestSlurmCount(t *testing.T) {
	for in, want := range map[string]int{"UNLIMITED": -1, "0": 0, "1": 1, "128": 128, "": -2, "1k": -2, "-1": -2, "4294967295": -2} {
		n, unl, err := SlurmCount(in)
		got := n
		switch {
		case err != nil:
			got = -2
		case unl:
			got = -1
		}
		if got != want {
			t.Errorf("%q: %d %v %v, want %d", in, n, unl, err, want)
		}
	}
}

// FuzzSlurmPartitions: whatever a login node prints, the parser returns
// (no panic), and a time it reads is never negative nor past its bound.
func FuzzSlurmPartitions(f *testing.F) {
	for _, s := range []string{labPartition, labLimited, labDenied, "PartitionName= MaxTime=1-", "PartitionName=x MaxTime=::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range SlurmPartitions(s) {
			if m, _, err := SlurmMinutes(p.MaxTime); err == nil && (m < 0 || m > maxSlurmMinutes) {
				t.Fatalf("MaxTime %q read as %d minutes", p.MaxTime, m)
			}
			if n, _, err := SlurmCount(p.MaxNodes); err == nil && (n < 0 || n > 999999999) {
				t.Fatalf("MaxNodes %q read as %d", p.MaxNodes, n)
			}
		}
		if m, _, err := SlurmMinutes(s); err == nil && (m < 0 || m > maxSlurmMinutes) {
			t.Fatalf("%q read as %d minutes", s, m)
		}
	})
}
