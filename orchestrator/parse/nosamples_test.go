package parse

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This test binary run where no shared samples are beside it: every fuzz
// target skips, saying why, and the sample tests fail loudly.
func TestWithoutTheSharedSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	dir := filepath.Join(t.TempDir(), "a", "b", "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(pattern string) (string, error) {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", pattern, "-test.v")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("^Fuzz")
	if err != nil || strings.Contains(out, "--- FAIL") {
		t.Errorf("fuzz targets without the samples: %v\n%s", err, out)
	}
	for _, f := range []string{"FuzzNvidiaSmiQ", "FuzzDCGMDiag", "FuzzNCCLTests", "FuzzFio"} {
		if !strings.Contains(out, "--- SKIP: "+f) {
			t.Errorf("%s did not skip:\n%s", f, out)
		}
	}
	if !strings.Contains(out, "no shared samples at ../../../shared/samples") {
		t.Errorf("no reason given:\n%s", out)
	}
	out, err = run("^TestSamplesAllCovered$")
	if err == nil || !strings.Contains(out, "sample directory ../../../shared/samples/nvidia-smi is missing") {
		t.Errorf("TestSamplesAllCovered without the samples: %v\n%s", err, out)
	}
}
