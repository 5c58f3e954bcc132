package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// WindowKey is an SSH key pair made for one acceptance window, so that the
// nodes can reach each other (mpirun starts its daemons over ssh) without
// the buyer's own keys ever leaving the coordinator. It lives only as long
// as the window: installed at the start, removed at teardown.
type WindowKey struct {
	// PrivatePEM is the OpenSSH private key file, unencrypted (it never
	// leaves the window's nodes and is deleted with the window's files).
	PrivatePEM []byte
	// AuthorizedKey is the authorized_keys line, comment included.
	AuthorizedKey string
	// Fingerprint is the SHA256 fingerprint, as ssh-keygen -l prints it.
	Fingerprint string
}

// NewWindowKey makes an ed25519 key pair whose public half carries comment
// (the marker teardown finds it by).
func NewWindowKey(comment string) (WindowKey, error) {
	if strings.ContainsAny(comment, " \t\r\n") {
		return WindowKey{}, fmt.Errorf("window key comment %q has white space", comment)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return WindowKey{}, fmt.Errorf("window key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return WindowKey{}, fmt.Errorf("window key: %w", err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return WindowKey{}, fmt.Errorf("window key: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + comment
	return WindowKey{PrivatePEM: pem.EncodeToMemory(block), AuthorizedKey: line, Fingerprint: ssh.FingerprintSHA256(sp)}, nil
}

// KnownHostsLine is the known_hosts line for the host key this client was
// shown when it connected, under the given names (the names other nodes
// will use for it). Nodes that reach each other through it need no
// accept-new: they trust exactly the key the coordinator verified.
func (c *Client) KnownHostsLine(names ...string) string {
	k := c.hostKey
	if k == nil || len(names) == 0 {
		return ""
	}
	var hosts []string
	for _, n := range names {
		host, port, err := net.SplitHostPort(n)
		if err != nil {
			host, port = n, "22"
		}
		if p, _ := strconv.Atoi(port); p != 22 && p != 0 {
			hosts = append(hosts, "["+host+"]:"+port)
		} else {
			hosts = append(hosts, host)
		}
	}
	return strings.Join(hosts, ",") + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}
