package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"gpuaccept/orchestrator/parse"
	"gpuaccept/remote"
	"gpuaccept/scripts/standins"
)

// The demo's nodes answer the NCCL phases' command lines, over SSH and through their own PATH, from the fabric
// model: gpu-03's inter-node links at half the quote, everything else at the quote.
func TestDemoNodesRunTheFabricModel(t *testing.T) {
	inv, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	servers, err := demoNodes(t.TempDir(), binary, inv, demoFabric(inv.Nodes, hw, 0), "")
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: inv.SSH.KnownHosts})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*remote.Client{}
	for _, n := range inv.Nodes {
		c, err := remote.Dial(t.Context(), *inv.NodeConfig(n, hk).SSH)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[n.Name] = c
	}
	fabric, err := standins.ParseFabric("gpu-01=370/450,gpu-02=370/450,gpu-03=185/450,gpu-04=370/450")
	if err != nil {
		t.Fatal(err)
	}
	if got := standins.FormatFabric(demoFabric(inv.Nodes, hw, 0)); got != standins.FormatFabric(fabric) {
		t.Fatalf("demo fabric %q", got)
	}

	run := func(node, command string) parse.NCCL {
		t.Helper()
		out, err := clients[node].Output(t.Context(), command)
		if err != nil {
			t.Fatalf("%s: %s: %v", node, command, err)
		}
		n, err := parse.NCCLTests(string(out))
		if err != nil || !n.OK {
			t.Fatalf("%s: %s: parse: %v\n%s", node, command, err, out)
		}
		for _, r := range n.Ranks {
			if r.Name != standins.ModelDeviceName {
				t.Fatalf("%s: rank %+v: not the model's device", node, r)
			}
		}
		return n
	}
	// check: the ranks are where they were asked to be, and the largest row's busbw is the model's, which is
	// about link GB/s at that size.
	check := func(what string, n parse.NCCL, program string, hosts []string, link float64) {
		t.Helper()
		if len(n.Ranks) != len(hosts) {
			t.Fatalf("%s: %d ranks, want %d", what, len(n.Ranks), len(hosts))
		}
		for i, r := range n.Ranks {
			if r.Rank != i || r.Host != hosts[i] {
				t.Errorf("%s: rank %d on %s, want %s", what, r.Rank, r.Host, hosts[i])
			}
		}
		last := n.Rows[len(n.Rows)-1]
		want, err := standins.FabricBusBW(fabric, program, hosts, last.Size)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []float64{last.OOP.BusBW, last.IP.BusBW} {
			if math.Abs(got-want) > 0.011*want || got < 0.97*link || got > 1.011*link {
				t.Errorf("%s: busbw %.2f at %d bytes, model %.2f, link %g GB/s", what, got, last.Size, want, link)
			}
		}
	}
	ranksOn := func(perHost int, hosts ...string) []string {
		var out []string
		for _, h := range hosts {
			for range perHost {
				out = append(out, h)
			}
		}
		return out
	}
	sweep := "-b 1048576 -e 8589934592 -f 2 -n 20 -w 5 -c 1 -g 1"
	root := `ROOT=; [ "$(id -u)" = 0 ] && ROOT=--allow-run-as-root; `

	// Cluster-wide, from the first node: every collective over all four nodes runs at gpu-03's rate.
	all := []string{"gpu-01", "gpu-02", "gpu-03", "gpu-04"}
	for _, prog := range []string{"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"} {
		n := run("gpu-01", root+"mpirun $ROOT -np 32 -H gpu-01:8,gpu-02:8,gpu-03:8,gpu-04:8 -x GPUACCEPT_RUN -x NCCL_DEBUG=INFO "+
			"-x NCCL_DEBUG_SUBSYS=INIT,TUNING --tag-output /opt/nccl-tests/build/"+prog+" "+sweep)
		check(prog+" over 4 nodes", n, prog, ranksOn(8, all...), 185)
		if prog == "all_reduce_perf" && (len(n.Algorithms) == 0 || !strings.Contains(n.Algorithms[0], "Bytes -> Algo 1 proto 2")) {
			t.Errorf("all_reduce over 4 nodes: tuner lines %q", n.Algorithms)
		}
	}
	// The healthy three reach the quote.
	n := run("gpu-02", root+"mpirun $ROOT -np 24 -H gpu-01:8,gpu-02:8,gpu-04:8 -x NCCL_ALGO=Ring all_reduce_perf "+sweep)
	check("all_reduce over the healthy nodes", n, "all_reduce_perf", ranksOn(8, "gpu-01", "gpu-02", "gpu-04"), 370)

	// Pairwise, from the first node of each pair: any pair with gpu-03 at half rate.
	for _, pair := range [][2]string{{"gpu-01", "gpu-02"}, {"gpu-01", "gpu-03"}, {"gpu-02", "gpu-04"}, {"gpu-03", "gpu-04"}} {
		link := 370.0
		if pair[0] == "gpu-03" || pair[1] == "gpu-03" {
			link = 185
		}
		n := run(pair[0], root+fmt.Sprintf("mpirun $ROOT -np 16 -H %s:8,%s:8 -x NCCL_ALGO=Ring all_reduce_perf %s", pair[0], pair[1], sweep))
		check("all_reduce "+pair[0]+"+"+pair[1], n, "all_reduce_perf", ranksOn(8, pair[0], pair[1]), link)
		n = run(pair[0], root+fmt.Sprintf("mpirun $ROOT -np 2 -H %s:1,%s:1 sendrecv_perf -b 1M -e 8G -f 2 -n 20 -w 5 -c 1 -g 1", pair[0], pair[1]))
		check("sendrecv "+pair[0]+"+"+pair[1], n, "sendrecv_perf", []string{pair[0], pair[1]}, link)
	}

	// Intra-node, on each node, without mpirun: NVLink is sound everywhere, gpu-03 included.
	for _, node := range all {
		n := run(node, "all_reduce_perf -b 1M -e 8G -f 2 -n 20 -w 5 -c 1 -g 8")
		check("intra "+node, n, "all_reduce_perf", ranksOn(8, node), 450)
	}

	// What the phases rely on from mpirun: the slot check, and a node outside the window.
	out, err := clients["gpu-01"].Output(t.Context(), root+"mpirun $ROOT -np 17 -H gpu-01:8,gpu-02:8 all_reduce_perf 2>&1")
	if ee, ok := err.(*remote.ExitError); !ok || ee.Status != 1 || !strings.Contains(string(out), "There are not enough slots available in the system to satisfy the 17") {
		t.Errorf("slots: %v\n%s", err, out)
	}
	out, err = clients["gpu-01"].Output(t.Context(), root+"mpirun $ROOT -np 2 -H gpu-01:1,gpu-05:1 all_reduce_perf 2>&1")
	if ee, ok := err.(*remote.ExitError); !ok || ee.Status != 1 || !strings.Contains(string(out), "ORTE was unable to reliably start one or more daemons") {
		t.Errorf("unknown host: %v\n%s", err, out)
	}
}

