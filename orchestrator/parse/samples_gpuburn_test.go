package parse

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGPUBurnSamples: every genuine gpu-burn output in the shared samples,
// each with what its summary says (SOURCES.md there).
func TestGPUBurnSamples(t *testing.T) {
	want := map[string]GPUBurn{
		"sb-gpuburn-8xA100-80gb-doubles-tc-pass-cr-progress.txt": {Summary: true, Tested: 8},
		"gpuburn12-16gpu-faulty-negative-error-counts-warning-summary-excerpt.txt": {Summary: true, Tested: 16,
			Faulty: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		"gpuburn52-4xK80-load-module-error-died-negative-errors-excerpt.txt": {},
		"gpuburn8-1xK80-azure-10s-pass-no-final-summary.txt":                 {},
		"gpuburn124-1xA2000-newer-no-progress-lines-sigterm-ok.txt":          {Summary: true, Tested: 1},
	}
	files, err := filepath.Glob(filepath.Join(samplesRoot, "gpu-burn", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no gpu-burn samples under %s (want the shared samples at /work/shared/samples): %v", samplesRoot, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: a sample with no expectation here", filepath.Base(f))
			continue
		}
		got := ParseGPUBurn(string(b))
		if got.Summary != w.Summary || got.Tested != w.Tested || !slices.Equal(got.Faulty, w.Faulty) {
			t.Errorf("%s: %+v, want %+v", filepath.Base(f), got, w)
		}
	}
	// Hostile: a summary line claiming a GPU past any node's, or garbage.
	if g := ParseGPUBurn("Tested 99999 GPUs:\n\tGPU 1: FAULTY\n\tGPU x: FAULTY\n"); g.Summary || len(g.Faulty) != 0 {
		t.Errorf("out-of-range summary read as %+v", g)
	}
}
