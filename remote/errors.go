package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// ExitError reports a remote command that ran and did not succeed. It
// carries everything an operator needs to act without re-running the
// command: where it ran, what it was, how it ended and what it last said.
type ExitError struct {
	Node    string
	Command string
	// Status is the exit status; -1 when the command died by a signal.
	Status int
	// Signal is the signal name without "SIG" (e.g. "KILL") when the
	// command was killed by one.
	Signal string
	// StderrTail is the last few KiB of the command's stderr.
	StderrTail string
}

func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: ", e.Node, Shorten(e.Command, 120))
	if e.Signal != "" {
		fmt.Fprintf(&b, "killed by signal %s", e.Signal)
	} else {
		fmt.Fprintf(&b, "exit %d", e.Status)
	}
	if tail := strings.TrimSpace(e.StderrTail); tail != "" {
		fmt.Fprintf(&b, ": %s", lastLines(tail, 5))
	}
	return b.String()
}

// ConnectionLostError is returned by every call on a connection that went
// away underneath it: the node died, the network dropped or keepalives went
// unanswered.
type ConnectionLostError struct {
	Node   string
	Reason string
	Err    error
}

func (e *ConnectionLostError) Error() string {
	msg := fmt.Sprintf("%s: connection lost: %s", e.Node, e.Reason)
	if e.Err != nil && !strings.Contains(e.Reason, e.Err.Error()) {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ConnectionLostError) Unwrap() error { return e.Err }

// ErrConnectionLost matches every ConnectionLostError with errors.Is.
var ErrConnectionLost = errors.New("connection lost")

func (e *ConnectionLostError) Is(target error) bool { return target == ErrConnectionLost }

// TimeoutError names the step that ran out of time; it matches
// context.DeadlineExceeded with errors.Is so callers can treat all
// deadlines alike.
type TimeoutError struct {
	Node  string
	Step  string
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: %s: no answer within %s", e.Node, e.Step, e.After)
}

func (e *TimeoutError) Is(target error) bool {
	return target == context.DeadlineExceeded
}

// UnknownHostKeyError: the node presented a key that no known_hosts file
// holds, and trust on first use is off.
type UnknownHostKeyError struct {
	Node        string
	Host        string // host:port as looked up in known_hosts
	KeyType     string
	Fingerprint string // SHA256:...
	Files       []string
	WriteFile   string
}

func (e *UnknownHostKeyError) Error() string {
	host, port := splitHostPortDefault(e.Host)
	target := e.WriteFile
	if target == "" && len(e.Files) > 0 {
		target = e.Files[0]
	}
	if target == "" {
		target = "~/.ssh/known_hosts"
	}
	return fmt.Sprintf("%s: host key of %s is not known (%s %s, checked %s); "+
		"confirm the fingerprint with the provider, then either add it: "+
		"ssh-keyscan -p %s -t %s %s >> %s, or enable accept-new (trust on first use)",
		e.Node, e.Host, e.KeyType, e.Fingerprint, filesOrNone(e.Files),
		port, keyscanType(e.KeyType), host, target)
}

// HostKeyChangedError: the node presented a key that differs from the one
// recorded. Always refused, in every mode: this is what a man in the middle
// looks like, and also what a reinstalled node looks like; only a person can
// tell which.
type HostKeyChangedError struct {
	Node        string
	Host        string
	KeyType     string
	Fingerprint string
	Known       []KnownKey
}

// KnownKey is one recorded key that did not match.
type KnownKey struct {
	File        string
	Line        int
	KeyType     string
	Fingerprint string
}

func (e *HostKeyChangedError) Error() string {
	var known []string
	for _, k := range e.Known {
		known = append(known, fmt.Sprintf("%s %s at %s:%d", k.KeyType, k.Fingerprint, k.File, k.Line))
	}
	host, _ := splitHostPortDefault(e.Host)
	fix := ""
	if len(e.Known) > 0 {
		fix = fmt.Sprintf("; if the node was legitimately reinstalled, remove the old entry: ssh-keygen -R %s -f %s",
			knownHostsName(e.Host, host), e.Known[0].File)
	}
	return fmt.Sprintf("%s: HOST KEY CHANGED for %s: node offered %s %s, known_hosts has %s; refusing to connect%s",
		e.Node, e.Host, e.KeyType, e.Fingerprint, strings.Join(known, ", "), fix)
}

// Shorten is s on one line, cut to n bytes with "..." where it was longer:
// a command as an error or a verdict names it. It cuts on a character's
// start, never inside one.
func Shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return runeCut(s, max(n-3, 0)) + "..."
}

// Clip keeps at most n bytes of s, whole characters, and says with "…"
// that it cut: a cut inside a character would be written as U+FFFD.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return runeCut(s, n) + "…"
}

