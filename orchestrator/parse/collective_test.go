package parse

import (
	"reflect"
	"testing"
)

// The texts are Open MPI's and NCCL's own, as users posted them:
// open-mpi/ompi#10734 (BTL TCP connect), omni-compiler#626 (two hosts at
// once), open-mpi/ompi#6297 (ORTE's TCP connection), NVIDIA/nccl-tests
// issues (NCCL's socket WARN line).
func TestCollectiveFaults(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []Fault
	}{
		{"btl tcp", `--------------------------------------------------------------------------
WARNING: Open MPI failed to TCP connect to a peer MPI process.  This
should not happen.

Your Open MPI job may now hang or fail.

  Local host: bl2609
  PID:        26165
  Message:    connect() to 9.9.11.33:1048 failed
  Error:      Operation now in progress (115)
--------------------------------------------------------------------------
`, []Fault{{Local: "bl2609", PeerAddr: "9.9.11.33", Said: "connect() to 9.9.11.33:1048 failed: Operation now in progress (115) (Open MPI)", Waited: true}}},
		{"two hosts, said twice", `  Local host: centos-1cpu-1gb-es-mad1
  PID:        272589
  Message:    connect() to 10.7.0.188:1024 failed
  Error:      Operation now in progress (115)
--------------------------------------------------------------------------
  Local host: centos-1cpu-1gb-es-mad2
  PID:        292546
  Message:    connect() to 10.7.0.187:1024 failed
  Error:      Operation now in progress (115)
--------------------------------------------------------------------------
  Local host: centos-1cpu-1gb-es-mad2
  PID:        292547
  Message:    connect() to 10.7.0.187:1024 failed
  Error:      Operation now in progress (115)
`, []Fault{
			{Local: "centos-1cpu-1gb-es-mad1", PeerAddr: "10.7.0.188", Said: "connect() to 10.7.0.188:1024 failed: Operation now in progress (115) (Open MPI)", Waited: true},
			{Local: "centos-1cpu-1gb-es-mad2", PeerAddr: "10.7.0.187", Said: "connect() to 10.7.0.187:1024 failed: Operation now in progress (115) (Open MPI)", Waited: true},
		}},
		{"orte", `A process or daemon was unable to complete a TCP connection
to another process:
  Local host:    a2935f150BBB
  Remote host:   34bb0519eAAA
This is usually caused by a firewall on the remote host.`, []Fault{{Local: "a2935f150BBB", Peer: "34bb0519eAAA", Said: "a process or daemon was unable to complete a TCP connection (Open MPI)"}}},
		{"orte lost", `ORTE has lost communication with a remote daemon.

  HNP daemon   : [[7735,0],0] on node h1
  Remote daemon: [[7735,0],2] on node h3
`, []Fault{{Lost: "h3", Said: "Open MPI lost its daemon on h3"}}},
		{"nccl", "gpu-03:24011:24107 [0] NCCL WARN Net : Connect to 10.40.1.11<50223> failed : Connection refused\n",
			[]Fault{{Local: "gpu-03", PeerAddr: "10.40.1.11", Said: "connect to 10.40.1.11 failed: Connection refused (NCCL)"}}},
		// A 128-host all-reduce under pml ucx in the lab (UCX 1.13.1,
		// Open MPI 4.1.4), its hosts' ARP replies late; verbatim.
		{"ucx", `[1796231823.969109] [h110:13082:0]            sock.c:325  UCX  ERROR   connect(fd=32, dest_addr=10.246.0.124:59879) failed: No route to host
[1796231823.959388] [h109:13142:0]            sock.c:325  UCX  ERROR   connect(fd=32, dest_addr=10.246.0.123:49139) failed: No route to host
[h43:13067] ../../../../../../ompi/mca/pml/ucx/pml_ucx.c:419  Error: ucp_ep_create(proc=46) failed: Destination is unreachable
[h110:13082] ../../../../../../ompi/mca/pml/ucx/pml_ucx.c:472  Error: Failed to resolve UCX endpoint for rank 113
[h23:13039] *** An error occurred in MPI_Barrier
[1796231825.177384] [h106:13056:0]            sock.c:325  UCX  ERROR connect(fd=31, dest_addr=10.246.0.120:44225) failed: Connection refused
[1796231825.193996] [h106:13056:0]          tcp_ep.c:1150 UCX  ERROR try to increase "net.core.somaxconn", "net.core.netdev_max_backlog", "net.ipv4.tcp_max_syn_backlog" to the maximum value on the remote node or increase UCX_TCP_MAX_CONN_RETRIES (=25)
`, []Fault{
			{Local: "h110", PeerAddr: "10.246.0.124", Said: "connect() to 10.246.0.124:59879 failed: No route to host (UCX)"},
			{Local: "h109", PeerAddr: "10.246.0.123", Said: "connect() to 10.246.0.123:49139 failed: No route to host (UCX)"},
			{Local: "h106", PeerAddr: "10.246.0.120", Said: "connect() to 10.246.0.120:44225 failed: Connection refused (UCX)"},
		}},
		{"nothing said", "# Out of bounds values : 0 OK\n", nil},
	} {
		if got := CollectiveFaults(tc.out); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n%+v\nwant\n%+v", tc.name, got, tc.want)
		}
	}
}

func FuzzCollectiveFaults(f *testing.F) {
	f.Add("  Local host: h3\n  Message:    connect() to 10.0.0.1:1025 failed\n")
	f.Add("h:1:2 [0] NCCL WARN Net : Connect to ::1<5> failed : x\n")
	f.Add("[1.5] [h3:1:0] sock.c:325 UCX ERROR connect(fd=3, dest_addr=10.0.0.1:5) failed: x\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, x := range CollectiveFaults(s) {
			if len(x.Local) > 253 || len(x.Said) > 204 {
				t.Fatalf("unbounded: %+v", x)
			}
		}
	})
}
