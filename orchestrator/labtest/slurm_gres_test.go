package labtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

// withGRES gives the lab's Slurm nodes GPU GRES for the test (perNode
// GPUs each, those in on their own count) and takes it off after: the
// next test finds plain Slurm. (t.Context is cancelled before the
// cleanups run.)
func withGRES(t *testing.T, l *lab.Lab, perNode int, on map[string]int) {
	t.Helper()
	if err := l.SlurmGRES(t.Context(), perNode, on); err != nil {
		t.Fatal(err)
	}
	withoutGRESAfter(t, l)
}

// withoutGRESAfter puts the lab's Slurm back without GRES when the test
// ends.
func withoutGRESAfter(t *testing.T, l *lab.Lab) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := l.Slurm(ctx); err != nil {
			t.Errorf("the lab's Slurm without GRES again: %v", err)
		}
	})
}

// logVerdicts prints id's verdict line for each node, as the card has it.
func logVerdicts(t *testing.T, r *record.Run, id string, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		v := verdict(r, id, n)
		t.Logf("%s %s: %s measured %q quoted %q: %s", id, n, v.Status, v.Measured, v.Quoted, v.Detail)
	}
}

// TestSlurmGRESSaysFewerGPUs: a window in its own allocation of h[1-3],
// where Slurm's GRES says h3 has 4 GPUs while the quote and nvidia-smi
// (the stand-in's H100 node) say 8: SLURM-003 FAILs h3 naming both counts
// and PASSes h1 and h2, whose GRES says 8.
func TestSlurmGRESSaysFewerGPUs(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	withGRES(t, l, 8, map[string]int{"h3": 4})
	prepare(t, l, nil)
	inv := allocatingInventory(t, l, "  allocate: {nodelist: \"h[1-3]\"}\n", "")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,teardown")
	r := readRun(t, runDir(t, runs))
	s := r.Slurm
	if s == nil || s.JobID == "" || s.Cancelled.IsZero() || len(s.Nodes) != 3 {
		t.Fatalf("exit %d: allocation %+v", res.code, s)
	}
	for _, n := range s.Nodes {
		want := map[string]string{"h1": "gpu:8", "h2": "gpu:8", "h3": "gpu:4"}[n.Name]
		if !strings.HasPrefix(n.GRES, want) {
			t.Errorf("%s: Slurm's GRES %q, want %s", n.Name, n.GRES, want)
		}
	}
	logVerdicts(t, r, "SLURM-003", "h1", "h2", "h3")
	logVerdicts(t, r, "GPU-002", "h3")
	for _, h := range []string{"h1", "h2"} {
		if v := verdict(r, "SLURM-003", h); v.Status != record.Pass || v.Detail != "as quoted and as nvidia-smi saw" {
			t.Errorf("SLURM-003 %s: %s %q", h, v.Status, v.Detail)
		}
	}
	v := verdict(r, "SLURM-003", "h3")
	if v.Status != record.Fail || v.Measured != "GRES gpu:4: 4 GPU(s)" || v.Detail != "Slurm schedules 4; the quote says 8, nvidia-smi saw 8" {
		t.Errorf("SLURM-003 h3: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if v := verdict(r, "GPU-002", "h3"); v.Status != record.Pass {
		t.Errorf("GPU-002 h3: %s %q: the node itself has the 8 GPUs quoted", v.Status, v.Detail)
	}
	t.Logf("exit %d; card:\n%s", res.code, res.stdout)
	if res.code == 0 {
		t.Error("a window whose node's GRES says fewer GPUs accepted")
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
}

// TestSlurmNodeDrainedWhileTheWindowHoldsIt: Slurm drains h2 with a
// reason right after the window's allocation of h[1-3] was granted (its
// nodes journaled), while every node was in service. The window reads
// the nodes again before it gives the job back: SLURM-002 FAILs h2 with
// the drain and its reason, and PASSes h1 and h3.
func TestSlurmNodeDrainedWhileTheWindowHoldsIt(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	setups := map[string]nodeSetup{}
	for _, h := range []string{"h1", "h2", "h3"} {
		setups[h] = nodeSetup{profile: "h100", slowDiag: 3 * time.Second}
	}
	prepare(t, l, setups)
	inv := allocatingInventory(t, l, "  allocate: {nodelist: \"h[1-3]\"}\n", "")
	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,diag,teardown")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = l.Exec(context.Background(), "h1", "scontrol", "update", "nodename=h2", "state=resume")
	})
	waitFor(t, 60*time.Second, "the allocation journaled", func() bool {
		js, _ := filepath.Glob(filepath.Join(runs, "*", "journal.jsonl"))
		for _, j := range js {
			if b, _ := os.ReadFile(j); bytes.Contains(b, []byte(`"key":"allocation"`)) {
				return true
			}
		}
		return false
	})
	if out, err := l.Exec(t.Context(), "h1", "scontrol", "update", "nodename=h2", "state=drain", "reason=GPU 3 fell off the bus"); err != nil {
		t.Fatalf("drain h2: %v %s", err, out)
	}
	err := cmd.Wait()
	t.Logf("gpuaccept run: %v; stderr ends:\n%s", err, tail(stderr.String(), 3000))
	r := readRun(t, runDir(t, runs))
	s := r.Slurm
	if s == nil || s.Cancelled.IsZero() || len(s.Nodes) != 3 {
		t.Fatalf("allocation %+v", s)
	}
	for _, n := range s.Nodes {
		t.Logf("%s: %s when granted, %s at the window's end (%s)", n.Name, n.State, n.StateAtEnd, n.ReasonAtEnd)
	}
	logVerdicts(t, r, "SLURM-002", "h1", "h2", "h3")
	if n := s.Nodes[1]; n.Name != "h2" || strings.Contains(n.State, "DRAIN") {
		t.Errorf("h2 was drained before its grant was read: %+v", n)
	}
	v := verdict(r, "SLURM-002", "h2")
	if v.Status != record.Fail || !strings.Contains(v.Measured, "DRAIN") ||
		!strings.HasPrefix(v.Detail, "DRAIN (GPU 3 fell off the bus [") || !strings.HasSuffix(v.Detail, "while the window held it (in service when granted)") {
		t.Errorf("SLURM-002 h2: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	for _, h := range []string{"h1", "h3"} {
		if v := verdict(r, "SLURM-002", h); v.Status != record.Pass || v.Detail != "in service when granted and at the window's end" {
			t.Errorf("SLURM-002 %s: %s %q", h, v.Status, v.Detail)
		}
	}
	if !strings.Contains(stderr.String(), "slurm: h2 is DRAIN now (GPU 3 fell off the bus") {
		t.Error("the window did not say h2 was drained")
	}
	t.Logf("card:\n%s", stdout.String())
	if cmd.ProcessState.ExitCode() == 0 {
		t.Error("a window with a node drained while it held it accepted")
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
}

// TestSrunWindowWithGRES: the lab's Slurm with GPU GRES (8 a node, h3's
// 4), first as Slurm 22.05 itself does it: an exclusive job holds every
// GPU of each node implicitly (the job's GRES per node as each node's
// says), a step that asks for none sees none (no CUDA_VISIBLE_DEVICES),
// and a step may ask for no more than the job's smallest node has, even on
// a node with more. Then a whole srun window over h[2-5] on hosts that
// take no SSH from the coordinator: its steps (srun --overlap, no --gres)
// still reach every node, and SLURM-003 names h3.
func TestSrunWindowWithGRES(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	withGRES(t, l, 8, map[string]int{"h3": 4})
	out, err := l.Exec(t.Context(), "h1", "sh", "-c", `set -u
salloc --no-shell -J gpuaccept-gres-probe -w 'h[2-3]' --exclusive --time=2 2>&1
j=$(squeue -h -n gpuaccept-gres-probe -o %i)
scontrol show job -d "$j" | grep -E 'JOB_GRES|Nodes=h'
echo "no --gres on h2: [$(srun --jobid="$j" --overlap -w h2 -N1 -n1 sh -c 'echo ${CUDA_VISIBLE_DEVICES:-}')]"
echo "--gres=gpu:4 on h2: [$(srun --jobid="$j" --overlap -w h2 -N1 -n1 --gres=gpu:4 sh -c 'echo ${CUDA_VISIBLE_DEVICES:-}')]"
echo "--gres=gpu:8 on h2: [$(srun --jobid="$j" --overlap -w h2 -N1 -n1 --gres=gpu:8 sh -c 'echo ${CUDA_VISIBLE_DEVICES:-}' 2>&1)]"
scancel "$j"`)
	t.Logf("Slurm 22.05 with GRES h2 gpu:8, h3 gpu:4, an exclusive job of both:\n%s", out)
	if err != nil {
		t.Fatalf("the probe: %v", err)
	}
	for _, want := range []string{"JOB_GRES=gpu:12", "Nodes=h2 CPU_IDs=", "GRES=gpu:8(IDX:0-7)", "GRES=gpu:4(IDX:0-3)",
		"no --gres on h2: []", "--gres=gpu:4 on h2: [0,1,2,3]", "more than the job's gres_per_node=gpu:4"} {
		if !strings.Contains(out, want) {
			t.Errorf("the probe did not say %q", want)
		}
	}
	waitFor(t, 20*time.Second, "the probe's job gone", func() bool { return slurmQueue(t, l) == "" })

	prepare(t, l, nil)
	noSSHFromTheCoordinator(t, l, srunHosts)
	inv := srunInventory(t, l, "")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,teardown")
	r := readRun(t, runDir(t, runs))
	if r.Slurm == nil || r.Slurm.Cancelled.IsZero() || len(r.Nodes) != len(srunHosts) {
		t.Fatalf("exit %d: allocation %+v", res.code, r.Slurm)
	}
	for i, n := range r.Nodes {
		if v := verdict(r, "CONN-001", n.Name); v.Status != record.Pass || !strings.Contains(v.Detail+v.Measured, "srun") {
			t.Errorf("CONN-001 %s: %s %q %q", n.Name, v.Status, v.Measured, v.Detail)
		}
		if pr := phaseData(t, r, "preflight", i, new(any)); pr.Outcome != record.OK {
			t.Errorf("preflight on %s: %s %s", n.Name, pr.Outcome, pr.Error)
		}
	}
	logVerdicts(t, r, "SLURM-003", srunHosts...)
	logVerdicts(t, r, "SLURM-002", srunHosts...)
	for _, h := range srunHosts {
		want := record.Pass
		if h == "h3" {
			want = record.Fail
		}
		if v := verdict(r, "SLURM-003", h); v.Status != want {
			t.Errorf("SLURM-003 %s: %s %q, want %s", h, v.Status, v.Detail, want)
		}
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
	nothingLeft(t, l)
}

// TestSlurmGRESTypeNamesAnotherGPU: the lab's Slurm says h1 and h2 hold
// gpu:h100:8 and h3 gpu:a100:8, while the quote and nvidia-smi (the
// stand-in's H100 node) say H100: SLURM-003 FAILs h3 naming its type and
// both models, and PASSes h1 and h2, saying their type names the model's
// GPU.
func TestSlurmGRESTypeNamesAnotherGPU(t *testing.T) {
	l := needLab(t)
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.SlurmGRESSpec(t.Context(), "gpu:h100:8", map[string]string{"h3": "gpu:a100:8"}); err != nil {
		t.Fatal(err)
	}
	withoutGRESAfter(t, l)
	prepare(t, l, nil)
	inv := allocatingInventory(t, l, "  allocate: {nodelist: \"h[1-3]\"}\n", "")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,preflight,teardown")
	r := readRun(t, runDir(t, runs))
	if r.Slurm == nil || len(r.Slurm.Nodes) != 3 {
		t.Fatalf("exit %d: allocation %+v", res.code, r.Slurm)
	}
	logVerdicts(t, r, "SLURM-003", "h1", "h2", "h3")
	for _, h := range []string{"h1", "h2"} {
		if v := verdict(r, "SLURM-003", h); v.Status != record.Pass || !strings.HasPrefix(v.Measured, "GRES gpu:h100:8") ||
			v.Detail != "as quoted and as nvidia-smi saw; its GRES type names the model's GPU" {
			t.Errorf("SLURM-003 %s: %s %q %q", h, v.Status, v.Measured, v.Detail)
		}
	}
	v := verdict(r, "SLURM-003", "h3")
	if v.Status != record.Fail || !strings.HasPrefix(v.Measured, "GRES gpu:a100:8") || v.Detail != "Slurm schedules 8; "+
		"its GRES type a100 is not the quote's NVIDIA H100 80GB HBM3, its GRES type a100 is not nvidia-smi's NVIDIA H100 80GB HBM3" {
		t.Errorf("SLURM-003 h3: %s %q %q", v.Status, v.Measured, v.Detail)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
}
