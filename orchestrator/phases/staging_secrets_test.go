package phases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/remote/fake"
)

// TestStagingCommandLinesCarryNoSecret: every command the staging phase
// runs on a node (what /proc/*/cmdline shows every user there) names a
// signed source without its credential; the source itself goes on stdin.
func TestStagingCommandLinesCarryNoSecret(t *testing.T) {
	inv := fakeInventory(t, 2, `phases:
  staging:
    enabled: true
    dir: /scratch
    fio: false
    sources:
      - {name: blob, url: "az://acct/cont/w.bin?sv=2024&sig=AZs3cr3t"}
      - {name: signed, url: "https://data.example.com/w.bin?X-Amz-Signature=S3s3cr3t&X-Amz-Credential=AKIAEXAMPLE"}
      - {name: object, url: "s3://bucket/w.bin", endpoint: "https://object.example.com"}
`)
	f := fakeFleet(inv)
	for _, h := range f.Hosts() {
		onScript(h, "stage.sh", func(c *fake.Call, a []string) fake.Reply {
			if a[0] == "prepare" {
				return fake.Reply{Stdout: "avail 900000000000\n"}
			}
			return fake.Reply{Stdout: "staged bytes=10 files=1 seconds=1 sha256=" + strings.Repeat("a", 64) + " checksum=tee tool=curl hasher=openssl\n"}
		})
	}
	runFake(t, inv, f, Staging)
	fetches := 0
	for _, h := range f.Hosts() {
		for _, c := range h.Commands() {
			for _, secret := range []string{"AZs3cr3t", "S3s3cr3t", "AKIAEXAMPLE", "sig=", "X-Amz-"} {
				if strings.Contains(c, secret) {
					t.Errorf("%s: a command line carries %q: %.300s", h.Name(), secret, c)
				}
			}
			if strings.Contains(c, `bash "$f" fetch `) {
				fetches++
			}
		}
	}
	if fetches != 6 {
		t.Errorf("%d fetches seen, want 3 on each of 2 nodes", fetches)
	}
}

// fakeTools puts stand-ins for curl and azcopy first on PATH: each logs
// its argv to argv, and curl also the URL file it is given (-K) to urls,
// then writes "blob" where the real tool would.
func fakeTools(t *testing.T) (env []string, argv, urls string) {
	t.Helper()
	bin := t.TempDir()
	argv, urls = filepath.Join(bin, "argv"), filepath.Join(bin, "urls")
	curl := `#!/bin/bash
printf '%s\n' "$0" "$@" >>` + argv + `
while [ $# -gt 0 ]; do [ "$1" = -K ] && cat "$2" >>` + urls + `; shift; done
printf blob
`
	azcopy := `#!/bin/bash
printf '%s\n' "$0" "$@" >>` + argv + `
for a; do last=$a; done
printf blob >"$last"
`
	for name, body := range map[string]string{"curl": curl, "azcopy": azcopy} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, argv, urls
}

// TestStageScriptKeepsASASTokenOutOfArgv: azcopy takes its URL only in
// argv, so a blob with a SAS token goes through curl, the URL in a file;
// a prefix with one (azcopy's job) is refused, saying why; a blob without
// one still goes to azcopy, which finds its own credentials.
func TestStageScriptKeepsASASTokenOutOfArgv(t *testing.T) {
	env, argv, urls := fakeTools(t)
	dst := filepath.Join(t.TempDir(), "gpuaccept-run")
	out, err := stageScriptEnv(t, env, "fetch", dst, "blob", "az", "az://acct/cont/dir/w.bin?sv=2024&sig=AZs3cr3t")
	kv, ok := stagedLine([]byte(out))
	if err != nil || !ok || kv["tool"] != "curl" || kv["bytes"] != "4" {
		t.Fatalf("fetch: %v %q", err, out)
	}
	got, _ := os.ReadFile(argv)
	if strings.Contains(string(got), "s3cr3t") || strings.Contains(out, "s3cr3t") {
		t.Errorf("the SAS token reached argv or the output:\nargv: %s\nout: %s", got, out)
	}
	if u, _ := os.ReadFile(urls); !strings.Contains(string(u), `url = "https://acct.blob.core.windows.net/cont/dir/w.bin?sv=2024&sig=AZs3cr3t"`) {
		t.Errorf("curl was given %q", u)
	}

	os.Remove(argv)
	out, err = stageScriptEnv(t, env, "fetch", dst, "tree", "az", "az://acct/cont/dir/?sv=2024&sig=AZs3cr3t")
	if err == nil || !strings.Contains(out, "error tree (az://acct/cont/dir/?…): a SAS token for a prefix would be in azcopy's command line") {
		t.Errorf("a prefix with a SAS token: %v %q", err, out)
	}
	if got, _ := os.ReadFile(argv); len(got) > 0 {
		t.Errorf("a tool ran for a refused prefix: %s", got)
	}

	out, err = stageScriptEnv(t, env, "fetch", dst, "plain", "az", "az://acct/cont/w.bin")
	if kv, ok := stagedLine([]byte(out)); err != nil || !ok || kv["tool"] != "azcopy" {
		t.Errorf("a blob without a token: %v %q", err, out)
	}
	if got, _ := os.ReadFile(argv); !strings.Contains(string(got), "https://acct.blob.core.windows.net/cont/w.bin\n") {
		t.Errorf("azcopy was given %s", got)
	}
}
