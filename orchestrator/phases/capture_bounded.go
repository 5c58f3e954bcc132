package phases

import "sync"

// Capture keeps the head and the tail of what a node prints, for a
// command outside a window (gpuaccept exec: a node printed 3 GB into
// memory in 10 s), safe for stdout and stderr to write at once.
type Capture struct {
	mu sync.Mutex
	c  capture
}

// NewCapture keeps the first head and the last tail bytes written.
func NewCapture(head, tail int) *Capture {
	return &Capture{c: capture{headMax: max(head, 1), tailMax: max(tail, 0)}}
}

func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Write(p)
}

// Bytes is what was kept, the cut said where it was made.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Bytes()
}

// Total is how many bytes were written; Dropped how many of them were
// not kept.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.total
}

func (c *Capture) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.total - int64(len(c.c.head)+len(c.c.tail))
}
