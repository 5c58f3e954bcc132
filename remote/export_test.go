package remote

import "testing"

// NewTestSSHNode starts an in-process SSH server and returns what reaches
// it afresh, and what resets every connection to it (a node that dies),
// for the executor contract suite (package remote_test).
func NewTestSSHNode(t *testing.T) (dial func(t *testing.T) Executor, drop func()) {
	f := newFleet(t, 1)
	return func(t *testing.T) Executor { return f.dial(t, 0) }, f.servers[0].DropConnections
}
