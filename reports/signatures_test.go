package reports

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A signer's signature has a name of its own, one per key; only those
// names, and the one earlier versions wrote, are outside the manifest.
func TestSignatureNames(t *testing.T) {
	a, b := SignerSignatureName("SHA256:aaaa"), SignerSignatureName("SHA256:bbbb")
	if a == b || a != SignerSignatureName("SHA256:aaaa") {
		t.Fatalf("names %q, %q: want one per key, the same for the same key", a, b)
	}
	for name, want := range map[string]bool{
		a: true, b: true, SignatureName: true,
		ManifestName + ".note.sig": false, ManifestName + ".0123456789ABCDEF.sig": false,
		"raw/" + a: false, a + ".txt": false, ManifestName: false, "report.md": false,
	} {
		if IsSignature(name) != want {
			t.Errorf("IsSignature(%q) = %v, want %v", name, !want, want)
		}
	}
	// Writing the bundle again removes every signature: they sign what is
	// no longer there.
	dir, run := newBundle(t)
	for _, s := range []string{a, b, SignatureName} {
		os.WriteFile(filepath.Join(dir, s), []byte("sig\n"), 0o644)
	}
	if sigs, _ := Signatures(dir); !slices.IsSorted(sigs) || len(sigs) != 3 {
		t.Fatalf("signatures %v", sigs)
	}
	if p := verify(t, dir); len(p) != 0 {
		t.Errorf("signatures are not evidence the manifest lists: %v", p)
	}
	if err := WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	if sigs, _ := Signatures(dir); len(sigs) != 0 {
		t.Errorf("signatures of the old manifest left: %v", sigs)
	}
}
