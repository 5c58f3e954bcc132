package orchestrator

import (
	"slices"
	"strings"
)

// A node's GRES may name its GPUs' type (gpu:h100:8): a site's own word,
// or under AutoDetect=nvml the device's name in lower case
// (nvidia_h100_80gb_hbm3). Slurm schedules by it (--gres=gpu:h100:8), so a
// type that names another GPU than the one rented is a node jobs asking
// for the quoted model never get. Only a plain contradiction is judged:
// both names must name a GPU product known here, and the products
// differ; a site's word naming none (gpu:fast:8) is not compared.

// GRESTypes are the types a node's GRES gives its GPUs, each once, in
// order ("gpu:h100:8(S:0-1),gpu:a100:2" → h100, a100); none for an untyped
// "gpu:8".
func GRESTypes(gres string) []string {
	var types []string
	for _, e := range strings.Split(gres, ",") {
		e = strings.TrimSpace(e)
		if i := strings.IndexByte(e, '('); i >= 0 {
			e = e[:i]
		}
		parts := strings.Split(e, ":")
		if parts[0] != "gpu" || len(parts) < 2 {
			continue
		}
		t := parts[1]
		if len(parts) == 2 && isCount(t) {
			continue // gpu:8
		}
		if t != "" && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return types
}

func isCount(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// gpuProducts are the GPU products a model name or a GRES type is held to,
// the longer of two that share a beginning first (a10g before a10).
var gpuProducts = []string{"gb200", "gh200", "b200", "b100", "h200", "h100", "h800", "h20", "a100", "a800", "a40", "a30",
	"a10g", "a16", "a10", "a2", "l40s", "l40", "l4", "v100", "p100", "t4", "mi300x", "mi300a", "mi325x", "mi250x", "mi250",
	"mi210", "mi100"}

// GPUProduct is the GPU product a model name or GRES type names ("NVIDIA
// H100 80GB HBM3", "nvidia_h100_80gb_hbm3", "h100nvl" → h100; "Tesla
// V100-SXM2-32GB" → v100); "" when no word of it names one known.
func GPUProduct(name string) string {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	})
	for _, w := range words {
		if slices.Contains(gpuProducts, w) {
			return w
		}
		// A product with a suffix of letters (h100nvl, h100pcie), never of
		// digits (a100 is not a10).
		for _, p := range gpuProducts {
			if rest, ok := strings.CutPrefix(w, p); ok && rest != "" && (rest[0] < '0' || rest[0] > '9') {
				return p
			}
		}
	}
	return ""
}

// gresTypeContradicts is each of types that names another GPU product
// than model does, in words naming both; nothing when model, or the
// type, names no product known.
func gresTypeContradicts(types []string, model, whose string) []string {
	want := GPUProduct(model)
	if want == "" {
		return nil
	}
	var out []string
	for _, t := range types {
		if got := GPUProduct(t); got != "" && got != want {
			out = append(out, "its GRES type "+t+" is not "+whose+" "+model)
		}
	}
	return out
}

// typeAgrees says whether some type names the GPU product model names.
func typeAgrees(types []string, model string) bool {
	want := GPUProduct(model)
	return want != "" && slices.ContainsFunc(types, func(t string) bool { return GPUProduct(t) == want })
}
