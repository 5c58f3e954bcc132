package parse

import (
	"fmt"
	"strings"
	"testing"
)

// dcgmiSamples: file -> what its parser must extract.
var dcgmiSamples = map[string]sampleCheck{
	"dcgmi/SOURCES.md": {parser: pNone},

	"dcgmi/discovery-l-8x-h800.txt": {parser: pDiscovery, check: func(t *testing.T, s string) {
		devs := ok(DCGMDiscovery(s)).must(t)
		buses := []string{"18", "3E", "51", "65", "98", "BD", "CF", "E2"}
		if len(devs) != 8 {
			t.Fatalf("%d devices, want 8: %+v", len(devs), devs)
		}
		for i, d := range devs {
			eq(t, "id", d.ID, i)
			eq(t, "kind", d.Kind, "gpu")
			eq(t, "name", d.Name, "NVIDIA H800")
			eq(t, "bus id", d.BusID, "00000000:"+buses[i]+":00.0")
		}
		eq(t, "GPU0 UUID", devs[0].UUID, "GPU-34bf77d1-c686-6821-79a8-32d326c5039c")
		eq(t, "GPU7 UUID", devs[7].UUID, "GPU-474d838c-171f-d249-4f45-bbc01a8eb74a")
	}},

	"dcgmi/awsome-diag-r2-3.3.3-8xA100-p4de-pass.txt": {parser: pDiag, check: func(t *testing.T, s string) {
		d := ok(DCGMDiag(s)).must(t)
		checkDiagHead(t, d, true, "3.3.3", "text", 0)
		eq(t, "tests", diagSummary(d), []string{
			"Deployment/Denylist=Pass", "Deployment/NVML Library=Pass", "Deployment/CUDA Main Library=Pass",
			"Deployment/Permissions and OS Blocks=Pass", "Deployment/Persistence Mode=Pass",
			"Deployment/Environment Variables=Pass", "Deployment/Page Retirement/Row Remap=Pass",
			"Deployment/Graphics Processes=Pass", "Deployment/Inforom=Pass",
			"Integration/PCIe=Pass", "Hardware/GPU Memory=Pass",
		})
		for _, tt := range d.Tests {
			eq(t, tt.Name+" per-GPU entries (\"Pass - All\" names none)", len(tt.GPUs), 0)
		}
	}},
	"dcgmi/dcgm124-diag-r2-i0-4.4.2-1xA10G-pass.txt": {parser: pDiag, check: func(t *testing.T, s string) {
		d := ok(DCGMDiag(s)).must(t)
		checkDiagHead(t, d, true, "4.4.2", "text", 0)
		eq(t, "tests", diagSummary(d), []string{"Deployment/software=Pass", "Hardware/memory=Pass", "Integration/pcie=Pass"})
		for _, tt := range d.Tests {
			eq(t, tt.Name+" GPUs", tt.GPUs, []DiagGPU{{GPU: 0, Status: StatusPass}})
		}
	}},
	"dcgmi/dcgm215-diag-r3-4.x-json-FRAGMENT-8gpu-info-truncation.txt": {parser: pDiag, check: func(t *testing.T, s string) {
		d := ok(DCGMDiag(s)).must(t)
		checkDiagHead(t, d, false, "", "json", 1)
		if !strings.Contains(d.Errors[0], "fragment") || !strings.Contains(d.Errors[0], `"diagnostic"`) {
			t.Errorf("error does not describe the fragment: %q", d.Errors[0])
		}
		eq(t, "tests", diagSummary(d), []string{"/diagnostic=Pass"})
		var gpus []DiagGPU
		for i := 0; i < 8; i++ {
			gpus = append(gpus, DiagGPU{GPU: i, Status: StatusPass})
		}
		eq(t, "GPUs", d.Tests[0].GPUs, gpus)
		// info[] is present for GPUs 0-1 (3 lines), GPU 2 (2 lines) and
		// missing for GPUs 3-7: the DCGM bug the issue reports.
		info := d.Tests[0].Info
		eq(t, "info lines", len(info), 8)
		eq(t, "info 0", info[0], "GPU0: Allocated space for 138 output matricies from 76077622886 bytes available.")
		eq(t, "info 5", info[5], "GPU1: GPU 1 calculated at approximately 859.08 gigaflops during this test")
		eq(t, "info 7", info[7], "GPU2: Running with precisions: FP64 1, FP32 1, FP16 1")
	}},
	"dcgmi/deepops-diag-r1-dcgm1x-blacklist-fail-empty-sections.txt": {parser: pDiag, check: func(t *testing.T, s string) {
		d := ok(DCGMDiag(s)).must(t)
		checkDiagHead(t, d, false, "", "text", 0) // not OK because tests failed, not because of output errors
		eq(t, "tests", diagSummary(d), []string{
			"Deployment/Blacklist=Pass", "Deployment/NVML Library=Pass", "Deployment/CUDA Main Library=Pass",
			"Deployment/Permissions and OS Blocks=Pass", "Deployment/Persistence Mode=Fail",
			"Deployment/Environment Variables=Fail", "Deployment/Page Retirement=Fail",
			"Deployment/Graphics Processes=Fail", "Deployment/Inforom=Fail",
		})
	}},
	"dcgmi/deepops-diag-r1-dcgm1x-blacklist-pass-no-footer.txt": {parser: pDiag, check: func(t *testing.T, s string) {
		d := ok(DCGMDiag(s)).must(t)
		checkDiagHead(t, d, false, "", "text", 1) // every row passes, but the table was cut off
		if !strings.Contains(d.Errors[0], "closing border") {
			t.Errorf("error does not describe the truncation: %q", d.Errors[0])
		}
		eq(t, "tests", len(d.Tests), 9)
		for _, tt := range d.Tests {
			eq(t, tt.Name, tt.Status, StatusPass)
		}
		eq(t, "first/last", []string{d.Tests[0].Name, d.Tests[8].Name}, []string{"Blacklist", "Inforom"})
	}},

	// A -r 3 text table cut from the middle: GPU 0 fails (CUDA busy), GPU 1
	// passes; the multi-line Warning cells stay with GPU 0.
	"dcgmi/godcgm52-diag-r3-3.3.1-gpu0-fail-cuda-busy-midtable-excerpt.txt": {parser: pDiag, check: func(t *testing.T, s string) {
		d := ok(DCGMDiag(s)).must(t)
		eq(t, "ok", d.OK, false)
		eq(t, "tests", diagSummary(d), []string{"Hardware/GPU Memory=Fail", "Hardware/Diagnostic=Fail", "Stress/Targeted Stress=Fail"})
		mem := d.Tests[0]
		eq(t, "GPU Memory per GPU", fmt.Sprintln(mem.GPUs[0].GPU, mem.GPUs[0].Status, mem.GPUs[1].GPU, mem.GPUs[1].Status), "1 Pass 0 Fail\n")
		if w := mem.GPUs[1].Warnings; len(w) != 1 || !strings.Contains(w[0], "'CUDA-capable device(s) is/are busy or unavailable'") {
			t.Errorf("GPU 0's warning, its three cell lines joined: %q", w)
		}
		eq(t, "info for GPU 1", mem.Info, []string{"GPU 1 Allocated 15568304202 bytes (98.3%)"})
	}},
	// dcgmi dmon field samples: read by no parser yet.
	"dcgmi/llmaction-dmon-i0-e1011-1012-1009-1010-c5-h800-nvlink-pcie-bytes.txt": {parser: pNone},
}

func checkDiagHead(t *testing.T, d Diag, ok bool, version, format string, errs int) {
	t.Helper()
	eq(t, "OK", d.OK, ok)
	eq(t, "version", d.Version, version)
	eq(t, "format", d.Format, format)
	if len(d.Errors) != errs {
		t.Fatalf("errors = %q, want %d", d.Errors, errs)
	}
}

// diagSummary renders tests as "Category/Name=Status" for compact tables.
func diagSummary(d Diag) []string {
	var out []string
	for _, t := range d.Tests {
		out = append(out, fmt.Sprintf("%s/%s=%s", t.Category, t.Name, t.Status))
	}
	return out
}
