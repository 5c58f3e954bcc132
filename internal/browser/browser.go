// Package browser prints a page with a real headless Chromium and reads the
// PDF back with poppler's tools: what the report tests hold the HTML
// report to (it opens offline, it prints on A4 within its page budget).
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// ErrMissing is returned when Chromium or poppler-utils is not installed.
var ErrMissing = errors.New("chromium or poppler-utils (pdfinfo, pdftotext) missing: bash scripts/deps.sh installs them")

// Chromium is the browser's path, or ErrMissing.
func Chromium() (string, error) {
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			return p, nil
		}
	}
	return "", ErrMissing
}

// PrintA4 prints the HTML file at path to PDF as Chromium's print-to-PDF
// does (A4, the page's own @page margins, backgrounds, no header or
// footer), in a profile under work.
func PrintA4(ctx context.Context, path, work string) ([]byte, error) {
	bin, err := Chromium()
	if err != nil {
		return nil, err
	}
	for _, t := range []string{"pdfinfo", "pdftotext"} {
		if _, err := exec.LookPath(t); err != nil {
			return nil, ErrMissing
		}
	}
	url, bctx, cancel, err := open(ctx, bin, path, work)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		return nil, err
	}
	return chromedp.Run(bctx, chromedp.PrintToPDF(chromedp.PDFPaper(chromedp.PaperA4), chromedp.PDFPrintBackground(),
		func(p *page.PrintToPDFParams) { yes := true; p.PreferCSSPageSize = &yes }))
}

// Pages is the PDF's page count (pdfinfo) and the text of each page asked
// for (pdftotext), 1-based.
func Pages(pdf []byte, work string, want ...int) (int, map[int]string, error) {
	f := filepath.Join(work, "out.pdf")
	if err := os.WriteFile(f, pdf, 0o644); err != nil {
		return 0, nil, err
	}
	info, err := exec.Command("pdfinfo", f).CombinedOutput()
	if err != nil {
		return 0, nil, fmt.Errorf("pdfinfo: %v: %s", err, info)
	}
	m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(info)
	if m == nil {
		return 0, nil, fmt.Errorf("pdfinfo: no page count in %q", info)
	}
	n, _ := strconv.Atoi(string(m[1]))
	text := map[int]string{}
	for _, p := range want {
		out, err := exec.Command("pdftotext", "-f", strconv.Itoa(p), "-l", strconv.Itoa(p), f, "-").Output()
		if err != nil {
			return 0, nil, fmt.Errorf("pdftotext page %d: %w", p, err)
		}
		text[p] = string(bytes.Join(bytes.Fields(out), []byte(" ")))
	}
	return n, text, nil
}

// LoadTime is how long Chromium takes to open the HTML file at path and
// finish loading it (the load event, every chart and style in), the
// browser already started in a profile under work: what a reader waits
// for once the report is double-clicked.
func LoadTime(ctx context.Context, path, work string) (time.Duration, error) {
	bin, err := Chromium()
	if err != nil {
		return 0, err
	}
	url, bctx, cancel, err := open(ctx, bin, path, work)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		return 0, err
	}
	state, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.readyState`))
	if err != nil {
		return 0, err
	}
	if state != "complete" {
		return 0, fmt.Errorf("%s: still %q after the load event", path, state)
	}
	return time.Since(start), nil
}

// open starts Chromium (bin) headless in a profile under work; url is the
// file at path's. cancel ends the browser.
func open(ctx context.Context, bin, path, work string) (string, context.Context, context.CancelFunc, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(work, "profile")))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	return "file://" + abs, bctx, func() { bcancel(); acancel() }, nil
}
