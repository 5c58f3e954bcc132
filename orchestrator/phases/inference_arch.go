package phases

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"strings"

	"gpuaccept/orchestrator"
)

// The load generator is the coordinator's gpuaccept unless the inventory
// names another build: a coordinator on macOS or on another architecture
// than the nodes' would upload a program the node cannot run, and every
// figure would read as the server's failure. Checked before the upload,
// it is NOT MEASURED, named as what the buyer must set.

// elfMachines are the nodes' `uname -m` answers a Linux build runs on.
var elfMachines = map[elf.Machine][]string{
	elf.EM_X86_64:  {"x86_64", "amd64"},
	elf.EM_AARCH64: {"aarch64", "arm64"},
	elf.EM_PPC64:   {"ppc64le", "ppc64"},
	elf.EM_S390:    {"s390x"},
	elf.EM_RISCV:   {"riscv64"},
}

// binaryMachine is the ELF machine of the program at path; an error for a
// file that is not a Linux (ELF) program.
func binaryMachine(path string) (elf.Machine, error) {
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return 0, fmt.Errorf("%s is not a Linux program (%v)", path, err)
		}
		return 0, err
	}
	defer f.Close()
	return f.Machine, nil
}

// checkLoadgenArch holds the generator bin against the node's machine.
func (s *infNode) checkLoadgenArch(ctx context.Context, bin string) error {
	v, err := s.w.Shared("loadgen-machine:"+bin, func() (any, error) { return binaryMachine(bin) })
	if err != nil {
		return orchestrator.Unmeasured("gpuaccept", "the load generator: %v: set phases.workload.inference.loadgen to a gpuaccept built for the nodes (GOOS=linux): the load test not measured", err)
	}
	m := v.(elf.Machine)
	out, err := runOn(ctx, s.w, s.n, "uname -m")
	if err != nil {
		return fmt.Errorf("uname -m: %w", err)
	}
	node := strings.TrimSpace(string(out))
	if len(node) > 32 {
		node = node[:32]
	}
	for _, name := range elfMachines[m] {
		if node == name {
			return nil
		}
	}
	return orchestrator.Unmeasured("gpuaccept", "the load generator %s is built for %s, the node is %q: set phases.workload.inference.loadgen to a gpuaccept built for it: the load test not measured",
		bin, strings.TrimPrefix(m.String(), "EM_"), node)
}