// demo --nodes N runs N simulated nodes; one and two are the degenerate
// windows (the only node quarantined; one node left for the cluster
// tests): each ends NOT ACCEPTED with every requirement a row of its own
// (no empty one), in 100 columns, and a count out of range is bad input.
func TestDemoOfOneAndTwoNodes(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	for _, n := range []string{"1", "2"} {
		dir := t.TempDir()
		res := gpuaccept(t, dir, "demo", "--nodes", n, "--runs-dir", "runs")
		if res.code != 1 {
			t.Fatalf("--nodes %s: exit %d\n%s\n%s", n, res.code, res.stdout, res.stderr)
		}
		want := map[string]string{"1": "1 node: 0 accepted, 1 quarantined (gpu-01)", "2": "2 nodes: 1 accepted, 1 quarantined (gpu-02)"}[n]
		if !strings.Contains(res.stdout, want) {
			t.Errorf("--nodes %s: no %q in\n%s", n, want, res.stdout)
		}
		for _, line := range strings.Split(res.stdout, "\n") {
			if strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "NCCL-001          PASS    cluster") {
				t.Errorf("--nodes %s: a row for nothing: %q\n%s", n, line, res.stdout)
			}
			if len([]rune(line)) > 100 {
				t.Errorf("--nodes %s: wider than 100 columns: %q", n, line)
			}
		}
	}
	for _, bad := range []string{"0", "2001"} {
		if res := gpuaccept(t, t.TempDir(), "demo", "--nodes", bad); res.code != 2 || !strings.Contains(res.stderr, "--nodes "+bad) {
			t.Errorf("--nodes %s: exit %d\n%s", bad, res.code, res.stderr)
		}
	}
}
