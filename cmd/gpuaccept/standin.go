package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"gpuaccept/scripts/standins"
)

// newStandinCmd is what the stand-in wrappers on simulated nodes call:
// `gpuaccept standin --profile P nvidia-smi -L` answers as nvidia-smi would
// on a node of that profile, and `gpuaccept standin mpirun ...` or
// `gpuaccept standin all_reduce_perf ...` answers from the demo's fabric
// model (standins.FabricMain; no profile), `gpuaccept standin podman ...`
// from the demo's container runtime (standins.PodmanMain), and
// `gpuaccept standin openai-server FLAGS` serves as vLLM's OpenAI API server
// would (package scripts/standins/openai), for inference load tests.
func newStandinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:                "standin [--profile PROFILE] TOOL [ARGS...]",
		Short:              "Answer as a GPU tool on a simulated node (used by the lab and the demo)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// A stand-in ends on SIGINT and SIGTERM as the tool it answers
			// for does: run's handler would keep a following dmesg or an
			// nvidia-smi loop alive past the sampler that signalled it.
			// (The server stand-in sets its own.)
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			return exitWith(standins.Command(args, os.Stdout, os.Stderr), nil)
		},
	}
	return cmd
}

type errUsage string

func (e errUsage) Error() string { return "usage: " + string(e) }
