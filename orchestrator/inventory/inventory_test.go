package inventory

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the .err files of inventories/testdata from what Load returns")

const (
	examplesDir = "../../inventories"
	testdataDir = "../../inventories/testdata"
	// fileToken in an .err file stands for the path the test loads the
	// inventory from.
	fileToken = "{{file}}"
)

// noEnv keeps the developer's own GPUACCEPT_* variables out of tests.
func noEnv(string) (string, bool) { return "", false }

// fakeEnv is an environment holding only vars.
func fakeEnv(vars map[string]string) lookupEnv {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// TestBadInventories loads every testdata/bad-*.yaml and compares the
// whole error text with its .err file.
func TestBadInventories(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	files, err := filepath.Glob(filepath.Join(testdataDir, "bad-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("%d bad inventories in %s, want at least 30", len(files), testdataDir)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			_, err := load(file, noEnv)
			var ie *Error
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			errFile := strings.TrimSuffix(file, ".yaml") + ".err"
			got := strings.ReplaceAll(err.Error(), file, fileToken)
			if *update {
				if err := os.WriteFile(errFile, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(errFile)
			if err != nil {
				t.Fatal(err)
			}
			if got != strings.TrimRight(string(want), "\n") {
				t.Errorf("error text differs from %s\ngot:\n%s\nwant:\n%s", filepath.Base(errFile), got, want)
			}
			for _, p := range ie.Problems {
				if p.Message == "" {
					t.Errorf("problem without a message: %+v", p)
				}
			}
		})
	}
}

// TestExamplesLoad loads every example inventory: they are documentation
// that must not rot.
func TestExamplesLoad(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d example inventories, want lab, demo and 3 provider shapes", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			inv, err := load(file, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Path != file || len(inv.Digest) != 64 {
				t.Errorf("path %q digest %q", inv.Path, inv.Digest)
			}
			checkInvariants(t, inv)
		})
	}
}

// checkInvariants holds for every inventory Load accepts: what later
// stages may rely on without checking again.
func checkInvariants(t *testing.T, inv *Inventory) {
	t.Helper()
	// Nodes, or none but the window's own allocation's, never both.
	// No node named: the window's own Slurm allocation's, or those the
	// Kubernetes node_selector finds when the window starts.
	later := inv.Slurm.Allocates() || inv.Kubernetes.NodeSelector != ""
	if inv.Provider == "" || len(inv.Nodes) == 0 && !later || len(inv.Nodes) > 0 && inv.Slurm.Allocates() {
		t.Errorf("provider %q, %d nodes, allocates %v, node_selector %q", inv.Provider, len(inv.Nodes), inv.Slurm.Allocates(), inv.Kubernetes.NodeSelector)
	}
	for i, n := range inv.Nodes {
		if n.Name == "" || n.Address == "" || n.User == "" || n.Port < 0 || n.Port > 65535 {
			t.Errorf("nodes[%d] = %+v", i, n)
		}
	}
	if len(inv.SSH.KnownHosts) == 0 {
		t.Error("no known_hosts")
	}
	if inv.SSH.Concurrency < 0 {
		t.Errorf("concurrency %d", inv.SSH.Concurrency)
	}
	if a := inv.Acceptance.Tolerance; !(a > 0 && a <= 1) {
		t.Errorf("tolerance %v", a)
	}
	if l := inv.Phases.Diag.Level; l < 1 || l > 4 {
		t.Errorf("diag level %d", l)
	}
	if ff := inv.Quote.FormFactor; ff != "" && ff != "SXM" && ff != "PCIe" {
		t.Errorf("form factor %q", ff)
	}
}

