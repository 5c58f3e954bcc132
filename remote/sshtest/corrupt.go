package sshtest

import (
	"encoding/binary"
	"io"

	"golang.org/x/crypto/ssh"
)

// corruptor reads SFTP packets from the client and flips the last data
// byte of the first SSH_FXP_WRITE that carries data.
type corruptor struct {
	ssh.Channel
	pending []byte // a whole packet not yet handed to the server
	done    bool
}

const fxpWrite = 6

func (c *corruptor) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(c.Channel, hdr[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 1<<20 {
			return 0, io.ErrUnexpectedEOF // larger than any SFTP client sends
		}
		pkt := make([]byte, 4+n)
		copy(pkt, hdr[:])
		if _, err := io.ReadFull(c.Channel, pkt[4:]); err != nil {
			return 0, err
		}
		if !c.done {
			c.done = flipWriteData(pkt[4:])
		}
		c.pending = pkt
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// flipWriteData corrupts a WRITE packet body: type, id, handle, offset, data.
func flipWriteData(body []byte) bool {
	if len(body) < 1+4+4 || body[0] != fxpWrite {
		return false
	}
	rest := body[5:]
	hl := binary.BigEndian.Uint32(rest)
	if uint64(len(rest)) < 4+uint64(hl)+8+4 {
		return false
	}
	rest = rest[4+hl+8:]
	dl := binary.BigEndian.Uint32(rest)
	if dl == 0 || uint64(len(rest)) < 4+uint64(dl) {
		return false
	}
	rest[4+dl-1] ^= 0xff
	return true
}
