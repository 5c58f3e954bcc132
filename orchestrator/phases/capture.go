package phases

import "fmt"

// A node may print without end (a hostname of 100 MB was tried): what a
// phase keeps of a command's output to read is bounded, its head and its
// tail, with the cut said between them. The raw log keeps more
// (orchestrator.MaxLogBytes).
const (
	captureHead = 4 << 20
	captureTail = 1 << 20
)

// capture is a command's stdout as a phase reads it.
type capture struct {
	head  []byte
	tail  []byte // a ring of the last tailMax bytes past the head
	at    int    // where the ring's oldest byte is, once it is full
	total int64
	// headMax, tailMax bound it; 0 is captureHead, captureTail.
	headMax, tailMax int
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	n := len(p)
	headMax, tailMax := c.headMax, c.tailMax
	if headMax == 0 && tailMax == 0 {
		headMax, tailMax = captureHead, captureTail
	}
	if room := headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 && tailMax > 0 {
		if len(c.tail) < tailMax {
			k := min(tailMax-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(c.tail[c.at:], p)
		c.at = (c.at + k) % tailMax
		p = p[k:]
	}
	return n, nil
}

// Bytes is the head, then (when more was printed than kept) a line saying
// how much was cut, then the tail.
func (c *capture) Bytes() []byte {
	kept := int64(len(c.head) + len(c.tail))
	if kept == c.total {
		return append(c.head, c.tail...)
	}
	out := append([]byte(nil), c.head...)
	out = append(out, fmt.Sprintf("\n[gpuaccept: %d bytes of output cut here]\n", c.total-kept)...)
	out = append(out, c.tail[c.at:]...)
	return append(out, c.tail[:c.at]...)
}
