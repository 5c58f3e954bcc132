package main

import (
	"os"

	"github.com/spf13/cobra"

	"gpuaccept/scripts/standins"
)

// newStandinCmd is what the stand-in wrappers on simulated nodes call:
// `gpuaccept standin --profile P nvidia-smi -L` answers as nvidia-smi would
// on a node of that profile, and `gpuaccept standin mpirun ...` or
// `gpuaccept standin all_reduce_perf ...` answers from the demo's fabric
// model (standins.FabricMain; no profile).
func newStandinCmd() *cobra.Command {
	var profile string
	cmd := &cobra.Command{
		Use:                "standin --profile PROFILE TOOL [ARGS...] | standin FABRIC-TOOL [ARGS...]",
		Short:              "Answer as a GPU tool on a simulated node (used by the lab and the demo)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && standins.IsFabricTool(args[0]) {
				code := standins.FabricMain(args[0], args[1:], os.Environ(), os.Stdout, os.Stderr)
				return exitWith(code, nil)
			}
			if len(args) >= 2 && args[0] == "--profile" {
				profile, args = args[1], args[2:]
			}
			if profile == "" || len(args) == 0 {
				return exitWith(exitBadInput, errUsage("standin --profile PROFILE TOOL [ARGS...]"))
			}
			code := standins.Main(profile, args[0], args[1:], os.Stdout, os.Stderr)
			return exitWith(code, nil)
		},
	}
	return cmd
}

type errUsage string

func (e errUsage) Error() string { return "usage: " + string(e) }
