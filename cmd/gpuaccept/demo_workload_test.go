package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/scripts/standins"
)

// --workload inference is the embedded demo with the load test's keys, read
// and checked as an inventory is (defaults filled by its validation);
// none is the demo unchanged; anything else is bad input.
func TestDemoWorkloadInventory(t *testing.T) {
	inv, _, err := demoInventoryFor("", "inference")
	if err != nil {
		t.Fatal(err)
	}
	w := inv.Phases.Workload
	in := w.Inference
	if !w.Enabled || w.Kind != "inference" || !demoInference(inv) {
		t.Fatalf("phases.workload: %+v", w)
	}
	wantCmd := []string{"standin", "openai-server", "--port", "{port}", "--model", "demo-model", "--ready-after", "1s",
		"--overrides", demoOverridesFile}
	if !slices.Equal(in.Command, wantCmd) || in.Model != "demo-model" ||
		!slices.Equal(in.Levels, []string{"concurrency:1", "concurrency:8"}) || in.Duration != 2*time.Second ||
		in.Warmup != 500*time.Millisecond || in.InputTokens.Mean != 128 || in.OutputTokens.Mean != 32 {
		t.Errorf("phases.workload.inference: %+v", in)
	}
	// The validation's defaults: the inventory went through it.
	if in.Port != inventory.DefaultInferencePort || in.HealthPath != "/health" || in.MetricsPath != "/metrics" || in.ServersPerNode != 1 {
		t.Errorf("defaults not filled: %+v", in)
	}
	a := inv.Acceptance.Workload
	if a.TTFT != 100*time.Millisecond || a.Percentile != 95 || a.At != "concurrency:8" || a.Ready != 30*time.Second ||
		a.ErrorRate == nil || *a.ErrorRate != 0.01 {
		t.Errorf("acceptance.workload: %+v", a)
	}

	plain, _, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	none, _, err := demoInventoryFor("", "none")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(none, plain) || plain.Phases.Workload.Enabled {
		t.Errorf("--workload none is not the demo as it was")
	}
	// Everything but the load test is the demo's.
	inv.Phases.Workload, inv.Acceptance.Workload = plain.Phases.Workload, plain.Acceptance.Workload
	inv.Path, inv.Digest = plain.Path, plain.Digest
	if !reflect.DeepEqual(inv, plain) {
		t.Errorf("--workload inference changed more than the load test")
	}

	// With --quote, the quote is the file's and the load test stays.
	quote := filepath.Join(t.TempDir(), "q.yaml")
	os.WriteFile(quote, []byte("quote:\n  gpu_model: NVIDIA H100 80GB HBM3\n  gpus_per_node: 8\n  inter_busbw_gbs: 360\n"), 0o644)
	q, _, err := demoInventoryFor(quote, "inference")
	if err != nil {
		t.Fatal(err)
	}
	if q.Quote.InterBusBWGBs != 360 || !demoInference(q) || q.Acceptance.Workload.TTFT != 100*time.Millisecond {
		t.Errorf("--quote with --workload: quote %+v, workload %+v", q.Quote, q.Phases.Workload)
	}

	tr, _, err := demoInventoryFor("", "training")
	if err != nil {
		t.Fatal(err)
	}
	if !demoTraining(tr) || demoInference(tr) || tr.Phases.Workload.Training.Steps != 12 {
		t.Errorf("--workload training: %+v", tr.Phases.Workload)
	}
	for _, bad := range []string{"bogus", ""} {
		if err := checkDemoWorkload(bad); err == nil || !strings.Contains(err.Error(), "one of none, inference, training") {
			t.Errorf("--workload %q: %v", bad, err)
		}
	}
	if res := gpuaccept(t, t.TempDir(), "demo", "--workload", "bogus"); res.code != 2 || !strings.Contains(res.stderr, `--workload "bogus": one of none, inference, training`) {
		t.Errorf("demo --workload bogus: exit %d %q", res.code, res.stderr)
	}
}

