package record

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestLowerIsBetter(t *testing.T) {
	for unit, lower := range map[string]bool{UnitGBs: false, UnitScore: false, UnitSeconds: true, UnitSteps: true, "GiB": false} {
		if LowerIsBetter(unit) != lower {
			t.Errorf("LowerIsBetter(%q) = %v", unit, !lower)
		}
	}
}

func TestMeasure(t *testing.T) {
	var v Verdict
	v.Measure(370.5, UnitGBs)
	if v.Value == nil || *v.Value != 370.5 || v.Unit != UnitGBs {
		t.Fatalf("Measure: %v %q", v.Value, v.Unit)
	}
	b, err := json.Marshal(v)
	if err != nil || !strings.Contains(string(b), `"value":370.5,"unit":"GB/s"`) {
		t.Errorf("JSON %s, %v", b, err)
	}
	// A NaN or infinity is no figure, and run.json could not hold it.
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		var w Verdict
		w.Measure(x, UnitSeconds)
		if w.Value != nil || w.Unit != "" {
			t.Errorf("Measure(%v) set %v %q", x, w.Value, w.Unit)
		}
	}
	if b, _ := json.Marshal(Verdict{ID: "GPU-001"}); strings.Contains(string(b), "value") || strings.Contains(string(b), "unit") {
		t.Errorf("a verdict without a figure: %s", b)
	}
}

func TestRegressionFor(t *testing.T) {
	var none *Regression
	r := &Regression{Threshold: 0.1, ByID: map[string]float64{"NCCL-002": 0, "STAGE-002": 0.3}}
	for _, c := range []struct {
		r    *Regression
		id   string
		want float64
	}{{none, "NCCL-002", DefaultRegression}, {r, "NCCL-002", 0}, {r, "STAGE-002", 0.3}, {r, "CKPT-004", 0.1}} {
		if got := c.r.For(c.id); got != c.want {
			t.Errorf("%+v.For(%s) = %v, want %v", c.r, c.id, got, c.want)
		}
	}
}
