package remote

import "testing"

// NewTestSSHNode starts an in-process SSH server and returns what reaches
// it afresh, for the executor contract suite (package remote_test).
func NewTestSSHNode(t *testing.T) func(t *testing.T) Executor {
	f := newFleet(t, 1)
	return func(t *testing.T) Executor { return f.dial(t, 0) }
}
