package orchestrator

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
)

// Progress writes what the window is doing to stderr: a banner per phase
// and one "node: message" line per event. On a terminal a live count of
// finished nodes is kept on the last line, and long transfers get a bar
// each (Transfer); elsewhere a transfer is a line per tenth.
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	live     bool
	phase    string
	total    int
	done     int
	failed   int
	started  time.Time
	liveLine bool
	// bars draws the transfers' bars while any runs; the other lines go
	// through it then, above the bars.
	bars    *mpb.Progress
	running int
	// Node lines wait groupFor to be printed, so that what many nodes say
	// at once is one line (as dshbak groups output): pending in order
	// first said, the timer that flushes them.
	pending   []*heldLine
	pendingAt map[string]*heldLine
	flush     *time.Timer
	heldSince time.Time
	addresses map[string]string
	// width is what every line is cut to (COLUMNS, else 100).
	width int
	// xfers are the plain-line transfers under way, by kind.
	xfers map[string]*xferAgg
}

// heldLine is a message and the nodes that said it. At fleet size it
// holds the messages of one shape: lo and hi are each number's least and
// greatest (nil while every node said msg).
type heldLine struct {
	msg    string
	nodes  []string
	lo, hi []string
}

// groupFor is how long a node's line waits for others that say the same:
// the nodes of a lockstep phase fail within it of one another. Each node
// that joins a held line holds it groupFor more, up to groupAtMost in all:
// nodes that fail one after another (a lab's three within 0.4 s) are one
// line, and a line is never held long.
const (
	groupFor    = 300 * time.Millisecond
	groupAtMost = 2 * time.Second
)

// NewProgress writes to w; live enables the terminal status line.
func NewProgress(w io.Writer, live bool) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{w: w, live: live, width: progressWidth()}
}

// Addresses tells the node lines' grouping each node's address: a
// message that differs between nodes only by their own name and address
// ("dial tcp 10.0.0.7:22: i/o timeout") is one line for all of them.
func (p *Progress) Addresses(nodes []inventory.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addresses = map[string]string{}
	for _, n := range nodes {
		if n.Address != "" && n.Address != n.Name {
			p.addresses[n.Name] = n.Address
		}
	}
}

// Phase starts a phase banner over total nodes.
func (p *Progress) Phase(name string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushHeld()
	p.clearLive()
	p.phase, p.total, p.done, p.failed, p.started = name, total, 0, 0, time.Now()
	if total == 0 {
		// Said once, with no tally after: there is nothing to count.
		p.put(fmt.Sprintf("== %s: no node left in the window\n", name))
		p.phase = ""
		return
	}
	p.put(fmt.Sprintf("== %s (%d node%s)\n", name, total, plural(total)))
	p.drawLive()
}

// Node reports an event on one node. It is printed within groupFor, with
// every other node's that says the same: "32 nodes gpu-[01-32]: ...".
func (p *Progress) Node(node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	// The node's own name and address are what its line is about, not
	// what it says (errors name their node first).
	msg = record.Impersonal(msg, node, p.addresses[node])
	key := msg
	if p.total > fleetAt {
		key = shapeOf(msg)
	}
	if h := p.pendingAt[key]; h != nil {
		h.nodes = append(h.nodes, node)
		h.join(msg)
		if left := p.holdAtMost() - time.Since(p.heldSince); p.flush != nil && left > 0 {
			p.flush.Reset(min(p.holdFor(), left))
		}
		return
	}
	if p.pendingAt == nil {
		p.pendingAt = map[string]*heldLine{}
	}
	h := &heldLine{msg: msg, nodes: []string{node}}
	p.pending = append(p.pending, h)
	p.pendingAt[key] = h
	if p.flush == nil {
		p.heldSince = time.Now()
		p.flush = time.AfterFunc(p.holdFor(), p.Flush)
	}
}

// Flush prints the node lines held for grouping now.
func (p *Progress) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushHeld()
}

func (p *Progress) flushHeld() {
	if p.flush != nil {
		p.flush.Stop()
		p.flush = nil
	}
	if len(p.pending) == 0 {
		return
	}
	p.clearLive()
	for _, h := range p.pending {
		who := NodesWho(h.nodes, p.whoWidth())
		msg := h.text()
		if len(h.nodes) == 1 {
			if a := p.addresses[who]; a != "" {
				msg = strings.ReplaceAll(msg, "<address>", a)
			}
		}
		p.put(fmt.Sprintf("%s: %s\n", who, msg))
	}
	p.pending, p.pendingAt = nil, nil
	p.drawLive()
}

