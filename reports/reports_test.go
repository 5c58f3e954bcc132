package reports

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	renderers := []struct {
		ext    string
		render func(io.Writer, *record.Run) error
	}{
		{"summary.txt", func(w io.Writer, r *record.Run) error { return Summary(w, r, SummaryOptions{}) }},
		{"report.md", Markdown},
		{"junit.xml", JUnit},
	}
	for _, c := range cases {
		for _, r := range renderers {
			t.Run(c.name+"/"+r.ext, func(t *testing.T) {
				var b bytes.Buffer
				if err := r.render(&b, c.run()); err != nil {
					t.Fatal(err)
				}
				golden(t, c.name+"."+r.ext, b.Bytes())
			})
		}
	}
}

// Every report made from a simulated run must say so, and no other may.
func TestSimulatedLabel(t *testing.T) {
	for _, c := range cases {
		run := c.run()
		var s, m, j bytes.Buffer
		if err := Summary(&s, run, SummaryOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := Markdown(&m, run); err != nil {
			t.Fatal(err)
		}
		if err := JUnit(&j, run); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"summary": s.String(), "markdown": m.String()} {
			if got := strings.Contains(out, "SIMULATED"); got != run.Simulated {
				t.Errorf("%s: %s says SIMULATED: %v, want %v", c.name, name, got, run.Simulated)
			}
		}
		if run.Simulated && !strings.HasPrefix(s.String(), "SIMULATED") {
			t.Errorf("%s: summary banner does not start with SIMULATED", c.name)
		}
		if run.Simulated && !strings.HasPrefix(m.String(), "> **SIMULATED**") {
			t.Errorf("%s: report.md does not open with the SIMULATED banner", c.name)
		}
		want := `<property name="simulated" value="false">`
		if run.Simulated {
			want = `<property name="simulated" value="true">`
		}
		if !strings.Contains(j.String(), want) {
			t.Errorf("%s: junit lacks %s", c.name, want)
		}
	}
}