// demo --serve --workload inference writes an inventory that loads with the
// load test, in the window's image (the demo's, loaded by the image phase).
func TestDemoServedInventoryKeepsTheWorkload(t *testing.T) {
	inv, hw, err := demoInventoryFor("", "inference")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	servers, err := demoNodes(work, binary, inv, demoFabric(inv.Nodes, hw, 0), "")
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	data, err := demoServedInventory(inv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(work, "served.yaml")
	os.WriteFile(path, data, 0o600)
	got, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !demoInference(got) || got.Phases.Workload.Image != "" || got.Image.Reference != inv.Image.Reference ||
		got.Acceptance.Workload.TTFT != inv.Acceptance.Workload.TTFT {
		t.Errorf("served inventory's load test: %+v %+v", got.Phases.Workload, got.Acceptance.Workload)
	}
}

// Each demo node has its own loopback address, a standin on its PATH and its
// server's overrides in its home (gpu-03's slow); a server started over SSH
// through the simulated podman, detached, answers at that node's address.
func TestDemoNodesServeInference(t *testing.T) {
	inv, hw, err := demoInventoryFor("", "inference")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	servers, err := demoNodes(work, binary, inv, demoFabric(inv.Nodes, hw, 0), "")
	defer func() {
		for _, s := range servers {
			s.Close()
		}
		demoKillContainers(work, inv.Nodes)
	}()
	if err != nil {
		t.Fatal(err)
	}
	hk, err := remote.NewHostKeys(remote.HostKeyOptions{Files: inv.SSH.KnownHosts})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*remote.Client{}
	for i, n := range inv.Nodes {
		c, err := remote.Dial(t.Context(), *inv.NodeConfig(n, hk).SSH)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[n.Name] = c
		out, err := c.Output(t.Context(), "echo $"+standins.LoopbackEnv+"; command -v standin; cat "+demoOverridesFile)
		want := fmt.Sprintf("127.0.1.%d\n%s\n{}\n", i+1, filepath.Join(work, n.Name, "bin", "standin"))
		if i == demoSlow {
			want = fmt.Sprintf("127.0.1.%d\n%s\n%s\n", i+1, filepath.Join(work, n.Name, "bin", "standin"), demoSlowServer)
		}
		if err != nil || string(out) != want {
			t.Errorf("%s: %v %q, want %q", n.Name, err, out, want)
		}
	}
	if demoLoopback(253) != "127.0.1.254" || demoLoopback(254) != "127.0.2.1" || demoLoopback(1999) != "127.0.8.222" {
		t.Errorf("loopback addresses of a fleet: %s %s %s", demoLoopback(253), demoLoopback(254), demoLoopback(1999))
	}

	// The server stand-in is another part of issue 26: until it is on this
	// branch, standin answers "unknown tool" for it.
	c := clients["gpu-03"]
	if out, _ := c.Output(t.Context(), "standin openai-server --help 2>&1"); strings.Contains(string(out), "unknown tool") {
		t.Skip("standin openai-server (scripts/standins/openai) is not on this branch yet: " + strings.TrimSpace(string(out)))
	}
	if out, err := c.Output(t.Context(), "podman load -q -i "+remote.Quote(inv.Image.Archive)+" 2>&1"); err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	port := 18000 + os.Getpid()%1000
	run := fmt.Sprintf("podman run -d --name srv --label gpuaccept.window=t --network host --device nvidia.com/gpu=all %s standin openai-server --port %d --model demo-model --ready-after 0s --overrides %s",
		remote.Quote(inv.Image.Reference), port, demoOverridesFile)
	out, err := c.Output(t.Context(), run)
	if err != nil || len(strings.TrimSpace(string(out))) != 64 {
		t.Fatalf("%s: %v %q", run, err, out)
	}
	url := fmt.Sprintf("http://127.0.1.3:%d/v1/models", port)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&models)
			resp.Body.Close()
			if err == nil && len(models.Data) == 1 && models.Data[0].ID == "demo-model" {
				break
			}
		}
		if time.Now().After(deadline) {
			logs, _ := c.Output(t.Context(), "podman logs srv 2>&1")
			t.Fatalf("%s: %v %+v\n%s", url, err, models, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := c.Output(t.Context(), "podman rm -f srv"); err != nil || string(out) != "srv\n" {
		t.Errorf("rm -f: %v %q", err, out)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("%s answers after rm -f", url)
	}
}

// The whole demo with the inference load test: gpu-03's slow server fails
// WORK-002 (p95 TTFT) and every other node that ran it passes (gpu-04 is
// quarantined by its diagnostic before the load test).
func TestDemoInferenceNamesTheSlowServer(t *testing.T) {
	if !slices.ContainsFunc(phases.All(), func(p orchestrator.Phase) bool { return p.Name == "inference" }) {
		t.Skip(`phases.All() has no "inference" phase yet (issue 26's inference part): nothing would run the load test`)
	}
	began := time.Now()
	res := gpuaccept(t, t.TempDir(), "demo", "--workload", "inference", "--runs-dir", "runs", "-o", "json")
	t.Logf("demo --workload inference: %v", time.Since(began).Round(100*time.Millisecond))
	if res.code != 1 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var rec struct {
		Verdicts []record.Verdict `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil {
		t.Fatalf("%v\n%.500s", err, res.stdout)
	}
	passed := 0
	for _, v := range rec.Verdicts {
		// gpu-04's diagnostic fails: quarantined, it runs no load test.
		if v.ID != "WORK-002" || v.Node == "" || v.Node == "gpu-04" && v.Status == record.Skip {
			continue
		}
		switch {
		case v.Node == "gpu-03" && v.Status != record.Fail:
			t.Errorf("gpu-03's slow server: WORK-002 %s (%s; %s)", v.Status, v.Measured, v.Detail)
		case v.Node != "gpu-03" && v.Status != record.Pass:
			t.Errorf("%s: WORK-002 %s (%s; %s)", v.Node, v.Status, v.Measured, v.Detail)
		case v.Node != "gpu-03":
			passed++
		}
	}
	if passed == 0 {
		t.Errorf("no healthy node's WORK-002 passed:\n%s", res.stderr)
	}
}

// The demo with the training load test, that phase alone: gpu-03 computes
// 1.5 times slower and is named the straggler (WORK-009 FAIL, retested);
// every other node passes, and carries no retest history of its own (the
// job ran again for gpu-03, nothing of theirs failed).
func TestDemoTrainingNamesTheStraggler(t *testing.T) {
	began := time.Now()
	res := gpuaccept(t, t.TempDir(), "demo", "--workload", "training", "--only", "training", "--runs-dir", "runs", "-o", "json")
	t.Logf("demo --workload training --only training: %v", time.Since(began).Round(100*time.Millisecond))
	if res.code != 1 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var rec struct {
		Verdicts []record.Verdict `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil {
		t.Fatalf("%v\n%.500s", err, res.stdout)
	}
	seen := map[string]record.Status{}
	for _, v := range rec.Verdicts {
		if v.ID != "WORK-009" {
			continue
		}
		seen[v.Node] = v.Status
		switch {
		case v.Node == "gpu-03" && (v.Status != record.Fail || v.Retest == nil || len(v.Retest.Runs) != 2):
			t.Errorf("gpu-03, the straggler: WORK-009 %s (%s), retest %+v", v.Status, v.Measured, v.Retest)
		case v.Node != "gpu-03" && (v.Status != record.Pass || v.Retest != nil):
			t.Errorf("%s: WORK-009 %s (%s), retest %+v", v.Node, v.Status, v.Measured, v.Retest)
		}
	}
	if len(seen) != 4 {
		t.Errorf("WORK-009 on %v, want every one of the 4 nodes\n%s", seen, res.stderr)
	}
}
