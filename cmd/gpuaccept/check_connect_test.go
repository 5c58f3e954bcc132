package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
	"gpuaccept/remote/sshtest"
	"gpuaccept/scripts/standins"
)

// check --connect reaches real SSH servers, lists what each node has,
// each answer once with its nodes, says why a node was not reached, and
// bounds the window; a node not reached exits 3.
func TestCheckConnectListsTheTools(t *testing.T) {
	dir := t.TempDir()
	servers := probedNodes(t, dir, 3, func(i int, bin string) bool {
		if i == 2 {
			return false // two GPU nodes; the third has none of the GPU tools
		}
		if err := standins.Install(bin, "h100", []string{binary, "standin"}); err != nil {
			t.Fatal(err)
		}
		return true
	})
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var nodes strings.Builder
	for i, s := range servers {
		fmt.Fprintf(&nodes, "  - {name: gpu-%02d, address: %s, port: %d}\n", i+1, s.Host(), s.Port())
	}
	fmt.Fprintf(&nodes, "  - {name: gpu-04, address: 127.0.0.1, port: %d}\n", closed)
	inv := filepath.Join(dir, "inv.yaml")
	os.WriteFile(inv, []byte(`provider: vendor-a
ssh: {user: root, identity_files: [id], known_hosts: [known_hosts], config: none, connect_timeout: 5s}
quote: {gpu_model: NVIDIA H100 80GB HBM3, gpus_per_node: 8, price_per_gpu_hour: 2.5}
nodes:
`+nodes.String()), 0o644)

	t.Setenv("COLUMNS", "100")
	res := gpuaccept(t, dir, "check", "--connect", inv)
	if res.code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	out := res.stdout
	flat := strings.ReplaceAll(out, "\n      ", " ")
	for _, want := range []string{
		"reached 3 of 4 node(s)",
		"not reached  gpu-04: ",
		"connection refused",
		"gpu-[01-02]",
		"missing                                        gpu-03",
		"window: at most ",
		"cost: at most ",
		"32 GPUs × ",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var smi string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  nvidia-smi ") {
			smi = line
		}
		if len([]rune(line)) > 100 {
			t.Errorf("wider than 100 columns: %q", line)
		}
	}
	if !strings.Contains(smi, "driver ") || !strings.Contains(smi, "8 × NVIDIA H100") || !strings.HasSuffix(smi, "gpu-[01-02]") {
		t.Errorf("nvidia-smi line %q", smi)
	}
	if !strings.Contains(res.stderr, "not reached") {
		t.Errorf("exit 3 without saying why on stderr:\n%s", res.stderr)
	}
}

