package sshtest

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"
)

// serveDirectTCPIP connects to the host and port the client names and
// relays both ways, which is what lets the server act as a ProxyJump hop.
// ctx ends with the SSH connection, so a slow dial does not outlive it.
func (s *Server) serveDirectTCPIP(ctx context.Context, nc ssh.NewChannel) {
	var msg struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &msg); err != nil || msg.Port > 65535 {
		nc.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	var d net.Dialer
	target, err := d.DialContext(ctx, "tcp", net.JoinHostPort(msg.Host, strconv.Itoa(int(msg.Port))))
	if err != nil {
		s.logf("direct-tcpip: %v", err)
		nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		target.Close()
		return
	}
	s.wg.Go(func() {
		ssh.DiscardRequests(reqs)
		// The channel is closed (or the connection gone): stop relaying
		// even if the target has more to say.
		target.Close()
	})

	// Each direction passes its EOF on, so half-closed streams work as
	// through sshd.
	var relay sync.WaitGroup
	relay.Go(func() {
		io.Copy(target, ch)
		if tc, ok := target.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	})
	relay.Go(func() {
		io.Copy(ch, target)
		ch.CloseWrite()
	})
	relay.Wait()
	target.Close()
	ch.Close()
}
