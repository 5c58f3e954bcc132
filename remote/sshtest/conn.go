package sshtest

import (
	"net"
	"sync"
)

// faultConn is a net.Conn that can be frozen: while frozen, Read and Write
// block instead of moving bytes, which from the client's side looks like a
// network that silently stopped delivering. Close always works, frozen or
// not, and releases the blocked calls.
type faultConn struct {
	net.Conn

	mu     sync.Mutex
	thawed chan struct{} // nil unless frozen; closed by thaw

	closeOnce sync.Once
	closed    chan struct{}
}

func newFaultConn(c net.Conn) *faultConn {
	return &faultConn{Conn: c, closed: make(chan struct{})}
}

func (c *faultConn) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.thawed == nil {
		c.thawed = make(chan struct{})
	}
}

func (c *faultConn) thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.thawed != nil {
		close(c.thawed)
		c.thawed = nil
	}
}

// gate returns once the connection is not frozen, or net.ErrClosed once it
// is closed.
func (c *faultConn) gate() error {
	for {
		c.mu.Lock()
		thawed := c.thawed
		c.mu.Unlock()
		if thawed == nil {
			select {
			case <-c.closed:
				return net.ErrClosed
			default:
				return nil
			}
		}
		select {
		case <-thawed:
		case <-c.closed:
			return net.ErrClosed
		}
	}
}

func (c *faultConn) Read(p []byte) (int, error) {
	if err := c.gate(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	// A Read already waiting in the kernel when Freeze came must not hand
	// over what arrives next; hold it back until Thaw.
	if gerr := c.gate(); gerr != nil {
		return 0, gerr
	}
	return n, err
}

func (c *faultConn) Write(p []byte) (int, error) {
	if err := c.gate(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.Conn.Close()
	})
	return err
}

// drop closes the connection with a reset rather than an orderly FIN, the
// closest a live process gets to the host vanishing.
func (c *faultConn) drop() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
