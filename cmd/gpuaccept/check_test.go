package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	cleanOffer = "inventories/example-8xh100-infiniband.yaml"
	priceList  = "inventories/example-4xl40s-pcie-ethernet.yaml"
)

func TestCheckLintsTheQuote(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	res := gpuaccept(t, "../..", "check", cleanOffer)
	if res.code != 0 || !strings.HasSuffix(res.stdout, "\nquote lint: no warnings\n") {
		t.Fatalf("clean offer: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	res = gpuaccept(t, "../..", "check", priceList)
	if res.code != 0 {
		t.Fatalf("warnings changed the exit status: %d\n%s", res.code, res.stderr)
	}
	plan, lint, ok := strings.Cut(res.stdout, "\nquote lint: 8 warning(s)\n")
	if !ok || !strings.Contains(plan, "phases:") {
		t.Fatalf("no lint section after the plan:\n%s", res.stdout)
	}
	// A line too wide for the terminal goes on under itself, indented.
	lint = strings.ReplaceAll(lint, "\n      ", " ")
	lines := strings.Split(strings.TrimSuffix(lint, "\n"), "\n")
	var got []string
	for _, l := range lines {
		id, _, _ := strings.Cut(strings.TrimPrefix(l, "  "), "  ")
		got = append(got, id)
	}
	want := []string{"QUOTE-004", "QUOTE-005", "QUOTE-006", "QUOTE-008", "QUOTE-009", "QUOTE-010", "QUOTE-011", "QUOTE-012"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings %v, want %v\n%s", got, want, lint)
	}
	for _, line := range []string{
		"  QUOTE-004  no statement of how a failed node in a distributed job is handled (quote.terms.failed_node)",
		"  QUOTE-006  vague support terms: a first response within 24h is longer than 4h for the training window (quote.terms.support_response)",
		"  QUOTE-008  a rate of 0.99 USD per GPU-hour with no minimum utilisation or cancellation terms (quote.terms.minimum_utilization, quote.terms.cancellation)",
	} {
		if !slices.Contains(lines, line) {
			t.Errorf("lint lacks the line\n%s\nin\n%s", line, lint)
		}
	}
}

func TestCheckStrictQuote(t *testing.T) {
	res := gpuaccept(t, "../..", "check", "--strict-quote", priceList)
	if res.code != 1 || !strings.Contains(res.stderr, "--strict-quote: the quote has 8 warning(s)") ||
		!strings.Contains(res.stdout, "QUOTE-012") {
		t.Fatalf("warnings with --strict-quote: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := gpuaccept(t, "../..", "check", "--strict-quote", cleanOffer); res.code != 0 {
		t.Fatalf("a clean offer with --strict-quote: exit %d\n%s", res.code, res.stderr)
	}
	// An invalid inventory is still bad input, not a lint failure.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("provider: x\nssh: {user: u}\nnodes: [{name: a, address: 10.0.0.1}]\nquote: {terms: {benchmark_window: -1h}}\n"), 0o644)
	res = gpuaccept(t, dir, "check", "--strict-quote", bad)
	if res.code != 2 || !strings.Contains(unwrapped(res.stderr), bad+":4: quote.terms.benchmark_window: must not be negative") {
		t.Fatalf("invalid inventory: exit %d\n%s", res.code, res.stderr)
	}
	if res := gpuaccept(t, "../..", "check", "-o", "xml", cleanOffer); res.code != 2 || !strings.Contains(res.stderr, "--output") {
		t.Fatalf("-o xml: exit %d %s", res.code, res.stderr)
	}
}

func TestCheckJSON(t *testing.T) {
	type report struct {
		Inventory string `json:"inventory"`
		Digest    string `json:"sha256"`
		Warnings  []struct {
			ID      string   `json:"id"`
			Message string   `json:"message"`
			Keys    []string `json:"keys"`
		} `json:"warnings"`
	}
	res := gpuaccept(t, "../..", "check", "-o", "json", priceList)
	var r report
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &r) != nil {
		t.Fatalf("exit %d, stdout is not the lint as JSON:\n%s%s", res.code, res.stdout, res.stderr)
	}
	if r.Inventory != priceList || len(r.Digest) != 64 || len(r.Warnings) != 8 || strings.Contains(res.stdout, "phases:") {
		t.Fatalf("unexpected report %+v", r)
	}
	w := r.Warnings[1]
	if w.ID != "QUOTE-005" || !reflect.DeepEqual(w.Keys, []string{"quote.price_storage_per_tib_month"}) || !strings.Contains(w.Message, "storage missing from the price") {
		t.Errorf("warnings[1] = %+v", w)
	}

	res = gpuaccept(t, "../..", "check", "--output=json", "--strict-quote", cleanOffer)
	if res.code != 0 || !strings.Contains(res.stdout, `"warnings": []`) {
		t.Fatalf("clean offer: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = gpuaccept(t, "../..", "check", "-o", "json", "--strict-quote", priceList)
	if res.code != 1 || json.Unmarshal([]byte(res.stdout), &r) != nil {
		t.Fatalf("--strict-quote with -o json: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// TestCheckWarnsOfQuotedFiguresThePlanWillNotMeasure: a quote that states
// an inter-node busbw and a checkpoint rate with those phases off would
// pass the window with its key test unrun; check says so (PLAN-001, the
// key that turns it on), and every example measures what it quotes.
func TestCheckWarnsOfQuotedFiguresThePlanWillNotMeasure(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("../..", cleanOffer))
	if err != nil {
		t.Fatal(err)
	}
	off := strings.Replace(strings.Replace(string(src), "  allreduce:\n    enabled: true", "  allreduce:\n    enabled: false", 1),
		"  checkpoint:\n    enabled: true", "  checkpoint:\n    enabled: false", 1)
	inv := filepath.Join(dir, "off.yaml")
	if err := os.WriteFile(inv, []byte(off), 0o644); err != nil {
		t.Fatal(err)
	}
	res := gpuaccept(t, "../..", "check", inv)
	for _, want := range []string{
		"PLAN-001  quote.inter_busbw_gbs (370) will not be measured: NCCL-002 needs phases.allreduce.enabled",
		"PLAN-001  quote.checkpoint_gbs (5) will not be measured: CKPT-002, CKPT-003 need phases.checkpoint.enabled",
	} {
		if !strings.Contains(strings.ReplaceAll(res.stdout, "\n      ", " "), want) {
			t.Errorf("check does not say %q:\n%s", want, res.stdout)
		}
	}
	if res := gpuaccept(t, "../..", "check", "--strict-quote", inv); res.code != 1 {
		t.Errorf("--strict-quote over an unmeasured figure: exit %d", res.code)
	}
	examples, _ := filepath.Glob("../../inventories/example-*.yaml")
	for _, ex := range examples {
		if res := gpuaccept(t, "../..", "check", strings.TrimPrefix(ex, "../../")); strings.Contains(res.stdout, "PLAN-001") {
			t.Errorf("%s quotes what it does not measure:\n%s", ex, res.stdout)
		}
	}
}

// A 1,000-node inventory is three lines of nodes, and check prints it in
// a few: nodes alike share a row as a host range, every line in 100
// columns.
func TestCheckAThousandNodes(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "known_hosts"), nil, 0o600)
	inv := filepath.Join(dir, "fleet.yaml")
	os.WriteFile(inv, []byte(`provider: vendor-a
ssh: {user: ubuntu, known_hosts: [known_hosts], config: none}
quote: {gpu_model: NVIDIA H100 80GB HBM3, gpus_per_node: 8, price_per_gpu_hour: 2.5}
nodes:
  - {name: "gpu-[0001-0500]", address: "10.40.[0-1].[1-250]", labels: {rack: a}}
  - {name: "gpu-[0501-1000]", address: "10.40.[2-3].[1-250]", labels: {rack: b}}
`), 0o644)
	res := gpuaccept(t, dir, "check", inv)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) > 60 {
		t.Errorf("%d lines for 1,000 nodes", len(lines))
	}
	for _, l := range lines {
		if len([]rune(l)) > 100 {
			t.Errorf("wider than 100 columns: %q", l)
		}
	}
	for _, want := range []string{"1000 node(s)", "gpu-[0001-0500]  10.40.0.[1-250],10.40.1.[1-250]  ubuntu  rack=a"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("no %q in\n%s", want, res.stdout)
		}
	}
}

// TestCheckErrorsFitTheTerminal: a bad Slurm inventory's problems, each
// led by the file, line and key, fit the terminal's 100 columns (or
// COLUMNS), the rest of a problem under it, indented; no word is lost.
func TestCheckErrorsFitTheTerminal(t *testing.T) {
	const bad = "inventories/testdata/bad-slurm-allocate.yaml"
	want, err := os.ReadFile("../../inventories/testdata/bad-slurm-allocate.err")
	if err != nil {
		t.Fatal(err)
	}
	for _, cols := range []int{100, 72} {
		t.Setenv("COLUMNS", strconv.Itoa(cols))
		res := gpuaccept(t, "../..", "check", bad)
		if res.code != 2 {
			t.Fatalf("exit %d, want 2\n%s", res.code, res.stderr)
		}
		for _, l := range strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > cols {
				t.Errorf("COLUMNS=%d: a line of %d: %q", cols, n, l)
			}
		}
		joined := unwrapped(res.stderr)
		if w := strings.ReplaceAll(string(want), "{{file}}", bad); joined != w {
			t.Errorf("COLUMNS=%d: the problems, unwrapped, differ:\ngot:\n%s\nwant:\n%s", cols, joined, w)
		}
	}
}

// The plan of an inventory of a managed Kubernetes cluster says how its
// nodes are reached (the kubeconfig, the namespace, the pods it makes and
// what they ask for), not the SSH settings it never uses; check alone
// reads no API, so the kubeconfig need not exist yet.
func TestCheckSaysThePodsOfAKubernetesWindow(t *testing.T) {
	work := t.TempDir()
	inv := filepath.Join(work, "k.yaml")
	os.WriteFile(inv, []byte(`provider: vendor-k
transport: kubernetes
image: {reference: "registry.example/train@sha256:`+strings.Repeat("0", 64)+`"}
quote: {gpus_per_node: 8}
kubernetes:
  kubeconfig: `+filepath.Join(work, "kubeconfig")+`
  namespace: gpu
  nodes: ["gpu-[01-04].pool-a"]
`), 0o644)
	res := gpuaccept(t, work, "check", inv)
	flat := strings.Join(strings.Fields(res.stdout), " ")
	want := "4 node(s) through the Kubernetes API (kubeconfig " + filepath.Join(work, "kubeconfig") + ", namespace gpu): one pod each of registry.example/train@sha256:"
	if res.code != 0 || !strings.Contains(flat, want) || !strings.Contains(flat, "asking for 8 nvidia.com/gpu, deleted at the window's end") ||
		strings.Contains(res.stdout, "known_hosts") {
		t.Errorf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// Nodes the selector will choose when the window starts: none yet.
	sel := filepath.Join(work, "sel.yaml")
	os.WriteFile(sel, []byte(`provider: vendor-k
image: {reference: "registry.example/train@sha256:`+strings.Repeat("0", 64)+`"}
quote: {gpus_per_node: 8}
kubernetes:
  node_selector: pool=a
`), 0o644)
	res = gpuaccept(t, work, "check", sel)
	flat = strings.Join(strings.Fields(res.stdout), " ")
	if res.code != 0 || !strings.Contains(flat, "the nodes through the Kubernetes API") ||
		!strings.Contains(flat, "nodes: those kubernetes.node_selector pool=a finds when the window starts") ||
		strings.Contains(res.stdout, "0 node(s)") || strings.Contains(res.stdout, "NODE ") || strings.Contains(res.stdout, "known_hosts") ||
		!strings.Contains(res.stdout, "32 at a time") {
		t.Errorf("selector: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// A command given too few or too many arguments says which, in its own
// usage's words, not cobra's "accepts 1 arg(s), received 0".
func TestMissingArgumentsSayWhatIsMissing(t *testing.T) {
	work := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "status needs RUN_DIR (gpuaccept status RUN_DIR; --help says more)"},
		{[]string{"diff", "a"}, "diff needs BASELINE CANDIDATE"},
		{[]string{"check", "a", "b"}, "check takes INVENTORY, got 2 argument(s): a b"},
		{[]string{"parse", "dcgmi"}, "dcgmi needs FILE (gpuaccept parse dcgmi FILE;"},
	} {
		res := gpuaccept(t, work, tc.args...)
		if res.code == 0 || !strings.Contains(res.stderr, tc.want) || strings.Contains(res.stderr, "accepts") {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
}
