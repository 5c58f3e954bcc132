package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/scripts/standins"
)

// A seed is one fabric, the same in every build; 0 is the demo as
// documented.
func TestDemoSeed(t *testing.T) {
	inv, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	for seed, want := range map[int64]string{
		0: "gpu-01=370/450,gpu-02=370/450,gpu-03=185/450,gpu-04=370/450",
		3: "gpu-01=372.5/438.5,gpu-02=259/453.7,gpu-03=361.9/460.5,gpu-04=369.8/460.5",
		8: "gpu-01=374.2/451,gpu-02=360.3/446.6,gpu-03=380.1/446.1,gpu-04=360.7/448.3",
	} {
		if got := standins.FormatFabric(demoFabric(inv.Nodes, hw, seed)); got != want {
			t.Errorf("seed %d: %s, want %s", seed, got, want)
		}
	}
	if a, b := demoFabric(inv.Nodes, hw, 3), demoFabric(inv.Nodes, hw, 4); standins.FormatFabric(a) == standins.FormatFabric(b) {
		t.Error("seeds 3 and 4 made the same fabric")
	}
	// Every seed: the degraded node's fraction clear of the demo's
	// thresholds, the others within ±3% of the hardware's rates.
	for seed := int64(1); seed < 200; seed++ {
		inter, intra := demoScales(seed, 4)
		slow := 0
		for i := range 4 {
			if intra[i] < 0.97 || intra[i] > 1.03 {
				t.Fatalf("seed %d: intra %v", seed, intra)
			}
			if inter[i] < 0.97 {
				slow++
				if inter[i] > 0.95 || (inter[i] > 0.75 && inter[i] < 0.85) {
					t.Fatalf("seed %d: inter %v near a threshold", seed, inter)
				}
			}
		}
		if slow > 1 || inter[0]*inter[1]*inter[2]*inter[3] == 0 {
			t.Fatalf("seed %d: inter %v", seed, inter)
		}
	}
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// --quote replaces the demo's quote and nothing else; a bad file is named
// with its line and key, and nothing starts.
func TestDemoQuoteFile(t *testing.T) {
	dir := t.TempDir()
	_, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	block := writeFile(t, filepath.Join(dir, "block.yaml"), "# vendor B\nquote:\n  gpu_model: NVIDIA H100 80GB HBM3\n"+
		"  gpus_per_node: 8\n  fabric: infiniband\n  inter_busbw_gbs: 360\n  price_per_gpu_hour: 1.99\n  currency: usd\n...\n")
	flow := writeFile(t, filepath.Join(dir, "flow.yaml"), `{quote: {gpu_model: NVIDIA H100 80GB HBM3, price_per_gpu_hour: 3.1, currency: EUR}}`)
	for _, c := range []struct {
		file, price, currency string
	}{{block, "1.99", "USD"}, {flow, "3.1", "EUR"}} {
		inv, gotHW, err := demoInventory(c.file)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		q, _ := json.Marshal(inv.Quote)
		if !strings.Contains(string(q), `"price_per_gpu_hour":`+c.price+`,"`) || inv.Quote.Currency != c.currency {
			t.Errorf("%s: quote %s", c.file, q)
		}
		// The rest is the demo's, and so is the hardware.
		if len(inv.Nodes) != 4 || !inv.Simulated || inv.Provider != "demo" || !inv.Phases.AllReduce.Enabled || !reflect.DeepEqual(gotHW, hw) ||
			inv.Path != "demo.yaml (embedded) with the quote of "+c.file {
			t.Errorf("%s: %d nodes, simulated %v, provider %q, path %q, hardware %+v", c.file, len(inv.Nodes), inv.Simulated, inv.Provider, inv.Path, gotHW)
		}
	}
	if inv, _, _ := demoInventory(block); inv.Quote.InterBusBWGBs != 360 || inv.Quote.Fabric != "infiniband" || inv.Quote.FormFactor != "" {
		t.Errorf("the file's quote replaces the demo's, it is not merged into it: %+v", inv.Quote)
	}

	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"bad.yaml", "quote:\n  gpus_per_node: -1\n  form_factor: OAM\n  gpu_modle: x\n", []string{
			"bad.yaml:2: quote.gpus_per_node: must not be negative, got -1",
			"bad.yaml:3: quote.form_factor: must be SXM or PCIe",
			`bad.yaml:4: quote.gpu_modle: unknown key; did you mean "gpu_model"?`}},
		{"extra.yaml", "quote:\n  gpus_per_node: 8\nnodes: []\n", []string{"extra.yaml:3: nodes: not read: a --quote file holds only quote:"}},
		{"scalar.yaml", "quote: cheap\n", []string{"scalar.yaml:1: quote: expected a mapping"}},
		{"noquote.yaml", "price_per_gpu_hour: 2\n", []string{"noquote.yaml:1: price_per_gpu_hour: not read", "noquote.yaml:1: quote: missing"}},
		{"empty.yaml", "", []string{"empty.yaml: expected a mapping with one key, quote:"}},
		{"two.yaml", "quote: {gpus_per_node: 8}\n---\nquote: {gpus_per_node: 4}\n", []string{"two.yaml:2: one YAML document only"}},
	} {
		path := writeFile(t, filepath.Join(dir, c.name), c.text)
		_, _, err := demoInventory(path)
		var ie *inventory.Error
		if !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an inventory error", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), dir+string(filepath.Separator)+w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
		if len(ie.Problems) != len(c.want) {
			t.Errorf("%s: %d problems, want %d: %v", c.name, len(ie.Problems), len(c.want), err)
		}
	}

	// The command: exit 2, the file named, no node started.
	res := gpuaccept(t, dir, "demo", "--quote", "bad.yaml", "--runs-dir", "runs")
	if res.code != 2 || !strings.Contains(res.stderr, "bad.yaml:2: quote.gpus_per_node: must not be negative") ||
		strings.Contains(res.stderr, "simulated nodes") || res.stdout != "" {
		t.Errorf("bad quote: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if res := gpuaccept(t, dir, "demo", "--quote", "missing.yaml"); res.code != 2 || !strings.Contains(res.stderr, "missing.yaml: cannot read: no such file or directory") {
		t.Errorf("missing quote: exit %d\n%s", res.code, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run directory was made: %v", err)
	}
}

// Three demos, each with its own seed and quote, compared: a column each,
// the quotes as given, the all-reduce failing where the seed degraded a
// node and passing where it did not.
func TestCompareDemos(t *testing.T) {
	work := t.TempDir()
	quoteB := writeFile(t, filepath.Join(work, "vendor-b.yaml"), `# vendor B: cheaper, InfiniBand, a lower all-reduce promise
quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  form_factor: SXM
  fabric: infiniband
  nics_per_node: 8
  nic_gbps: 400
  intra_busbw_gbs: 450
  inter_busbw_gbs: 360
  price_per_gpu_hour: 1.99
  currency: USD
  billing_granularity: 1h
`)
	quoteC := writeFile(t, filepath.Join(work, "vendor-c.yaml"), `quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  form_factor: SXM
  fabric: roce
  nics_per_node: 8
  nic_gbps: 400
  intra_busbw_gbs: 440
  inter_busbw_gbs: 380
  price_per_gpu_hour: 3.10
  currency: EUR
`)
	// Seed 8 degrades no node; seed 3 puts gpu-02 at 70% (TestDemoSeed).
	demos := []struct {
		args     []string
		progress string
	}{
		{nil, "demo: seed 0: gpu-03's inter-node links at 50% (185 GB/s)"},
		{[]string{"--seed", "8", "--quote", quoteB}, "demo: seed 8: no node's links degraded"},
		{[]string{"--seed", "3", "--quote", quoteC}, "demo: seed 3: gpu-02's inter-node links at 70% (259 GB/s)"},
	}
	var dirs, ids []string
	for i, d := range demos {
		runs := filepath.Join(work, "runs", string(rune('a'+i)))
		res := gpuaccept(t, work, append([]string{"demo", "--runs-dir", runs}, d.args...)...)
		if res.code != 1 || !strings.Contains(res.stderr, d.progress) {
			t.Fatalf("demo %v: exit %d, want 1 and %q\n%s", d.args, res.code, d.progress, res.stderr)
		}
		entries, _ := os.ReadDir(runs)
		if len(entries) != 1 {
			t.Fatalf("demo %v: %d runs", d.args, len(entries))
		}
		dirs = append(dirs, filepath.Join(runs, entries[0].Name()))
		ids = append(ids, entries[0].Name())
	}

	// Labelled, given as directories of runs (runs/a holds one), on a
	// wide terminal: one column each.
	t.Setenv("COLUMNS", "400")
	res := gpuaccept(t, work, "compare", filepath.Join(work, "runs", "a"), filepath.Join(work, "runs", "b"), filepath.Join(work, "runs", "c"),
		"--label", "a=Vendor A", "--label", "b=Vendor B", "--label", "3=Vendor C")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("compare: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	cols := func(label string, cells ...string) string {
		return `\n\| ` + regexp.QuoteMeta(label) + `\s+\| ` + strings.Join(cells, `\s+\| `) + `\s+\|\n`
	}
	for _, re := range []string{
		`\n\|\s+\|\s+Vendor A\s+\|\s+Vendor B\s+\|\s+Vendor C\s+\|\n`,
		cols("run ID", ids...),
		cols("simulated", "SIMULATED", "SIMULATED", "SIMULATED"),
		cols("quote: price per GPU-hour", `2\.49 USD`, `1\.99 USD`, `3\.10 EUR`),
		cols("quote: fabric", "roce", "infiniband", "roce"),
		cols("nodes accepted", `2 of 4 \(not: gpu-03, gpu-04\)`, `3 of 4 \(not: gpu-04\)`, `[23] of 4 \(not: [^|]*gpu-04\)`),
		// What the seeds did: gpu-03 at half rate, no node degraded,
		// gpu-02 at 70%; each against its own quote.
		cols("NCCL-002", `FAIL 18\d(\.\d)? GB/s vs 370 GB/s \(0\.(49|50)\)`, `PASS 3[56]\d(\.\d)? GB/s vs 360 GB/s \((0\.9\d|1\.0\d)\)`,
			`FAIL 25\d(\.\d)? GB/s vs 380 GB/s \(0\.6\d\)`),
		// The bisection names gpu-03 at half rate, and no node where none
		// is degraded (with gpu-04 quarantined, gpu-02 at 70% is in every
		// pair it runs: not asserted).
		cols("NCCL-004", `FAIL slow: node gpu-03 [^|]*`, `PASS [^|]*`, `[^|]*`),
		cols("NCCL-003", `PASS 4\d\d(\.\d)? GB/s vs 450 GB/s \([01]\.\d\d\) on gpu-0[123]`, `PASS 4\d\d(\.\d)? GB/s vs 450 GB/s \([01]\.\d\d\) on gpu-0[123]`,
			`PASS 4\d\d(\.\d)? GB/s vs 440 GB/s \([01]\.\d\d\) on gpu-0[123]`),
		cols("DIAG-001", `FAIL \(1 of 4\) failed on gpu-04`, `FAIL \(1 of 4\) failed on gpu-04`, `FAIL \(1 of 4\) failed on gpu-04`),
		// The demo's node-kill test, the same in every run: the last node
		// left after the diagnostic killed, the job going on without it.
		cols("failure: test", "kill-node on gpu-03, elastic recovery", "kill-node on gpu-03, elastic recovery", "kill-node on gpu-03, elastic recovery"),
		cols("failure: time to detection", `\d\.\d+ s`, `\d\.\d+ s`, `\d\.\d+ s`),
		cols("RECOV-001", `PASS resumed [^|]*`, `PASS resumed [^|]*`, `PASS resumed [^|]*`),
		cols("cost of the window", `\d+\.\d\d USD`, `\d+\.\d\d USD`, `\d+\.\d\d EUR`),
		// The degraded node's Xid (HEALTH-012) is one more FAIL in a and c.
		cols("HEALTH-012", `FAIL \(1 of 4\) 1 kernel event: Xid 94 on GPU 5 [^|]*`, `PASS [^|]*`, `FAIL \(1 of 4\) [^|]*`),
		cols("verdict", `NOT ACCEPTED: [^(|]*\(5 FAIL, [^|]*`, `NOT ACCEPTED: [^(|]*\(2 FAIL, [^|]*`, `NOT ACCEPTED: [^(|]*\([45] FAIL, [^|]*`),
		`\n3 runs compared: ACCEPTED none; NOT ACCEPTED Vendor A, Vendor B, Vendor C \(SIMULATED\)\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(res.stdout) {
			t.Errorf("no match for %s in\n%s", re, res.stdout)
		}
	}
	if !strings.HasPrefix(res.stdout, "SIMULATED | gpuaccept compare | 3 runs | ") {
		t.Errorf("banner: %s", strings.SplitN(res.stdout, "\n", 2)[0])
	}
	// Without labels, the runs' directory given: demo, told apart by
	// position; at 100 columns, too narrow for three side by side, a
	// block per row with the runs one under the other.
	t.Setenv("COLUMNS", "100")
	block := gpuaccept(t, work, append([]string{"compare"}, dirs...)...)
	for i, l := range strings.Split(block.stdout, "\n") {
		if len([]rune(l)) > 100 {
			t.Errorf("at 100 columns, line %d is %d wide: %s", i+1, len([]rune(l)), l)
		}
	}
	for _, want := range []string{"3 runs do not fit side by side in 100 columns", "\nNCCL-002\n  demo #1  FAIL ",
		"\n  demo #2  ", "\n  demo #3  "} {
		if !strings.Contains(block.stdout, want) {
			t.Errorf("no %q in\n%s", want, block.stdout)
		}
	}
	if bad := gpuaccept(t, work, append([]string{"compare", "--label", "zz=X"}, dirs...)...); bad.code != 2 || !strings.Contains(bad.stderr, `no run is "zz"`) {
		t.Errorf("an unknown label key: exit %d\n%s", bad.code, bad.stderr)
	}

	// JSON: the schema, the quotes as given, the statuses per run.
	res = gpuaccept(t, work, append([]string{"compare", "-o", "json"}, dirs...)...)
	var c struct {
		Schema string
		Runs   []struct {
			ID, Path string
			Quote    struct {
				Fabric          string
				PricePerGPUHour float64 `json:"price_per_gpu_hour"`
				Currency        string
			}
			NodesAccepted []string `json:"nodes_accepted"`
			Accepted      bool
		}
		Criteria []struct {
			ID   string
			Runs []*struct{ Status string }
		}
	}
	if err := json.Unmarshal([]byte(res.stdout), &c); res.code != 0 || err != nil {
		t.Fatalf("-o json: exit %d, %v\n%s", res.code, err, res.stdout)
	}
	if c.Schema != "gpuaccept.compare/v1" || len(c.Runs) != 3 {
		t.Fatalf("-o json: schema %q, %d runs", c.Schema, len(c.Runs))
	}
	for i, want := range []struct {
		fabric   string
		price    float64
		currency string
		accepted int
	}{{"roce", 2.49, "USD", 2}, {"infiniband", 1.99, "USD", 3}, {"roce", 3.10, "EUR", -1}} {
		r := c.Runs[i]
		if r.ID != ids[i] || r.Path != filepath.Join(dirs[i], "run.json") || r.Quote.Fabric != want.fabric || r.Quote.PricePerGPUHour != want.price ||
			r.Quote.Currency != want.currency || (want.accepted >= 0 && len(r.NodesAccepted) != want.accepted) || r.Accepted {
			t.Errorf("-o json: run %d: %+v", i, r)
		}
	}
	statuses := map[string]string{}
	for _, cr := range c.Criteria {
		var s []string
		for _, x := range cr.Runs {
			if x == nil {
				s = append(s, "-")
			} else {
				s = append(s, x.Status)
			}
		}
		statuses[cr.ID] = strings.Join(s, " ")
	}
	for id, want := range map[string]string{"NCCL-002": "FAIL PASS FAIL", "NCCL-004": "FAIL PASS ", "GPU-001": "PASS PASS PASS", "DIAG-001": "FAIL FAIL FAIL"} {
		if !strings.HasPrefix(statuses[id], want) {
			t.Errorf("-o json: %s %q, want %q", id, statuses[id], want)
		}
	}

	res = gpuaccept(t, work, append([]string{"compare", "-o", "markdown"}, dirs...)...)
	if res.code != 0 || !strings.HasPrefix(res.stdout, "> **SIMULATED**") || !strings.Contains(res.stdout, "\n## Acceptance criteria\n") ||
		!regexp.MustCompile(`\n\| price per GPU-hour +\| 2\.49 USD +\| 1\.99 USD +\| 3\.10 EUR +\|\n`).MatchString(res.stdout) {
		t.Errorf("-o markdown: exit %d\n%s", res.code, res.stdout)
	}
	res = gpuaccept(t, work, append([]string{"compare", "-o", "html"}, dirs...)...)
	if res.code != 0 || !strings.HasPrefix(res.stdout, "<!DOCTYPE html>") || !strings.Contains(res.stdout, `<table id="compare">`) ||
		strings.Contains(strings.ToLower(res.stdout), "<script") || strings.Count(res.stdout, `<th scope="col">demo #`) != 3 {
		t.Errorf("-o html: exit %d\n%s", res.code, res.stdout)
	}

	// Bad input: exit 2, the path named, nothing on stdout.
	empty := t.TempDir()
	for _, x := range []struct {
		args []string
		want string
	}{
		{[]string{dirs[0]}, "compare needs 2 or more runs (run directories or run.json files), got 1: " + dirs[0]},
		{nil, "compare needs 2 or more runs (run directories or run.json files), got none"},
		{[]string{dirs[0], empty}, empty + ": neither a run (no run.json in it) nor a directory of runs"},
		{[]string{dirs[0], dirs[1], filepath.Join(dirs[0], "run.json")}, filepath.Join(dirs[0], "run.json") + ": the same run.json as " + dirs[0]},
		{[]string{dirs[0], dirs[1], "-o", "xml"}, `--output: "xml" is not text, markdown, html or json`},
	} {
		r := gpuaccept(t, work, append([]string{"compare"}, x.args...)...)
		if r.code != 2 || !strings.Contains(unwrapped(r.stderr), x.want) || r.stdout != "" {
			t.Errorf("compare %v: exit %d, stderr %q, want 2 and %q", x.args, r.code, r.stderr, x.want)
		}
	}
}
