package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/scripts/standins"
)

// localInventory is one node, the machine the test runs on, reached
// without SSH; CKPT is replaced by the checkpoint directory.
const localInventory = `provider: this-machine
region: here
window: local-e2e
simulated: true          # the GPU tools are stand-ins on PATH
nodes:
  - {name: here, address: local}
quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  form_factor: SXM
  intra_busbw_gbs: 450
  busbw_size: 1GiB
  price_per_gpu_hour: 2.49
  currency: USD
  billing_granularity: 1m
  driver: "535.183.01"
  cuda: "12.2"
phases:
  allreduce:
    enabled: true
    min_bytes: 64MiB
    max_bytes: 2GiB
    repeats: 2
    timeout: 1m
    bisection:
      enabled: false
  checkpoint:
    enabled: true
    dir: CKPT
    size: 16MiB
    shards: 2
    timeout: 1m
  staging:
    enabled: true
    dir: staging
    sources:
      - {name: dataset, size: 8MiB}
    window: 1m
    fio: false
  deadline: 2m
`

// A whole window on this machine with address: local: no SSH server, the
// GPU tools stand-ins on PATH, preflight, security, staging, the intra-node
// all-reduce and the checkpoint; a report labelled SIMULATED, and nothing
// of the window left on the machine after teardown.
func TestLocalWindowEndToEnd(t *testing.T) {
	work, home, ckpt, inv, run := localMachine(t)
	res := run("run", inv, "--runs-dir", "runs", "--only", "preflight,security,staging,intranode,checkpoint-write,checkpoint-restore")
	if res.code != 0 || !strings.Contains(res.stdout, "ACCEPTED (SIMULATED)") {
		t.Fatalf("exit %d, want 0 and ACCEPTED (SIMULATED)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "here: reached locally, without SSH") || strings.Contains(res.stderr, "windowkey (") {
		t.Errorf("progress: want the node reached locally and no window key:\n%s", res.stderr)
	}
	runs, _ := os.ReadDir(filepath.Join(work, "runs"))
	if len(runs) != 1 {
		t.Fatalf("%d run directories", len(runs))
	}
	id := runs[0].Name()
	dir := filepath.Join(work, "runs", id)
	var rec struct {
		Simulated bool
		Verdicts  []struct{ ID, Node, Status, Measured, Detail, Incomplete string }
	}
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil || json.Unmarshal(data, &rec) != nil {
		t.Fatalf("run.json: %v", err)
	}
	got := map[string]string{}
	for _, v := range rec.Verdicts {
		got[v.ID+" "+v.Node] = v.Status + " " + v.Measured + " | " + v.Detail
	}
	for key, want := range map[string]string{
		"CONN-001 here": "PASS reached locally, without SSH, no host key", "GPU-001 here": "PASS ", "HEALTH-001 here": "PASS ",
		"NCCL-001 here": "PASS ", "NCCL-003 here": "PASS ", "STAGE-001 here": "PASS ",
		"CKPT-001 here": "PASS ", "SEC-001 here": "SKIP not applicable | not applicable: reached locally",
		"SEC-002 here": "PASS ", "SEC-003 here": "PASS ", "SEC-004 here": "PASS ",
	} {
		if !strings.HasPrefix(got[key], want) {
			t.Errorf("%s = %q, want %q...", key, got[key], want)
		}
	}
	if !rec.Simulated {
		t.Error("run.json is not marked simulated")
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "SIMULATED") {
		t.Errorf("report.md not marked SIMULATED (%v)", err)
	}
	if v := run("verify", dir); v.code != 0 {
		t.Errorf("verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	// Nothing of the window is left: no file in the home it worked in or
	// in the checkpoint directory (the directories the buyer named may
	// stay, empty), and no process that carries its run ID.
	for _, root := range []string{home, ckpt} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("left behind after teardown: %s", p)
			}
			return nil
		})
	}
	if _, err := os.Stat(filepath.Join(home, ".gpuaccept", id)); !os.IsNotExist(err) {
		t.Errorf("the window's private directory is still there (%v)", err)
	}
	if out, _ := exec.Command("pgrep", "-af", id).Output(); strings.Contains(string(out), id) {
		t.Errorf("processes of the window outlived it:\n%s", out)
	}
}

// localMachine is this machine as a GPU node: the stand-ins on PATH of a
// home of the test's own, and a one-node inventory at address local; run
// runs gpuaccept there.
func localMachine(t *testing.T) (work, home, ckpt, inv string, run func(args ...string) result) {
	work = t.TempDir()
	bin := filepath.Join(work, "bin")
	home, ckpt = filepath.Join(work, "home"), filepath.Join(work, "ckpt")
	for _, d := range []string{home, ckpt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	argv0 := []string{binary, "standin"}
	if err := standins.Install(bin, "h100", argv0); err != nil {
		t.Fatal(err)
	}
	if err := standins.InstallFabric(bin, argv0); err != nil {
		t.Fatal(err)
	}
	inv = filepath.Join(work, "local.yaml")
	if err := os.WriteFile(inv, []byte(strings.Replace(localInventory, "CKPT", ckpt, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+home, "PATH="+bin+":"+os.Getenv("PATH"),
		standins.FabricEnv+"=here=370/450", standins.FabricNodeEnv+"=here")
	run = func(args ...string) result {
		cmd := exec.CommandContext(t.Context(), binary, args...)
		cmd.Dir, cmd.Env = work, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		var ee *exec.ExitError
		if err := cmd.Run(); err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return result{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
	}
	return work, home, ckpt, inv, run
}

// exec and check --connect reach a local node through the same factory.
func TestLocalExecAndCheckConnect(t *testing.T) {
	_, _, _, inv, run := localMachine(t)
	res := run("exec", inv, "--", "echo", "hi from", "$(nvidia-smi -L | wc -l) GPUs")
	if res.code != 0 || !strings.Contains(res.stdout, "hi from 8 GPUs") || !strings.Contains(res.stdout, "here: exit 0") {
		t.Errorf("exec: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res = run("check", inv); res.code != 0 || !strings.Contains(res.stdout, "reached locally, without SSH") || strings.Contains(res.stdout, "known_hosts") {
		t.Errorf("check of a local node: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run("check", "--connect", inv)
	if res.code != 0 || !strings.Contains(res.stdout, "reached 1 of 1 node(s)") || !strings.Contains(res.stdout, "8 × NVIDIA H100 80GB HBM3") {
		t.Errorf("check --connect: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
