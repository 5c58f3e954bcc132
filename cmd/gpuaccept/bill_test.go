package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The demo's bundle carries a usage export that reconciles with its run
// (exit 0); each fault planted in it is exit 1, naming the node.
func TestBillTheDemosExport(t *testing.T) {
	work := t.TempDir()
	if res := gpuaccept(t, work, "demo", "--runs-dir", "runs"); res.code != 1 {
		t.Fatalf("demo exit %d\n%s", res.code, res.stderr)
	}
	runs, _ := os.ReadDir(filepath.Join(work, "runs"))
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	dir := filepath.Join(work, "runs", runs[0].Name())
	export := filepath.Join(dir, demoBillingExport)
	manifest, err := os.ReadFile(filepath.Join(dir, "MANIFEST.sha256"))
	if err != nil || !strings.Contains(string(manifest), " "+demoBillingExport+"\n") {
		t.Fatalf("the manifest does not list %s (%v)", demoBillingExport, err)
	}
	res := gpuaccept(t, work, "bill", dir, export)
	if res.code != 0 || !strings.Contains(res.stdout, "RECONCILED") || !strings.Contains(res.stderr, "bill: reading") {
		t.Fatalf("the demo's own export: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, l := range strings.Split(res.stdout, "\n") {
		if len([]rune(l)) > 100 {
			t.Errorf("a line of %d columns: %q", len([]rune(l)), l)
		}
	}

	// A quote that credits a failed node's time from its failure: the
	// run's record edited as a provider with those terms would have it.
	credited := filepath.Join(work, "credited")
	if err := os.MkdirAll(credited, 0o755); err != nil {
		t.Fatal(err)
	}
	var run map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, "run.json"))
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	run["quote"].(map[string]any)["terms"] = map[string]any{"failed_node": "a failed node's time is credited from the failure"}
	data, _ = json.Marshal(run)
	if err := os.WriteFile(filepath.Join(credited, "run.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := gpuaccept(t, work, "bill", credited, export); res.code != 0 {
		t.Fatalf("the demo's export under crediting terms: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 5 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	// plant writes the export with edit applied to a copy of its rows.
	plant := func(name string, edit func([][]string) [][]string) string {
		rs := make([][]string, len(rows))
		for i := range rows {
			rs[i] = append([]string(nil), rows[i]...)
		}
		p := filepath.Join(work, name+".csv")
		out, _ := os.Create(p)
		w := csv.NewWriter(out)
		w.WriteAll(edit(rs))
		out.Close()
		return p
	}
	// later moves a row's end and adds to its quantity and cost as
	// hours more at the quote's 8 × 2.49 per node-hour.
	later := func(r []string, hours float64) {
		end, _ := time.Parse(time.RFC3339Nano, r[2])
		r[2] = end.Add(time.Duration(hours * float64(time.Hour))).Format(time.RFC3339Nano)
		q, _ := strconv.ParseFloat(r[3], 64)
		c, _ := strconv.ParseFloat(r[5], 64)
		r[3] = strconv.FormatFloat(q+hours*3600, 'f', -1, 64)
		r[5] = strconv.FormatFloat(c+hours*8*2.49, 'f', -1, 64)
	}
	for _, c := range []struct {
		name, run, want string
		edit            func([][]string) [][]string
	}{
		{"overbilled", dir, "BILL-002 FAIL gpu-02: billed 2h01m", func(rs [][]string) [][]string { later(rs[2], 2); return rs }},
		{"after-quarantine", credited, "BILL-003 FAIL gpu-04: quarantined at", func(rs [][]string) [][]string { later(rs[4], 2); return rs }},
		{"duplicate", dir, "BILL-004 FAIL gpu-01: line 6 repeats line 2", func(rs [][]string) [][]string { return append(rs, rs[1]) }},
		// The copy names gpu-02 in upper case: the same node, so a repeat.
		{"duplicate-renamed", dir, "BILL-004 FAIL gpu-02: line 6 repeats line 3", func(rs [][]string) [][]string {
			dup := append([]string(nil), rs[2]...)
			dup[0] = strings.ToUpper(dup[0])
			return append(rs, dup)
		}},
		{"missing-tag", dir, "BILL-006 FAIL gpu-03: line 4 lacks team", func(rs [][]string) [][]string { rs[3][8] = "job=x"; return rs }},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := gpuaccept(t, work, "bill", c.run, plant(c.name, c.edit))
			if res.code != 1 || !strings.Contains(res.stdout, c.want) || !strings.Contains(res.stdout, "NOT RECONCILED") {
				t.Errorf("exit %d, want 1 with %q:\n%s%s", res.code, c.want, res.stdout, res.stderr)
			}
		})
	}

	// JSON for machines: the same outcome, each node's row.
	res = gpuaccept(t, work, "bill", "-o", "json", dir, plant("dup-json", func(rs [][]string) [][]string { return append(rs, rs[1]) }))
	var out struct {
		Outcome string
		Nodes   []struct{ Node string }
	}
	if res.code != 1 || json.Unmarshal([]byte(res.stdout), &out) != nil || !strings.Contains(out.Outcome, "BILL-004") || len(out.Nodes) != 4 {
		t.Errorf("json: exit %d %+v\n%s", res.code, out, res.stdout)
	}

	// What cannot be read is exit 2, named.
	for name, c := range map[string]struct {
		want string
		edit func([][]string)
	}{
		"mixed":   {"mixed currencies", func(rs [][]string) { rs[2][6] = "EUR" }},
		"unknown": {"unknown export format", func(rs [][]string) { rs[0][0] = "instance" }},
		// Summed to +Inf, it printed -9223372036854775808s and broke -o json.
		"huge": {"line 3: quantity: 1e+306 days is more time than a node-year", func(rs [][]string) {
			rs[2][3], rs[2][4] = "1e306", "days"
		}},
		"currency": {`line 4: currency "?]0;owned?" is not a 3-letter ISO 4217 code`, func(rs [][]string) {
			rs[3][6] = "\x1b]0;owned\a"
		}},
	} {
		p := plant(name, func(rs [][]string) [][]string { c.edit(rs); return rs })
		res := gpuaccept(t, work, "bill", dir, p)
		if res.code != 2 || !strings.Contains(unwrapped(res.stderr), c.want) || strings.ContainsRune(res.stderr, 0x1b) {
			t.Errorf("%s: exit %d, want 2 with %q\n%q", name, res.code, c.want, res.stderr)
		}
	}
	if res := gpuaccept(t, work, "bill", export); res.code != 2 {
		t.Errorf("no run: exit %d", res.code)
	}
}
