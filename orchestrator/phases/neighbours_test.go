package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

const (
	neighLimit = "/proc/sys/net/ipv4/neigh/default/gc_thresh2:512\n/proc/sys/net/ipv4/neigh/default/gc_thresh3:1024\n"
	// What the kernel logs when it refuses an entry (net/core/neighbour.c),
	// as dmesg printed it on this machine with 1,100 entries in one table.
	neighOverflow = "[ 2181.906223] neighbour: arp_cache: neighbor table overflow!\n"
	roceIbstat    = "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n" +
		"\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tLink layer: Ethernet\n"
)

// TestNeighbourTableFacts: what preflight makes of the neigh-limit section
// and of overflows in the kernel log, on hosts that answer and on hosts
// that do not.
func TestNeighbourTableFacts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sections  map[string]string
		rc        map[string]int
		want      *Neighbours
		unreadHas string
		overflows int // in the kernel log's facts; -1: none read
	}{
		{"host", map[string]string{"neigh-limit": neighLimit, "kernel-log": ""}, nil,
			&Neighbours{GCThresh2: 512, GCThresh3: 1024}, "", 0},
		{"raised, overflow logged before", map[string]string{
			"neigh-limit": "/proc/sys/net/ipv4/neigh/default/gc_thresh2:8192\n/proc/sys/net/ipv4/neigh/default/gc_thresh3:16384\n",
			"kernel-log":  neighOverflow + neighOverflow}, nil,
			&Neighbours{GCThresh2: 8192, GCThresh3: 16384}, "", 2},
		{"network namespace", map[string]string{
			"neigh-limit": "grep: /proc/sys/net/ipv4/neigh/default/gc_thresh2: No such file or directory\n" +
				"grep: /proc/sys/net/ipv4/neigh/default/gc_thresh3: No such file or directory\n",
			"kernel-log": ""}, map[string]int{"neigh-limit": 2},
			nil, "exit 2: grep: /proc/sys/net/ipv4/neigh/default/gc_thresh3: No such file or directory", 0},
		{"hostile value", map[string]string{"neigh-limit": "/proc/sys/net/ipv4/neigh/default/gc_thresh3:99999999999999999999\n"},
			nil, nil, "unreadable line", -1},
		{"empty", map[string]string{"neigh-limit": ""}, nil, nil, "unreadable line", -1},
		{"kernel log unreadable", map[string]string{"neigh-limit": neighLimit, "kernel-log": "dmesg: read kernel buffer failed: Operation not permitted\n"},
			map[string]int{"kernel-log": 1}, &Neighbours{GCThresh2: 512, GCThresh3: 1024}, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := tc.rc
			if rc == nil {
				rc = map[string]int{}
			}
			f := factsFrom(splitSections(preflightOutput(tc.sections, rc)))
			got := f.Neighbours
			switch {
			case got == nil:
				t.Fatal("no neighbour facts")
			case tc.unreadHas != "":
				if !strings.Contains(got.Unread, tc.unreadHas) {
					t.Errorf("unread %q, want it to say %q", got.Unread, tc.unreadHas)
				}
			case *got != *tc.want:
				t.Errorf("got %+v, want %+v", *got, *tc.want)
			}
			overflows, last := -1, ""
			if f.Health != nil && f.Health.Kernel != nil {
				overflows, last = f.Health.Kernel.NeighOverflows, f.Health.Kernel.NeighOverflow
			}
			if overflows != tc.overflows || overflows > 0 && last != strings.TrimSpace(neighOverflow) {
				t.Errorf("kernel log: %d overflow(s), last %q; want %d", overflows, last, tc.overflows)
			}
		})
	}
	if f := factsFrom(splitSections(preflightOutput(map[string]string{"hostname": "a\n"}, map[string]int{}))); f.Neighbours != nil {
		t.Errorf("a script without the section read %+v", *f.Neighbours)
	}
}

// TestNeighbourVerdict: a limit under what a flat network of the window's
// peers needs is a warning with the arithmetic and the fix; so is an
// overflow the kernel already logged.
func TestNeighbourVerdict(t *testing.T) {
	host := func(thresh3, overflows int, ibstat string) *Facts {
		s := map[string]string{"neigh-limit": "/proc/sys/net/ipv4/neigh/default/gc_thresh3:" + itoa(thresh3) + "\n", "kernel-log": ""}
		if overflows > 0 {
			s["kernel-log"] = strings.Repeat(neighOverflow, overflows)
		}
		if ibstat != "" {
			s["ibstat"] = ibstat
		}
		return factsFrom(splitSections(preflightOutput(s, map[string]int{})))
	}
	netns := factsFrom(splitSections(preflightOutput(map[string]string{"neigh-limit": "grep: x: No such file or directory\n"},
		map[string]int{"neigh-limit": 2})))
	for _, tc := range []struct {
		name        string
		f           *Facts
		peers       int
		want        record.Status
		detailHas   string
		measuredHas string
		q           inventory.Quote
	}{
		{"default limit, 1,000 nodes, no RoCE", host(1024, 0, ""), 999, record.Pass, "", "limit 1024, needs 999 (999 peers x 1 networks)", inventory.Quote{}},
		{"default limit, 1,000 nodes, one RoCE rail", host(1024, 0, roceIbstat), 999, record.Warn,
			"the front end and 1 RoCE port(s)): raise net.ipv4.neigh.default.gc_thresh1/2/3", "needs 1998 (999 peers x 2 networks)", inventory.Quote{}},
		{"a port slower than quoted is another network", host(1024, 0, roceIbstat), 999, record.Pass, "", "needs 999",
			inventory.Quote{NICGbps: 800}},
		{"raised", host(16384, 0, roceIbstat), 999, record.Pass, "", "", inventory.Quote{}},
		{"overflow logged", host(16384, 3, ""), 999, record.Warn, "overflow since boot (3 line(s)): [ 2181.906223] neighbour", "", inventory.Quote{}},
		{"network namespace", netns, 127, record.Skip, "host's limit applies", "limit not readable, needs 127", inventory.Quote{}},
		{"one node", host(16, 0, ""), 0, record.Skip, "no peers", "", inventory.Quote{}},
		{"record before the check", &Facts{}, 9, record.Skip, "before the check existed", "", inventory.Quote{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := neighbourVerdict("gpu-1", tc.f, tc.peers, tc.q, 0.9)
			if v.ID != "NET-002" || v.Status != tc.want || !strings.Contains(v.Detail, tc.detailHas) {
				t.Errorf("%s %s: %s (want %s with %q)", v.ID, v.Status, v.Detail, tc.want, tc.detailHas)
			}
			if !strings.Contains(v.Measured, tc.measuredHas) {
				t.Errorf("measured %q, want it to say %q", v.Measured, tc.measuredHas)
			}
		})
	}
}
