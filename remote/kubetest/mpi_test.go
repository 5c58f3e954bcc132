package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// A window over two of the lab's nodes, one pod on each: mpirun in the
// first pod reaches the second through the window's own SSH server there
// (the lab image's OpenSSH, a port of the window's on the pod's address,
// only the window's key), and the cluster all-reduce is measured with the
// MPI stand-in for nccl-tests, from host to host over the pods' host
// network. Afterwards no pod of the window is left, and with it its
// servers.
func TestMpirunBetweenPods(t *testing.T) {
	k := needKube(t)
	if len(k.Nodes) < 2 || len(k.NodeIPs) < 2 {
		t.Skipf("the lab's cluster has one node (%v): kube.sh up --nodes 2", k.Nodes)
	}
	bin := t.TempDir()
	if out, err := exec.CommandContext(t.Context(), "bash", "../../scripts/standins/nccl/build.sh", bin).CombinedOutput(); err != nil {
		t.Fatalf("the nccl-tests stand-in: %v\n%s", err, out)
	}
	dir := t.TempDir()
	// One rank a pod over TCP on the nodes' own addresses: the lab's pods
	// share this machine's network, where Open MPI would also find the
	// lab's other bridges. mpirun starts in the first node's pod, which
	// Open MPI tells apart from the others here (kube.sh's notes).
	subnet := k.NodeIPs[0][:strings.LastIndexByte(k.NodeIPs[0], '.')] + ".0/24"
	// The image as a user pins it: by its manifest's digest, held by the
	// nodes (no registry in the lab), nothing overridden by the dialer.
	path := writeInventory(t, dir, k, `image: {reference: "`+k.ImageRef+`"}
simulated: true
quote: {gpus_per_node: 4}
phases:
  allreduce:
    enabled: true
    min_bytes: 1MiB
    max_bytes: 2MiB
    iters: 2
    warmup: 1
    repeats: 1
    ranks_per_node: 1
    timeout: 2m
    mpi_args: [--mca, pml, ob1, --mca, btl, "tcp,self", --mca, btl_tcp_if_include, "`+subnet+`", --mca, oob_tcp_if_include, "`+subnet+`"]
`, "  nodes: ["+k.Nodes[0]+", "+k.Nodes[1]+"]\n  image_pull_policy: Never\n")
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, c remote.Config) (remote.Executor, error) {
		e, err := remote.DialNode(ctx, c)
		if err != nil {
			return nil, err
		}
		// The pods share this machine's host name: each names its node
		// for the stand-in, as a real node's host name would.
		name := strings.NewReader(c.Kube.Node + "\n")
		if _, err := e.UploadFrom(ctx, name, name.Size(), "/etc/gpuaccept-standin-hostname", remote.TransferOptions{Mode: 0o644}); err != nil {
			e.Close()
			return nil, fmt.Errorf("%s: the stand-in's host name: %w", c.Name, err)
		}
		for _, b := range []string{"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"} {
			if _, err := e.Upload(ctx, filepath.Join(bin, b), "/usr/local/bin/"+b, remote.TransferOptions{Mode: 0o755}); err != nil {
				e.Close()
				return nil, fmt.Errorf("%s: the stand-in: %w", c.Name, err)
			}
		}
		return e, nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	rec, runDir, err := orchestrator.Start(ctx, inv, phases.All(), orchestrator.Options{
		RunsDir: filepath.Join(dir, "runs"), Dial: dial, Selection: &orchestrator.Selection{Only: []string{"windowkey", "allreduce"}},
		Progress: orchestrator.NewProgress(logWriter{t}, false),
	})
	if rec == nil {
		t.Fatalf("no run: %v", err)
	}
	for _, v := range rec.Verdicts {
		if v.Status == record.Fail {
			t.Errorf("%s %s FAIL %s | %s", v.ID, v.Node, v.Measured, v.Detail)
		}
	}
	for i, n := range inv.Nodes {
		var ki phases.KeyInstalled
		found := false
		for _, p := range rec.Phases {
			if p.Phase == "windowkey" && p.Index == i && len(p.Data) > 0 {
				found = json.Unmarshal(p.Data, &ki) == nil
			}
		}
		if !found || ki.SSHD == nil || ki.SSHD.Unmeasured != "" || ki.SSHD.Address != k.NodeIPs[i] || ki.SSHD.Port == 0 {
			t.Errorf("%s: the pod's sshd %+v (found %v; %s)", n.Name, ki.SSHD, found, runDir)
		} else {
			t.Logf("%s: the window's sshd at %s:%d, host key %s", n.Name, ki.SSHD.Address, ki.SSHD.Port, ki.SSHD.HostKey)
		}
	}
	var correct, bw record.Verdict
	for _, v := range rec.Verdicts {
		switch v.ID {
		case "NCCL-001":
			correct = v
		case "NCCL-002":
			bw = v
		}
	}
	t.Logf("NCCL-001 %s %s; NCCL-002 %s %s | %s %s", correct.Status, correct.Measured, bw.Status, bw.Measured, bw.Detail, bw.Incomplete)
	// No bandwidth is quoted: the figure is measured and not judged.
	if correct.Status != record.Pass || bw.Value == nil || !strings.Contains(bw.Measured, "GB/s") {
		t.Errorf("the cluster all-reduce over the pods was not measured: NCCL-001 %+v; NCCL-002 %+v (%s)", correct, bw, runDir)
	}
	list, err := clientset(t, k).CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: rec.Kubernetes.Label})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after the window the API lists %d pods with %s (%v)", len(list.Items), rec.Kubernetes.Label, err)
	}
}

// logWriter is the test's log as a window's progress writer.
type logWriter struct{ t *testing.T }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
