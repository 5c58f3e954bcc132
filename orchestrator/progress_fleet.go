package orchestrator

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator/inventory"
)

// At fleet size the progress stays short: a 256-node demo printed 4,135
// lines, 2,573 of them one node's "N% sent", some 201 columns wide.
const (
	// fleetAt: a phase over more nodes than this merges node lines that
	// differ only in their numbers into one with each number's range
	// ("255 nodes gpu-[001-255]: checkpoint saved: 16MiB in 1.87..2.72 s"),
	// and holds them up to fleetGroupAtMost. Below it each node's figures
	// are its own line, as a person watching a few nodes wants them.
	fleetAt          = 16
	fleetGroupAtMost = 10 * time.Second
	// defaultWidth is the width of a progress line without COLUMNS.
	defaultWidth = 100
)

// progressWidth is COLUMNS when set (what a shell exports, and what a
// user sets to get another width), else defaultWidth.
func progressWidth() int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	return defaultWidth
}

// fitLines cuts each line of s (already escaped) to width columns, with an
// ellipsis where it cut.
func fitLines(s string, width int) string {
	if width < 10 {
		width = 10
	}
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		if twwidth.Width(body) > width {
			lines[i] = twwidth.Truncate(body, width-1, "") + "…" + l[len(body):]
		}
	}
	return strings.Join(lines, "")
}

var number = regexp.MustCompile(`\d+(?:\.\d+)?`)

// shapeOf is msg with its numbers blanked: the key under which nodes'
// lines merge at fleet size.
func shapeOf(msg string) string { return number.ReplaceAllString(msg, "#") }

// join adds what one more node said to h: the same message, or (at fleet
// size) one of the same shape, whose numbers widen h's ranges.
func (h *heldLine) join(msg string) {
	if msg == h.msg && h.lo == nil {
		return
	}
	if h.lo == nil {
		h.lo = number.FindAllString(h.msg, -1)
		h.hi = append([]string(nil), h.lo...)
	}
	for i, n := range number.FindAllString(msg, -1) {
		if i >= len(h.lo) {
			break
		}
		v, _ := strconv.ParseFloat(n, 64)
		if lo, _ := strconv.ParseFloat(h.lo[i], 64); v < lo {
			h.lo[i] = n
		}
		if hi, _ := strconv.ParseFloat(h.hi[i], 64); v > hi {
			h.hi[i] = n
		}
	}
}

// text is what h prints after its nodes: the message, each number that
// differed between them shown as least..greatest.
func (h *heldLine) text() string {
	if h.lo == nil {
		return h.msg
	}
	i := 0
	return number.ReplaceAllStringFunc(h.msg, func(n string) string {
		defer func() { i++ }()
		if i >= len(h.lo) || h.lo[i] == h.hi[i] {
			return n
		}
		return h.lo[i] + ".." + h.hi[i]
	})
}

// holdAtMost is how long node lines may be held for grouping: longer at
// fleet size, where lines come without pause and each flush is a line per
// message.
func (p *Progress) holdAtMost() time.Duration {
	if p.total > fleetAt {
		return fleetGroupAtMost
	}
	return groupAtMost
}

// holdFor is how long a quiet moment holds lines: at fleet size the whole
// holdAtMost (a flush at every pause of groupFor printed one node's
// line at a time when 256 nodes finished a step over 40 s), the lines
// rate-limited to one per message each fleetGroupAtMost.
func (p *Progress) holdFor() time.Duration {
	if p.total > fleetAt {
		return fleetGroupAtMost
	}
	return groupFor
}

// NodesWho names nodes as a line's subject: the node, or "N nodes RANGE",
// the range cut to width columns ("gpu-[001-002,004,…]") so that what
// they said still fits the line: the count says how many it stands for.
func NodesWho(nodes []string, width int) string {
	if len(nodes) == 1 {
		return nodes[0]
	}
	r := hostlist.Compress(nodes)
	if len(r) > width {
		cut := strings.LastIndex(r[:max(width-2, 1)], ",")
		if open := strings.LastIndex(r[:max(cut, 0)+1], "["); cut > 0 && open >= 0 && !strings.Contains(r[open:cut], "]") {
			r = r[:cut] + ",…]"
		} else {
			r = twwidth.Truncate(r, width-1, "") + "…"
		}
	}
	return fmt.Sprintf("%d nodes %s", len(nodes), r)
}

// whoWidth is how many columns a line's range of nodes may take.
func (p *Progress) whoWidth() int { return max(p.width*2/5, 20) }

// xferAgg is every plain-line transfer of one kind (what) at once: at
// fleet size a line per node per tenth was most of the output, so the
// tenths are those of all of them together.
type xferAgg struct {
	what        string
	nodes       []string
	open        int
	total, done int64
	next        int64
	start       time.Time
}

// joinTransfer counts a plain-line transfer of total bytes to node in its
// kind's aggregate. p.mu is held.
func (p *Progress) joinTransfer(node, what string, total int64) *xferAgg {
	if p.xfers == nil {
		p.xfers = map[string]*xferAgg{}
	}
	a := p.xfers[what]
	if a == nil {
		a = &xferAgg{what: what, next: 1, start: time.Now()}
		p.xfers[what] = a
	}
	a.nodes = append(a.nodes, node)
	a.open++
	a.total += total
	return a
}

// sent adds n bytes to a and prints its line when a tenth more of all of
// it was sent, once it has run quietFor. p.mu is held.
func (p *Progress) sent(a *xferAgg, n int64) {
	a.done += n
	if a.total <= 0 || a.done*10 < a.next*a.total || time.Since(a.start) < quietFor {
		return
	}
	p.clearLive()
	p.put(fmt.Sprintf("%s: %s: %d%% of %s sent\n", NodesWho(a.nodes, p.whoWidth()), a.what, a.done*100/a.total, inventory.Bytes(a.total)))
	a.next = a.done*10/a.total + 1
	p.drawLive()
}

// leave ends one transfer of a; the last one ends a. p.mu is held.
func (p *Progress) leave(a *xferAgg) {
	a.open--
	if a.open <= 0 && p.xfers[a.what] == a {
		delete(p.xfers, a.what)
	}
}
