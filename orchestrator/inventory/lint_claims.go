package inventory

import (
	"fmt"
	"regexp"
	"strings"
)

// lintClaims flags quoted figures and names that cannot be what the buyer
// will get: a fabric bandwidth the quoted NICs cannot carry (QUOTE-013), a
// GPU model that names a family rather than the SKU sold (QUOTE-014). Both
// passed the lint silently.
func lintClaims(inv *Inventory) []Warning {
	var out []Warning
	if w, ok := busbwOverNICs(inv); ok {
		out = append(out, w)
	}
	if w, ok := gpuModelSKU(inv.Quote.GPUModel); ok {
		out = append(out, w)
	}
	return out
}

// busbwOverNICs: an all-reduce moves each GPU's share over the NICs at
// the wire rate busbw × (k−1)/(n−1) for k nodes and n ranks (DESIGN.md's
// measurement rules), which cannot exceed the NICs' line rate shared by
// the node's GPUs. A figure above that is a tree/NVLS or intra-node
// number (2880 GB/s over 8 × 400 Gb/s NICs), not the fabric's, and the
// window would hold the nodes to what they cannot do. k is the
// inventory's node count; below 2 the most lenient k, 2.
func busbwOverNICs(inv *Inventory) (Warning, bool) {
	q := &inv.Quote
	if q.InterBusBWGBs <= 0 || q.NICsPerNode <= 0 || q.NICGbps <= 0 || q.GPUsPerNode <= 0 {
		return Warning{}, false
	}
	k := max(len(inv.Nodes), 2)
	n := k * q.GPUsPerNode
	nicGBs := float64(q.NICsPerNode) * q.NICGbps / 8
	perGPU := nicGBs / float64(q.GPUsPerNode)
	wire := q.InterBusBWGBs * float64(k-1) / float64(n-1)
	if wire <= perGPU {
		return Warning{}, false
	}
	most := perGPU * float64(n-1) / float64(k-1)
	keys := []string{"quote.inter_busbw_gbs", "quote.nics_per_node", "quote.nic_gbps"}
	msg := fmt.Sprintf("an inter-node busbw of %g GB/s is more than %d × %g Gb/s NICs carry: over %d nodes of %d GPUs it "+
		"is a wire rate of %.4g GB/s per GPU, and the NICs give each GPU %.4g GB/s (busbw at most %.4g GB/s); "+
		"ask which figure it is (NCCL's tree or NVLS, or inside a node?) and quote the ring busbw across nodes",
		q.InterBusBWGBs, q.NICsPerNode, q.NICGbps, k, q.GPUsPerNode, wire, perGPU, most)
	return Warning{ID: "QUOTE-013", Message: msg + " (" + strings.Join(keys, ", ") + ")", Keys: keys}, true
}

// gpuSKU is one GPU sold under a family's name, as nvidia-smi names it.
type gpuSKU struct{ name, what string }

// gpuFamilies are the data-centre GPUs sold as several SKUs that differ
// in memory, power and NVLink; GPU-001 compares the quoted model with
// what nvidia-smi names the GPUs, whole (case aside).
var gpuFamilies = []struct {
	family string
	skus   []gpuSKU
}{
	{"H100", []gpuSKU{{"NVIDIA H100 80GB HBM3", "SXM5, 80 GB, 700 W, NVLink"}, {"NVIDIA H100 PCIe", "80 GB, 350 W"}, {"NVIDIA H100 NVL", "PCIe, 94 GB, 400 W, NVLink bridge"}}},
	{"H200", []gpuSKU{{"NVIDIA H200", "SXM, 141 GB, 700 W, NVLink"}, {"NVIDIA H200 NVL", "PCIe, 141 GB, 600 W, NVLink bridge"}}},
	{"H800", []gpuSKU{{"NVIDIA H800", "SXM5, 80 GB, NVLink"}, {"NVIDIA H800 PCIe", "80 GB"}}},
	{"A100", []gpuSKU{{"NVIDIA A100-SXM4-80GB", "SXM4, 80 GB, 400 W"}, {"NVIDIA A100-SXM4-40GB", "SXM4, 40 GB, 400 W"},
		{"NVIDIA A100 80GB PCIe", "80 GB, 300 W"}, {"NVIDIA A100-PCIE-40GB", "40 GB, 250 W"}}},
	{"A800", []gpuSKU{{"NVIDIA A800-SXM4-80GB", "SXM4, 80 GB"}, {"NVIDIA A800 80GB PCIe", "80 GB"}}},
}

// gpuModelSKU warns when the quoted model names a family ("H100") and not
// one of its SKUs as nvidia-smi names it: the buyer cannot tell what was
// sold, and GPU-001 would fail the right GPU.
func gpuModelSKU(model string) (Warning, bool) {
	m := strings.TrimSpace(model)
	if m == "" {
		return Warning{}, false
	}
	for _, f := range gpuFamilies {
		if !regexp.MustCompile(`(?i)\b` + f.family + `\b`).MatchString(m) {
			continue
		}
		var names []string
		for _, s := range f.skus {
			if strings.EqualFold(m, s.name) {
				return Warning{}, false
			}
			names = append(names, fmt.Sprintf("%q (%s)", s.name, s.what))
		}
		msg := fmt.Sprintf("gpu_model %q does not name a SKU as nvidia-smi does: %s SKUs differ in memory, power and NVLink, "+
			"and GPU-001 compares the name whole; write the one sold: %s", short(m), f.family, strings.Join(names, ", "))
		return Warning{ID: "QUOTE-014", Message: msg + " (quote.gpu_model)", Keys: []string{"quote.gpu_model"}}, true
	}
	return Warning{}, false
}
