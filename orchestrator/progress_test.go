package orchestrator

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
)

// syncBuffer: mpb draws from its own goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// On a terminal each transfer is a bar; lines printed meanwhile still come
// out whole, and the drawing stops (no goroutine left, see TestMain) once
// the last transfer closes.
func TestTransferDrawsBarsOnATerminal(t *testing.T) {
	var out syncBuffer
	p := NewProgress(&out, true)
	p.Phase("image", 2)
	a := p.Transfer("n1", "image", 64<<20)
	b := p.Transfer("n2", "image", 64<<20)
	a.Set(32 << 20)
	b.Set(16 << 20)
	p.Node("n1", "a line between bars")
	time.Sleep(500 * time.Millisecond) // a few refreshes
	a.Set(64 << 20)
	a.Close()
	b.Close() // unfinished: dropped
	p.End()
	s := out.String()
	// (Off a real terminal mpb cuts each bar line at the bar width.)
	for _, want := range []string{"n1 image  32.0 MiB / 64.0 MiB", "n2 image  16.0 MiB / 64.0 MiB", "n1: a line between bars\n", "== image: 0/2 done"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%q", want, s)
		}
	}
	if strings.Contains(s, "% of") {
		t.Errorf("plain transfer lines on a terminal:\n%q", s)
	}
}

// Elsewhere a transfer is a line per tenth, and only once it has run a
// while: a short copy says nothing.
func TestTransferLinesWithoutATerminal(t *testing.T) {
	var out syncBuffer
	p := NewProgress(&out, false)
	short := p.Transfer("n1", "image", 100)
	short.Set(100)
	short.Close()
	long := p.Transfer("n2", "staging data", 1000)
	long.agg.start = time.Now().Add(-time.Minute)
	for done := int64(0); done <= 1000; done += 50 {
		long.Set(done)
	}
	long.Close()
	long.Set(1000) // after Close: nothing
	got := out.String()
	if strings.Contains(got, "n1:") {
		t.Errorf("a short copy printed:\n%s", got)
	}
	if n := strings.Count(got, "n2: staging data: "); n != 10 || !strings.Contains(got, "n2: staging data: 100% of 1KB sent\n") {
		t.Errorf("%d lines:\n%s", n, got)
	}
}

// What many nodes say at once is one line, their own names and addresses
// aside; a node alone keeps its address; a held line waits for the
// phase's end at most, or groupFor.
func TestNodeLinesGroup(t *testing.T) {
	var out syncBuffer
	p := NewProgress(&out, false)
	p.Addresses([]inventory.Node{{Name: "gpu-01", Address: "10.0.0.1"}, {Name: "gpu-02", Address: "10.0.0.2"},
		{Name: "gpu-03", Address: "10.0.0.3"}, {Name: "gpu-07", Address: "10.0.0.7"}})
	p.Phase("connect", 4)
	for _, n := range []string{"gpu-02", "gpu-01", "gpu-03"} {
		p.Node(n, "connect failed: %s: dial tcp %s:22: i/o timeout", n, map[string]string{"gpu-01": "10.0.0.1", "gpu-02": "10.0.0.2", "gpu-03": "10.0.0.3"}[n])
	}
	p.Node("gpu-07", "connect failed: gpu-07: dial tcp 10.0.0.7:22: connection refused")
	if s := out.String(); strings.Contains(s, "failed") {
		t.Fatalf("printed before the group closed:\n%s", s)
	}
	p.End()
	want := "== connect (4 nodes)\n" +
		"3 nodes gpu-[01-03]: connect failed: dial tcp <address>:22: i/o timeout\n" +
		"gpu-07: connect failed: dial tcp 10.0.0.7:22: connection refused\n"
	if got := out.String(); !strings.HasPrefix(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	var later syncBuffer
	q := NewProgress(&later, false)
	q.Node("n1", "reconnect: refused")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(later.String(), "n1: reconnect: refused\n") {
		if time.Now().After(deadline) {
			t.Fatal("a held line was never printed")
		}
		time.Sleep(groupFor / 4)
	}
}

// Each node that joins a held line holds it longer, never past
// groupAtMost: nodes saying the same thing without end still get lines.
func TestAGrowingGroupIsStillPrinted(t *testing.T) {
	var out syncBuffer
	p := NewProgress(&out, false)
	p.Phase("staging", fleetAt) // below fleet size: held groupAtMost at most
	for i := 0; time.Duration(i)*groupFor/3 < 2*groupAtMost; i++ {
		p.Node(fmt.Sprintf("n%d", i), "staging failed: no such file")
		time.Sleep(groupFor / 3)
	}
	p.End()
	if n := strings.Count(out.String(), "staging failed: no such file"); n < 2 {
		t.Errorf("%d line(s) in %s of joining: held past %s\n%s", n, 2*groupAtMost, groupAtMost, out.String())
	}
}
