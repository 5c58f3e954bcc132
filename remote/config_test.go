package remote

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeSSHConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSSHConfigFillsWhatTheInventoryLeavesOpen(t *testing.T) {
	home, _ := os.UserHomeDir()
	path := writeSSHConfig(t, `
Host gpu-*
    HostName %h.cluster.example
    User ubuntu
    Port 2222
    IdentityFile ~/.ssh/gpu_%r
    ProxyJump bastion

Host bastion
    HostName 203.0.113.7
    User jump
    IdentityFile /keys/bastion

Host *
    IdentityFile ~/.ssh/extra
    User fallback
`)
	hk := &HostKeys{}
	r, err := SSHConfig{Host: "gpu-01", SSHConfig: path, HostKeys: hk}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := endpoint{alias: "gpu-01", host: "gpu-01.cluster.example", port: 2222, user: "ubuntu",
		identityFiles: []string{home + "/.ssh/gpu_ubuntu", home + "/.ssh/extra"}}
	if !reflect.DeepEqual(r.target, want) {
		t.Errorf("target\n got %+v\nwant %+v", r.target, want)
	}
	if len(r.jumps) != 1 || r.jumps[0].host != "203.0.113.7" || r.jumps[0].user != "jump" || r.jumps[0].port != 22 ||
		!reflect.DeepEqual(r.jumps[0].identityFiles, []string{"/keys/bastion", home + "/.ssh/extra"}) {
		t.Errorf("jump %+v", r.jumps)
	}
	if r.Name != "gpu-01" || r.KeepaliveInterval != DefaultKeepaliveInterval || r.GuardLease < 10*time.Second {
		t.Errorf("defaults not applied: %+v", r.SSHConfig)
	}

	// Explicit values win over ssh_config; an explicit jump list too.
	r, err = SSHConfig{Name: "n1", Host: "gpu-01", Port: 22, User: "root", IdentityFiles: []string{"/k"},
		Jump: []string{"ops@hop1:2200", "hop2"}, SSHConfig: path, HostKeys: hk}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.target.port != 22 || r.target.user != "root" || !reflect.DeepEqual(r.target.identityFiles, []string{"/k"}) {
		t.Errorf("explicit values lost: %+v", r.target)
	}
	if len(r.jumps) != 2 || r.jumps[0].addr() != "hop1:2200" || r.jumps[0].user != "ops" || r.jumps[1].user != "fallback" {
		t.Errorf("jumps %+v", r.jumps)
	}
	// A hop without its own identity uses the node's.
	if !reflect.DeepEqual(r.jumps[0].identityFiles, []string{home + "/.ssh/extra"}) {
		t.Errorf("hop identities %v", r.jumps[0].identityFiles)
	}
}

func TestSSHConfigErrors(t *testing.T) {
	hk := &HostKeys{}
	if _, err := (SSHConfig{Name: "n1", Host: "h", SSHConfig: "/nonexistent/config", HostKeys: hk}).resolve(); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/config") || !strings.HasPrefix(err.Error(), "n1: ") {
		t.Errorf("missing explicit ssh_config: %v", err)
	}
	if _, err := (SSHConfig{Name: "n1", Host: "h", SSHConfig: "none", Jump: []string{"u@:22"}, HostKeys: hk}).resolve(); err == nil ||
		!strings.Contains(err.Error(), `jump host "u@:22"`) {
		t.Errorf("bad jump: %v", err)
	}
	if _, err := (SSHConfig{Name: "n1", SSHConfig: "none", HostKeys: hk}).resolve(); err == nil || !strings.Contains(err.Error(), "no host") {
		t.Errorf("no host: %v", err)
	}
	if _, err := (SSHConfig{Name: "n1", Host: "h", SSHConfig: "none"}).resolve(); err == nil || !strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("no host keys: %v", err)
	}
	if _, err := (SSHConfig{Name: "n1", Host: "h", SSHConfig: "none", Jump: []string{"h:99999"}, HostKeys: hk}).resolve(); err == nil ||
		!strings.Contains(err.Error(), "bad port") {
		t.Errorf("bad port: %v", err)
	}
}

func TestProxyJumpNoneMeansDirect(t *testing.T) {
	path := writeSSHConfig(t, "Host direct\n  ProxyJump none\nHost *\n  ProxyJump bastion\n")
	r, err := SSHConfig{Host: "direct", SSHConfig: path, HostKeys: &HostKeys{}}.resolve()
	if err != nil || len(r.jumps) != 0 {
		t.Fatalf("jumps %v, %v", r.jumps, err)
	}
}

func TestParseHop(t *testing.T) {
	for in, want := range map[string][3]string{
		"host":                {"", "host", "0"},
		"user@host":           {"user", "host", "0"},
		"user@host:2022":      {"user", "host", "2022"},
		"ssh://u@h:7":         {"u", "h", "7"},
		"[2001:db8::1]:22":    {"", "2001:db8::1", "22"},
		"a@b@host.example:23": {"a@b", "host.example", "23"},
	} {
		u, h, p, err := parseHop(in)
		if err != nil || u != want[0] || h != want[1] || strconv.Itoa(p) != want[2] {
			t.Errorf("parseHop(%q) = %q %q %d %v", in, u, h, p, err)
		}
	}
}
