package lab

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed torch2.sh
var torch2Script []byte

var torch2Embed = &embedded{name: "torch2", content: torch2Script}

// Torch2 is a root filesystem with Debian 13's PyTorch of the 2.x line (torch2.sh).
type Torch2 struct {
	Rootfs  string // DIR/rootfs
	Version string // python3-torch's Debian version, "2.6.0+dfsg-7"
}

// Torch2Rootfs builds, once per machine, the trixie root filesystem with python3-torch 2.x (torch2.sh,
// embedded here) under dir ("" for its default, /var/cache/gpuaccept/torch2-trixie) and returns it. The
// first build fetches ~200 MB from the Debian mirror (about two minutes on the lab's 2-core machine); later
// calls return at once. Needs root.
func Torch2Rootfs(ctx context.Context, dir string) (*Torch2, error) {
	path, err := torch2Embed.path()
	if err != nil {
		return nil, err
	}
	args := []string{path}
	if dir != "" {
		args = append(args, dir)
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("lab: torch2.sh: %w: %s", err, tail(stderr.String(), 2000))
	}
	root := strings.TrimSpace(string(out))
	v, err := os.ReadFile(filepath.Join(root, "TORCH_VERSION"))
	if err != nil {
		return nil, fmt.Errorf("lab: torch2.sh: %w", err)
	}
	return &Torch2{Rootfs: root, Version: strings.TrimSpace(string(v))}, nil
}
