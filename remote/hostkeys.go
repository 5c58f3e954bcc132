package remote

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"

	"gpuaccept/sshconfig"
)

// HostKeys verifies node host keys against OpenSSH known_hosts files. One
// HostKeys is shared by every connection of a window so that trust on first
// use stays consistent when many nodes connect at once.
type HostKeys struct {
	files     []string // read, in order; missing files are skipped
	writeFile string   // where accept-new records keys
	acceptNew bool

	mu sync.Mutex
	db *knownhosts.HostKeyDB // nil when no file exists yet
}

// HostKeyOptions configures NewHostKeys.
type HostKeyOptions struct {
	// Files are OpenSSH known_hosts files (plain and hashed entries).
	Files []string
	// AcceptNew records the key of a host that no file knows (trust on
	// first use, as OpenSSH's StrictHostKeyChecking=accept-new). A changed
	// key is refused regardless.
	AcceptNew bool
	// WriteFile receives accepted keys; defaults to the first of Files.
	WriteFile string
}

// NewHostKeys loads the known_hosts files. A file that does not exist is
// fine (it may be created by accept-new); one that cannot be parsed is an
// error naming it.
func NewHostKeys(o HostKeyOptions) (*HostKeys, error) {
	h := &HostKeys{acceptNew: o.AcceptNew, writeFile: o.WriteFile}
	for _, f := range o.Files {
		if f == "" {
			continue
		}
		h.files = append(h.files, expandHome(f))
	}
	if h.writeFile == "" && len(h.files) > 0 {
		h.writeFile = h.files[0]
	}
	h.writeFile = expandHome(h.writeFile)
	if h.acceptNew && h.writeFile == "" {
		return nil, errors.New("known_hosts: accept-new needs a file to record keys in")
	}
	if h.writeFile != "" && !slices.Contains(h.files, h.writeFile) {
		h.files = append(h.files, h.writeFile)
	}
	if err := h.reload(); err != nil {
		return nil, err
	}
	return h, nil
}

// reload re-reads every file; the caller holds mu or is the constructor.
func (h *HostKeys) reload() error {
	var present []string
	for _, f := range h.files {
		if _, err := os.Stat(f); err == nil {
			present = append(present, f)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("known_hosts %s: %w", f, err)
		}
	}
	if len(present) == 0 {
		h.db = nil
		return nil
	}
	db, err := knownhosts.NewDB(present...)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	h.db = db
	return nil
}

// Algorithms lists the host key algorithms recorded for hostport, so the
// handshake asks only for a key we can check (golang/go#29286: otherwise the
// server may offer a key type we have no record of and a known host looks
// changed). Empty when the host is unknown: any algorithm is then fine.
func (h *HostKeys) Algorithms(hostport string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.db == nil {
		return nil
	}
	return h.db.HostKeyAlgorithms(hostport)
}

// Callback returns the ssh.HostKeyCallback for one node; node names it in
// errors.
func (h *HostKeys) Callback(node string) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		err := h.check(node, hostname, remote, key)
		var unknown *UnknownHostKeyError
		if !errors.As(err, &unknown) || !h.acceptNew {
			return err
		}
		return h.acceptLocked(node, hostname, remote, key)
	}
}

func (h *HostKeys) check(node, hostname string, remote net.Addr, key ssh.PublicKey) error {
	if h.db == nil {
		return h.unknown(node, hostname, key)
	}
	err := h.db.HostKeyCallback()(hostname, remote, key)
	if err == nil {
		return nil
	}
	var ke *xknownhosts.KeyError
	if !errors.As(err, &ke) {
		var re *xknownhosts.RevokedError
		if errors.As(err, &re) {
			return fmt.Errorf("%s: host key of %s is revoked in %s:%d; refusing to connect",
				node, hostname, re.Revoked.Filename, re.Revoked.Line)
		}
		return fmt.Errorf("%s: known_hosts: %w", node, err)
	}
	if len(ke.Want) == 0 {
		return h.unknown(node, hostname, key)
	}
	changed := &HostKeyChangedError{
		Node: node, Host: hostname, KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key),
	}
	for _, w := range ke.Want {
		changed.Known = append(changed.Known, KnownKey{
			File: w.Filename, Line: w.Line, KeyType: w.Key.Type(), Fingerprint: ssh.FingerprintSHA256(w.Key),
		})
	}
	return changed
}

func (h *HostKeys) unknown(node, hostname string, key ssh.PublicKey) error {
	return &UnknownHostKeyError{
		Node: node, Host: hostname, KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key),
		Files: h.files, WriteFile: h.writeFile,
	}
}

// acceptLocked records a first-seen key. Other gpuaccept processes may be
// accepting keys into the same file at the same moment, so the append
// happens under an exclusive flock and after a re-read: if someone else
// recorded a key for this host meanwhile, that record decides.
func (h *HostKeys) acceptLocked(node, hostname string, remote net.Addr, key ssh.PublicKey) error {
	if err := os.MkdirAll(filepath.Dir(h.writeFile), 0o700); err != nil {
		return fmt.Errorf("%s: accept-new: %w", node, err)
	}
	f, err := os.OpenFile(h.writeFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%s: accept-new: %w", node, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("%s: accept-new: lock %s: %w", node, h.writeFile, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too

	if err := h.reload(); err != nil {
		return fmt.Errorf("%s: accept-new: %w", node, err)
	}
	err = h.check(node, hostname, remote, key)
	var unknown *UnknownHostKeyError
	if !errors.As(err, &unknown) {
		return err // known now (nil) or changed: either way not ours to write
	}
	if err := knownhosts.WriteKnownHost(f, hostname, remoteForRecord(remote), key); err != nil {
		return fmt.Errorf("%s: accept-new: write %s: %w", node, h.writeFile, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: accept-new: sync %s: %w", node, h.writeFile, err)
	}
	return h.reload()
}

// remoteForRecord drops addresses that are not the node's (a jump host's
// forwarded channel reports a placeholder), so only the name we dialled is
// recorded.
func remoteForRecord(remote net.Addr) net.Addr {
	if tcp, ok := remote.(*net.TCPAddr); ok && tcp.Port != 0 && !tcp.IP.IsUnspecified() {
		return remote
	}
	return &net.TCPAddr{IP: net.IPv4zero}
}

func expandHome(p string) string { return sshconfig.ExpandHome(p) }

func splitHostPortDefault(hostport string) (string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, "22"
	}
	return host, port
}

// knownHostsName is how ssh-keygen -R spells a host: [host]:port off 22.
func knownHostsName(hostport, host string) string {
	_, port := splitHostPortDefault(hostport)
	if port == "22" {
		return host
	}
	return "[" + host + "]:" + port
}

func keyscanType(keyType string) string {
	switch {
	case strings.Contains(keyType, "ed25519"):
		return "ed25519"
	case strings.HasPrefix(keyType, "ecdsa"):
		return "ecdsa"
	case strings.Contains(keyType, "rsa"):
		return "rsa"
	}
	return keyType
}
