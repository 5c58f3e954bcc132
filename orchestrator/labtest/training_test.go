package labtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/workload"
	"gpuaccept/scripts/lab"
)

var trainingHosts = []string{"h1", "h2", "h3"}

// TestTrainingNamesTheSlowedHost: a real DDP job (PyTorch, gloo on CPU)
// over three lab hosts under torchrun, h3's worker capped at a tenth of a
// CPU by a cgroup quota: the training phase names h3 the straggler on its compute
// time (WORK-009 FAILs there, after its retest), the others pass, and
// every host's figures are there: time to the first step, the steady
// step split into compute and all-reduce wait, throughput; nothing is
// left running.
func TestTrainingNamesTheSlowedHost(t *testing.T) {
	l := needLab(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if out, err := l.Exec(t.Context(), "h1", "/usr/bin/python3", "-c", "import torch.distributed.run"); err != nil {
		t.Skipf("the lab's python3 has no torch (apt-get install python3-torch): %v %s", err, out)
	}
	prepare(t, l, nil)
	inv := writeInventory(t, l, trainingHosts, "", `  workload:
    enabled: true
    kind: training
    timeout: 6m
    training:
      python: /usr/bin/python3
      procs_per_node: 1
      steps: 20
      warmup: 5
      hidden: 512
      batch: 64
      straggler_ratio: 1.5
`)
	slowWorkers(t, l, "h3", 10)
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,training,teardown")
	dir := runDir(t, runs)
	r := readRun(t, dir)
	var tr workload.Training
	pr := phaseData(t, r, "training", -1, &tr)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("exit %d, stderr:\n%s", res.code, res.stderr)
		for _, h := range trainingHosts {
			b := rawLog(dir, h, "training")
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("raw/%s/training.log.gz (end, unpacked):\n%s", h, b)
		}
	})
	if pr.Outcome != record.OK {
		t.Fatalf("training: %s %s", pr.Outcome, pr.Error)
	}
	t.Logf("world %d, median step %.3f s, straggler %q, %d run(s), unit %s", tr.World, tr.MedianStepSecs, tr.Straggler, max(len(tr.Runs), 1), tr.Unit)
	for _, n := range tr.Nodes {
		t.Logf("%s: first step %s (rendezvous %s), %d steps, step p50 %.3f s, compute p50 %s, wait p50 %s, %s %s, %d error(s)",
			n.Node, secs(n.FirstStepSecs), secs(n.RendezvousSecs), n.Steps, n.StepSecs.P50, distP50(n.ComputeSecs), distP50(n.WaitSecs),
			perSec(n.PerSec), tr.Unit, n.Errors)
	}
	for _, id := range []string{"WORK-001", "WORK-008", "WORK-009", "WORK-010", "WORK-011"} {
		for _, h := range trainingHosts {
			v := verdict(r, id, h)
			t.Logf("%s %s %s %s %s", id, h, v.Status, v.Measured, v.Detail)
		}
	}
	if tr.Straggler != "h3" || tr.World != 3 || tr.Unit != "samples/s" {
		t.Errorf("straggler %q, world %d, unit %q", tr.Straggler, tr.World, tr.Unit)
	}
	for _, n := range tr.Nodes {
		if n.Steps != 20 || n.StepSecs.N == 0 || n.ComputeSecs == nil || n.WaitSecs == nil || n.PerSec == nil || *n.PerSec <= 0 ||
			n.FirstStepSecs == nil || n.RendezvousSecs == nil || n.Errors != 0 {
			t.Errorf("%s: figures missing: %+v", n.Node, n)
		}
	}
	if v := verdict(r, "WORK-009", "h3"); v.Status != record.Fail || !strings.HasPrefix(v.Measured, "straggler: ") || v.Retest == nil {
		t.Errorf("WORK-009 h3: %s %q (retest %+v)", v.Status, v.Measured, v.Retest)
	}
	for _, h := range []string{"h1", "h2"} {
		if v := verdict(r, "WORK-009", h); v.Status != record.Pass {
			t.Errorf("WORK-009 %s: %s %q", h, v.Status, v.Measured)
		}
		if v := verdict(r, "WORK-011", h); v.Status != record.Pass {
			t.Errorf("WORK-011 %s: %s %q %s", h, v.Status, v.Measured, v.Detail)
		}
	}
	nothingLeft(t, l)
}

func distP50(d *workload.Dist) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f s", d.P50)
}

func perSec(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g", *p)
}

// slowWorkers caps host's training workers (the processes running
// ddp_train.py, not the torchrun agent that launches them) at percent of
// one CPU with a cgroup's CPU quota (cgroup v2's cpu.max, v1's
// cpu.cfs_quota_us), in 10 ms periods so that a short step cannot slip
// through unthrottled. A watcher moves each worker into the group as it
// appears, so that the host's sshd, the agent and the rendezvous run at
// full speed: capping the whole host made one run of 20 steps take three
// minutes, most of it importing torch twice at a tenth of a CPU. Undone
// when the test ends.
func slowWorkers(t *testing.T, l *lab.Lab, host string, percent int) {
	t.Helper()
	const period = 10000 // µs
	quota := period * percent / 100
	var dir, root string
	switch {
	case exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
		root = "/sys/fs/cgroup/cpu"
		dir = filepath.Join(root, "gpuaccept-"+l.Name+"-"+host)
		mkCgroup(t, dir)
		write(t, filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(period))
		write(t, filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(quota))
	case controllerOn("/sys/fs/cgroup", "cpu"):
		root = "/sys/fs/cgroup"
		dir = filepath.Join(root, "gpuaccept-"+l.Name+"-"+host)
		mkCgroup(t, dir)
		write(t, filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quota, period))
	default:
		t.Skip("no cgroup CPU controller to slow a host with")
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	var moved atomic.Int32
	go func() {
		defer close(done)
		seen := map[string]bool{}
		for ctx.Err() == nil {
			ps, _ := l.Ps(ctx, host)
			for _, line := range strings.Split(ps, "\n") {
				f := strings.Fields(line)
				if len(f) < 4 || seen[f[0]] || !strings.Contains(line, "ddp_train.py") || strings.Contains(line, "torch.distributed.run") {
					continue
				}
				if os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(f[0]), 0o644) == nil {
					seen[f[0]] = true
					moved.Add(1)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		// Back to the root group, whatever the group still holds, then the
		// group goes.
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0o644)
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("cgroup %s: %v", dir, err)
		}
		t.Logf("%s: %d training worker(s) capped at %d%% of a CPU (%s)", host, moved.Load(), percent, dir)
	})
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func controllerOn(root, c string) bool {
	b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	return err == nil && strings.Contains(" "+string(b)+" ", " "+c+" ")
}

func mkCgroup(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		t.Skipf("cannot make a cgroup to slow a host with: %v", err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
