package phases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// TestHealthNamesTheBrokenNodeAtPreflight: genuine -q captures and kernel
// logs, each node broken one way; each HEALTH verdict names node and GPU,
// a sound node passes them all, and a kernel log that cannot be read is a
// SKIP with the reason, never a PASS.
func TestHealthNamesTheBrokenNodeAtPreflight(t *testing.T) {
	inv := fakeInventory(t, 6, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100-hw-slowdown")
	answerAsStandin(f.Host("h3"), "h100-throttled")
	answerAsStandinWithKernel(f.Host("h4"), "h100", sharedSample(t, "kernel/gpud-dmesg-iso-xid48-63-94-dbe-rowremap-peermem.txt"), 0)
	answerAsStandinWithKernel(f.Host("h5"), "h100", sharedSample(t, "kernel/nvsentinel155-dmesg-fallen-off-bus-multiline-no-xid-570.158.01.txt"), 0)
	answerAsStandinWithKernel(f.Host("h6"), "a10-wrong-model", "dmesg: read kernel buffer failed: Operation not permitted\n", 1)
	r := runFake(t, inv, f, Preflight)

	for _, id := range []string{"HEALTH-001", "HEALTH-002", "HEALTH-003", "HEALTH-004"} {
		if v := verdictOf(t, r, id, "h1"); v.Status != record.Pass {
			t.Errorf("%s h1 (sound): %+v", id, v)
		}
	}
	if v := verdictOf(t, r, "HEALTH-001", "h2"); v.Status != record.Fail || v.Measured != "8 of 8 GPU(s) slowed on an idle node" ||
		!strings.Contains(v.Detail, "GPU 00000000:19:00.0: HW Slowdown, HW Power Brake Slowdown") {
		t.Errorf("HEALTH-001 h2: %+v", v)
	}
	if v := verdictOf(t, r, "HEALTH-001", "h3"); v.Status != record.Fail || v.Detail != "GPU 00000000:75:00.0: HW Power Brake Slowdown, SW Thermal Slowdown" {
		t.Errorf("HEALTH-001 h3: %+v", v)
	}
	if v := verdictOf(t, r, "HEALTH-003", "h4"); v.Status != record.Fail || v.Measured != "Xid 48 ×1, Xid 63 ×1, Xid 94 ×9 on 0000:19:00" {
		t.Errorf("HEALTH-003 h4: %+v", v)
	}
	if v := verdictOf(t, r, "HEALTH-004", "h5"); v.Status != record.Fail || !strings.Contains(v.Measured, "0000:b3:00.0") {
		t.Errorf("HEALTH-004 h5: %+v", v)
	}
	if v := verdictOf(t, r, "HEALTH-003", "h6"); v.Status != record.Skip || !strings.Contains(v.Detail, "Operation not permitted") {
		t.Errorf("HEALTH-003 h6 (unreadable log): %+v", v)
	}
	if v := verdictOf(t, r, "HEALTH-002", "h6"); v.Status != record.Fail || !strings.Contains(v.Detail, "GPU 00000000:07:00.0: a row remapping pending") {
		t.Errorf("HEALTH-002 h6 (the A10 capture: 4 rows remapped, one pending): %+v", v)
	}
}

// sharedSample reads a genuine output from the shared samples.
func sharedSample(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../../shared/samples", rel))
	if err != nil {
		t.Fatalf("want the shared samples next to the module: %v", err)
	}
	return string(b)
}
