package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
)

// signerKeyLen is the length of the key in a signer's signature's name,
// MANIFEST.sha256.<key>.sig: hex of its public key's fingerprint's hash.
const signerKeyLen = 16

// SignerSignatureName is the file of the signature of the manifest by
// the key of fingerprint fp (ssh.FingerprintSHA256's form): one file per
// key, so that the approver's signature does not replace the preparer's,
// and the same key signing again replaces only its own.
func SignerSignatureName(fp string) string {
	sum := sha256.Sum256([]byte(fp))
	return fmt.Sprintf("%s.%s.sig", ManifestName, hex.EncodeToString(sum[:])[:signerKeyLen])
}

// IsSignature says whether f (a path relative to the bundle) is a
// signature of its manifest: a signer's MANIFEST.sha256.<key>.sig, or
// MANIFEST.sha256.sig, which gpuaccept sign wrote before it kept one per
// signer. Nothing else is outside the manifest, so the name is exact: a
// file that only looks like one is unlisted evidence.
func IsSignature(f string) bool {
	if f == SignatureName {
		return true
	}
	key, ok := strings.CutPrefix(f, ManifestName+".")
	if !ok {
		return false
	}
	key, ok = strings.CutSuffix(key, ".sig")
	if !ok || len(key) != signerKeyLen || strings.ToLower(key) != key {
		return false
	}
	_, err := hex.DecodeString(key)
	return err == nil
}

// Signatures are the names of the signature files of dir's manifest,
// sorted.
func Signatures(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if IsSignature(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}
