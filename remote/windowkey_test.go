package remote

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestWindowKeyIsAUsableKeyPair(t *testing.T) {
	k, err := NewWindowKey("gpuaccept-window-run1")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(k.PrivatePEM)
	if err != nil {
		t.Fatalf("private key does not parse: %v", err)
	}
	pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(k.AuthorizedKey))
	if err != nil {
		t.Fatalf("authorized_keys line %q does not parse: %v", k.AuthorizedKey, err)
	}
	if comment != "gpuaccept-window-run1" {
		t.Errorf("comment = %q", comment)
	}
	if !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		t.Error("the authorized key is not the private key's public half")
	}
	if k.Fingerprint != ssh.FingerprintSHA256(pub) || !strings.HasPrefix(k.Fingerprint, "SHA256:") {
		t.Errorf("fingerprint %q", k.Fingerprint)
	}
	other, _ := NewWindowKey("gpuaccept-window-run1")
	if other.Fingerprint == k.Fingerprint {
		t.Error("two windows got the same key")
	}
	if _, err := NewWindowKey("two words"); err == nil {
		t.Error("a comment with a space was accepted")
	}
}

func TestKnownHostsLineIsTheKeyTheNodeShowed(t *testing.T) {
	f := newFleet(t, 1)
	c := f.dial(t, 0)
	line := c.KnownHostsLine("h1", "10.0.0.1:2222")
	fields := strings.Fields(line)
	if len(fields) != 3 || fields[0] != "h1,[10.0.0.1]:2222" {
		t.Fatalf("known_hosts line %q", line)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(fields[1] + " " + fields[2]))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pub.Marshal(), f.servers[0].HostKey().Marshal()) {
		t.Error("the line does not carry the server's host key")
	}
	if c.KnownHostsLine() != "" {
		t.Error("a line without names")
	}
}
