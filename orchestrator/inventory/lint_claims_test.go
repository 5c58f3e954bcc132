package inventory

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A quoted inter-node busbw the quoted NICs cannot carry is flagged: 2880
// GB/s over 8 × 400 Gb/s passed silently. The bound follows the per-GPU
// wire rate busbw × (k−1)/(n−1) for the inventory's k nodes.
func TestLintBusBWOverNICs(t *testing.T) {
	for _, c := range []struct {
		nodes            int
		busbw, gbps      float64
		nics, gpus       int
		warn             bool
		wire, perGPU, at string
	}{
		{nodes: 4, busbw: 2880, nics: 8, gbps: 400, gpus: 8, warn: true, wire: "278.7", perGPU: "50", at: "516.7"},
		{nodes: 1, busbw: 2880, nics: 8, gbps: 400, gpus: 8, warn: true, wire: "192", perGPU: "50", at: "750"},
		{nodes: 256, busbw: 450, nics: 8, gbps: 400, gpus: 8, warn: true, wire: "56.06", perGPU: "50", at: "401.4"},
		{nodes: 256, busbw: 370, nics: 8, gbps: 400, gpus: 8},
		{nodes: 4, busbw: 170, nics: 8, gbps: 200, gpus: 8},
		{nodes: 4, busbw: 10, nics: 1, gbps: 100, gpus: 4},
		{nodes: 4, busbw: 20, nics: 1, gbps: 100, gpus: 4, warn: true, wire: "4", perGPU: "3.125", at: "15.62"},
		{nodes: 4, busbw: 2880, gpus: 8}, // no NICs quoted: QUOTE-003 says so
	} {
		inv := cleanInventory(t)
		inv.Nodes = make([]Node, c.nodes)
		q := &inv.Quote
		q.InterBusBWGBs, q.NICsPerNode, q.NICGbps, q.GPUsPerNode = c.busbw, c.nics, c.gbps, c.gpus
		var got []Warning
		for _, w := range LintQuote(inv) {
			if w.ID == "QUOTE-013" {
				got = append(got, w)
			}
		}
		name := fmt.Sprintf("%d nodes, %g GB/s over %d x %g Gb/s", c.nodes, c.busbw, c.nics, c.gbps)
		if !c.warn {
			if len(got) > 0 {
				t.Errorf("%s: %+v", name, got)
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: no QUOTE-013", name)
			continue
		}
		m := got[0].Message
		for _, want := range []string{
			fmt.Sprintf("an inter-node busbw of %g GB/s is more than %d × %g Gb/s NICs carry", c.busbw, c.nics, c.gbps),
			"a wire rate of " + c.wire + " GB/s per GPU", "each GPU " + c.perGPU + " GB/s", "busbw at most " + c.at + " GB/s",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("%s: %q lacks %q", name, m, want)
			}
		}
		checkWarnings(t, got)
	}
}

// A GPU model that names a family, not the SKU sold, is flagged and says
// what to write; nvidia-smi's own names are not.
func TestLintGPUModelSKU(t *testing.T) {
	for model, want := range map[string]string{
		"H100":                  `gpu_model "H100" does not name a SKU as nvidia-smi does: H100 SKUs differ in memory, power and NVLink, and GPU-001 compares the name whole; write the one sold: "NVIDIA H100 80GB HBM3" (SXM5, 80 GB, 700 W, NVLink), "NVIDIA H100 PCIe" (80 GB, 350 W), "NVIDIA H100 NVL" (PCIe, 94 GB, 400 W, NVLink bridge) (quote.gpu_model)`,
		"NVIDIA H100":           `"NVIDIA H100 80GB HBM3" (SXM5`,
		"H100 SXM5 80GB":        `"NVIDIA H100 80GB HBM3" (SXM5`,
		"h200":                  `"NVIDIA H200" (SXM, 141 GB`,
		"A100 80GB":             `"NVIDIA A100-SXM4-80GB" (SXM4, 80 GB`,
		"NVIDIA H100 80GB HBM3": "",
		"nvidia h100 pcie":      "",
		"NVIDIA H200":           "",
		"NVIDIA A100-SXM4-80GB": "",
		"NVIDIA L40S":           "",
		"NVIDIA GH100":          "",
	} {
		inv := cleanInventory(t)
		inv.Quote.GPUModel = model
		got := LintQuote(inv)
		if want == "" {
			if len(got) > 0 {
				t.Errorf("%s: %+v", model, got)
			}
			continue
		}
		if len(got) != 1 || got[0].ID != "QUOTE-014" || !reflect.DeepEqual(got[0].Keys, []string{"quote.gpu_model"}) || !strings.Contains(got[0].Message, want) {
			t.Errorf("%s: %+v, want QUOTE-014 with %q", model, got, want)
		}
		checkWarnings(t, got)
	}
}
