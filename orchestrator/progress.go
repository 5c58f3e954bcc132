package orchestrator

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress writes what the window is doing to stderr: a banner per phase
// and one "node: message" line per event. On a terminal a live count of
// finished nodes is kept on the last line.
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
}

// NewProgress writes to w; live enables the terminal status line.
func NewProgress(w io.Writer, live bool) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{w: w, live: live}
}

// Phase starts a phase banner over total nodes.
func (p *Progress) Phase(name string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLive()
	p.phase, p.total, p.done, p.failed, p.started = name, total, 0, 0, time.Now()
	fmt.Fprintf(p.w, "== %s (%d node%s)\n", name, total, plural(total))
	p.drawLive()
}

// Node reports an event on one node.
func (p *Progress) Node(node, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLive()
	fmt.Fprintf(p.w, "%s: %s\n", node, fmt.Sprintf(format, args...))
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
	p.clearLive()
	fmt.Fprintf(p.w, format+"\n", args...)
	p.drawLive()
}

// End closes the phase with its tally.
func (p *Progress) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLive()
	fmt.Fprintf(p.w, "== %s: %d/%d done, %d failed, %s\n", p.phase, p.done, p.total, p.failed,
		time.Since(p.started).Round(10*time.Millisecond))
}

func (p *Progress) clearLive() {
	if p.liveLine {
		fmt.Fprint(p.w, "\r\033[K")
		p.liveLine = false
	}
}

func (p *Progress) drawLive() {
	if !p.live || p.phase == "" {
		return
	}
	fmt.Fprintf(p.w, "  %s: %d/%d done, %d failed, %s", p.phase, p.done, p.total, p.failed,
		time.Since(p.started).Round(time.Second))
	p.liveLine = true
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