// Finished counts a node as done with its phase.
func (p *Progress) Finished(failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if failed {
		p.failed++
	}
	p.clearLive()
	p.drawLive()
}

// Line prints a line that is not about one node.
func (p *Progress) Line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushHeld()
	p.clearLive()
	p.put(fmt.Sprintf(format+"\n", args...))
	p.drawLive()
}

// End closes the phase with its tally.
func (p *Progress) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushHeld()
	p.clearLive()
	if p.phase == "" {
		return
	}
	p.put(fmt.Sprintf("== %s: %d/%d done, %d failed, %s\n", p.phase, p.done, p.total, p.failed,
		time.Since(p.started).Round(10*time.Millisecond)))
}

func (p *Progress) clearLive() {
	if p.liveLine {
		fmt.Fprint(p.w, "\r\033[K")
		p.liveLine = false
	}
}

func (p *Progress) drawLive() {
	if !p.live || p.phase == "" || p.bars != nil {
		return
	}
	fmt.Fprintf(p.w, "  %s: %d/%d done, %d failed, %s", p.phase, p.done, p.total, p.failed,
		time.Since(p.started).Round(time.Second))
	p.liveLine = true
}

// put writes lines as the operator may see them: what a node said has no
// secret in it and cannot drive the terminal (redact.Shown), and no line
// is wider than the terminal (cut after escaping, so an escape is never
// half shown as the real character).
func (p *Progress) put(lines string) {
	io.WriteString(p.out(), fitLines(redact.Shown(lines), p.width))
}

// out is where a line goes: above the bars while they are drawn.
func (p *Progress) out() io.Writer {
	if p.bars != nil {
		return p.bars
	}
	return p.w
}

// Transfer follows one long copy of total bytes to node: a bar on a
// terminal, else a "node: what: N% of SIZE sent" line per tenth of all the
// transfers of that kind under way ("255 nodes gpu-[001-255]: staging
// dataset: 40% of 2.0GiB sent"), once they have run quietFor. Every
// Transfer must be closed.
func (p *Progress) Transfer(node, what string, total int64) *Transfer {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := &Transfer{p: p, node: node, what: what, total: total}
	if !p.live || total <= 0 {
		if total > 0 {
			t.agg = p.joinTransfer(node, what, total)
		}
		return t
	}
	if p.bars == nil {
		p.flushHeld()
		p.clearLive()
		// AutoRefresh: stderr was found to be a terminal already, and mpb
		// would not draw to anything else (tests).
		p.bars = mpb.New(mpb.WithOutput(p.w), mpb.WithWidth(32), mpb.WithAutoRefresh(), mpb.WithRefreshRate(200*time.Millisecond))
	}
	p.running++
	label := redact.Shown(node + " " + what)
	t.bar = p.bars.AddBar(total,
		mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR), decor.CountersKibiByte("% .1f / % .1f", decor.WCSyncSpace)),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), decor.AverageSpeed(decor.SizeB1024(0), "% .1f", decor.WCSyncSpace),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO, decor.WCSyncSpace), "")),
		mpb.BarRemoveOnComplete())
	return t
}

// Transfer is one copy followed by Progress.
type Transfer struct {
	p          *Progress
	node, what string
	total      int64
	bar        *mpb.Bar
	closed     bool
	// agg counts a plain-line transfer with the others of its kind; sent
	// is what this one added to it.
	agg  *xferAgg
	sent int64
}

// quietFor: a plain-line transfer says nothing before this, so short
// copies do not fill the log.
const quietFor = 2 * time.Second

// Set records done bytes of the total (safe from any goroutine).
func (t *Transfer) Set(done int64) {
	if t.bar != nil {
		t.bar.SetCurrent(min(done, t.total))
		return
	}
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	if t.agg == nil || t.closed {
		return
	}
	done = min(max(done, 0), t.total)
	if done > t.sent {
		t.p.sent(t.agg, done-t.sent)
		t.sent = done
	}
}

// Close ends the transfer, finished or not; the last bar to close stops
// the drawing.
func (t *Transfer) Close() {
	if t.bar == nil {
		t.p.mu.Lock()
		if !t.closed && t.agg != nil {
			t.p.leave(t.agg)
		}
		t.closed = true
		t.p.mu.Unlock()
		return
	}
	if !t.bar.Completed() {
		t.bar.Abort(true)
	}
	t.bar.Wait()
	t.p.mu.Lock()
	t.p.running--
	var stop *mpb.Progress
	if t.p.running == 0 {
		stop, t.p.bars = t.p.bars, nil
	}
	t.p.mu.Unlock()
	if stop != nil {
		stop.Wait()
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
