package remote

import "sync"

// StderrTailBytes is how much of a failed command's stderr its
// *ExitError keeps: the last words, which say why, and never more, so
// that a node printing without end cannot make an error of megabytes.
const StderrTailBytes = 4 << 10

// Tail keeps the last bytes written to it. Every executor keeps a
// command's stderr in one (NewStderrTail) for its *ExitError, so that the
// same failure reads the same whichever transport ran the command.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// NewStderrTail is the tail of a command's stderr an *ExitError holds.
func NewStderrTail() *Tail { return NewTail(StderrTailBytes) }

// Write keeps what is new and drops what falls out of the tail; it never
// fails, so that it can sit beside the caller's writer in a MultiWriter.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what the tail holds.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
