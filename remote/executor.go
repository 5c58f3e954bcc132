package remote

import (
	"context"
	"io"
)

// Executor is one node as the window's phases reach it: a place to run
// commands and to put files. SSH (*Client) is one; the machine gpuaccept
// runs on (*Local, inventory address local), srun inside a Slurm
// allocation and the fake of package remote/fake are others. Phases hold
// an Executor, never a connection; the window dials and redials (DialNode
// picks the executor from the node's Config). Package remote/contract holds every implementation to the
// guarantees below.
//
// What every implementation guarantees:
//
//   - Run returns only once the command has ended on the node, or once the
//     node can no longer be reached. When ctx is cancelled, or the
//     connection is lost, the command's whole process group on the node is
//     ended (TERM, then KILL after Cmd.Grace), not only the local wait.
//   - Run's error is nil; an *ExitError when the command ran and did not
//     succeed (with the tail of its stderr); a *ConnectionLostError
//     (errors.Is ErrConnectionLost) when the node went away; a
//     *TimeoutError (errors.Is context.DeadlineExceeded) when a step of
//     reaching the node ran out of time; or ctx's error, wrapped with the
//     node's name and the command, when ctx ended first.
//   - Cmd.Env is exported before the command and only for it; Cmd.Stdin
//     is streamed and the command sees EOF at its end; Stdout and Stderr
//     receive the streams as they arrive, each from one goroutine at a
//     time.
//   - Upload and UploadFrom leave remotePath either as it was or as the
//     complete file whose size and sha256 were checked on the node; the
//     result's SHA256 is the node's own sum of its copy.
//   - Once Lost reports true it stays true, and every later call fails
//     with a *ConnectionLostError naming the node.
//   - All methods are safe for concurrent use; Close is idempotent and
//     ends every command still running.
type Executor interface {
	// Name is the node's name, as errors give it.
	Name() string
	// Addr is where the node was reached (host:port for SSH).
	Addr() string
	Run(ctx context.Context, cmd Cmd) error
	Upload(ctx context.Context, local, remotePath string, o TransferOptions) (TransferResult, error)
	UploadFrom(ctx context.Context, src io.ReaderAt, size int64, remotePath string, o TransferOptions) (TransferResult, error)
	Lost() bool
	Close() error
}

// HostKeyed is an Executor that verified a host key when it connected.
// The window key phase asks for it, so that the nodes trust each other's
// keys exactly as the coordinator verified them.
type HostKeyed interface {
	// KnownHostsLine is the known_hosts line of the key the node showed,
	// under the given names; "" when there is none.
	KnownHostsLine(names ...string) string
}

// Dialer reaches the node cfg describes. It is bounded by ctx and by
// cfg's timeouts, and returns a nil Executor with every error. DialNode
// is the window's; tests give a fake fleet's.
type Dialer func(ctx context.Context, cfg Config) (Executor, error)

var (
	_ Executor  = (*Client)(nil)
	_ HostKeyed = (*Client)(nil)
)

// CloseExecutors closes every non-nil executor, all at once.
func CloseExecutors(execs []Executor) {
	done := make(chan struct{}, len(execs))
	n := 0
	for _, e := range execs {
		if e != nil {
			n++
			go func() { e.Close(); done <- struct{}{} }()
		}
	}
	for ; n > 0; n-- {
		<-done
	}
}
