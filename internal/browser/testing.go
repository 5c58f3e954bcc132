package browser

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
)

// CheckPrint prints the HTML report at path on A4 and fails t unless it
// takes at most maxPages pages and page 1 holds the result and every row
// of the acceptance card. The PDF is kept as name in $GPUACCEPT_ARTIFACTS
// (else the system's temporary directory). Without Chromium it skips, or
// fails where the lab's packages should be (root, lab tests on).
func CheckPrint(t *testing.T, path, name string, maxPages int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := t.TempDir()
	pdf, err := PrintA4(ctx, path, work)
	if errors.Is(err, ErrMissing) {
		if os.Geteuid() == 0 && os.Getenv("GPUACCEPT_NO_LAB") == "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	art := os.Getenv("GPUACCEPT_ARTIFACTS")
	if art == "" {
		art = filepath.Join(os.TempDir(), "gpuaccept-artifacts")
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(art, name), pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	n, text, err := Pages(pdf, work, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d A4 page(s), kept at %s", path, n, filepath.Join(art, name))
	if n > maxPages {
		t.Errorf("%d pages, more than %d", n, maxPages)
	}
	first := text[1]
	for _, want := range append([]string{"Result:", "Acceptance card", "Pass condition"}, record.CardRows...) {
		if !strings.Contains(first, want) {
			t.Errorf("page 1 has no %q:\n%s", want, first)
		}
	}
	// Why, too: the reasons the report gives are on page 1 (the page
	// keeps them whole), however many nodes (at 256 they were on pages
	// 2 and 3).
	_, page2, err := Pages(pdf, work, min(2, n))
	if err != nil {
		t.Fatal(err)
	}
	for _, why := range []string{"Not accepted because", "Incomplete because", "Warnings"} {
		if strings.Contains(page2[min(2, n)], why) && !strings.Contains(first, why) {
			t.Errorf("%q is not on page 1:\n%s", why, first)
		}
	}
}
