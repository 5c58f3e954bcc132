package phases

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseJobLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
		want JobEvent
	}{
		{"[default0]:GPUACCEPT step t=1764500000.123 node=h2 rank=1 world=3 step=12 loss=0.5", true, JobEvent{Kind: "step", Rank: 1, World: 3, Step: 12}},
		{"GPUACCEPT start t=1.0 node=h1 rank=0 world=2 restart=1 resume_step=10", true, JobEvent{Kind: "start", World: 2, Restart: 1, Step: 10}},
		{"GPUACCEPT start t=1.0 node=h1 rank=0 world=2 restart=0 resume_step=0 torch=2.11.0+cu130", true, JobEvent{Kind: "start", World: 2, Torch: "2.11.0+cu130"}},
		{"GPUACCEPT error t=1.0 node=h1 rank=0 step=7 msg=RuntimeError: Connection closed by peer [10.0.0.3]:1234", true,
			JobEvent{Kind: "error", Step: 7, Msg: "RuntimeError: Connection closed by peer [10.0.0.3]:1234"}},
		{"GPUACCEPT checkpoint t=1.0 node=h1 rank=0 step=10", true, JobEvent{Kind: "checkpoint", Step: 10}},
		{"INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group", false, JobEvent{}},
		{"GPUACCEPT banana t=1", false, JobEvent{}},
		{"GPUACCEPT", false, JobEvent{}},
	} {
		got, ok := parseJobLine(tc.line)
		got.Node = ""
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTorchText: one clause per distinct answer, nodes as host ranges;
// workers named only where they differ from the launcher.
func TestTorchText(t *testing.T) {
	nodes := []string{"gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05"}
	got := torchText(nodes, map[string]TorchVersion{
		"gpu-01": {Launcher: "2.11.0+cu130", Workers: "2.11.0+cu130"},
		"gpu-02": {Launcher: "2.11.0+cu130"},
		"gpu-03": {Launcher: "2.6.0", Workers: "1.13.0a0"},
		"gpu-04": {Error: "ModuleNotFoundError: No module named 'torch'"},
		"gpu-05": {Workers: "2.11.0+cu130", Error: "no answer within 3m0s"},
	})
	want := "PyTorch 2.11.0+cu130 on gpu-[01-02]; PyTorch 2.6.0 (workers 1.13.0a0) on gpu-03; " +
		"gpu-04: no PyTorch: ModuleNotFoundError: No module named 'torch'; " +
		"PyTorch 2.11.0+cu130 (workers; the launcher's: no answer within 3m0s) on gpu-05"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := torchText(nodes, nil); got != "" {
		t.Errorf("nothing probed: %q", got)
	}
}

// A 3-node job (one worker each) runs steps 1..12 with checkpoints every
// 5; h3 is killed at 10 s after step 12; the survivors error at 10.2 s,
// start again at 25 s from step 10 and step on; h3 rejoins at 40 s.
func killScenario() []JobEvent {
	var ev []JobEvent
	at := 1.0
	for s := 1; s <= 12; s++ {
		for r, n := range []string{"h1", "h2", "h3"} {
			ev = append(ev, JobEvent{At: at, Node: n, Kind: "step", Rank: r, World: 3, Step: s})
		}
		if s%5 == 0 {
			ev = append(ev, JobEvent{At: at + 0.1, Node: "h1", Kind: "checkpoint", Step: s})
		}
		at += 0.75
	}
	ev = append(ev, JobEvent{At: 10.2, Node: "h2", Kind: "error", Rank: 1, Step: 12, Msg: "Connection closed by peer"},
		JobEvent{At: 10.3, Node: "h1", Kind: "error", Step: 12})
	ev = append(ev, JobEvent{At: 25, Node: "h1", Kind: "start", World: 2, Restart: 1, Step: 10},
		JobEvent{At: 25, Node: "h2", Kind: "start", Rank: 1, World: 2, Restart: 1, Step: 10})
	at = 26
	for s := 11; s <= 16; s++ {
		ev = append(ev, JobEvent{At: at, Node: "h1", Kind: "step", World: 2, Step: s}, JobEvent{At: at, Node: "h2", Kind: "step", Rank: 1, World: 2, Step: s})
		at += 0.5
	}
	ev = append(ev, JobEvent{At: 40, Node: "h3", Kind: "start", Rank: 2, World: 3, Restart: 2, Step: 15},
		JobEvent{At: 41, Node: "h3", Kind: "step", Rank: 2, World: 3, Step: 16})
	return ev
}

func TestFailureFigures(t *testing.T) {
	f := figures(killScenario(), 10, "h3", 3)
	if f.LastStep != 12 || f.LastCheckpoint != 10 {
		t.Fatalf("before: %+v", f)
	}
	if f.DetectedAt == nil || *f.DetectedAt != 10.2 || f.ResumedAt == nil || *f.ResumedAt != 26 || !f.Resumed {
		t.Fatalf("after: %+v", f)
	}
	if *f.ResumedFrom != 10 || *f.StepsLost != 2 || f.VictimBackAt == nil || *f.VictimBackAt != 41 {
		t.Fatalf("figures: %+v", f)
	}
	if d, r := *f.DetectionSecs(), *f.ResumeSecs(); d < 0.19 || d > 0.21 || r != 16 {
		t.Errorf("detection %v, resume %v", d, r)
	}
	// A step and its checkpoint that complete after the coordinator acted
	// but before the job noticed (a cut takes a moment) count as done.
	late := append(killScenario(), JobEvent{At: 10.05, Node: "h1", Kind: "step", Step: 13, World: 3}, JobEvent{At: 10.1, Node: "h1", Kind: "checkpoint", Step: 13})
	if g := figures(late, 10, "h3", 3); g.LastStep != 13 || g.LastCheckpoint != 13 {
		t.Errorf("late step and checkpoint not counted: %+v", g)
	}
	// Too few steps after the restart: not resumed yet.
	if g := figures(killScenario()[:len(killScenario())-12], 10, "h3", 3); g.Resumed || g.VictimBackAt != nil {
		t.Errorf("resumed on too few steps: %+v", g)
	}
	// Nothing after the failure: no detection, no resume, no steps lost.
	ev := killScenario()
	var before []JobEvent
	for _, e := range ev {
		if e.At <= 10 {
			before = append(before, e)
		}
	}
	if g := figures(before, 10, "h3", 3); g.DetectedAt != nil || g.ResumedAt != nil || g.StepsLost != nil {
		t.Errorf("%+v", g)
	}
}

func TestTextTimelineMarksTheFailureWindow(t *testing.T) {
	ev := killScenario()
	f := figures(ev, 10, "h3", 3)
	got := textTimeline([]string{"h1", "h2", "h3"}, ev, f, 0, 41)
	lines := strings.Split(got, "\n")
	if len(lines) < 5 || !strings.Contains(lines[0], "!") || !strings.Contains(got, "x") {
		t.Fatalf("timeline:\n%s", got)
	}
	ruler := lines[0][4 : 4+41]
	if strings.Index(ruler, "!") != 10 || strings.LastIndex(ruler, "!") != 26 {
		t.Errorf("failure window at columns %d..%d, want 10..26:\n%s", strings.Index(ruler, "!"), strings.LastIndex(ruler, "!"), got)
	}
	h3 := lines[3][4 : 4+41]
	if strings.Count(h3[11:39], "#") != 0 || h3[40] != '#' {
		t.Errorf("h3 row %q", h3)
	}
}

func TestLineWriterSplitsLines(t *testing.T) {
	var got []string
	l := &lineWriter{fn: func(s string) { got = append(got, s) }}
	l.Write([]byte("a\nb"))
	l.Write([]byte("c\n\nd"))
	l.flush()
	if strings.Join(got, "|") != "a|bc||d" {
		t.Errorf("%q", got)
	}
}

// The record keeps one step event per node and step: the ranks of a node
// step together; a step counted again after a restart is kept again.
func TestRecordedEventsKeepOneStepPerNode(t *testing.T) {
	ev := []JobEvent{
		{Node: "h1", Kind: "start", Rank: 0}, {Node: "h1", Kind: "start", Rank: 1},
		{Node: "h1", Kind: "step", Rank: 0, Step: 1}, {Node: "h1", Kind: "step", Rank: 1, Step: 1},
		{Node: "h2", Kind: "step", Rank: 2, Step: 1}, {Node: "h1", Kind: "checkpoint", Rank: 0, Step: 1},
		{Node: "h1", Kind: "step", Rank: 0, Step: 2}, {Node: "h1", Kind: "step", Rank: 1, Step: 2},
		{Node: "h1", Kind: "error", Rank: 1, Step: 2},
		{Node: "h1", Kind: "start", Rank: 0}, {Node: "h1", Kind: "step", Rank: 0, Step: 2},
		{Node: "h1", Kind: "step", Rank: 1, Step: 2},
	}
	got := recordedEvents(ev, []string{"h1", "h2"})
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, fmt.Sprintf("%s:%s:%d", e.Node, e.Kind, e.Step))
	}
	want := []string{"h1:start:0", "h1:start:0", "h1:step:1", "h2:step:1", "h1:checkpoint:1", "h1:step:2", "h1:error:2",
		"h1:start:0", "h1:step:2"}
	if !slices.Equal(kinds, want) {
		t.Errorf("recorded %v\nwant     %v", kinds, want)
	}
	// Figures come from every event, not the recorded ones: the same here.
	if a, b := figures(ev, 0, "h1", 1), figures(got, 0, "h1", 1); !reflect.DeepEqual(a, b) {
		t.Errorf("figures differ: %+v / %+v", a, b)
	}
	// A node the timeline does not draw keeps the first and the last step
	// of each run between starts, in time order, to the millisecond.
	ev = []JobEvent{{At: 0.0004, Node: "h3", Kind: "start"}}
	for s := 1; s <= 5; s++ {
		ev = append(ev, JobEvent{At: float64(s) + 0.12345, Node: "h3", Kind: "step", Step: s}, JobEvent{At: float64(s) + 0.2, Node: "h1", Kind: "step", Step: s})
	}
	ev = append(ev, JobEvent{At: 6, Node: "h3", Kind: "error", Step: 5}, JobEvent{At: 7, Node: "h3", Kind: "start"},
		JobEvent{At: 8, Node: "h3", Kind: "step", Step: 4})
	kinds = nil
	for _, e := range recordedEvents(ev, []string{"h1"}) {
		kinds = append(kinds, fmt.Sprintf("%g:%s:%s:%d", e.At, e.Node, e.Kind, e.Step))
	}
	want = []string{"0:h3:start:0", "1.123:h3:step:1", "1.2:h1:step:1", "2.2:h1:step:2", "3.2:h1:step:3", "4.2:h1:step:4",
		"5.123:h3:step:5", "5.2:h1:step:5", "6:h3:error:5", "7:h3:start:0", "8:h3:step:4"}
	if !slices.Equal(kinds, want) {
		t.Errorf("recorded %v\nwant     %v", kinds, want)
	}
}
