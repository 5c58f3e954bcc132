package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

func TestGRESTypes(t *testing.T) {
	for gres, want := range map[string]string{
		"gpu:h100:8(S:0-1)": "h100", "gpu:8": "", "gpu": "", "gpu:h100:4,gpu:a100:2(S:1)": "h100 a100", "gpu:h100:4,gpu:h100:4": "h100",
		"nic:2,gpu:nvidia_h100_80gb_hbm3:8": "nvidia_h100_80gb_hbm3", "mps:100": "", "": "", "gpu:a100-sxm4-80gb:4": "a100-sxm4-80gb",
	} {
		if got := strings.Join(GRESTypes(gres), " "); got != want {
			t.Errorf("%q: %q, want %q", gres, got, want)
		}
	}
}

func TestGPUProduct(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3": "h100", "nvidia_h100_80gb_hbm3": "h100", "h100": "h100", "H100 NVL": "h100", "h100nvl": "h100",
		"NVIDIA A100-SXM4-80GB": "a100", "a100-sxm4-80gb": "a100", "NVIDIA A10G": "a10g", "NVIDIA A10": "a10", "a10": "a10",
		"Tesla V100-SXM2-32GB": "v100", "NVIDIA L40S": "l40s", "NVIDIA L4": "l4", "NVIDIA H200": "h200", "NVIDIA GH200 480GB": "gh200",
		"AMD Instinct MI300X": "mi300x", "NVIDIA B200": "b200",
		"fast": "", "": "", "Quadro RTX 8000": "", "80gb": "", "a1000": "", "h1000": "",
	} {
		if got := GPUProduct(name); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}

// SLURM-003 holds the GRES type to the quote's model and nvidia-smi's: a
// type naming another GPU FAILs naming both; one naming the same passes
// and says so; an untyped GRES, or a site's word naming no GPU known, is
// not judged on its type; the count is held as before.
func TestGRESTypeJudged(t *testing.T) {
	h100 := inventory.Quote{GPUsPerNode: 8, GPUModel: "NVIDIA H100 80GB HBM3"}
	smi := func(model string, n int) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"gpu_model": model, "gpu_count": n})
		return b
	}
	for _, c := range []struct {
		name   string
		gres   string
		q      inventory.Quote
		facts  json.RawMessage
		status record.Status
		detail string
	}{
		{"same", "gpu:h100:8(S:0-1)", h100, smi("NVIDIA H100 80GB HBM3", 8), record.Pass,
			"as quoted and as nvidia-smi saw; its GRES type names the model's GPU"},
		{"autodetected name", "gpu:nvidia_h100_80gb_hbm3:8", h100, smi("NVIDIA H100 80GB HBM3", 8), record.Pass,
			"as quoted and as nvidia-smi saw; its GRES type names the model's GPU"},
		{"untyped", "gpu:8", h100, smi("NVIDIA H100 80GB HBM3", 8), record.Pass, "as quoted and as nvidia-smi saw"},
		{"a site's word", "gpu:fast:8", h100, smi("NVIDIA H100 80GB HBM3", 8), record.Pass, "as quoted and as nvidia-smi saw"},
		{"another GPU", "gpu:a100:8", h100, smi("NVIDIA H100 80GB HBM3", 8), record.Fail,
			"Slurm schedules 8; its GRES type a100 is not the quote's NVIDIA H100 80GB HBM3, its GRES type a100 is not nvidia-smi's NVIDIA H100 80GB HBM3"},
		{"type and count", "gpu:a100:4", h100, nil, record.Fail,
			"Slurm schedules 4; the quote says 8, its GRES type a100 is not the quote's NVIDIA H100 80GB HBM3"},
		{"nvidia-smi's model only", "gpu:h100:8", inventory.Quote{GPUsPerNode: 8}, smi("NVIDIA A100-SXM4-80GB", 8), record.Fail,
			"Slurm schedules 8; its GRES type h100 is not nvidia-smi's NVIDIA A100-SXM4-80GB"},
		{"mixed GPUs", "gpu:h100:8", inventory.Quote{GPUsPerNode: 8}, smi("mixed: NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3", 8), record.Pass,
			"as quoted and as nvidia-smi saw"},
		{"no model named", "gpu:a100:8", inventory.Quote{GPUsPerNode: 8}, nil, record.Pass, "as quoted (nvidia-smi's count not measured)"},
		{"a type but no count held", "gpu:h100:8", inventory.Quote{GPUModel: "H100"}, nil, record.Skip,
			"nothing to hold it to: no quote.gpus_per_node, and nvidia-smi's count not measured (preflight); its GRES type names the model's GPU"},
	} {
		v := gresVerdict(record.SlurmNode{Name: "g1", GRES: c.gres}, c.q, c.facts)
		if v.Status != c.status || v.Detail != c.detail {
			t.Errorf("%s: %s %q\nwant %s %q", c.name, v.Status, v.Detail, c.status, c.detail)
		}
	}
}
