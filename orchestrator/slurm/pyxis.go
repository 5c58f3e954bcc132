package slurm

import (
	"context"
	"fmt"
	"strings"

	"gpuaccept/remote"
)

// NoPyxis is why a window that asks for image.runtime pyxis runs without
// the container: the login node's srun has no Pyxis.
const NoPyxis = "srun on the login node lists no --container-image: the cluster has no Pyxis"

// PyxisListed: srun's help lists --container-image, the option Pyxis
// (NVIDIA's SPANK plugin) adds under "Options provided by plugins:"; an
// srun without Pyxis has no such option. Only an option's own line
// counts, not a mention in another's help text.
func PyxisListed(help string) bool {
	for _, line := range strings.Split(help, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "--container-image" || strings.HasPrefix(f[0], "--container-image=")) {
			return true
		}
	}
	return false
}

// Pyxis asks the login node's srun whether Pyxis is loaded (srun --help,
// which loads the plugin stack as a step would).
func Pyxis(ctx context.Context, login Login) (bool, error) {
	var out capWriter
	if err := login.Run(ctx, remote.Cmd{Command: "srun --help 2>&1", Stdout: &out}); err != nil {
		return false, fmt.Errorf("%s: srun --help: %w: %s", login.Name(), err, lastSlurmLine(out.String()))
	}
	return PyxisListed(out.String()), nil
}
