package labtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gpuaccept/orchestrator/record"
)

// TestAllReduceOnShapedLinks runs the window's all-reduce over two lab
// hosts whose links are capped at 200 Mbit/s, with the MPI stand-in for
// all_reduce_perf, and prints busbw against the cap's TCP goodput.
func TestAllReduceOnShapedLinks(t *testing.T) {
	l := needLab(t)
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Fatalf("the all-reduce stand-in needs mpicc (make deps installs libopenmpi-dev): %v", err)
	}
	bin := t.TempDir() // /tmp is shared by the lab hosts
	if out, err := exec.Command("bash", "../../scripts/standins/nccl/build.sh", bin).CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in: %v\n%s", err, out)
	}
	prepare(t, l, nil)
	hosts := []string{"h1", "h2"}
	for _, h := range hosts {
		if err := os.Symlink(filepath.Join(bin, "all_reduce_perf"), filepath.Join(l.BinDir(h), "all_reduce_perf")); err != nil {
			t.Fatal(err)
		}
		if err := l.Cap(t.Context(), h, "200mbit"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, h := range hosts {
			_ = l.Uncap(context.Background(), h)
			os.Remove(filepath.Join(l.BinDir(h), "all_reduce_perf"))
		}
	})
	// What 200 Mbit/s carries as TCP payload (LAB.md: 95.5% of the cap).
	const goodput = 0.2 / 8 * 0.955 // GB/s
	inv := writeInventory(t, l, hosts,
		"  inter_busbw_gbs: 0.023875\n  busbw_size: 4MiB\n",
		`  allreduce:
    enabled: true
    min_bytes: 4MiB
    max_bytes: 16MiB
    iters: 3
    warmup: 1
    repeats: 2
    ranks_per_node: 1
    timeout: 3m
    mpi_args: [--mca, pml, ob1, --mca, btl, "tcp,self", --mca, btl_tcp_if_include, eth0, --mca, oob_tcp_if_include, eth0, --mca, btl_tcp_links, "2"]
`)
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	correct, bw := verdict(r, "NCCL-001", ""), verdict(r, "NCCL-002", "")
	if correct.Status != record.Pass || bw.Ratio == nil {
		t.Fatalf("exit %d; NCCL-001 %+v; NCCL-002 %+v\n%s", res.code, correct, bw, res.stderr)
	}
	t.Logf("2 hosts at 200 Mbit/s: %s; busbw / TCP goodput = %.2f (NCCL-002 %s)", bw.Measured, *bw.Ratio*0.023875/goodput, bw.Status)
	if _, err := os.Stat(filepath.Join(dir, "raw", "h1", "allreduce.log")); err != nil {
		t.Errorf("the benchmark's own output is not in the evidence: %v", err)
	}
	nothingLeft(t, l)
}
