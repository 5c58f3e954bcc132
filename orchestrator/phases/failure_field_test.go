package phases

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The failure test's own logs from a real window on an H200 with PyTorch
// 2.11 (testdata/h200-torch2.11-failure/README.md): the job's lines read
// as the window read them, and the figures come out as that window's
// run.json has them. The times are the job's own (t=), put on the
// window's clock by the first start line's arrival (21.1 s after launch).
func TestFailureFiguresOfARealTorch211Window(t *testing.T) {
	const arrival, injected = 21.1, 22.5635
	var events []JobEvent
	first := 0.0
	for _, node := range []string{"gpu-01", "gpu-02"} {
		f, err := os.Open("testdata/h200-torch2.11-failure/" + node + ".log")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			e, ok := parseJobLine(sc.Text())
			if !ok {
				continue
			}
			_, after, found := strings.Cut(sc.Text(), " t=")
			ts, err := strconv.ParseFloat(strings.TrimSpace(strings.SplitN(after, " ", 2)[0]), 64)
			if !found || err != nil {
				t.Fatalf("%s: a job line without its time: %q", node, sc.Text())
			}
			if first == 0 {
				first = ts
			}
			e.At = ts - first + arrival
			if e.Node != node {
				t.Errorf("%s's log has a line of %q", node, e.Node)
			}
			events = append(events, e)
		}
		f.Close()
	}
	starts := 0
	for _, e := range events {
		if e.Kind == "start" {
			starts++
			if e.Torch != "2.11.0+cu130" {
				t.Errorf("start line of %s: torch %q", e.Node, e.Torch)
			}
		}
	}
	if starts != 4 {
		t.Errorf("%d start lines, want 4 (each node's worker, then again after the kill)", starts)
	}
	f := figures(events, injected, "gpu-02", 3)
	if f.LastStep != 5 || f.LastCheckpoint != 3 || !f.Resumed || f.ResumedFrom == nil || *f.ResumedFrom != 3 {
		t.Fatalf("figures: %+v", f)
	}
	if *f.StepsLost != 2 || f.VictimBackAt == nil {
		t.Errorf("steps lost %d, victim back %v; the window had 2 and gpu-02 back", *f.StepsLost, f.VictimBackAt)
	}
	if d, r := *f.DetectionSecs(), *f.ResumeSecs(); d < 0.1 || d > 0.5 || r < 18 || r > 20 {
		t.Errorf("detected after %.2f s, resumed after %.2f s; the window had 0.25 and 18.6", d, r)
	}
}
