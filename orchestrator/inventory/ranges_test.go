package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const rangesHead = `provider: vendor-a
ssh: {user: ubuntu, known_hosts: [known_hosts], config: none}
`

func parseText(t *testing.T, text string) (*Inventory, error) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	return parse(filepath.Join(dir, "inv.yaml"), []byte(text), noEnv)
}

// A fleet in one line: names and addresses as host ranges, paired in
// order, the entry's labels on every node; nodes_from a file or a
// nodelist.
func TestNodeRanges(t *testing.T) {
	inv, err := parseText(t, rangesHead+`nodes:
  - {name: "gpu-[001-128]", address: "10.40.[1-4].[11-42]", labels: {rack: r1}}
  - {name: login-1, address: 10.40.9.1}
  - {name: "spare-[1,3]", address: "10.41.0.[1,3]", fabric_address: "192.168.0.[1,3]", port: 2222}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Nodes) != 131 {
		t.Fatalf("%d nodes", len(inv.Nodes))
	}
	for i, want := range map[int]string{0: "gpu-001 10.40.1.11", 31: "gpu-032 10.40.1.42", 32: "gpu-033 10.40.2.11", 127: "gpu-128 10.40.4.42", 128: "login-1 10.40.9.1", 130: "spare-3 10.41.0.3"} {
		n := inv.Nodes[i]
		if got := n.Name + " " + n.Address; got != want {
			t.Errorf("node %d: %s, want %s", i, got, want)
		}
	}
	if inv.Nodes[5].Labels["rack"] != "r1" || inv.Nodes[128].Labels != nil {
		t.Errorf("labels: %v %v", inv.Nodes[5].Labels, inv.Nodes[128].Labels)
	}
	inv.Nodes[0].Labels["rack"] = "changed"
	if inv.Nodes[1].Labels["rack"] != "r1" {
		t.Error("the nodes of a range share one labels map")
	}
	if s := inv.Nodes[130]; s.FabricAddress != "192.168.0.3" || s.Port != 2222 || s.User != "ubuntu" {
		t.Errorf("spare-3: %+v", s)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "hosts.txt"), []byte("# the rented nodes\ngpu-001.vendor-a.internal\n\ngpu-[002-003].vendor-a.internal  # rack 2\n"), 0o644)
	inv, err = parse(filepath.Join(dir, "inv.yaml"), []byte(rangesHead+"nodes_from: hosts.txt\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range inv.Nodes {
		got = append(got, n.Name+"@"+n.Address)
	}
	if strings.Join(got, " ") != "gpu-001@gpu-001.vendor-a.internal gpu-002@gpu-002.vendor-a.internal gpu-003@gpu-003.vendor-a.internal" {
		t.Errorf("nodes_from file: %v", got)
	}
	inv, err = parseText(t, rangesHead+"nodes_from: \"gpu-[01-02],login\"\n")
	if err != nil || len(inv.Nodes) != 3 || inv.Nodes[2].Name != "login" {
		t.Errorf("nodes_from nodelist: %v %v", inv, err)
	}
	// No address: the name, when ssh_config has a Host entry with a
	// HostName for it (dialled by the name, reached by the others at
	// the HostName); else the address is required.
	os.WriteFile(filepath.Join(dir, "ssh_config"), []byte("Host gpu-01\n  HostName 10.0.0.1\n"), 0o600)
	inv, err = parse(filepath.Join(dir, "inv.yaml"), []byte("provider: p\nssh: {user: u, known_hosts: [known_hosts], config: ssh_config}\nnodes: [{name: gpu-01}]\n"), noEnv)
	if err != nil || inv.Nodes[0].Address != "gpu-01" || inv.Nodes[0].FabricAddress != "10.0.0.1" {
		t.Errorf("no address with ssh_config: %v %v", inv, err)
	}
	_, err = parse(filepath.Join(dir, "inv.yaml"), []byte("provider: p\nssh: {user: u, known_hosts: [known_hosts], config: ssh_config}\nnodes: [{name: gpu-02}]\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "nodes[0].address: required") {
		t.Errorf("no address, no Host entry: %v", err)
	}
}

// ssh.user may be left to ssh_config: its User for a node's address is the
// node's (the record names the account); a node it gives none is named.
func TestUserFromSSHConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "ssh_config"), []byte("Host gpu-*\n  User alice\n  HostName 10.0.0.%h\n"), 0o600)
	head := "provider: p\nssh: {known_hosts: [known_hosts], config: ssh_config}\n"
	inv, err := parse(filepath.Join(dir, "inv.yaml"), []byte(head+`nodes: [{name: "gpu-[1-2]"}, {name: b, address: 10.0.0.9, user: bob}]`+"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if u := inv.Nodes[0].User + inv.Nodes[1].User + inv.Nodes[2].User; u != "alicealicebob" {
		t.Errorf("users %q", u)
	}
	_, err = parse(filepath.Join(dir, "inv.yaml"), []byte(head+`nodes: [{name: gpu-1}, {name: login, address: 10.0.0.9}]`+"\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "nodes[1].user: required: ssh.user is not set, so every node needs a user, or a User for them in "+filepath.Join(dir, "ssh_config")) {
		t.Errorf("a node ssh_config gives no user: %v", err)
	}
}

// Every mistake in a range names the entry, the range and the counts.
func TestNodeRangeErrors(t *testing.T) {
	for _, c := range []struct{ nodes, want string }{
		{`[{name: "gpu-[01-04]", address: "10.0.0.[1-3]"}]`, `nodes[0].address: "10.0.0.[1-3]" names 3 hosts, and gpu-[01-04] names 4 nodes: one each`},
		{`[{name: "gpu-[01-04]", address: 10.0.0.1}]`, `nodes[0].address: "10.0.0.1" is one host for the 4 names of gpu-[01-04]: give a range of 4`},
		{`[{name: "gpu-[1-", address: 10.0.0.1}]`, `nodes[0].name: "gpu-[1-": `},
		{`[{name: "gpu-[01-02]", address: "10.0.0.[1-2]"}, {name: gpu-02, address: 10.0.0.9}]`, `nodes[1].name: duplicate name: nodes[0] is also called "gpu-02"`},
		{`[{name: "GPU-[1-2]", address: "10.0.0.[1-2]"}]`, `nodes[0].name: GPU-1: "GPU-1" is not a DNS label`},
		{`[{name: "gpu-[1-2]", address: "10.0.0.[1-2]", fabric_address: "10.1.0.[1-3]"}]`, `nodes[0].fabric_address: "10.1.0.[1-3]" names 3 hosts, and gpu-[1-2] names 2 nodes: one each`},
		{`[{name: "gpu-[1-2]"}]`, `nodes[0].address: gpu-1: required: the node's IP address or host name`},
	} {
		_, err := parseText(t, rangesHead+"nodes: "+c.nodes+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.nodes, err, c.want)
		}
	}
	for _, missing := range []string{"missing/hosts.txt", "hosts"} {
		_, err := parseText(t, rangesHead+"nodes_from: "+missing+"\n")
		if err == nil || !strings.Contains(err.Error(), "nodes_from: ") || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("a missing nodes_from file %s: %v", missing, err)
		}
	}
	// A file of IP addresses names each node after its whole address; a
	// line too long to be a host list is an error, not a shorter fleet.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "ips"), []byte("10.0.0.5\n10.0.0.6\n"), 0o644)
	inv, err := parse(filepath.Join(dir, "inv.yaml"), []byte(rangesHead+"nodes_from: ips\n"), noEnv)
	if err != nil || len(inv.Nodes) != 2 || inv.Nodes[1].Name != "10-0-0-6" || inv.Nodes[1].Address != "10.0.0.6" {
		t.Errorf("a file of IP addresses: %v %v", inv, err)
	}
	os.WriteFile(filepath.Join(dir, "long"), []byte("gpu-1\n"+strings.Repeat("x", 5<<20)+"\n"), 0o644)
	if _, err := parse(filepath.Join(dir, "inv.yaml"), []byte(rangesHead+"nodes_from: long\n"), noEnv); err == nil || !strings.Contains(err.Error(), "nodes_from: ") {
		t.Errorf("a 5 MiB line: %v", err)
	}
}

// A 1,000-node inventory is three lines, and parses quickly enough to be
// a non-issue (BenchmarkParseThousandNodes shows the figure).
func TestThousandNodesInALine(t *testing.T) {
	inv, err := parseText(t, rangesHead+`nodes: [{name: "gpu-[0001-1000]", address: "10.40.[0-3].[1-250]"}]`+"\n")
	if err != nil || len(inv.Nodes) != 1000 || inv.Nodes[999].Address != "10.40.3.250" {
		t.Fatalf("%v %v", err, len(inv.Nodes))
	}
}

func BenchmarkParseThousandNodes(b *testing.B) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	text := []byte(fmt.Sprintf(rangesHead + `nodes: [{name: "gpu-[0001-1000]", address: "10.40.[0-3].[1-250]"}]` + "\n"))
	for b.Loop() {
		if _, err := parse(filepath.Join(dir, "inv.yaml"), text, noEnv); err != nil {
			b.Fatal(err)
		}
	}
}
