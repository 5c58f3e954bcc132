package record

import (
	"encoding/json"
	"strings"
	"testing"
)

func f(x float64) *float64 { return &x }

// What a verdict was held to, said from its own numbers: a throughput's
// floor, a duration's ceiling, an exact quote, nothing.
func TestRule(t *testing.T) {
	tput := Verdict{Quoted: "370 GB/s", Ratio: f(184.3 / 370), Tolerance: f(0.9)}
	tput.Measure(184.3, UnitGBs)
	dur := Verdict{Quoted: "0.2 s (16MiB saved and restored at 1 GB/s per node)", Ratio: f(0.2 / 0.26), Tolerance: f(0.8)}
	dur.Measure(0.26, UnitSeconds)
	for _, c := range []struct {
		v           Verdict
		rule, short string
	}{
		{tput, "≥ 333 GB/s (0.9 × 370 GB/s quoted)", "≥ 333 GB/s"},
		{dur, "≤ 0.25 s (0.2 s quoted ÷ 0.8)", "≤ 0.25 s"},
		{Verdict{Quoted: "80 GiB", Ratio: f(0.995), Tolerance: f(0.9)}, "≥ 0.9 × 80 GiB", "≥ 0.9 × 80 GiB"},
		{Verdict{Quoted: "NVIDIA H100 80GB HBM3"}, "= NVIDIA H100 80GB HBM3", "= NVIDIA H100 80GB HBM3"},
		{Verdict{Measured: "connected"}, "", ""},
		// A rate over no time has no bound to work out.
		{Verdict{Quoted: "1 GB/s", Ratio: f(0), Tolerance: f(0.9), Value: f(0), Unit: UnitGBs}, "≥ 0.9 × 1 GB/s", "≥ 0.9 × 1 GB/s"},
	} {
		if got := c.v.Rule(); got != c.rule {
			t.Errorf("Rule() = %q, want %q", got, c.rule)
		}
		if got := c.v.ShortRule(); got != c.short {
			t.Errorf("ShortRule() = %q, want %q", got, c.short)
		}
	}
	for x, want := range map[float64]string{184.31: "184", 0.2601: "0.26", 1234.5: "1235", 0.5: "0.5", 12345678: "12345678"} {
		if got := Figure(x, ""); got != want {
			t.Errorf("Figure(%v) = %q, want %q", x, got, want)
		}
	}
}

// The outcome of a window: a failure is NOT ACCEPTED whatever else; what
// could not be measured for the buyer's reasons, a quoted figure nothing
// measured, an abort or nothing judged is INCOMPLETE; never a silent pass.
func TestResult(t *testing.T) {
	pass := func(id, node string) Verdict { return Verdict{ID: id, Node: node, Status: Pass} }
	quote := json.RawMessage(`{"gpu_model":"H100","inter_busbw_gbs":370}`)
	nccl := Verdict{ID: "NCCL-002", Status: Pass}
	unreached := Verdict{ID: "CONN-001", Node: "b", Status: Skip, Incomplete: "not reached for a reason on the buyer's side (jump host): bastion"}
	for _, c := range []struct {
		name    string
		run     Run
		outcome string
		words   string
	}{
		{"everything passed", Run{Quote: quote, Verdicts: []Verdict{pass("CONN-001", "a"), pass("GPU-001", "a"), nccl}}, OutcomeAccepted, ""},
		{"a failure", Run{Verdicts: []Verdict{pass("CONN-001", "a"), {ID: "DIAG-001", Node: "a", Status: Fail}, unreached}}, OutcomeNotAccepted, ""},
		{"buyer's side on two nodes", Run{Verdicts: []Verdict{pass("CONN-001", "a"), unreached, {ID: "CONN-001", Node: "c", Status: Skip, Incomplete: unreached.Incomplete}}},
			OutcomeIncomplete, "2 nodes b,c: not reached for a reason on the buyer's side (jump host)"},
		{"a quoted figure nothing measured", Run{Quote: quote, Verdicts: []Verdict{pass("CONN-001", "a"), pass("GPU-001", "a")}},
			OutcomeIncomplete, "quote.inter_busbw_gbs is 370, and nothing measured NCCL-002"},
		{"a skip is no measurement", Run{Quote: quote, Verdicts: []Verdict{pass("CONN-001", "a"), pass("GPU-001", "a"), {ID: "NCCL-002", Status: Skip}}},
			OutcomeIncomplete, "nothing measured NCCL-002"},
		{"aborted", Run{Aborted: "a: preflight failed (--strict)", Verdicts: []Verdict{pass("CONN-001", "a")}}, OutcomeIncomplete, "aborted: a: preflight failed"},
		{"nothing judged", Run{Nodes: []Node{{Name: "a"}}}, OutcomeIncomplete, "no node was reached"},
		{"interrupted", Run{Interrupted: true, Verdicts: []Verdict{pass("CONN-001", "a")}}, OutcomeInterrupted, "--resume"},
	} {
		res := c.run.Result()
		if res.Outcome != c.outcome {
			t.Errorf("%s: %s, want %s (%v)", c.name, res.Outcome, c.outcome, res.Incomplete)
		}
		if c.words != "" && !strings.Contains(strings.Join(res.Incomplete, "\n"), c.words) {
			t.Errorf("%s: no %q in %q", c.name, c.words, res.Incomplete)
		}
		if c.run.Accepted() != (c.outcome == OutcomeAccepted) {
			t.Errorf("%s: Accepted() disagrees with %s", c.name, res.Outcome)
		}
	}
}

// A quote that is itself a bound is the rule as written, not "= ≤ 1m0s".
func TestRuleOfABoundQuote(t *testing.T) {
	if got := (Verdict{Quoted: "≤ 1m0s"}).ShortRule(); got != "≤ 1m0s" {
		t.Errorf("rule %q", got)
	}
	if got := (Verdict{Quoted: "H100 80GB HBM3"}).Rule(); got != "= H100 80GB HBM3" {
		t.Errorf("rule %q", got)
	}
}