func TestLabInventory(t *testing.T) {
	inv, err := load(filepath.Join(examplesDir, "lab.yaml"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Simulated || inv.SSH.User != "root" {
		t.Errorf("simulated %v user %q", inv.Simulated, inv.SSH.User)
	}
	want := []string{"10.231.0.11", "10.231.0.12", "10.231.0.13", "10.231.0.14"}
	var got []string
	for _, n := range inv.Nodes {
		got = append(got, n.Address)
		if n.User != "root" || n.Port != 0 {
			t.Errorf("%s: user %q port %d", n.Name, n.User, n.Port)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("addresses %v, want %v", got, want)
	}
	if !reflect.DeepEqual(inv.SSH.IdentityFiles, []string{"/tmp/gpuaccept-lab-lab/client_ed25519"}) ||
		!reflect.DeepEqual(inv.SSH.KnownHosts, []string{"/tmp/gpuaccept-lab-lab/known_hosts"}) {
		t.Errorf("identity %v known_hosts %v", inv.SSH.IdentityFiles, inv.SSH.KnownHosts)
	}
	q := inv.Quote
	if q.GPUModel != "NVIDIA H100 80GB HBM3" || q.GPUsPerNode != 8 || q.FormFactor != "SXM" || q.GPUMemoryGiB != 80 {
		t.Errorf("quote %+v", q)
	}
}

func TestDemoInventoryPorts(t *testing.T) {
	inv, err := load(filepath.Join(examplesDir, "demo.yaml"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range inv.Nodes {
		if n.Address != "127.0.0.1" || n.Port != 2201+i {
			t.Errorf("nodes[%d] = %s:%d", i, n.Address, n.Port)
		}
	}
}

const minimal = `provider: vendor-a
ssh:
  user: ubuntu
nodes:
  - name: gpu-01
    address: 10.0.0.11
`

func TestDefaults(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	inv, err := parse("/inv/a.yaml", []byte(minimal), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	n := inv.Nodes[0]
	if n.Port != 0 || n.User != "ubuntu" { // 0: ssh_config's Port, else 22, at dial time
		t.Errorf("node %+v", n)
	}
	if inv.Acceptance.Tolerance != DefaultTolerance || inv.Phases.Diag.Level != DefaultDiagLevel || inv.SSH.Concurrency != DefaultConcurrency {
		t.Errorf("tolerance %v level %d concurrency %d", inv.Acceptance.Tolerance, inv.Phases.Diag.Level, inv.SSH.Concurrency)
	}
	if !reflect.DeepEqual(inv.SSH.KnownHosts, []string{"/home/tester/.ssh/known_hosts"}) {
		t.Errorf("known_hosts %v", inv.SSH.KnownHosts)
	}
	if !On(inv.Phases.Preflight.Enabled) || !On(inv.Phases.Diag.Enabled) {
		t.Error("phases off by default")
	}
}

// TestExplicitZeroIsKept: 0 written in the file is a value, not "absent".
func TestExplicitZeroIsKept(t *testing.T) {
	inv, err := parse("a.yaml", []byte(minimal+"  - {name: gpu-02, address: 10.0.0.12, user: admin}\n"+
		"ssh_extra: 1\n"[:0]+"phases: {preflight: {enabled: false}}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if On(inv.Phases.Preflight.Enabled) {
		t.Error("preflight enabled: false was ignored")
	}
	if inv.Nodes[1].User != "admin" {
		t.Errorf("node user %q overridden by ssh.user", inv.Nodes[1].User)
	}
	inv, err = parse("a.yaml", []byte(strings.Replace(minimal, "  user: ubuntu\n", "  user: ubuntu\n  concurrency: 0\n", 1)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if inv.SSH.Concurrency != 0 {
		t.Errorf("concurrency: 0 became %d", inv.SSH.Concurrency)
	}
}

func TestRelativePathsFollowTheFile(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	src := strings.Replace(minimal, "  user: ubuntu\n", `  user: ubuntu
  identity_files: [keys/id_ed25519, ~/.ssh/id_rsa, /abs/key]
  known_hosts: [hosts/known]
  config: ssh_config
`, 1)
	inv, err := parse("/srv/inv/vendor.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	s := inv.SSH
	if want := []string{"/srv/inv/keys/id_ed25519", "/home/tester/.ssh/id_rsa", "/abs/key"}; !reflect.DeepEqual(s.IdentityFiles, want) {
		t.Errorf("identity_files %v, want %v", s.IdentityFiles, want)
	}
	if !reflect.DeepEqual(s.KnownHosts, []string{"/srv/inv/hosts/known"}) || s.Config != "/srv/inv/ssh_config" {
		t.Errorf("known_hosts %v config %q", s.KnownHosts, s.Config)
	}
	inv, err = parse("/srv/inv/vendor.yaml", []byte(strings.Replace(minimal, "  user: ubuntu\n", "  user: ubuntu\n  config: none\n", 1)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if inv.SSH.Config != "none" {
		t.Errorf("config none became %q", inv.SSH.Config)
	}
}

func TestLabelsAndThresholdsKeepTheirCase(t *testing.T) {
	src := minimal + `    labels: {Rack: R12, rack: r12, IB-Leaf: "3"}
acceptance:
  thresholds: {NCCL-002: 0.85, GPU-003: 1}
`
	inv, err := parse("a.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"Rack": "R12", "rack": "r12", "IB-Leaf": "3"}; !reflect.DeepEqual(inv.Nodes[0].Labels, want) {
		t.Errorf("labels %v, want %v", inv.Nodes[0].Labels, want)
	}
	if want := map[string]float64{"NCCL-002": 0.85, "GPU-003": 1}; !reflect.DeepEqual(inv.Acceptance.Thresholds, want) {
		t.Errorf("thresholds %v, want %v", inv.Acceptance.Thresholds, want)
	}
}

func TestMergeKeys(t *testing.T) {
	src := `provider: vendor-a
ssh: {user: ubuntu}
nodes:
  - &base {name: gpu-01, address: 10.0.0.11, port: 2222, labels: {Rack: r1}}
  - <<: *base
    name: gpu-02
    address: 10.0.0.12
`
	inv, err := parse("a.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	n := inv.Nodes[1]
	if n.Name != "gpu-02" || n.Port != 2222 || n.Labels["Rack"] != "r1" {
		t.Errorf("merged node %+v", n)
	}
}

func TestNormalization(t *testing.T) {
	src := minimal + `image:
  reference: nvcr.io/nvidia/pytorch:24.05-py3@sha256:` + strings.Repeat("ab", 32) + `
  runtime: Podman
quote:
  form_factor: pcie
  currency: usd
  busbw_size: 8G
  billing_granularity: 1m
phases:
  deadline: 1h30m
`
	inv, err := parse("a.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Image.Runtime != "podman" || inv.Quote.FormFactor != "PCIe" || inv.Quote.Currency != "USD" {
		t.Errorf("runtime %q form factor %q currency %q", inv.Image.Runtime, inv.Quote.FormFactor, inv.Quote.Currency)
	}
	if inv.Quote.BusBWSize != 8e9 || inv.Phases.Deadline != 90*time.Minute {
		t.Errorf("busbw_size %d deadline %v", inv.Quote.BusBWSize, inv.Phases.Deadline)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := fakeEnv(map[string]string{
		"GPUACCEPT_SSH_USER":               "admin",
		"GPUACCEPT_QUOTE_GPUS_PER_NODE":    "4",
		"GPUACCEPT_ACCEPTANCE_TOLERANCE":   "0.85",
		"GPUACCEPT_SIMULATED":              "TRUE",
		"GPUACCEPT_SSH_CONNECT_TIMEOUT":    "3s",
		"GPUACCEPT_QUOTE_BUSBW_SIZE":       "2GiB",
		"GPUACCEPT_QUOTE_CUDA":             "12.4",
		"GPUACCEPT_PHASES_DIAG_ENABLED":    "false",
		"GPUACCEPT_IMAGE_REFERENCE":        "",   // empty: not an override
		"GPUACCEPT_NODES":                  "x",  // not a scalar key: ignored
		"GPUACCEPT_QUOTE_PRICE_PER_GPU_HR": "9",  // no such key: ignored
		"GPUACCEPT_PHASES_DIAG_LEVEL":      " 3", // spaces around a number are fine
	})
	src := minimal + "quote:\n  gpus_per_node: 8\n"
	inv, err := parse("a.yaml", []byte(src), env)
	if err != nil {
		t.Fatal(err)
	}
	if inv.SSH.User != "admin" || inv.Nodes[0].User != "admin" {
		t.Errorf("user %q node user %q", inv.SSH.User, inv.Nodes[0].User)
	}
	q := inv.Quote
	if q.GPUsPerNode != 4 || q.BusBWSize != 2<<30 || q.CUDA != "12.4" {
		t.Errorf("quote %+v", q)
	}
	if inv.Acceptance.Tolerance != 0.85 || !inv.Simulated || inv.SSH.ConnectTimeout != 3*time.Second {
		t.Errorf("tolerance %v simulated %v timeout %v", inv.Acceptance.Tolerance, inv.Simulated, inv.SSH.ConnectTimeout)
	}
	if On(inv.Phases.Diag.Enabled) || inv.Phases.Diag.Level != 3 {
		t.Errorf("diag %+v", inv.Phases.Diag)
	}
}

func TestEnvOverrideBadValues(t *testing.T) {
	env := fakeEnv(map[string]string{
		"GPUACCEPT_QUOTE_GPUS_PER_NODE":  "eight",
		"GPUACCEPT_ACCEPTANCE_TOLERANCE": "1.5",
		"GPUACCEPT_SSH_CONNECT_TIMEOUT":  "30",
		"GPUACCEPT_SIMULATED":            "yes",
		"GPUACCEPT_IMAGE_REFERENCE":      "pytorch:latest",
	})
	src := minimal + "quote:\n  gpus_per_node: 8\n"
	_, err := parse("a.yaml", []byte(src), env)
	want := `a.yaml:1: acceptance.tolerance: must be more than 0 and at most 1 (a fraction of the quoted figure: 0.9 passes at 90%), got 1.5 (value from environment variable GPUACCEPT_ACCEPTANCE_TOLERANCE)
a.yaml:1: image.reference: "pytorch:latest" is not pinned: a tag can be moved to another image; pin it by digest as NAME@sha256:<64 hex digits> (docker buildx imagetools inspect pytorch:latest prints it) (value from environment variable GPUACCEPT_IMAGE_REFERENCE)
a.yaml:1: simulated: expected true or false, got "yes" (value from environment variable GPUACCEPT_SIMULATED)
a.yaml:2: ssh.connect_timeout: expected a duration such as "30s", "5m" or "1h30m", got "30": a duration needs a unit, e.g. "30s" (value from environment variable GPUACCEPT_SSH_CONNECT_TIMEOUT)
a.yaml:8: quote.gpus_per_node: expected an integer, got "eight" (value from environment variable GPUACCEPT_QUOTE_GPUS_PER_NODE)`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

// TestOSEnvironment goes through Parse and the process environment.
func TestOSEnvironment(t *testing.T) {
	for _, k := range envKeys {
		t.Setenv(k.name, "")
	}
	t.Setenv("GPUACCEPT_SSH_USER", "from-env")
	inv, err := Parse("a.yaml", []byte(strings.Replace(minimal, "  user: ubuntu\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if inv.Nodes[0].User != "from-env" {
		t.Errorf("user %q", inv.Nodes[0].User)
	}
}

func TestEnvVarNames(t *testing.T) {
	for key, want := range map[string]string{
		"ssh.user":             "GPUACCEPT_SSH_USER",
		"quote.gpus_per_node":  "GPUACCEPT_QUOTE_GPUS_PER_NODE",
		"acceptance.tolerance": "GPUACCEPT_ACCEPTANCE_TOLERANCE",
		"phases.diag.level":    "GPUACCEPT_PHASES_DIAG_LEVEL",
	} {
		if got := EnvVar(key); got != want {
			t.Errorf("EnvVar(%q) = %q, want %q", key, got, want)
		}
	}
	keys := EnvKeys()
	for _, k := range keys {
		if strings.HasPrefix(k, "nodes") && k != "nodes_from" || strings.HasSuffix(k, "known_hosts") || strings.HasSuffix(k, "thresholds") {
			t.Errorf("%s is not a scalar key", k)
		}
	}
	if len(keys) < 40 {
		t.Errorf("only %d overridable keys: %v", len(keys), keys)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	var ie *Error
	if !errors.As(err, &ie) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasSuffix(err.Error(), "missing.yaml: cannot read: no such file or directory") {
		t.Errorf("err = %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", maxSize)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "an inventory is at most") {
		t.Errorf("big file: %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{File: "f.yaml", Problems: []Problem{
		{Line: 3, Key: "nodes[0].port", Message: "bad"},
		{Line: 1, Message: "YAML syntax error: x"},
		{Key: "k", Message: "no line"},
	}}
	want := "f.yaml:3: nodes[0].port: bad\nf.yaml:1: YAML syntax error: x\nf.yaml: k: no line"
	if e.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", e.Error(), want)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]Bytes{
		"1GiB": 1 << 30, "512MiB": 512 << 20, "8G": 8e9, "8gb": 8e9, "1e9": 1e9, "1073741824": 1 << 30,
		"1.5GiB": 1536 << 20, "2 TB": 2e12, "4Ki": 4096, "0": 0, "100b": 100, "1e3KiB": 1024000, "+1k": 1000,
	} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "1.5B", "1GB/s", "1 e9", "1e999999999", "0x10", "1/2", "9EiB", "99999999PiB", "1..2G"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func TestBytesString(t *testing.T) {
	for b, want := range map[Bytes]string{1 << 30: "1GiB", 8e9: "8GB", 1000: "1KB", 1023: "1023B", 0: "0B", 3 << 20: "3MiB", 1536 << 20: "1536MiB"} {
		if got := b.String(); got != want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(b), got, want)
		}
		if back, err := ParseBytes(b.String()); err != nil || back != b {
			t.Errorf("ParseBytes(%q) = %d, %v", b.String(), back, err)
		}
	}
}
