package remote

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strings"
	"time"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// SignatureNamespace is the SSH signature namespace of gpuaccept's
// evidence: `ssh-keygen -Y verify -n gpuaccept` checks what Sign makes.
const SignatureNamespace = "gpuaccept"

// SignOptions say which key signs.
type SignOptions struct {
	// KeyFile is a private key (unencrypted), or a public key (.pub) whose
	// private half ssh-agent holds, as ssh-keygen -Y sign -f takes.
	// Empty: the agent's only key.
	KeyFile string
	// AgentSocket is ssh-agent's socket; SSH_AUTH_SOCK when empty.
	AgentSocket string
}

// Sign signs data in the SSH signature format (PROTOCOL.sshsig, what
// ssh-keygen -Y sign and git's ssh signing write), namespace gpuaccept,
// sha512, and returns it armored with the signing key's fingerprint.
func Sign(data []byte, o SignOptions) (armored []byte, fingerprint string, err error) {
	signer, closeAgent, err := signerFor(o)
	if err != nil {
		return nil, "", err
	}
	defer closeAgent()
	sig, err := sshsig.Sign(bytes.NewReader(data), signer, sshsig.HashSHA512, SignatureNamespace)
	if err != nil {
		return nil, "", fmt.Errorf("sign with %s: %w", ssh.FingerprintSHA256(signer.PublicKey()), err)
	}
	return sshsig.Armor(sig), ssh.FingerprintSHA256(signer.PublicKey()), nil
}

func signerFor(o SignOptions) (ssh.Signer, func(), error) {
	none := func() {}
	var want ssh.PublicKey
	if o.KeyFile != "" {
		raw, err := os.ReadFile(o.KeyFile)
		if err != nil {
			return nil, none, fmt.Errorf("--key: %w", err)
		}
		if pub, _, _, _, err := ssh.ParseAuthorizedKey(raw); err == nil {
			want = pub // its private half is in the agent
		} else {
			s, err := ssh.ParsePrivateKey(raw)
			var missing *ssh.PassphraseMissingError
			switch {
			case errors.As(err, &missing):
				return nil, none, fmt.Errorf("--key %s is encrypted: add it to ssh-agent (ssh-add %s) and give its .pub, or run without --key", o.KeyFile, o.KeyFile)
			case err != nil:
				return nil, none, fmt.Errorf("--key %s: neither an OpenSSH private key nor a public key: %w", o.KeyFile, err)
			}
			return s, none, nil
		}
	}
	sock := o.AgentSocket
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if sock == "" {
		return nil, none, errors.New("no key: give --key FILE, or start ssh-agent (SSH_AUTH_SOCK is not set)")
	}
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return nil, none, fmt.Errorf("ssh-agent at SSH_AUTH_SOCK=%s: %w", sock, err)
	}
	ag := agent.NewClient(conn)
	signers, err := ag.Signers()
	if err != nil {
		conn.Close()
		return nil, none, fmt.Errorf("ssh-agent at %s: %w", sock, err)
	}
	var found []ssh.Signer
	var prints []string
	for _, s := range signers {
		prints = append(prints, ssh.FingerprintSHA256(s.PublicKey()))
		if want == nil || bytes.Equal(s.PublicKey().Marshal(), want.Marshal()) {
			found = append(found, s)
		}
	}
	closeConn := func() { conn.Close() }
	switch {
	case want != nil && len(found) == 0:
		closeConn()
		return nil, none, fmt.Errorf("--key %s (%s) is not in ssh-agent (it holds %s): ssh-add its private key", o.KeyFile, ssh.FingerprintSHA256(want), orNoKeys(prints))
	case len(found) == 0:
		closeConn()
		return nil, none, errors.New("ssh-agent holds no key: ssh-add one, or give --key FILE")
	case len(found) > 1:
		closeConn()
		return nil, none, fmt.Errorf("ssh-agent holds %d keys (%s): say which with --key its.pub", len(found), strings.Join(prints, ", "))
	}
	return found[0], closeConn, nil
}

func orNoKeys(p []string) string {
	if len(p) == 0 {
		return "no key"
	}
	return strings.Join(p, ", ")
}

// Signer is who a verified signature is from.
type Signer struct {
	Principals  []string // the allowed-signers line's
	Fingerprint string
}

