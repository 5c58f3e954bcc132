package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuaccept/reports"
)

// plant writes a candidate run directory: the baseline's run.json with
// edit applied to it as plain JSON.
func plant(t *testing.T, baseline string, edit func(run map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(baseline, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run map[string]any
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	edit(run)
	out, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scaleVerdict multiplies the value of verdict id (cluster-wide) by f.
func scaleVerdict(t *testing.T, run map[string]any, id string, f float64) {
	t.Helper()
	for _, v := range run["verdicts"].([]any) {
		v := v.(map[string]any)
		if v["id"] == id && v["node"] == nil {
			if _, ok := v["value"].(float64); !ok {
				t.Fatalf("%s has no value: %v", id, v)
			}
			v["value"] = v["value"].(float64) * f
			return
		}
	}
	t.Fatalf("no cluster-wide %s verdict", id)
}

// setDriver changes what preflight found of node's driver: in the phase's
// data, the one place run.json keeps a node's facts (nodes[].facts is
// only in runs recorded before that).
func setDriver(t *testing.T, run map[string]any, node, driver string) {
	t.Helper()
	n := 0
	for _, p := range run["phases"].([]any) {
		p := p.(map[string]any)
		if p["phase"] == "preflight" && p["node"] == node {
			p["data"].(map[string]any)["driver"] = driver
			n++
		}
	}
	for _, x := range run["nodes"].([]any) {
		if x := x.(map[string]any); x["name"] == node && x["facts"] != nil {
			t.Fatalf("%s: facts kept on the node too: %v", node, x["facts"])
		}
	}
	if n != 1 {
		t.Fatalf("%s: driver set in %d places, want 1", node, n)
	}
}

// section is the text between the heading line that starts with from and
// the next blank line followed by a heading.
func section(out, from string) string {
	_, rest, ok := strings.Cut(out, "\n"+from)
	if !ok {
		return ""
	}
	end := regexp.MustCompile(`\n\n[A-Z]`).FindStringIndex(rest)
	if end == nil {
		return rest
	}
	return rest[:end[0]]
}

func TestDiff(t *testing.T) {
	work := t.TempDir()
	if res := gpuaccept(t, work, "demo", "--runs-dir", "runs"); res.code != 1 {
		t.Fatalf("demo exit %d\n%s", res.code, res.stderr)
	}
	runs, _ := os.ReadDir(filepath.Join(work, "runs"))
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	base := filepath.Join(work, "runs", runs[0].Name())

	// A run against itself: nothing changed, nothing regressed; the demo
	// measures its figures (NCCL-002 among them).
	res := gpuaccept(t, work, "diff", base, filepath.Join(base, "run.json"))
	if res.code != 0 || !strings.Contains(res.stdout, "\nNO REGRESSION: ") || !strings.Contains(res.stdout, "Nothing changed.") ||
		!regexp.MustCompile(`\| NCCL-002 +\| cluster +\| [0-9.]+ GB/s +\| [0-9.]+ GB/s +\| \+0\.0% +\| 5% +\| same`).MatchString(res.stdout) {
		t.Fatalf("the run against itself: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}

	// (i) A driver upgrade on gpu-01: shown in the changed section, and no
	// regression by itself.
	upgraded := plant(t, base, func(run map[string]any) { setDriver(t, run, "gpu-01", "550.90.07") })
	res = gpuaccept(t, work, "diff", base, upgraded)
	changed := section(res.stdout, "Changed on the nodes")
	if res.code != 0 || !regexp.MustCompile(`\| gpu-01 +\| driver +\| 535\.183\.01 +\| 550\.90\.07 +\|`).MatchString(changed) ||
		strings.Count(changed, "driver") != 1 {
		t.Errorf("driver change: exit %d, changed section:\n%s\n--- whole output\n%s\n%s", res.code, changed, res.stdout, res.stderr)
	}

	// (ii) NCCL-002's busbw 20% down: a regression, named on stderr and in
	// the output, exit 1.
	slow := plant(t, base, func(run map[string]any) { scaleVerdict(t, run, "NCCL-002", 0.8) })
	res = gpuaccept(t, work, "diff", base, slow)
	if res.code != 1 || !strings.Contains(res.stderr, "gpuaccept: regression: NCCL-002 cluster: ") ||
		!regexp.MustCompile(`\| NCCL-002 +\| cluster +\|.*\| -20\.0% +\| 5% +\| REGRESSION \|`).MatchString(res.stdout) ||
		!strings.Contains(res.stdout, "\nREGRESSED: 1 regression(s) (SIMULATED)\n") {
		t.Errorf("20%% drop: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for _, o := range []string{"json", "markdown"} {
		r := gpuaccept(t, work, "diff", base, slow, "-o", o)
		if r.code != 1 || !strings.Contains(r.stderr, "regression: NCCL-002") {
			t.Errorf("-o %s: exit %d\n%s", o, r.code, r.stderr)
		}
		if o == "markdown" && (!strings.Contains(r.stdout, "## Regressions\n\n- NCCL-002 cluster: ") || !strings.HasPrefix(r.stdout, "> **SIMULATED**")) {
			t.Errorf("markdown:\n%s", r.stdout)
		}
		if o == "json" {
			var d struct {
				Schema      string
				Regressed   bool
				Regressions []string
				Metrics     []struct {
					ID, Change string
					Regression bool
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
				t.Fatalf("-o json: %v\n%s", err, r.stdout)
			}
			if d.Schema != "gpuaccept.diff/v1" || !d.Regressed || len(d.Regressions) != 1 || !strings.HasPrefix(d.Regressions[0], "NCCL-002 cluster") {
				t.Errorf("-o json: %+v", d)
			}
		}
	}

	// (iii) A 2% wobble is not a regression.
	wobble := plant(t, base, func(run map[string]any) { scaleVerdict(t, run, "NCCL-002", 0.98) })
	res = gpuaccept(t, work, "diff", base, wobble)
	if res.code != 0 || res.stderr != "" || !strings.Contains(res.stdout, "\nNO REGRESSION: ") ||
		!regexp.MustCompile(`\| NCCL-002 +\| cluster +\|.*\| -2\.0% +\| 5% +\| worse +\|`).MatchString(res.stdout) {
		t.Errorf("2%% wobble: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}

	// The candidate's own threshold applies: 25% allowed, a 20% drop passes.
	lenient := plant(t, base, func(run map[string]any) {
		scaleVerdict(t, run, "NCCL-002", 0.8)
		run["regression"] = map[string]any{"threshold": 0.25}
	})
	if res = gpuaccept(t, work, "diff", base, lenient); res.code != 0 {
		t.Errorf("threshold 25%%: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}

	// Bad input: exit 2, naming the path.
	empty := t.TempDir()
	notJSON := filepath.Join(t.TempDir(), "run.json")
	os.WriteFile(notJSON, []byte("{"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", base, filepath.Join(work, "nowhere")}, filepath.Join(work, "nowhere") + ": no such file or directory"},
		{[]string{"diff", empty, base}, empty + ": no run.json"},
		{[]string{"diff", base, notJSON}, notJSON + ": not a gpuaccept run.json"},
		{[]string{"diff", base, base, "-o", "xml"}, `"xml" is not text, json or markdown`},
		{[]string{"diff", base}, "diff needs BASELINE CANDIDATE"},
	} {
		r := gpuaccept(t, work, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args[1:], r.code, r.stderr, c.want)
		}
	}
}

// Two demos of the same seed, run one after the other: the figures the
// seed decides (the collectives') are the same, and the planted 20 % busbw
// drop is a regression. The figures the demo times on this machine (image
// loads, staging, checkpoints, recovery) wobble with its load; on a loaded
// 2-core machine one of them may pass the diff's floors, so only those may
// regress, and they are logged.
func TestDiffOfTwoDemosOfOneSeed(t *testing.T) {
	work := t.TempDir()
	for i := range 2 {
		if res := gpuaccept(t, work, "demo", "--runs-dir", "runs"); res.code != 1 {
			t.Fatalf("demo %d exit %d\n%s", i+1, res.code, res.stderr)
		}
		time.Sleep(1100 * time.Millisecond) // run IDs are to the second
	}
	runs, _ := os.ReadDir(filepath.Join(work, "runs"))
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	a, b := filepath.Join(work, "runs", runs[0].Name()), filepath.Join(work, "runs", runs[1].Name())
	res := gpuaccept(t, work, "diff", a, b, "-o", "json")
	var d reports.Diff
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil || (res.code != 0 && res.code != 1) {
		t.Fatalf("two demos of one seed: exit %d, %v\n%s\n%s", res.code, err, res.stdout, res.stderr)
	}
	timedHere := regexp.MustCompile(`^(IMG|STAGE|CKPT|RECOV)-`)
	seeded := 0
	for _, m := range d.Metrics {
		switch {
		case strings.HasPrefix(m.ID, "NCCL-"):
			seeded++
			if m.Change != reports.ChangeSame {
				t.Errorf("%s %s: %g then %g (%s): the seed decides it", m.ID, m.Node, m.Baseline, m.Candidate, m.Change)
			}
		case m.Regression && timedHere.MatchString(m.ID):
			t.Logf("timed on this machine, past the floors under its load: %s %s %g then %g %s", m.ID, m.Node, m.Baseline, m.Candidate, m.Unit)
		case m.Regression:
			t.Errorf("%s %s: %g then %g %s, a regression between two demos of one seed", m.ID, m.Node, m.Baseline, m.Candidate, m.Unit)
		}
	}
	if seeded == 0 {
		t.Errorf("no NCCL figure compared\n%s", res.stdout)
	}
	slow := plant(t, b, func(run map[string]any) { scaleVerdict(t, run, "NCCL-002", 0.8) })
	if res := gpuaccept(t, work, "diff", a, slow); res.code != 1 || !strings.Contains(res.stdout, "NCCL-002") || !strings.Contains(res.stdout, "REGRESSED") {
		t.Errorf("the planted 20%% drop: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}
