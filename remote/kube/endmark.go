package kube

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"strconv"
	"sync"
)

// An exec through the Kubernetes API may lose the end of a command's
// output without an error: the stream ends when the process does, and what
// the runtime had not copied yet is gone (kubernetes/kubernetes#124571,
// seen in the lab as 8,208,384 of 8,388,608 bytes). It may lose the exec's
// status the same way, and client-go reads an error stream that ended
// empty as success (seen in the lab: kill -9 $$ came back as exit 0). So
// the exec's process ends each stream with a line of its own, a random
// mark and the command's status, and stays until the coordinator has read
// both (execWrap): a stream that ends without its mark lost output, and
// says so, and the status is the one the marks carry, never the one an
// empty error stream implies.

// newEndMark is a mark for one exec: random, so no command's output holds
// it by chance, and no node can forge an end it did not reach.
func newEndMark() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "gpuaccept-end-" + hex.EncodeToString(b)
}

// endWriter passes a stream on to w, less the end line at its end (the
// mark, a space, the status in decimal, a newline), and closes seen when
// the line arrived, with status its status. It holds back only what could
// still be the start of that line (a stream ending in "gpu" waits for its
// next write), never a line's newline: output streams as it comes.
type endWriter struct {
	w      io.Writer
	mark   []byte // the mark and its space
	hold   []byte
	done   bool
	status int
	once   sync.Once
	seen   chan struct{}
}

func newEndWriter(w io.Writer, mark string) *endWriter {
	return &endWriter{w: w, mark: []byte(mark + " "), seen: make(chan struct{})}
}

// maxStatus is how many digits a status has at most (0..255).
const maxStatus = 3

func (e *endWriter) Write(p []byte) (int, error) {
	n := len(p)
	if e.done {
		return n, nil // nothing of the command's comes after the mark
	}
	e.hold = append(e.hold, p...)
	for {
		i := bytes.Index(e.hold, e.mark)
		if i < 0 {
			break
		}
		rest := e.hold[i+len(e.mark):]
		j := bytes.IndexByte(rest, '\n')
		if j < 0 && len(rest) <= maxStatus {
			// The status is still on its way.
			if _, err := e.w.Write(e.hold[:i]); err != nil {
				return n, err
			}
			e.hold = append(e.hold[:0], e.hold[i:]...)
			return n, nil
		}
		if st, err := strconv.Atoi(string(rest[:max(j, 0)])); j > 0 && j <= maxStatus && err == nil && st >= 0 && st <= 255 {
			e.done, e.status = true, st
			_, err := e.w.Write(e.hold[:i])
			e.hold = nil
			e.once.Do(func() { close(e.seen) })
			return n, err
		}
		// The mark without a status after it is not the end line: the
		// command's, passed on.
		if _, err := e.w.Write(e.hold[:i+1]); err != nil {
			return n, err
		}
		e.hold = append(e.hold[:0], e.hold[i+1:]...)
	}
	keep := partialMark(e.hold, e.mark)
	if out := len(e.hold) - keep; out > 0 {
		if _, err := e.w.Write(e.hold[:out]); err != nil {
			return n, err
		}
		e.hold = append(e.hold[:0], e.hold[out:]...)
	}
	return n, nil
}

// flush passes on what was held back when the stream ended without its
// end line: it was the command's.
func (e *endWriter) flush() {
	if !e.done && len(e.hold) > 0 {
		e.w.Write(e.hold)
		e.hold = nil
	}
}

// partialMark is the length of the longest end of b that is a start of
// mark (shorter than mark: a whole one was looked for already).
func partialMark(b, mark []byte) int {
	for k := min(len(b), len(mark)-1); k > 0; k-- {
		if bytes.Equal(b[len(b)-k:], mark[:k]) {
			return k
		}
	}
	return 0
}