func TestSummaryLastLine(t *testing.T) {
	want := map[string]string{
		"failed":      "NOT ACCEPTED: GPU-001, NCCL-001 failed (2 FAIL, 1 WARN, 1 SKIP)",
		"interrupted": "INTERRUPTED",
		"aborted":     "INCOMPLETE: aborted: --strict: gpu-02 failed preflight",
		"simulated":   "ACCEPTED (SIMULATED)",
		"costed":      "NOT ACCEPTED: GPU-001, NCCL-001 failed (2 FAIL, 1 WARN, 1 SKIP)",
	}
	for _, c := range cases {
		var b bytes.Buffer
		if err := Summary(&b, c.run(), SummaryOptions{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if got := lines[len(lines)-1]; got != want[c.name] {
			t.Errorf("%s: last line %q, want %q", c.name, got, want[c.name])
		}
	}
}

// Colour must only add escape codes: tablewriter measures cells without
// them, so stripping them gives the plain output back exactly.
func TestSummaryColor(t *testing.T) {
	var plain, colored bytes.Buffer
	if err := Summary(&plain, failedRun(), SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Summary(&colored, failedRun(), SummaryOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(colored.String(), "\x1b[") {
		t.Fatal("color asked for, none given")
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Fatal("color given unasked")
	}
	stripped := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colored.String(), "")
	if stripped != plain.String() {
		t.Errorf("colored summary differs from plain beyond escape codes:\n%s\n---\n%s", stripped, plain.String())
	}
}

func TestVerdictOrder(t *testing.T) {
	run := failedRun()
	before := append([]record.Verdict(nil), run.Verdicts...)
	var got []string
	for _, v := range verdicts(run) {
		got = append(got, v.ID+"/"+nodeLabel(v.Node))
	}
	want := "DIAG-001/gpu-01 DIAG-001/gpu-02 DIAG-001/gpu-03 GPU-001/gpu-01 GPU-001/gpu-02 GPU-001/gpu-03 NCCL-001/cluster STAGE-001/gpu-01"
	if strings.Join(got, " ") != want {
		t.Errorf("order:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if run.Verdicts[0].ID != before[0].ID {
		t.Error("verdicts() reordered the run's own slice")
	}
}

func TestJUnitParses(t *testing.T) {
	type parsed struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Cases    []struct {
			Classname string    `xml:"classname,attr"`
			Name      string    `xml:"name,attr"`
			Failure   *struct{} `xml:"failure"`
			Skipped   *struct{} `xml:"skipped"`
			SystemOut string    `xml:"system-out"`
		} `xml:"testcase"`
	}
	for _, c := range cases {
		run := c.run()
		var b bytes.Buffer
		if err := JUnit(&b, run); err != nil {
			t.Fatal(err)
		}
		var s parsed
		if err := xml.Unmarshal(b.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// One testcase per requirement ID: failed when any of its verdicts
		// failed, skipped when all were skipped; every verdict's line in
		// system-out.
		byID := map[string][]record.Verdict{}
		for _, v := range run.Verdicts {
			byID[v.ID] = append(byID[v.ID], v)
		}
		wantFail, wantSkip := 0, 0
		for _, vs := range byID {
			fail, skip := false, true
			for _, v := range vs {
				fail = fail || v.Status == record.Fail
				skip = skip && v.Status == record.Skip
			}
			if fail {
				wantFail++
			} else if skip {
				wantSkip++
			}
		}
		var failures, skipped, warned, lines int
		for _, tc := range s.Cases {
			if tc.Failure != nil {
				failures++
			}
			if tc.Skipped != nil {
				skipped++
			}
			warned += strings.Count(tc.SystemOut, "] WARN: ")
			lines += strings.Count(tc.SystemOut, "\n") + 1
			id, _, _ := strings.Cut(tc.Name, " ")
			family, _, _ := strings.Cut(id, "-")
			if len(byID[id]) == 0 || tc.Classname != "gpuaccept."+family {
				t.Errorf("%s: testcase %q (class %q) is not \"<ID> <title>\" of a requirement", c.name, tc.Name, tc.Classname)
			}
		}
		if s.Name != "gpuaccept" || s.Tests != len(byID) || len(s.Cases) != len(byID) || lines != len(run.Verdicts) {
			t.Errorf("%s: suite %q with tests=%d, %d testcases and %d verdict lines, want gpuaccept with %d and %d",
				c.name, s.Name, s.Tests, len(s.Cases), lines, len(byID), len(run.Verdicts))
		}
		if s.Failures != wantFail || failures != s.Failures {
			t.Errorf("%s: failures attr %d, elements %d, want %d", c.name, s.Failures, failures, wantFail)
		}
		if s.Skipped != wantSkip || skipped != s.Skipped {
			t.Errorf("%s: skipped attr %d, elements %d, want %d", c.name, s.Skipped, skipped, wantSkip)
		}
		if warned != count(run, record.Warn) {
			t.Errorf("%s: %d warnings in system-out, want %d", c.name, warned, count(run, record.Warn))
		}
	}
}

// TestNodeTextCannotDriveTheTerminalOrThePage: what a node said (a
// hostname that sets the window title, a coloured stderr tail, a Markdown
// image) is shown escaped in the summary and inert in report.md.
func TestNodeTextCannotDriveTheTerminalOrThePage(t *testing.T) {
	run := failedRun()
	run.Nodes[1].Reason = "preflight failed: \x1b]0;owned\x07 \x1b[31mred\x1b[0m"
	run.Verdicts = append(run.Verdicts, record.Verdict{ID: "CONN-001", Title: "reachable", Node: "gpu-01", Status: record.Fail,
		Measured: "\x1b[2J cleared", Detail: "see ![x](http://evil.example/p.png) and [click](http://evil.example) `code"})
	for _, detail := range []bool{false, true} {
		var sum bytes.Buffer
		if err := Summary(&sum, run, SummaryOptions{Detail: detail}); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(sum.String(), "\x1b\x07") || !strings.Contains(sum.String(), `\x1b[2J cleared`) ||
			detail && !strings.Contains(sum.String(), `\x1b]0;owned\a`) {
			t.Errorf("control characters reached the summary (detail %v) raw:\n%s", detail, sum.String())
		}
	}
	var md bytes.Buffer
	if err := Markdown(&md, run); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"![x](", "[click](", "\x1b", " `code"} {
		if strings.Contains(md.String(), bad) {
			t.Errorf("report.md keeps %q active", bad)
		}
	}
	if !strings.Contains(md.String(), `!\[x\](http://evil.example/p.png)`) {
		t.Errorf("the image is not shown escaped:\n%s", md.String())
	}
}

// One long cell does not widen every row of its table: report.md stays
// about as large as its rows (a 1,000-node window's was 3.8 GB).
func TestMarkdownOfALongCellIsBounded(t *testing.T) {
	run := fullRun()
	for i := range 500 {
		v := record.NewVerdict("HEALTH-001", "gpu-"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i))
		v.Status, v.Detail = record.Skip, "diag failed"
		run.Verdicts = append(run.Verdicts, v)
	}
	run.Verdicts[0].Detail = strings.Repeat("every node's words ", 20000)
	var b bytes.Buffer
	if err := MarkdownReport(&b, run, nil); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 1<<20 {
		t.Errorf("report.md is %d bytes for %d verdicts", b.Len(), len(run.Verdicts))
	}
	if !strings.Contains(b.String(), "every node's words every node's words") || !strings.Contains(b.String(), "…") {
		t.Error("the long cell is not said, clipped")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestPassedCountsNodes: a requirement judged on each node and for the
// cluster too counts its nodes in PASSED (a 1,000-node window read
// "0/1001"); the cluster's verdict still decides its status.
func TestPassedCountsNodes(t *testing.T) {
	run := &record.Run{}
	for _, n := range []string{"gpu-1", "gpu-2", "gpu-3"} {
		run.Verdicts = append(run.Verdicts, record.Verdict{ID: "STAGE-002", Node: n, Status: record.Pass})
	}
	run.Verdicts = append(run.Verdicts, record.Verdict{ID: "STAGE-002", Status: record.Fail, Measured: "0.08 GB/s over 3 node(s)"},
		record.Verdict{ID: "NCCL-002", Status: record.Pass})
	got := map[string]requirement{}
	for _, r := range requirements(run) {
		got[r.ID] = r
	}
	if r := got["STAGE-002"]; r.passedText() != "3/3" || r.Status != string(record.Fail) || r.Worst.Node != "" {
		t.Errorf("STAGE-002: %s %s, worst %+v", r.passedText(), r.Status, r.Worst)
	}
	if r := got["NCCL-002"]; r.passedText() != "cluster" {
		t.Errorf("NCCL-002: %s", r.passedText())
	}
}
