package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/reports"
)

// smallBundle writes a bundle of a not-accepted run made by tool.
func smallBundle(t *testing.T, tool string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	run := &record.Run{Schema: record.Schema, ID: "20261204T080000Z-p", Tool: tool, Provider: "p", Started: t0,
		Ended: t0.Add(time.Hour), Nodes: []record.Node{{Name: "gpu-01", Address: "192.0.2.1"}},
		Verdicts: []record.Verdict{{ID: "GPU-001", Node: "gpu-01", Status: record.Fail, Measured: "7 GPUs"}}}
	if err := reports.WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A report edited from NOT ACCEPTED to ACCEPTED is named by verify, for a
// run this build made and for one another build made (where verify used
// to hold the report only to naming the digest).
func TestVerifyNamesAnEditedReport(t *testing.T) {
	work := t.TempDir()
	for _, tool := range []string{"gpuaccept v0.0.1 (another build)", "gpuaccept"} {
		for _, name := range reports.Reports {
			dir := smallBundle(t, tool)
			if v := gpuaccept(t, work, "verify", dir); v.code != 0 || !strings.Contains(v.stdout, "intact") {
				t.Fatalf("fresh bundle of %q: exit %d\n%s%s", tool, v.code, v.stdout, v.stderr)
			}
			path := filepath.Join(dir, name)
			b, _ := os.ReadFile(path)
			edited := bytes.Replace(b, []byte("NOT ACCEPTED"), []byte("ACCEPTED"), 1)
			if bytes.Equal(b, edited) {
				t.Fatalf("%s says no NOT ACCEPTED", name)
			}
			os.WriteFile(path, edited, 0o644)
			v := gpuaccept(t, work, "verify", dir)
			if v.code != 1 || !strings.Contains(v.stdout, "changed: "+name) {
				t.Errorf("%s edited in a bundle of %q: exit %d\n%s%s", name, tool, v.code, v.stdout, v.stderr)
			}
		}
	}
}

// signingKey writes a new ed25519 key for name into dir and returns its
// file and its allowed-signers line.
func signingKey(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	// remote makes the key: only package remote imports x/crypto/ssh.
	k, err := remote.NewWindowKey(name)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".key")
	if err := os.WriteFile(file, k.PrivatePEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, name + " " + k.AuthorizedKey + "\n"
}

// Two people sign: the approver's signature is kept beside the
// preparer's (sign overwrote it), verify checks each and names who
// signed, and --signer, repeated, requires each.
func TestTwoPeopleSign(t *testing.T) {
	work := t.TempDir()
	dir := smallBundle(t, "gpuaccept v0.0.1")
	keys := t.TempDir()
	prep, prepLine := signingKey(t, keys, "preparer@buyer.example")
	appr, apprLine := signingKey(t, keys, "approver@buyer.example")
	allowed := filepath.Join(keys, "allowed_signers")
	os.WriteFile(allowed, []byte(prepLine+apprLine), 0o644)
	both := []string{"verify", dir, "--allowed-signers", allowed, "--signer", "preparer@buyer.example", "--signer", "approver@buyer.example"}

	if s := gpuaccept(t, work, "sign", dir, "--key", prep); s.code != 0 {
		t.Fatalf("sign: exit %d\n%s%s", s.code, s.stdout, s.stderr)
	}
	if v := gpuaccept(t, work, both...); v.code != 1 || !strings.Contains(v.stderr, "not signed by approver@buyer.example") ||
		strings.Contains(v.stderr, "not signed by preparer") {
		t.Errorf("signed by the preparer only: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	if s := gpuaccept(t, work, "sign", dir, "--key", appr); s.code != 0 || !strings.Contains(s.stdout, "2 signature(s) in all") {
		t.Fatalf("sign: exit %d\n%s%s", s.code, s.stdout, s.stderr)
	}
	gpuaccept(t, work, "sign", dir, "--key", prep) // again: it replaces its own
	sigs, _ := reports.Signatures(dir)
	if len(sigs) != 2 {
		t.Fatalf("signatures %v, want one per signer", sigs)
	}
	v := gpuaccept(t, work, both...)
	if v.code != 0 || !strings.Contains(v.stdout, "signed by preparer@buyer.example (") ||
		!strings.Contains(v.stdout, "signed by approver@buyer.example (") {
		t.Fatalf("signed by both: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	v = gpuaccept(t, work, "verify", dir)
	if v.code != 0 || strings.Count(v.stdout, "signed by key SHA256:") != 2 {
		t.Errorf("without --allowed-signers, each signature's key: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	// A signer named by its key's fingerprint.
	fp := regexp.MustCompile(`signed by key (SHA256:\S+)`).FindStringSubmatch(v.stdout)
	if v := gpuaccept(t, work, "verify", dir, "--allowed-signers", allowed, "--signer", fp[1]); v.code != 0 {
		t.Errorf("--signer %s: exit %d\n%s%s", fp[1], v.code, v.stdout, v.stderr)
	}
	if v := gpuaccept(t, work, "verify", dir, "--allowed-signers", allowed, "--signer", "SHA256:nobody"); v.code != 1 {
		t.Errorf("--signer of a key that did not sign: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}

	// One of them spoiled: verify names it, whatever the other says.
	spoilt := filepath.Join(dir, sigs[1])
	good, _ := os.ReadFile(spoilt)
	os.WriteFile(spoilt, bytes.Replace(good, []byte("AAAA"), []byte("AAAB"), 1), 0o644)
	for _, args := range [][]string{both, {"verify", dir}} {
		if v := gpuaccept(t, work, args...); v.code != 1 || !strings.Contains(v.stderr, sigs[1]) {
			t.Errorf("%v with %s spoilt: exit %d\n%s%s", args, sigs[1], v.code, v.stdout, v.stderr)
		}
	}
	// A file that only looks like a signature is evidence the manifest
	// does not list.
	os.WriteFile(spoilt, good, 0o644)
	os.WriteFile(filepath.Join(dir, reports.ManifestName+".note.sig"), []byte("ACCEPTED\n"), 0o644)
	if v := gpuaccept(t, work, both...); v.code != 1 || !strings.Contains(v.stdout, "unlisted: "+reports.ManifestName+".note.sig") {
		t.Errorf("a stray .sig: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}
