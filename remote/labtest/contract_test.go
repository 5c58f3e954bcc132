package labtest

import (
	"context"
	"testing"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
)

// The SSH executor keeps the executor contract against a real OpenSSH
// sshd as well as against the in-process server; its node goes away by a
// cut link, which the node never hears of (the guard's lease ends the
// command there).
func TestContractRealSSHD(t *testing.T) {
	l := needLab(t)
	host := l.Hosts[0].Name
	contract.Run(t, contract.Target{
		New: func(t *testing.T) remote.Executor { return dial(t, l, host) },
		Cut: func(t *testing.T, _ remote.Executor) func() {
			if err := l.Cut(t.Context(), host); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := l.Restore(context.Background(), host); err != nil {
					t.Errorf("restore %s: %v", host, err)
				}
			}
		},
	})
}