// runeCut is s cut to at most n bytes on a character's start.
func runeCut(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func filesOrNone(files []string) string {
	if len(files) == 0 {
		return "no known_hosts file"
	}
	return strings.Join(files, ", ")
}

// AuthError: the node (or a jump host) refused every key offered.
type AuthError struct {
	Addr, User string
	// Said is what the node said as it refused a key it had accepted (its
	// PAM account phase: pam_slurm_adopt's "no active jobs on this
	// node"); "" when it refused the key itself.
	Said string
	Err  error
}

func (e *AuthError) Error() string {
	if e.Said != "" {
		return fmt.Sprintf("ssh to %s as %s: login refused by the node, which said %q: %v", e.Addr, e.User, e.Said, e.Err)
	}
	return fmt.Sprintf("ssh to %s as %s: authentication refused (check the user and identity files): %v", e.Addr, e.User, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// SetupError: the coordinator's own means of reaching nodes are wrong
// (an identity file that is no key, an ssh_config that does not parse):
// nothing was sent to the node.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// Cause is what kept the coordinator from a node, and whose side of the
// contract it is on: the buyer's (its names, keys, known hosts and jump
// hosts: the window could not measure, and is incomplete) or the
// provider's (the node refused, timed out or went away: a failure).
type Cause struct {
	Kind  string `json:"kind"`
	Buyer bool   `json:"buyer_side,omitempty"`
}

// CauseOf classifies an error of Dial.
func CauseOf(err error) Cause {
	var (
		unknown *UnknownHostKeyError
		changed *HostKeyChangedError
		auth    *AuthError
		dns     *net.DNSError
		ne      *nodeError
		lost    *ConnectionLostError
		setup   *SetupError
	)
	switch {
	case err == nil:
		return Cause{}
	case errors.As(err, &setup):
		// The coordinator's own settings (a key, a config, a kubeconfig),
		// whichever transport.
		return Cause{Kind: "setup", Buyer: true}
	case errors.As(err, &ne) && ne.jump:
		return Cause{Kind: "jump host", Buyer: true}
	case errors.As(err, &unknown):
		return Cause{Kind: "unknown host key", Buyer: true}
	case errors.As(err, &changed):
		return Cause{Kind: "host key changed", Buyer: true}
	case errors.As(err, &auth):
		return Cause{Kind: "authentication", Buyer: true}
	case errors.As(err, &dns):
		return Cause{Kind: "name resolution", Buyer: true}
	case errors.As(err, &lost):
		return Cause{Kind: "connection lost"}
	case errors.Is(err, context.DeadlineExceeded):
		return Cause{Kind: "timeout"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Cause{Kind: "refused"}
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return Cause{Kind: "unreachable"}
	}
	return Cause{Kind: "unreachable"}
}

// nodeError puts the node name first exactly once, whatever the wrapped
// error already says, and keeps the chain for errors.As. jump: the error
// is a jump host's.
type nodeError struct {
	msg  string
	err  error
	jump bool
}

func (e *nodeError) Error() string { return e.msg }
func (e *nodeError) Unwrap() error { return e.err }

func withNode(node, step string, err error) error {
	rest := strings.TrimPrefix(err.Error(), node+": ")
	if step != "" {
		rest = step + ": " + rest
	} else if rest != err.Error() {
		return err // already "node: ..."
	}
	return &nodeError{msg: node + ": " + rest, err: err, jump: strings.HasPrefix(step, "jump host ")}
}

// StepNotStartedError: Slurm did not start a command's job step in time
// (its controller silent, failing over or refusing steps), so nothing of
// the command ran on the node and nothing of the node is known from it:
// not the node's failure.
type StepNotStartedError struct {
	Node, Command string
	After         time.Duration
	// Said is what srun said meanwhile, "" when nothing.
	Said string
}

// StepAbortedError: srun aborted the job step a node's command shared with
// other nodes' (an I/O error with another node's slurmstepd aborts every
// task of a step), and the command's end was never heard. Its outcome is
// unknown and says nothing of the node: the window records the command
// NOT MEASURED, as a step Slurm never started.
type StepAbortedError struct {
	Node, Command string
	// Said is what srun said.
	Said string
	// Reason, when set, says why instead: srun did not abort the step,
	// and yet its end says nothing of the node (the step stopped passing
	// the coordinator's stream on; two tasks said they ran on the node).
	Reason string
}

func (e *StepAbortedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s: %s: %s", e.Node, e.Command, e.Reason)
	}
	return fmt.Sprintf("%s: %s: srun aborted the job step this node's command shared with others, before its end: %s",
		e.Node, e.Command, strings.TrimSpace(e.Said))
}

func (e *StepNotStartedError) Error() string {
	s := fmt.Sprintf("%s: %s: Slurm did not start the job step within %s", e.Node, e.Command, e.After)
	if e.Said != "" {
		s += ": " + e.Said
	}
	return s
}
