package labtest

import (
	"testing"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
)

// The SSH executor keeps the executor contract against a real OpenSSH
// sshd as well as against the in-process server.
func TestContractRealSSHD(t *testing.T) {
	l := needLab(t)
	contract.Run(t, contract.Target{New: func(t *testing.T) remote.Executor { return dial(t, l, l.Hosts[0].Name) }})
}
