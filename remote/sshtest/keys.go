package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// NewKey generates an ed25519 key, usable as a host key or a client key.
func NewKey() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

// WriteKnownHosts appends a known_hosts line for each server, in the form
// OpenSSH writes for a non-standard port: "[127.0.0.1]:PORT ssh-ed25519 ...".
// The file is created if needed.
func WriteKnownHosts(path string, servers ...*Server) error {
	var b strings.Builder
	for _, s := range servers {
		b.WriteString(knownhosts.Line([]string{knownhosts.Normalize(s.Addr())}, s.HostKey()))
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sshtest: known_hosts: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("sshtest: known_hosts: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sshtest: known_hosts: %w", err)
	}
	return nil
}
