// Command standin answers as a GPU tool of a simulated node, replaying genuine outputs (package
// gpuaccept/scripts/standins):
//
//	standin [--profile PROFILE] TOOL [ARGS...]     TOOL: nvidia-smi, dcgmi, ibstat, ibv_devinfo
//	standin FABRIC-TOOL [ARGS...]                  demo only: mpirun, all_reduce_perf, ... computed from the
//	                                               fabric model in GPUACCEPT_STANDIN_FABRIC (see package doc)
//	standin openai-server [FLAGS]                 an OpenAI-compatible server answering as vLLM's (package
//	                                               gpuaccept/scripts/standins/openai); the lab's test image
//	                                               carries this binary, static, at /usr/local/bin/standin
//	standin --list-profiles
//	standin --install DIR [--profile PROFILE]      wrappers in DIR that run this binary; put DIR on PATH
//
// The gpuaccept binary carries the same thing as a hidden `standin` subcommand.
package main

import (
	"fmt"
	"os"

	"gpuaccept/scripts/standins"
)

func main() {
	args := os.Args[1:]
	if len(args) >= 2 && args[0] == "--install" {
		os.Exit(install(args[1], args[2:]))
	}
	os.Exit(standins.Command(args, os.Stdout, os.Stderr))
}

func install(dir string, rest []string) int {
	profile := "h100"
	switch {
	case len(rest) == 0:
	case len(rest) == 2 && rest[0] == "--profile":
		profile = rest[1]
	default:
		fmt.Fprintln(os.Stderr, "usage: standin --install DIR [--profile PROFILE]")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		return 1
	}
	if err := standins.Install(dir, profile, []string{exe}); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		return 1
	}
	return 0
}
