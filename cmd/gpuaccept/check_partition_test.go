package main

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// check --connect names each limit that would cut the window, in lines
// that fit 100 columns however long the partition's words are, and says
// a partition it could not read is NOT MEASURED in scontrol's words.
func TestPrintPartition(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name string
		p    *record.SlurmPartition
		want string
	}{
		{"not reached", nil, ""},
		{"open", &record.SlurmPartition{Name: "gpu", State: "UP", MaxTime: "UNLIMITED", MaxNodes: "UNLIMITED", MinNodes: "0", TotalNodes: "4",
			AskedNodes: 4, AskedMinutes: 135},
			"the partition gpu: UP, MaxTime UNLIMITED, MaxNodes UNLIMITED, TotalNodes 4\n  the window asks 4 node(s) for 2h15m\n\n"},
		{"cut", &record.SlurmPartition{Name: "gpu", State: "UP", MaxTime: "00:30:00", MaxNodes: "2", MinNodes: "0", TotalNodes: "4",
			AskedNodes: 4, AskedMinutes: 135, Cuts: []string{"MaxTime 00:30:00 (30m) is shorter than the 2h15m the window asks for",
				"MaxNodes 2: at most 2 node(s) a job, not the 4 the window asks for"}},
			"the partition gpu: UP, MaxTime 00:30:00, MaxNodes 2, TotalNodes 4\n  the window asks 4 node(s) for 2h15m\n" +
				"  cuts the window: MaxTime 00:30:00 (30m) is shorter than the 2h15m the window asks for\n" +
				"  cuts the window: MaxNodes 2: at most 2 node(s) a job, not the 4 the window asks for\n\n"},
		{"not shown", &record.SlurmPartition{Name: "gpu", ReadError: "slurm-login: scontrol show partition gpu: Partition gpu not found: exit 1"},
			"the partition's limits: NOT MEASURED\n  slurm-login: scontrol show partition gpu: Partition gpu not found: exit 1\n\n"},
		{"long", &record.SlurmPartition{Name: long, State: long, MaxTime: long, AskedNodes: 1, Cuts: []string{"MaxTime " + long},
			Unread: []string{"MaxNodes " + long}}, ""},
	} {
		var b strings.Builder
		printPartition(&b, c.p)
		if c.want != "" && b.String() != c.want || c.p == nil && b.Len() > 0 {
			t.Errorf("%s:\n got %q\nwant %q", c.name, b.String(), c.want)
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if n := len([]rune(l)); n > 100 {
				t.Errorf("%s: a line of %d columns: %s", c.name, n, l)
			}
		}
	}
}