// probedNodes starts n in-process SSH nodes, each with a home of its own
// under dir; setup fills node i's bin directory and says whether it is on
// the node's PATH. The buyer's key is dir/id, the nodes' host keys are in
// dir/known_hosts; the nodes stop with the test.
func probedNodes(t *testing.T, dir string, n int, setup func(i int, bin string) bool) []*sshtest.Server {
	t.Helper()
	key, err := remote.NewWindowKey("buyer")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "id"), key.PrivatePEM, 0o600)
	var servers []*sshtest.Server
	for i := range n {
		home := filepath.Join(dir, fmt.Sprintf("home-%d", i))
		bin := filepath.Join(home, "bin")
		os.MkdirAll(bin, 0o755)
		path := os.Getenv("PATH")
		if setup(i, bin) {
			path = bin + ":" + path
		}
		srv, err := sshtest.Start(sshtest.Options{AuthorizedKeyLines: []string{key.AuthorizedKey}, Dir: home,
			Env: []string{"PATH=" + path, "HOME=" + home}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		servers = append(servers, srv)
	}
	if err := sshtest.WriteKnownHosts(filepath.Join(dir, "known_hosts"), servers...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// A node may print anything: its answers are parsed by section, escaped,
// clipped, and a section the probe does not ask for is ignored.
func TestToolAnswersOfAHostileNode(t *testing.T) {
	out := "@@ nvidia-smi\n550.54.15, NVIDIA H100 80GB HBM3\n550.54.15, NVIDIA H100 80GB HBM3\n\n@@ rc 0\n" +
		"@@ dcgmi\nVersion : 3.3.5\nBuild ID : 14\n\n@@ rc 0\n" +
		"@@ mpirun\nmpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n\n@@ rc 0\n" +
		"@@ all_reduce_perf\n@@ missing\n" +
		"@@ podman\n\x1b[31mpodman version 4.3.1\n@@ rc 0\n" +
		"@@ docker\n@@ missing\n" +
		"@@ python3\nPython 3.11.2\n\n@@ rc 0\n" +
		"@@ torch\nTraceback (most recent call last):\nModuleNotFoundError: No module named 'torch'\n\n@@ rc 1\n" +
		"@@ torchrun\n2.6.0+cpu\n\n@@ rc 0\n" +
		"@@ kernel\n" + strings.Repeat("x", 500) + "\n@@ rc 0\n" +
		"@@ injected\nanything\n"
	got := toolAnswers([]byte(out))
	for tool, want := range map[string]string{
		"nvidia-smi":      "driver 550.54.15, 2 × NVIDIA H100 80GB HBM3",
		"dcgmi":           "3.3.5",
		"mpirun":          "Open MPI 4.1.4",
		"all_reduce_perf": "missing",
		"podman":          "4.3.1",
		"docker":          "missing",
		"python3":         "3.11.2",
		"torch":           "fails (exit 1): ModuleNotFoundError: No module named 'torch'",
		"torchrun":        "torch.distributed.run, torch 2.6.0+cpu",
	} {
		if got[tool] != want {
			t.Errorf("%s: %q, want %q", tool, got[tool], want)
		}
	}
	if k := got["kernel"]; len([]rune(k)) != 120 || !strings.HasSuffix(k, "…") {
		t.Errorf("kernel not clipped: %d runes", len([]rune(k)))
	}
	if _, ok := got["injected"]; ok {
		t.Error("a section the probe did not ask for was kept")
	}
	if a := summarize("nvidia-smi", []string{"\x1b]0;pwned\x07"}, "0"); strings.ContainsAny(a, "\x1b\x07") {
		t.Errorf("control characters printed: %q", a)
	}
	// An exit status line is a number, or the node's own text, not printed.
	if a := toolAnswers([]byte("@@ dcgmi\nboom\n@@ rc \x1b]0;pwned\x07\n"))["dcgmi"]; strings.ContainsAny(a, "\x1b\x07") || a != "fails (exit ?): boom" {
		t.Errorf("a hostile exit status: %q", a)
	}
}

// The bound is priced as the invoice will bill it: at 1 h granularity a
// window bounded at 3 h 30 min is 4 whole hours a node (a new user saw
// the bound priced per second, some 400 EUR under the invoice).
func TestBoundCostRoundsToTheBillingStep(t *testing.T) {
	inv := &inventory.Inventory{Nodes: make([]inventory.Node, 4), Quote: inventory.Quote{GPUsPerNode: 8,
		PricePerGPUHr: 26.28, Currency: "EUR", Billing: "1h"}}
	b := orchestrator.WindowBound{Total: 3*time.Hour + 30*time.Minute}
	cost, what, ok := boundCost(inv, b)
	if !ok || fmt.Sprintf("%.2f", cost) != "3363.84" || what != "32 GPUs × 4.00 h (to whole 1h) × 26.28 EUR per GPU-hour" {
		t.Errorf("%.2f %q %v", cost, what, ok)
	}
	inv.Quote.Billing = ""
	if cost, what, _ = boundCost(inv, b); fmt.Sprintf("%.2f", cost) != "2943.36" || strings.Contains(what, "whole") {
		t.Errorf("per second: %.2f %q", cost, what)
	}
}
