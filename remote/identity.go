package remote

import (
	"net"
	"os"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// IdentityFingerprints are the SHA256 fingerprints of the keys the
// coordinator offers a node (cfg's identity files, or the defaults, and
// the agent's): the security check tells them from the other keys that may
// log in as the window's user. A key that cannot be read is left out: this
// only names keys, it never authenticates. A node not reached over SSH
// is offered no key: its own user's default keys are the buyer's there.
func IdentityFingerprints(node Config) []string {
	var cfg SSHConfig
	if node.SSH != nil {
		cfg = *node.SSH
	}
	var out []string
	seen := map[string]bool{}
	add := func(k ssh.PublicKey) {
		if f := ssh.FingerprintSHA256(k); !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	files := cfg.IdentityFiles
	if len(files) == 0 {
		files = defaultIdentityFiles()
	}
	for _, f := range files {
		// The public half needs no passphrase: read it when it is there.
		if b, err := os.ReadFile(f + ".pub"); err == nil {
			if k, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil {
				add(k)
				continue
			}
		}
		if s, err := loadIdentity(f); err == nil {
			add(s.PublicKey())
		}
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); cfg.Agent && sock != "" {
		if conn, err := net.DialTimeout("unix", sock, 2*time.Second); err == nil {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			if keys, err := agent.NewClient(conn).List(); err == nil {
				for _, k := range keys {
					if pk, err := ssh.ParsePublicKey(k.Blob); err == nil {
						add(pk)
					}
				}
			}
		}
	}
	return out
}