// VerifySignature checks armored, a signature of data, against an
// allowed-signers file (ssh-keygen(1) ALLOWED SIGNERS: principals,
// options, key): the signature must be valid, in namespace gpuaccept, by
// a key a line allows for that namespace at now. principal, when set,
// must be one of that line's (ssh-keygen -Y verify -I). Certificates
// (cert-authority) are refused, said as such.
func VerifySignature(data, armored []byte, allowedSigners, name, principal string, now time.Time) (Signer, error) {
	sig, fp, err := checkSignature(data, armored)
	if err != nil {
		return Signer{}, err
	}
	lines, err := parseAllowedSigners(allowedSigners, name)
	if err != nil {
		return Signer{}, err
	}
	var why []string
	for _, l := range lines {
		if !bytes.Equal(l.key.Marshal(), sig.PublicKey.Marshal()) {
			continue
		}
		switch {
		case l.certAuthority:
			why = append(why, fmt.Sprintf("%s line %d: cert-authority: certificate signers are not supported", name, l.line))
		case len(l.namespaces) > 0 && !matchAny(l.namespaces, SignatureNamespace):
			why = append(why, fmt.Sprintf("%s line %d: namespaces=%q does not allow %q", name, l.line, strings.Join(l.namespaces, ","), SignatureNamespace))
		case !l.validAfter.IsZero() && now.Before(l.validAfter):
			why = append(why, fmt.Sprintf("%s line %d: valid only after %s", name, l.line, l.validAfter.Format(time.RFC3339)))
		case !l.validBefore.IsZero() && !now.Before(l.validBefore):
			why = append(why, fmt.Sprintf("%s line %d: valid only before %s", name, l.line, l.validBefore.Format(time.RFC3339)))
		case principal != "" && !matchAny(l.principals, principal):
			why = append(why, fmt.Sprintf("%s line %d: the key is %s's, not %s's", name, l.line, strings.Join(l.principals, ","), principal))
		default:
			return Signer{Principals: l.principals, Fingerprint: fp}, nil
		}
	}
	if len(why) > 0 {
		return Signer{}, fmt.Errorf("signature by %s is valid, but not allowed: %s", fp, strings.Join(why, "; "))
	}
	return Signer{}, fmt.Errorf("signature by %s is valid, but %s allows no such key", fp, name)
}

// SignatureKey checks that armored is a valid signature of data in
// namespace gpuaccept by the key it carries, and returns that key's
// fingerprint. Whose key it is takes an allowed-signers file
// (VerifySignature): this says only that the signature is sound.
func SignatureKey(data, armored []byte) (fingerprint string, err error) {
	_, fp, err := checkSignature(data, armored)
	return fp, err
}

func checkSignature(data, armored []byte) (*sshsig.Signature, string, error) {
	sig, err := sshsig.Unarmor(armored)
	if err != nil {
		return nil, "", fmt.Errorf("signature: %w", err)
	}
	if sig.Namespace != SignatureNamespace {
		return nil, "", fmt.Errorf("signature is for namespace %q, not %q: it signs something else", sig.Namespace, SignatureNamespace)
	}
	fp := ssh.FingerprintSHA256(sig.PublicKey)
	if err := sshsig.Verify(bytes.NewReader(data), sig, sig.PublicKey, sig.HashAlgorithm, SignatureNamespace); err != nil {
		return nil, "", fmt.Errorf("signature by %s does not verify: %w", fp, err)
	}
	return sig, fp, nil
}

type allowedSigner struct {
	line                    int
	principals, namespaces  []string
	certAuthority           bool
	validAfter, validBefore time.Time
	key                     ssh.PublicKey
}

// parseAllowedSigners reads the file's lines; a line it cannot read is an
// error naming it, not a line skipped (a typo must not quietly drop the
// only signer the buyer allowed).
func parseAllowedSigners(text, name string) ([]allowedSigner, error) {
	var out []allowedSigner
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s line %d: %s", name, n, fmt.Sprintf(format, a...))
		}
		principals, rest, _ := strings.Cut(line, " ")
		s := allowedSigner{line: n, principals: strings.Split(principals, ",")}
		rest = strings.TrimSpace(rest)
		// Options come before the key type, comma-separated, quoted values
		// allowed; a key type starts the key.
		if !looksLikeKeyType(rest) {
			opts, after := splitOptions(rest)
			for _, o := range opts {
				k, v, _ := strings.Cut(o, "=")
				v = strings.Trim(v, `"`)
				switch strings.ToLower(k) {
				case "cert-authority":
					s.certAuthority = true
				case "namespaces":
					s.namespaces = strings.Split(v, ",")
				case "valid-after", "valid-before":
					t, err := signerTime(v)
					if err != nil {
						return nil, bad("%s=%q: %v", k, v, err)
					}
					if strings.EqualFold(k, "valid-after") {
						s.validAfter = t
					} else {
						s.validBefore = t
					}
				default:
					return nil, bad("unknown option %q", k)
				}
			}
			rest = after
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rest))
		if err != nil {
			return nil, bad("no public key: %v", err)
		}
		s.key = key
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no signer in it (lines: principal[,principal] [options] key-type base64-key)", name)
	}
	return out, nil
}

func looksLikeKeyType(s string) bool {
	return strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-") || strings.HasPrefix(s, "sk-")
}

// splitOptions splits "a,b=\"x,y\",c key..." at the first space outside
// quotes into the options and the rest.
func splitOptions(s string) ([]string, string) {
	var opts []string
	quoted, start := false, 0
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			opts = append(opts, s[start:i])
			start = i + 1
		case r == ' ' && !quoted:
			return append(opts, s[start:i]), strings.TrimSpace(s[i+1:])
		}
	}
	return append(opts, s[start:]), ""
}

// signerTime reads YYYYMMDD[HHMM[SS]] (local time, as ssh-keygen), with an
// optional Z for UTC.
func signerTime(v string) (time.Time, error) {
	loc := time.Local
	if z, ok := strings.CutSuffix(v, "Z"); ok {
		v, loc = z, time.UTC
	}
	for _, layout := range []string{"20060102150405", "200601021504", "20060102"} {
		if len(v) == len(layout) {
			return time.ParseInLocation(layout, v, loc)
		}
	}
	return time.Time{}, errors.New("want YYYYMMDD[HHMM[SS]][Z]")
}

// matchAny matches s against patterns with * and ? (ssh's patterns).
func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(strings.TrimSpace(p), s); ok {
			return true
		}
	}
	return false
}
