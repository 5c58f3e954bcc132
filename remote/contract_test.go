package remote_test

import (
	"testing"
	"time"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
)

// The SSH executor, through the in-process SSH server, keeps the contract.
func TestContractSSH(t *testing.T) {
	contract.Run(t, contract.Target{New: remote.NewTestSSHNode(t)})
}

// This machine's executor keeps the same contract.
func TestContractLocal(t *testing.T) {
	contract.Run(t, contract.Target{New: func(t *testing.T) remote.Executor {
		return remote.NewLocal(remote.Config{Name: "here", KeepaliveInterval: 500 * time.Millisecond, GuardLease: 2 * time.Second})
	}})
}
