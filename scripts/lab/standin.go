package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// TestImageStandin is where the test image carries the stand-in binary (scripts/standins/cmd/standin), so that
// a lab host runs an inference server as `podman run -d --network host TestImageRef standin openai-server ...`.
const TestImageStandin = "/usr/local/bin/standin"

// BuildStandin builds scripts/standins/cmd/standin static (CGO_ENABLED=0: the test image has no libc),
// stripped, to out. It needs the go command and this module's source (the lab runs from a checkout); after the
// first build the go build cache makes it a link of about a second.
func BuildStandin(ctx context.Context, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("lab: standin: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out,
		"gpuaccept/scripts/standins/cmd/standin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	// from the module's root, whatever the caller's directory (a benchmark's go run, a test's package dir)
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			cmd.Dir = root
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lab: go build scripts/standins/cmd/standin: %w: %s", err, tail(string(b), 2000))
	}
	return nil
}

// StandinState is the host's stand-in state directory seen from the coordinator: its own
// /srv/gpuaccept-standin (standins.DefaultStateDir), where the telemetry stand-ins keep their origin, the busy
// markers of the workloads and the IB counter tree (standins.InstallTelemetry). Every host's sshd gives its
// sessions GPUACCEPT_SYSFS_IB pointing at that tree inside the host (lab.sh's sshd_config).
func (l *Lab) StandinState(host string) string {
	return filepath.Join(l.Dir, "hosts", l.Host(host).Name, "srv", "gpuaccept-standin")
}
