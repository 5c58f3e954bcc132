package inventory

import (
	"strings"
	"testing"
)

// TestDiagImage: phases.diag.image is run on every node, so it must be
// one pinned container reference and nothing a shell or a runtime could
// read as more; a bad one is named by file, line and key.
func TestDiagImage(t *testing.T) {
	const digest = "@sha256:1dbd2c5e0e3ec4e2a4a3d18e8e3e0f2f5f9f6a2e1b7c3d4e5f60718293a4b5c6"
	for _, ref := range []string{
		"nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04" + digest,
		"localhost:5000/dcgm" + digest,
		"dcgm" + digest,
	} {
		inv, err := parse("a.yaml", []byte(minimal+"phases:\n  diag:\n    image: "+ref+"\n"), noEnv)
		if err != nil || inv.Phases.Diag.Image != ref {
			t.Errorf("%s: %v", ref, err)
		}
	}
	for ref, want := range map[string]string{
		"nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04": "is not pinned",
		`"nvcr.io/x;reboot` + digest + `"`:                     "is not a container reference",
		`"nvcr.io/x$(reboot)` + digest + `"`:                   "is not a container reference",
		`"-v/:/host` + digest + `"`:                            "is not a container reference",
		"NVCR.io/NVIDIA/DCGM" + digest:                         "is not a container reference",
		"nvcr.io/nvidia/dcgm@sha256:1dbd2c5e0e3ec4e2a4a3d18e8": "bad digest",
	} {
		_, err := parse("a.yaml", []byte(minimal+"phases:\n  diag:\n    image: "+ref+"\n"), noEnv)
		if err == nil || !strings.HasPrefix(err.Error(), "a.yaml:9: phases.diag.image: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a.yaml:9: phases.diag.image: ...%s...", ref, err, want)
		}
	}
}

// TestBurninLoadSwitches: gpu_burn and dcgm_stress take auto, true or
// false (YAML's booleans too); anything else is refused naming the key.
func TestBurninLoadSwitches(t *testing.T) {
	base := "phases:\n  burnin:\n    enabled: true\n    duration: 10m\n"
	inv, err := parse("x.yaml", []byte(minimal+base+"    gpu_burn: true\n    dcgm_stress: false\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if b := inv.Phases.Burnin; b.GPUBurn != AutoOn || b.DCGMStress != AutoOff || !On(b.Collectives) {
		t.Errorf("gpu_burn %q dcgm_stress %q collectives %v", b.GPUBurn, b.DCGMStress, b.Collectives)
	}
	inv, err = parse("x.yaml", []byte(minimal+base), noEnv)
	if err != nil || inv.Phases.Burnin.GPUBurn != AutoDefault || inv.Phases.Burnin.DCGMStress != AutoDefault {
		t.Errorf("defaults: %v %+v", err, inv)
	}
	_, err = parse("x.yaml", []byte(minimal+base+"    gpu_burn: sometimes\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "phases.burnin.gpu_burn") || !strings.Contains(err.Error(), "auto") {
		t.Errorf("a bad value must name the key: %v", err)
	}
}
