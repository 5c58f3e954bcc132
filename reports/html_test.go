package reports

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"gpuaccept/orchestrator/record"
)

// fullRun is a window with every phase that draws a chart: the all-reduce
// sweeps, the intra-node runs, the bisection, staging, the checkpoint and
// the failure test, on three nodes.
func fullRun() *record.Run {
	r := simulatedRun()
	r.Nodes = []record.Node{{Index: 0, Name: "gpu-01", Address: "10.0.0.11:22"}, {Index: 1, Name: "gpu-02", Address: "10.0.0.12:22"},
		{Index: 2, Name: "gpu-03", Address: "10.0.0.13:22"}}
	r.Phases = nil
	var points []string
	for i, size := 0, int64(64<<20); size <= 8<<30; i, size = i+1, size*2 {
		points = append(points, fmt.Sprintf(`{"bytes":%d,"busbw_gbs":%g}`, size, 150+float64(i)*5))
	}
	sweep := `{"judgement":{"gate_bytes":1073741824,"quoted_gbs":370,"busbw_gbs":{"min":180,"median":184,"max":186}},"points":[` + strings.Join(points, ",") + `]}`
	r.Phases = append(r.Phases, withData(phase("allreduce", "", -1, record.OK, 10, 20, ""), `{"repeats":[`+sweep+`,`+sweep+`]}`))
	r.Phases = append(r.Phases, withData(phase("bisect", "", -1, record.OK, 30, 5, ""),
		`{"rounds":2,"reference_gbs":370,"pairs":[{"round":1,"a":"gpu-01","b":"gpu-02","busbw_gbs":371},{"round":1,"a":"gpu-03","b":"gpu-01","busbw_gbs":185},{"round":2,"a":"gpu-02","b":"gpu-03","busbw_gbs":184}]}`))
	for i, n := range r.Nodes {
		r.Phases = append(r.Phases,
			withData(phase("preflight", n.Name, i, record.OK, 1, 2, ""), `{"gpu_model":"NVIDIA H100 80GB HBM3","gpu_count":8,"driver":"535.183.01","cuda":"12.2","kernel":"6.1.0-28-amd64","os":"Debian GNU/Linux 12 <bookworm>"}`),
			withData(phase("intranode", n.Name, i, record.OK, 5, 3, ""), fmt.Sprintf(`{"repeats":[{"judgement":{"quoted_gbs":450,"busbw_gbs":{"median":%d}}}]}`, 440+i*5)),
			withData(phase("staging", n.Name, i, record.OK, 40, 3, ""), fmt.Sprintf(`{"gbs":%g}`, 1.5+float64(i)/10)),
			withData(phase("checkpoint-write", n.Name, i, record.OK, 50, 3, ""), `{"gbs":2.1}`),
			withData(phase("checkpoint-restore", n.Name, i, record.OK, 53, 3, ""), `{"gbs":3.4}`))
	}
	var ev []string
	for s := 1; s <= 10; s++ {
		for _, n := range []string{"gpu-01", "gpu-02", "gpu-03"} {
			ev = append(ev, fmt.Sprintf(`{"at":%g,"node":%q,"kind":"step","step":%d}`, float64(s)*0.5, n, s))
		}
	}
	for s := 6; s <= 12; s++ {
		ev = append(ev, fmt.Sprintf(`{"at":%g,"node":"gpu-01","kind":"step","step":%d}`, 20+float64(s)*0.5, s))
	}
	r.Phases = append(r.Phases, withData(phase("failure", "", -1, record.OK, 60, 40, ""),
		`{"victim":"gpu-03","nodes":["gpu-01","gpu-02","gpu-03"],"injected_at":5.2,"resumed_at":23,"ended_at":27,"timeline":"x <tag> & y\n","events":[`+strings.Join(ev, ",")+`]}`))
	return r
}

var wantCharts = []string{"chart-busbw", "chart-intranode", "chart-io", "chart-failure", "chart-bisection"}

