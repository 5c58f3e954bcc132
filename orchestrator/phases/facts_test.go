package phases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

const samples = "../../scripts/standins/samples"

func sample(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(samples, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// preflightOutput frames outputs as preflight.sh does; rc 127 marks a tool
// that is not installed.
func preflightOutput(sections map[string]string, rc map[string]int) string {
	var b strings.Builder
	for _, name := range []string{"hostname", "machine-id", "kernel", "os-release", "cpu", "meminfo", "nvidia-smi-L", "nvidia-smi-query", "nvidia-smi-q", "nvidia-smi-topo", "dcgmi-discovery", "ibstat", "ibv_devinfo", "kernel-log", "neigh-limit"} {
		out, ok := sections[name]
		if !ok {
			continue
		}
		b.WriteString("@@gpuaccept@@ begin " + name + "\n" + out)
		// As the real script: the marker follows the output directly, so an
		// output without a final newline shares its last line.
		b.WriteString("@@gpuaccept@@ end " + name + " rc=" + itoa(rc[name]) + "\n")
	}
	return b.String()
}

func h100(t *testing.T) map[string]string {
	return map[string]string{
		"hostname":         "gpu-01\n",
		"machine-id":       "3d1219c7c4c5404aaa1f6d2a48adfda4\n",
		"nvidia-smi-L":     listOf(8),
		"nvidia-smi-query": "index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB\n",
		"kernel":           "5.15.0-105-generic\n",
		"os-release":       "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n",
		"cpu":              "model name\t: Intel(R) Xeon(R) Platinum 8480+\n224\n",
		"meminfo":          "MemTotal:       2113389512 kB\n",
		"nvidia-smi-q":     sample(t, "nvidia-smi/gpud-q-8xH100-535.183.01-cuda12.2.txt"),
		"nvidia-smi-topo":  sample(t, "nvidia-smi/topo-m-8xH100-NV18-6xmlx5-tabs-empty-cpu-affinity.txt"),
		"dcgmi-discovery":  sample(t, "dcgmi/discovery-l-8x-h800.txt"),
		"ibstat":           sample(t, "ib/gpud-ibstat-h100-node-12ca-roce-ethernet-all-active.txt"),
	}
}

func TestFactsFromAHealthyH100Node(t *testing.T) {
	out := preflightOutput(h100(t), map[string]int{"ibv_devinfo": 127})
	f := factsFrom(splitSections(out))
	if f.GPUCount != 8 || f.GPUModel != "NVIDIA H100 80GB HBM3" || f.GPUMemoryMiB != 81559 ||
		f.Driver != "535.183.01" || f.CUDA != "12.2" || f.FormFactor != "SXM" || !f.NVLink {
		t.Fatalf("facts %+v", f)
	}
	if f.OS != "Ubuntu 22.04.4 LTS" || f.CPUs != 224 || f.MemoryGiB < 2015 || f.Hostname != "gpu-01" {
		t.Errorf("host facts %+v", f)
	}
	// The ibstat sample has no final newline: its last port must still count.
	if len(f.NICs) != 12 || f.DCGMDevices != 8 {
		t.Errorf("%d NIC ports, %d DCGM devices", len(f.NICs), f.DCGMDevices)
	}
	// Each port carries its adapter's firmware (for gpuaccept diff).
	for _, p := range f.NICs {
		if want := map[string]string{"mlx5_0": "28.39.1002", "mlx5_1": "22.39.1002"}[p.Device]; want != "" && p.Firmware != want {
			t.Errorf("%s firmware %q, want %q", p.Device, p.Firmware, want)
		} else if p.Firmware == "" {
			t.Errorf("%s: no firmware", p.Device)
		}
	}
	if len(f.Problems) != 0 {
		t.Errorf("problems: %v", f.Problems)
	}
	if err := f.usable(); err != nil {
		t.Error(err)
	}
}

func TestFactsOfABrokenNode(t *testing.T) {
	s := h100(t)
	s["nvidia-smi-q"] = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
	s["nvidia-smi-L"] = s["nvidia-smi-q"]
	s["ibv_devinfo"] = "ibv_devinfo: not installed\n"
	f := factsFrom(splitSections(preflightOutput(s, map[string]int{"nvidia-smi-q": 9, "nvidia-smi-L": 9, "ibv_devinfo": 127})))
	err := f.usable()
	if err == nil || !strings.Contains(err.Error(), "no GPU found") || !strings.Contains(err.Error(), "exit 9") {
		t.Fatalf("usable: %v (problems %v)", err, f.Problems)
	}
	// A tool that is not installed is a fact, not a problem.
	if len(f.Missing) != 1 || f.Missing[0] != "ibv_devinfo" {
		t.Errorf("missing %v", f.Missing)
	}
}

func TestFormFactorEvidence(t *testing.T) {
	for _, c := range []struct {
		names  []string
		nvlink bool
		want   string
	}{
		{[]string{"Tesla P100-PCIE-16GB"}, false, "PCIe"},
		{[]string{"NVIDIA A100-SXM4-80GB"}, false, "SXM"},
		{[]string{"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}, true, "SXM"},
		{[]string{"NVIDIA L40S", "NVIDIA L40S"}, true, ""}, // a bridged pair proves nothing
		{[]string{"NVIDIA H100 80GB HBM3"}, false, ""},
	} {
		f := &Facts{NVLink: c.nvlink, GPUCount: len(c.names)}
		for _, n := range c.names {
			f.GPUs = append(f.GPUs, GPUFact{Name: n})
		}
		if got, _ := formFactor(f); got != c.want {
			t.Errorf("%v nvlink=%v: %q, want %q", c.names, c.nvlink, got, c.want)
		}
	}
}

func TestNICVerdictCountsOnlyQuotedSpeed(t *testing.T) {
	f := &Facts{}
	for i := 0; i < 8; i++ {
		f.NICs = append(f.NICs, NICFact{Device: "mlx5_" + itoa(i), Port: 1, State: "Active", RateGbps: 400})
	}
	f.NICs = append(f.NICs, NICFact{Device: "mlx5_8", Port: 1, State: "Active", RateGbps: 100})
	q := inventory.Quote{NICsPerNode: 8, NICGbps: 400}
	if v := nicVerdict("n", f, q, 0.9); v.Status != record.Pass {
		t.Errorf("8 × 400 up plus a front-end port: %+v", v)
	}
	f.NICs[3].State = "Down"
	if v := nicVerdict("n", f, q, 0.9); v.Status != record.Fail || !strings.Contains(v.Detail, "mlx5_3/1 Down") {
		t.Errorf("one of the 8 down: %+v", v)
	}
}

func TestModalIsStable(t *testing.T) {
	facts := map[int]*Facts{0: {Driver: "a"}, 1: {Driver: "b"}, 2: {Driver: "b"}, 3: {Driver: "a"}}
	for i := 0; i < 20; i++ {
		if got := modal(facts, func(f *Facts) string { return f.Driver }); got != "a" {
			t.Fatalf("tie went to %q, want the lowest node's", got)
		}
	}
}

func listOf(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("GPU " + itoa(i) + ": NVIDIA H100 80GB HBM3 (UUID: GPU-0d9a3b48-4b3c-4f2a-9c7e-2f1f3a8b8d1" + itoa(i) + ")\n")
	}
	return b.String()
}
