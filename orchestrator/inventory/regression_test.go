package inventory

import (
	"reflect"
	"strings"
	"testing"
)

func TestRegressionThresholds(t *testing.T) {
	inv, err := parse("a.yaml", []byte(minimal), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Acceptance.Regression != 0.05 || inv.Acceptance.RegressionByID != nil {
		t.Errorf("default regression %v %v, want 0.05 and none per ID", inv.Acceptance.Regression, inv.Acceptance.RegressionByID)
	}

	// Given, IDs keep their case (viper lower-cases keys), and 0 is a
	// threshold (any worsening), not "unset".
	inv, err = parse("a.yaml", []byte(minimal+`acceptance:
  regression: 0
  regression_by_id: {STAGE-002: 0.2, NCCL-002: 0.03}
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Acceptance.Regression != 0 {
		t.Errorf("regression %v, want 0", inv.Acceptance.Regression)
	}
	if want := map[string]float64{"STAGE-002": 0.2, "NCCL-002": 0.03}; !reflect.DeepEqual(inv.Acceptance.RegressionByID, want) {
		t.Errorf("regression_by_id %v, want %v", inv.Acceptance.RegressionByID, want)
	}

	// From the environment.
	env := func(k string) (string, bool) {
		if k == "GPUACCEPT_ACCEPTANCE_REGRESSION" {
			return "0.1", true
		}
		return "", false
	}
	if inv, err = parse("a.yaml", []byte(minimal), env); err != nil || inv.Acceptance.Regression != 0.1 {
		t.Errorf("from the environment: %v, %v", inv, err)
	}

	for src, want := range map[string]string{
		"acceptance:\n  regression: 1.5\n":                           "a.yaml:8: acceptance.regression: must be at least 0 and at most 1",
		"acceptance:\n  regression: -0.1\n":                          "acceptance.regression: must be at least 0",
		"acceptance:\n  regression_by_id: {nccl-2: 0.1}\n":           "acceptance.regression_by_id.nccl-2: \"nccl-2\" is not a requirement ID gpuaccept judges; did you mean NCCL-002?",
		"acceptance:\n  regression_by_id: {NCCL-002: 2}\n":           "acceptance.regression_by_id.NCCL-002: must be at least 0 and at most 1",
		"acceptance:\n  regression: \"5%\"\n":                        "acceptance.regression: expected a number",
		"acceptance:\n  regression_by_id: {NCCL-002: 0.1}\n  x: 1\n": "acceptance.x",
	} {
		_, err := parse("a.yaml", []byte(minimal+src), noEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", src, err, want)
		}
	}
}
