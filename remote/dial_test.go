package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"gpuaccept/remote/sshtest"
)

func TestJumpHostsInOrder(t *testing.T) {
	// node-c reached through node-a then node-b; every hop's key checked.
	f := newFleet(t, 3)
	cfg := f.config(2)
	cfg.Jump = []string{"tester@" + f.servers[0].Addr(), f.servers[1].Addr()}
	c, err := Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out, err := c.Output(t.Context(), "echo via jumps"); err != nil || string(out) != "via jumps\n" {
		t.Fatalf("%q %v", out, err)
	}
	for i, s := range f.servers {
		if s.Connections() != 1 {
			t.Errorf("server %d saw %d connections, want 1", i, s.Connections())
		}
	}
	if got := f.servers[2].Execs(); len(got) != 1 {
		t.Errorf("target ran %d commands", len(got))
	}
	if got := f.servers[0].Execs(); len(got) != 0 {
		t.Errorf("jump host ran commands: %v", got)
	}
}

func TestJumpHostFailureNamesTheHop(t *testing.T) {
	f := newFleet(t, 2)
	cfg := f.config(1)
	cfg.Jump = []string{"127.0.0.1:1"} // nothing listens there
	_, err := Dial(t.Context(), cfg)
	if err == nil || !strings.HasPrefix(err.Error(), "node-b: jump host 127.0.0.1:1: ") || strings.Count(err.Error(), "node-b") != 1 {
		t.Fatalf("got %v", err)
	}
}

func TestAgentAuthentication(t *testing.T) {
	// A key only the agent holds, authorised on the server.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	f := newFleet(t, 1, func(o *sshtest.Options) { o.AuthorizedKeys = []ssh.PublicKey{sshPub} })
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, conn); conn.Close() }()
		}
	}()
	defer func() { ln.Close(); <-served }()
	t.Setenv("SSH_AUTH_SOCK", sock)

	cfg := f.config(0)
	cfg.IdentityFiles = nil
	cfg.Agent = true
	c, err := Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Output(t.Context(), "echo agent"); err != nil || string(out) != "agent\n" {
		t.Fatalf("%q %v", out, err)
	}
	c.Close()

	// The file key alone is not authorised here: a clear refusal.
	cfg = f.config(0)
	_, err = Dial(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "authentication refused") || !strings.HasPrefix(err.Error(), "node-a: ") {
		t.Fatalf("got %v", err)
	}
}

func TestIdentityFileErrors(t *testing.T) {
	f := newFleet(t, 1)
	cfg := f.config(0)
	cfg.IdentityFiles = []string{filepath.Join(f.dir, "nope")}
	if _, err := Dial(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing identity: %v", err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(f.dir, "encrypted")
	if err := os.WriteFile(enc, pemEncode(block), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.IdentityFiles = []string{enc}
	if _, err := Dial(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "passphrase") || !strings.Contains(err.Error(), "ssh-add") {
		t.Errorf("encrypted identity: %v", err)
	}
}

// A server that says something while authenticating and then closes the
// connection refused the login (OpenSSH when its PAM account phase denies
// an accepted key): an authentication error that quotes it. Without a
// banner an EOF stays a plain handshake error.
func TestHandshakeErrorQuotesTheRefusal(t *testing.T) {
	eof := fmt.Errorf("ssh: handshake failed: %w", io.EOF)
	err := handshakeError("10.0.0.2:22", "alice", eof, "Access denied by pam_slurm_adopt: you have no active jobs on this node\n")
	var auth *AuthError
	if !errors.As(err, &auth) || CauseOf(err).Kind != "authentication" || !strings.Contains(err.Error(), "no active jobs on this node") || strings.Contains(err.Error(), "check the user") {
		t.Errorf("with a banner: %T %v", err, err)
	}
	if err := handshakeError("10.0.0.2:22", "alice", eof, ""); errors.As(err, &auth) {
		t.Errorf("without a banner: %v", err)
	}
}
