package labtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

// tenant is the other user of the lab's machine: another tenant, or the
// provider's staff, with a shell on the nodes.
const tenant = "ga-tnt" // 8 characters at most: ps shows longer names cut

const tenantUID = 4999

// needTenant makes the tenant's account; at the end of the test every
// process of theirs is ended (and waited for) before the account goes, so
// no later test meets them.
func needTenant(t *testing.T) {
	t.Helper()
	made := false
	if exec.Command("id", tenant).Run() != nil {
		if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", "--uid", fmt.Sprint(tenantUID), tenant).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v: %s", tenant, err, out)
		}
		made = true
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && exec.Command("pgrep", "-U", fmt.Sprint(tenantUID)).Run() == nil; i++ {
			exec.Command("pkill", "-KILL", "-U", fmt.Sprint(tenantUID)).Run()
			time.Sleep(100 * time.Millisecond)
		}
		if made {
			exec.Command("userdel", tenant).Run()
		}
	})
}

// asTenant runs a shell command as the tenant inside a lab host.
func asTenant(t *testing.T, l *lab.Lab, host, script string) string {
	t.Helper()
	out, err := l.Exec(t.Context(), host, "runuser", "-u", tenant, "--", "sh", "-c", script)
	if err != nil {
		t.Fatalf("%s as %s: %v: %s", host, tenant, err, out)
	}
	return out
}

// TestSecurityChecksAndPlantedFiles: on real sshd hosts, each check of the
// card's security row fails where its finding is planted (a password login
// enabled, another tenant's process, a file an earlier tenant left in the
// staging directory) and passes where nothing is; files another user
// plants where teardown used to look (a restore script it ran as root, an
// image list whose names it removed) are ignored; after teardown a fresh
// connection finds nothing of the window on any node.
func TestSecurityChecksAndPlantedFiles(t *testing.T) {
	l := needLab(t)
	needTenant(t)
	// A slow diagnostic leaves the tenant time to plant before teardown.
	prepare(t, l, map[string]nodeSetup{"h1": {profile: "h100", slowDiag: 2 * time.Second}})
	hosts := []string{"h1", "h2", "h3", "h4"}
	inv := writeInventory(t, l, hosts, "", `  staging:
    enabled: true
    dir: /srv/scratch
    fio: false
    sources:
      - {name: dataset, size: 1MiB}
`)
	// h2: password login enabled in the config its sshd runs with.
	conf := filepath.Join(l.Dir, "hosts", "h2", "sshd_config")
	orig, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(conf, orig, 0o644) })
	if err := os.WriteFile(conf, bytes.Replace(orig, []byte("PasswordAuthentication no"), []byte("PasswordAuthentication yes"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	// h3: the other tenant's process runs in the node.
	asTenant(t, l, "h3", "setsid sleep 600 >/dev/null 2>&1 < /dev/null &")
	// h4: what an earlier tenant left in the staging directory.
	for _, h := range hosts {
		os.RemoveAll(filepath.Join(l.Dir, "hosts", h, "srv", "scratch"))
	}
	left := filepath.Join(l.Dir, "hosts", "h4", "srv", "scratch", "llama-70b-finetune")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(left, "adapter.safetensors"), []byte("someone else's weights"), 0o644)
	// The earlier tenant's: their files, not the provider's (root's).
	os.Chown(left, tenantUID, tenantUID)
	// What root keeps there is the provider's, perhaps: a warning.
	os.MkdirAll(filepath.Join(l.Dir, "hosts", "h1", "srv", "scratch", "lost+found"), 0o700)

	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// As soon as the run ID shows (every user of a node sees it in ps),
	// the tenant plants what teardown used to run and read as root.
	marker := "/var/tmp/gpuaccept-test-planted-ran"
	os.Remove(marker)
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if entries, _ := os.ReadDir(runs); len(entries) == 1 {
			id = entries[0].Name()
		}
	}
	if id == "" {
		t.Fatalf("no run directory appeared: %s", stderr.String())
	}
	asTenant(t, l, "h1", fmt.Sprintf(`echo 'touch %s' > /var/tmp/gpuaccept-restore-%s.sh; chmod 755 /var/tmp/gpuaccept-restore-%s.sh
echo 'podman sha256:%s' > /var/tmp/gpuaccept-images-%s-h1`, marker, id, id, strings.Repeat("e", 64), id))
	plantedAt := time.Now()
	t.Cleanup(func() {
		os.Remove(marker)
		os.Remove("/var/tmp/gpuaccept-restore-" + id + ".sh")
		os.Remove("/var/tmp/gpuaccept-images-" + id + "-h1")
	})
	err = cmd.Wait()
	t.Logf("gpuaccept run: %v; stderr ends:\n%s", err, tail(stderr.String(), 3000))
	r := readRun(t, filepath.Join(runs, id))

	for _, p := range r.Phases {
		if p.Phase == "teardown" && p.Started.Before(plantedAt) {
			t.Fatalf("teardown started before the files were planted: the test proves nothing")
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("teardown ran a script another user planted")
	}
	var cleaned struct {
		Actions []string `json:"actions"`
	}
	phaseData(t, r, "teardown", 0, &cleaned)
	for _, a := range cleaned.Actions {
		if strings.Contains(a, "image") || strings.Contains(a, "restored") {
			t.Errorf("teardown acted on a planted file: %q", a)
		}
	}
	for _, tc := range []struct {
		id, node string
		status   record.Status
		says     string
	}{
		{"SEC-001", "h1", record.Pass, "key login only"},
		{"SEC-001", "h2", record.Fail, "password login enabled"},
		{"SEC-002", "h1", record.Pass, ""},
		{"SEC-002", "h3", record.Fail, tenant},
		{"SEC-003", "h1", record.Warn, "lost+found"},
		{"SEC-003", "h2", record.Pass, "/srv/scratch"},
		{"SEC-003", "h4", record.Fail, "llama-70b-finetune"},
	} {
		v := verdict(r, tc.id, tc.node)
		if v.Status != tc.status || !strings.Contains(v.Measured+" "+v.Detail, tc.says) {
			t.Errorf("%s %s: %s %q / %q, want %s saying %q", tc.id, tc.node, v.Status, v.Measured, v.Detail, tc.status, tc.says)
		}
	}
	for _, h := range hosts {
		if v := verdict(r, "SEC-004", h); v.Status != record.Pass {
			t.Errorf("SEC-004 %s: %s %q %q", h, v.Status, v.Measured, v.Detail)
		}
	}
	if left, _ := filepath.Glob("/var/tmp/gpuaccept-" + id + ".*"); len(left) > 0 {
		t.Errorf("the window's private directories were left: %v", left)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
