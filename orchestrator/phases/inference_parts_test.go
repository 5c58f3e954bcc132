package phases

import (
	"io"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/scripts/standins"
)

func TestJudgedLevel(t *testing.T) {
	for _, c := range []struct {
		levels []string
		at     string
		want   string
	}{
		{[]string{"concurrency:1", "concurrency:32", "concurrency:8"}, "", "concurrency:32"},
		{[]string{"rate:2", "rate:8", "rate:4"}, "", "rate:8"},
		{[]string{"concurrency:64", "rate:8"}, "", "rate:8"},
		{[]string{"concurrency:1", "concurrency:32"}, "concurrency:1", "concurrency:1"},
	} {
		inv := &inventory.Inventory{}
		inv.Phases.Workload.Inference.Levels = c.levels
		inv.Acceptance.Workload.At = c.at
		if got := judgedLevel(inv).String(); got != c.want {
			t.Errorf("%v at %q: %s, want %s", c.levels, c.at, got, c.want)
		}
	}
}

func TestMemSamplerSumsItsGroup(t *testing.T) {
	m := &memSampler{peaks: map[string][2]float64{}, groups: []string{"0-1", "2", ""}}
	io.WriteString(m, "100, 1000\n200, 1000\n300, 1000\n--\n900, 1000\n[N/A], [N/A]\n")
	io.WriteString(m, "50, 1000\n--\n")
	if u, tot := m.peak("0-1"); u == nil || *u != 300 || *tot != 2000 {
		t.Errorf("0-1: %v %v", u, tot)
	}
	if u, _ := m.peak("2"); u == nil || *u != 300 {
		t.Errorf("2: %v", u)
	}
	if u, _ := m.peak(""); u == nil || *u != 600 {
		t.Errorf("all: %v (a sample with an unreadable row does not count)", u)
	}
}

// TestInferenceDeadline: the built-in bound covers the start, the ready
// timeout and every run a retest may add; phases.workload.timeout wins
// over phases.deadline, which replaces the built-in bound.
func TestInferenceDeadline(t *testing.T) {
	inv := infInventory(t, 1, "", "")
	// 2m + ready 10m + 3 runs (a retest and its confirmation) × (2 levels
	// × (0s + 1s + 60s + 10s) + 1m)
	if got := orchestrator.PhaseDeadline(&Inference, inv); got != 22*time.Minute+6*time.Second {
		t.Errorf("built-in bound %s", got)
	}
	inv.Phases.Deadline = 7 * time.Minute
	if got := orchestrator.PhaseDeadline(&Inference, inv); got != 7*time.Minute {
		t.Errorf("with phases.deadline 7m: %s", got)
	}
	inv.Phases.Workload.Timeout = 30 * time.Minute
	if got := orchestrator.PhaseDeadline(&Inference, inv); got != 30*time.Minute {
		t.Errorf("with phases.workload.timeout 30m: %s", got)
	}
	if b := orchestrator.Bound(inv, []orchestrator.Phase{Inference}); b.Total != 30*time.Minute || b.Phases != 1 {
		t.Errorf("window bound %+v", b)
	}
	inv.Phases.Workload.Kind = "training"
	if b := orchestrator.Bound(inv, []orchestrator.Phase{Inference}); b.Phases != 0 {
		t.Errorf("a training workload runs no inference phase: %+v", b)
	}
}

func TestLoopbackEnvIsTheDemos(t *testing.T) {
	if loopbackEnv != standins.LoopbackEnv {
		t.Fatalf("the phase reads $%s, the demo sets $%s", loopbackEnv, standins.LoopbackEnv)
	}
}