func TestHTMLHasEveryPart(t *testing.T) {
	var b bytes.Buffer
	evidence := []EvidenceFile{{Path: "run.json", SHA256: "ab12", Bytes: 3}, {Path: "raw/gpu-01/diag.log.gz", SHA256: "cd34", Bytes: 5},
		{Path: "raw/gpu-01/intranode.log.gz", SHA256: "ef56", Bytes: 7}, {Path: "raw/gpu-02/diag.log.gz", SHA256: "0789", Bytes: 11}}
	if err := HTML(&b, fullRun(), &BundleFacts{Evidence: evidence}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// The raw logs are summed up in one row (their sums are in the
	// manifest); the other files are listed with theirs.
	if !strings.Contains(page, "3 raw log(s) of 2 node(s), gzip") || !strings.Contains(page, `<td class="num">23</td>`) || strings.Contains(page, "cd34") {
		t.Error("the raw logs are not summed up in one row")
	}
	// A verdict row links its requirement's row, and the table says how
	// many verdicts its rows hold.
	if a := `<a href="#` + reqAnchor("DIAG-001") + `">DIAG-001</a>`; !strings.Contains(page, a) || !strings.Contains(page, `id="`+reqAnchor("DIAG-001")+`"`) {
		t.Errorf("the page has no %s to a requirement row", a)
	}
	if n := fmt.Sprintf("Every verdict of every node (%d;", len(fullRun().Verdicts)); !strings.Contains(page, n) {
		t.Errorf("the page has no %q", n)
	}
	for _, want := range append(wantCharts, `id="simulated"`, "FAIL-001", "DIAG-001", "run.json", "ab12", "535.183.01",
		"8 × NVIDIA H100 80GB HBM3", "x &lt;tag&gt; &amp; y", "<svg", "gating window", "quote 370 GB/s", "failure window", "gpu-03 (victim)") {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "<?xml") || strings.Contains(page, "http://") && !strings.Contains(page, "xmlns") {
		t.Error("the page is not self-contained")
	}
	// A run without those phases has no charts, and says so nowhere wrong.
	b.Reset()
	if err := HTML(&b, failedRun(), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "figure class=\"chart\"") || strings.Contains(b.String(), `id="simulated"`) {
		t.Error("charts or a SIMULATED banner in a run that has neither")
	}
	if strings.Contains(b.String(), "<h2>Cost</h2>") {
		t.Error("a Cost section in a run without a ledger")
	}
	// The ledger: its nodes (the one not accepted marked), components,
	// cost per unit and monthly TCO.
	b.Reset()
	if err := HTML(&b, costedRun(), nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Cost</h2>", `<table id="cost-nodes">`, `<tr class="fail"><td>gpu-02</td>`, "compute (19.200 GPU-hours)",
		`<td>licences</td><td class="num">3.00</td>`, "Cost per training step from the ledger: 0.00442 USD (53.04 USD ÷ 12000 training step(s)).",
		`<table id="cost-tco">`, `<td>committed compute</td><td class="num">143000.00</td>`, `<td>total</td><td class="num">152800.00</td>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the costed page has no %q", want)
		}
	}
}

// The page in a real headless Chromium: it loads without a console error
// or exception, shows every chart, and a screenshot is kept as an artifact
// ($GPUACCEPT_ARTIFACTS, else the system's temporary directory).
func TestHTMLInChromium(t *testing.T) {
	browser := ""
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if os.Geteuid() == 0 && os.Getenv("GPUACCEPT_NO_LAB") == "" {
			t.Fatal("chromium missing: bash scripts/deps.sh installs it")
		}
		t.Skip("no chromium on this machine (bash scripts/deps.sh installs it, as root)")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, HTMLName)
	var b bytes.Buffer
	if err := HTML(&b, fullRun(), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, fmt.Sprintf("console %s: %v", e.Type, e.Args))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+page), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	charts, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('figure.chart')).filter(f => f.getBoundingClientRect().height > 50 && (f.querySelector('svg') || f.querySelector('table'))).map(f => f.id)`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	for _, want := range wantCharts {
		found := false
		for _, c := range charts {
			found = found || c == want
		}
		if !found {
			t.Errorf("chart %s not shown (shown: %v)", want, charts)
		}
	}
	mu.Lock()
	if len(problems) > 0 {
		t.Errorf("console: %v", problems)
	}
	mu.Unlock()
	art := os.Getenv("GPUACCEPT_ARTIFACTS")
	if art == "" {
		art = filepath.Join(os.TempDir(), "gpuaccept-artifacts")
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(art, "report-html-chromium.png")
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d charts shown; screenshot (%d bytes) kept at %s", len(charts), len(shot), out)
}

// TestBisectionPastMatrixSizeListsTheSlowestPairs: at fleet size the
// bisection is the slowest pairs, slowest first, not a matrix of every
// node by every node (a million cells at 1,000 nodes).
func TestBisectionPastMatrixSizeListsTheSlowestPairs(t *testing.T) {
	r := fullRun()
	var pairs []string
	const nodes = 200
	for i := 1; i <= nodes; i += 2 {
		bw := 370.0
		switch i {
		case 7:
			bw = 90 // the slowest
		case 41:
			bw = 200
		}
		pairs = append(pairs, fmt.Sprintf(`{"round":1,"a":"gpu-%03d","b":"gpu-%03d","busbw_gbs":%g}`, i, i+1, bw))
	}
	pairs = append(pairs, `{"round":2,"a":"gpu-100","b":"gpu-013","busbw_gbs":0,"error":"exit 1: connect() failed <x>"}`)
	for i, p := range r.Phases {
		if p.Phase == "bisect" {
			r.Phases[i] = withData(phase("bisect", "", -1, record.OK, 30, 5, ""),
				`{"rounds":2,"reference_gbs":370,"pairs":[`+strings.Join(pairs, ",")+`]}`)
		}
	}
	var b bytes.Buffer
	if err := HTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	i := strings.Index(page, `id="chart-bisection"`)
	if i < 0 {
		t.Fatal("no bisection chart")
	}
	fig := page[i : i+strings.Index(page[i:], "</figure>")]
	if n := strings.Count(fig, "<tr>") - 1; n != slowPairs {
		t.Errorf("%d pair rows, want the %d slowest", n, slowPairs)
	}
	for _, want := range []string{"the 30 slowest of the 101 pairs that ran", "over 200 nodes", "connect() failed &lt;x&gt;"} {
		if !strings.Contains(fig, want) {
			t.Errorf("the bisection has no %q", want)
		}
	}
	failed, slowest, next := strings.Index(fig, "gpu-013 – gpu-100"), strings.Index(fig, "gpu-007 – gpu-008"), strings.Index(fig, "gpu-041 – gpu-042")
	if failed < 0 || slowest < failed || next < slowest {
		t.Errorf("not slowest first: failed pair at %d, 0.24 at %d, 0.54 at %d", failed, slowest, next)
	}
	if len(fig) > 20000 {
		t.Errorf("the bisection is %d bytes at %d nodes", len(fig), nodes)
	}
}
