package orchestrator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// A phase at fleet size is a few lines: the transfers' tenths are those
// of all nodes together, and what the nodes say with their own figures is
// one line with each figure's range. A 256-node demo printed 2,573 "N%
// sent" lines and one per node per step.
func TestFleetProgressStaysShort(t *testing.T) {
	t.Setenv("COLUMNS", "")
	var out syncBuffer
	p := NewProgress(&out, false)
	const nodes = 256
	p.Phase("staging", nodes)
	var trs []*Transfer
	for i := 1; i <= nodes; i++ {
		trs = append(trs, p.Transfer(fmt.Sprintf("gpu-%03d", i), "staging dataset", 8<<20))
	}
	trs[0].agg.start = time.Now().Add(-time.Minute)
	for step := int64(1); step <= 10; step++ {
		for _, tr := range trs {
			tr.Set(step * (8 << 20) / 10)
		}
	}
	for i, tr := range trs {
		tr.Close()
		p.Node(tr.node, "staged dataset: 8.0 MiB in %.2f s (%.2f MB/s)", 1+float64(i)/100, 8/(1+float64(i)/100))
	}
	p.End()
	got := out.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) > 15 {
		t.Errorf("%d lines for one phase over %d nodes:\n%s", len(lines), nodes, got)
	}
	for _, want := range []string{
		"256 nodes gpu-[001-256]: staging dataset: 10% of 2GiB sent\n",
		"256 nodes gpu-[001-256]: staging dataset: 100% of 2GiB sent\n",
		"256 nodes gpu-[001-256]: staged dataset: 8.0 MiB in 1.00..3.55 s (2.25..8.00 MB/s)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	for _, l := range lines {
		if w := twwidth.Width(l); w > defaultWidth {
			t.Errorf("%d columns: %s", w, l)
		}
	}
}

// A few nodes keep their own figures: a person watching four nodes wants
// each one's.
func TestFewNodesKeepTheirFigures(t *testing.T) {
	var out syncBuffer
	p := NewProgress(&out, false)
	p.Phase("checkpoint-write", 4)
	for i := 1; i <= 4; i++ {
		p.Node(fmt.Sprintf("gpu-%02d", i), "checkpoint saved: 16MiB in %d.5 s", i)
	}
	p.End()
	for i := 1; i <= 4; i++ {
		if want := fmt.Sprintf("gpu-%02d: checkpoint saved: 16MiB in %d.5 s\n", i, i); !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// Every line fits COLUMNS: a long one is cut with an ellipsis, after its
// control characters were escaped (never half an escape, never a raw one).
func TestProgressLinesFitTheWidth(t *testing.T) {
	t.Setenv("COLUMNS", "60")
	var out syncBuffer
	p := NewProgress(&out, false)
	p.Phase("diag", 1)
	p.Node("gpu-256", "diag failed: \x1b[31m%s", strings.Repeat("Persistence Mode, ", 10))
	p.Line("bisect: %s", strings.Repeat("slow ", 40))
	p.End()
	got := out.String()
	if strings.Contains(got, "\x1b") {
		t.Errorf("a raw escape reached the terminal: %q", got)
	}
	for _, want := range []string{`gpu-256: diag failed: \x1b[31mPersistence Mode, Persistence…` + "\n", "bisect: slow slow"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if w := twwidth.Width(l); w > 60 {
			t.Errorf("%d columns: %q", w, l)
		}
	}
}

// A long range of nodes is cut, the count whole, so that what the nodes
// said still fits the line.
func TestALongRangeLeavesRoomForTheMessage(t *testing.T) {
	t.Setenv("COLUMNS", "")
	var out syncBuffer
	p := NewProgress(&out, false)
	p.Phase("checkpoint-write", 256)
	for i := 1; i <= 256; i += 3 {
		p.Node(fmt.Sprintf("gpu-%03d", i), "checkpoint saved: 16MiB")
	}
	p.End()
	want := "86 nodes gpu-[001,004,007,010,013,016,019,022,…]: checkpoint saved: 16MiB\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
	if got := NodesWho([]string{"gpu-1", "gpu-3"}, 6); got != "2 nodes gpu-[…" {
		t.Errorf("a range with no comma to cut at: %q", got)
	}
}

// At fleet size nodes that finish a step a little apart are still one
// line: a pause of groupFor flushed one node's line at a time.
func TestFleetLinesAreRateLimited(t *testing.T) {
	var out syncBuffer
	p := NewProgress(&out, false)
	p.Phase("checkpoint-write", 64)
	for i := 1; i <= 4; i++ {
		p.Node(fmt.Sprintf("gpu-%02d", i), "checkpoint saved: 16MiB in %d.5 s", i)
		time.Sleep(2 * groupFor)
	}
	if s := out.String(); strings.Contains(s, "saved") {
		t.Errorf("printed before %s:\n%s", fleetGroupAtMost, s)
	}
	p.End()
	if want := "4 nodes gpu-[01-04]: checkpoint saved: 16MiB in 1.5..4.5 s\n"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
}
