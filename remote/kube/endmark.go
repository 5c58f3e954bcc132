package kube

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"sync"
)

// An exec through the Kubernetes API may lose the end of a command's
// output without an error: the stream ends when the process does, and what
// the runtime had not copied yet is gone (kubernetes/kubernetes#124571,
// seen in the lab as 8,208,384 of 8,388,608 bytes). So the exec's process
// ends each stream with a mark of its own, a line no command prints, and
// stays until the coordinator has read both marks (execWrap); a stream
// that ends without its mark lost output, and says so.

// newEndMark is a mark for one exec: random, so no command's output holds
// it by chance, and no node can forge an end it did not reach.
func newEndMark() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "gpuaccept-end-" + hex.EncodeToString(b)
}

// endWriter passes a stream on to w, less the mark (mark+"\n") at its
// end, and closes seen when the mark arrived. It holds back only what could
// still be the start of the mark (a stream ending in "gpu" waits for its
// next write), never a line's newline: output streams as it comes.
type endWriter struct {
	w    io.Writer
	mark []byte
	hold []byte
	done bool
	once sync.Once
	seen chan struct{}
}

func newEndWriter(w io.Writer, mark string) *endWriter {
	return &endWriter{w: w, mark: []byte(mark + "\n"), seen: make(chan struct{})}
}

func (e *endWriter) Write(p []byte) (int, error) {
	n := len(p)
	if e.done {
		return n, nil // nothing of the command's comes after the mark
	}
	e.hold = append(e.hold, p...)
	if i := bytes.Index(e.hold, e.mark); i >= 0 {
		e.done = true
		_, err := e.w.Write(e.hold[:i])
		e.hold = nil
		e.once.Do(func() { close(e.seen) })
		return n, err
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
// mark: it was the command's.
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
