// Package gobuild builds this module's gpuaccept binary for the benches
// that run it as a separate process (the coordinator's CPU and memory are
// then its own).
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Gpuaccept builds ./cmd/gpuaccept into dir, the compiler's errors on
// stderr, and returns the binary's path. Run from the module's root.
func Gpuaccept(dir string) (string, error) {
	bin := filepath.Join(dir, "gpuaccept")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpuaccept")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build ./cmd/gpuaccept: %w", err)
	}
	return bin, nil
}
