package parse

import (
	"fmt"
	"strings"
)

// Diag is the result of `dcgmi diag -r N`, from the text table (DCGM 1.x to
// 4.x layouts) or from `dcgmi diag -j` JSON.
type Diag struct {
	// OK is true only when no test failed and nothing in the output
	// undermines the result: a runtime error, a truncated table or JSON
	// fragment, or a status this parser does not know all make OK false and
	// are described in Errors. Warn and Skip do not make OK false.
	OK      bool       `json:"ok"`
	Version string     `json:"version"` // DCGM version if printed, else ""
	Format  string     `json:"format"`  // "text" | "json"
	Tests   []DiagTest `json:"tests"`
	Errors  []string   `json:"errors,omitempty"`
}

// DiagTest is one test (plugin) row of the diagnostic.
type DiagTest struct {
	Name     string `json:"name"`
	Category string `json:"category,omitempty"` // Deployment, Integration, Hardware, Stress, ...
	// Status is Pass, Fail, Warn, Skip or Not Run. When per-GPU results are
	// given it is the worst of them (Fail > Warn > Pass > Skip > Not Run).
	Status string    `json:"status"`
	GPUs   []DiagGPU `json:"gpus,omitempty"`
	// Info holds informational lines, and warnings that name no GPU, as
	// "Warning: ..." (per-GPU info is prefixed "GPU<n>: ").
	Info []string `json:"info,omitempty"`
}

// DiagGPU is one GPU's result for a test.
type DiagGPU struct {
	GPU      int      `json:"gpu"`
	Status   string   `json:"status"`
	Warnings []string `json:"warnings,omitempty"`
}

// Normalized statuses.
const (
	StatusPass   = "Pass"
	StatusFail   = "Fail"
	StatusWarn   = "Warn"
	StatusSkip   = "Skip"
	StatusNotRun = "Not Run"
)

const diagTool = "dcgmi diag"

// DCGMDiag parses `dcgmi diag` output, telling JSON (-j) from the text table
// by the first non-blank character of the tool's output. A JSON fragment (a
// piece of a document, or a document cut short) is parsed as far as it goes
// and the loss is recorded in Errors, so OK is false for it.
func DCGMDiag(text string) (Diag, error) {
	lines := splitLines(text)
	var (
		d   Diag
		err error
	)
	if start, ok := jsonStart(lines); ok {
		d, err = diagFromJSON(lines, start)
	} else {
		d, err = diagFromText(lines)
	}
	if err != nil {
		return d, err
	}
	d.OK = len(d.Errors) == 0
	for _, t := range d.Tests {
		if t.Status == StatusFail {
			d.OK = false
		}
	}
	return d, nil
}

// normStatus maps the spellings of DCGM versions ("Pass", "PASS", "Warning",
// "Skipped", "NotRun", "not_run") onto the five normalized words.
func normStatus(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pass", "passed":
		return StatusPass, true
	case "fail", "failed", "failure":
		return StatusFail, true
	case "warn", "warning":
		return StatusWarn, true
	case "skip", "skipped":
		return StatusSkip, true
	case "not run", "notrun", "not_run", "not-run":
		return StatusNotRun, true
	}
	return "", false
}

// statusRank orders statuses by severity for aggregation.
func statusRank(s string) int {
	switch s {
	case StatusFail:
		return 4
	case StatusWarn:
		return 3
	case StatusPass:
		return 2
	case StatusSkip:
		return 1
	case StatusNotRun:
		return 0
	}
	return 5 // an unrecognized status is reported as is and wins (and OK is false)
}

// worse returns the more severe of two statuses; "" means none yet.
func worse(a, b string) string {
	if a == "" || statusRank(b) > statusRank(a) {
		return b
	}
	return a
}

// testAcc builds one DiagTest. GPU entries are indexed by number so a long
// "Pass - GPUs: 0, 1, ..." list or thousands of JSON entities stay linear,
// and warnings already filed are remembered so a summary does not repeat them.
type testAcc struct {
	DiagTest
	gpuAt  map[int]int
	warned map[string]bool
}

func newTest(name, category string) *testAcc {
	return &testAcc{DiagTest: DiagTest{Name: name, Category: category}, gpuAt: map[int]int{}, warned: map[string]bool{}}
}

// gpu returns the test's entry for GPU n, creating it with the given status.
func (t *testAcc) gpu(n int, status string) *DiagGPU {
	if i, ok := t.gpuAt[n]; ok {
		return &t.GPUs[i]
	}
	t.gpuAt[n] = len(t.GPUs)
	t.GPUs = append(t.GPUs, DiagGPU{GPU: n, Status: status})
	return &t.GPUs[len(t.GPUs)-1]
}

// setGPU records GPU n's status, keeping the worse one if it is listed twice.
func (t *testAcc) setGPU(n int, status string) {
	g := t.gpu(n, status)
	g.Status = worse(g.Status, status)
	t.Status = worse(t.Status, status)
}

func (t *testAcc) hasGPU(n int) bool {
	_, ok := t.gpuAt[n]
	return ok
}

// warnGPU files a warning under GPU n (created with status if new).
func (t *testAcc) warnGPU(n int, status, msg string) {
	g := t.gpu(n, status)
	g.Warnings = append(g.Warnings, msg)
	t.warned[msg] = true
}

// warnInfo files a warning that has no GPU entry to go to as an info line.
func (t *testAcc) warnInfo(label, msg string) {
	t.Info = append(t.Info, label+msg)
	t.warned[msg] = true
}

// unknownStatus records a status word this parser does not know. It is kept
// as printed (so nothing is invented) and listed in Errors (so OK is false).
func (d *Diag) unknownStatus(where, test, raw string) string {
	d.Errors = append(d.Errors, fmt.Sprintf("%s: test %q: unrecognized status %q", where, test, raw))
	return raw
}
