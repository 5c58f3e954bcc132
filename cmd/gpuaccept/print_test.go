package main

import (
	"os"
	"path/filepath"
	"testing"

	"gpuaccept/internal/browser"
	"gpuaccept/reports"
)

// The 4-node demo's report.html prints (Chromium, A4) on at most 4 pages,
// the result and the whole acceptance card on the first.
func TestDemoReportPrints(t *testing.T) {
	dir := t.TempDir()
	res := gpuaccept(t, dir, "demo", "--runs-dir", "runs")
	if res.code != 1 {
		t.Fatalf("demo exit %d\n%s", res.code, res.stderr)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*", reports.HTMLName))
	if len(runs) != 1 {
		t.Fatalf("report.html: %v", runs)
	}
	if _, err := os.Stat(runs[0]); err != nil {
		t.Fatal(err)
	}
	browser.CheckPrint(t, runs[0], "demo-report.pdf", 4)
}
