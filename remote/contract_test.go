package remote_test

import (
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
)

// The SSH executor, through the in-process SSH server, keeps the contract.
func TestContractSSH(t *testing.T) {
	dial, drop := remote.NewTestSSHNode(t)
	contract.Run(t, contract.Target{New: dial, Cut: func(*testing.T, remote.Executor) func() {
		drop()
		return func() {}
	}})
}

// This machine's executor keeps the same contract.
func TestContractLocal(t *testing.T) {
	contract.Run(t, contract.Target{
		New: func(t *testing.T) remote.Executor {
			return remote.NewLocal("here", remote.LocalConfig{Heartbeat: 500 * time.Millisecond, GuardLease: 2 * time.Second})
		},
		NotApplicable: map[string]string{
			"lost": "the machine gpuaccept runs on cannot go away under it; only Close ends its commands (item close)",
		},
	})
}
