package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/remote"
	"gpuaccept/remote/sshtest"
)

// TestBuyerSideFailuresAreIncomplete: a window whose nodes could not be
// reached for a reason on the buyer's side (a name or a jump host that does
// not resolve, an unknown host key, a key the node refuses) is INCOMPLETE,
// exit 3, and says which reason, for every node in one line: never NOT
// ACCEPTED, which would blame the provider.
func TestBuyerSideFailuresAreIncomplete(t *testing.T) {
	buyer, err := remote.NewWindowKey("buyer")
	if err != nil {
		t.Fatal(err)
	}
	other, err := remote.NewWindowKey("someone-else")
	if err != nil {
		t.Fatal(err)
	}
	// The servers know another key than the one the inventory offers.
	var servers []*sshtest.Server
	for range 2 {
		srv, err := sshtest.Start(sshtest.Options{AuthorizedKeyLines: []string{other.AuthorizedKey}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		servers = append(servers, srv)
	}

	for _, tc := range []struct {
		name, nodes, jump string
		knownServer       bool
		words             []string
	}{
		{name: "a node name that does not resolve", nodes: "gpu-01.invalid gpu-02.invalid",
			words: []string{"INCOMPLETE: 2 nodes gpu-[01-02]: not reached for a reason on the buyer's side (name resolution)"}},
		{name: "a jump host that does not resolve", nodes: "127.0.0.1 127.0.0.2", jump: "bastion.invalid",
			words: []string{"INCOMPLETE: 2 nodes gpu-[01-02]: not reached for a reason on the buyer's side (jump host)", "bastion.invalid"}},
		{name: "an unknown host key", nodes: "server server",
			words: []string{"INCOMPLETE: 2 nodes gpu-[01-02]: not reached for a reason on the buyer's side (unknown host key): its host key is in none of ssh.known_hosts", "ssh-keyscan"}},
		{name: "a key the node refuses", nodes: "server server", knownServer: true,
			words: []string{"INCOMPLETE: 2 nodes gpu-[01-02]: not reached for a reason on the buyer's side (authentication)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "id"), buyer.PrivatePEM, 0o600)
			known := filepath.Join(dir, "known_hosts")
			os.WriteFile(known, nil, 0o600)
			if tc.knownServer {
				if err := sshtest.WriteKnownHosts(known, servers...); err != nil {
					t.Fatal(err)
				}
			}
			var nodes strings.Builder
			for i, addr := range strings.Fields(tc.nodes) {
				port := 22
				if addr == "server" {
					addr, port = servers[i].Host(), servers[i].Port()
				}
				fmt.Fprintf(&nodes, "  - {name: gpu-%02d, address: %s, port: %d}\n", i+1, addr, port)
			}
			jump := ""
			if tc.jump != "" {
				jump = "  jump: [" + tc.jump + "]\n"
			}
			inv := filepath.Join(dir, "inv.yaml")
			os.WriteFile(inv, []byte(`provider: vendor-a
ssh:
  user: root
  identity_files: [id]
  known_hosts: [known_hosts]
  config: none
  connect_timeout: 5s
`+jump+`nodes:
`+nodes.String()), 0o644)
			res := gpuaccept(t, dir, "run", inv, "--runs-dir", "runs")
			if res.code != 3 {
				t.Fatalf("exit %d, want 3\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			flat := strings.Join(strings.Fields(res.stdout), " ")
			for _, w := range tc.words {
				if !strings.Contains(flat, w) {
					t.Errorf("no %q in\n%s", w, res.stdout)
				}
			}
			for _, bad := range []string{"NOT ACCEPTED", "FAIL"} {
				if strings.Contains(res.stdout, bad) {
					t.Errorf("%q: the buyer's own setup is blamed on the provider:\n%s", bad, res.stdout)
				}
			}
			if !strings.Contains(res.stdout, "Incomplete because:") {
				t.Errorf("no reasons under the table:\n%s", res.stdout)
			}
		})
	}
}
