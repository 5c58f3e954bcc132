package phases

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// TestFormFactorOfGenuineNodes: each rule on the genuine -q outputs (the
// node's other sections as preflight.sh frames them).
func TestFormFactorOfGenuineNodes(t *testing.T) {
	for _, c := range []struct {
		q, topo string
		form    string
		why     []string // each must be in the evidence
	}{
		// The field report's H200 SXM: one GPU, no NVLink peer, a name that
		// does not say; the board and the power limit do.
		{"nvidia-smi/h200-580.159.04-q-idle.txt", "nvidia-smi/h200-580.159.04-topo-m-single-gpu-vm.txt", "SXM", []string{
			"board part number 692-2G520-0282-000: the SXM5 module board of the H100, H800 and H200 (692-2G520)",
			"700 W max power limit: the H200 SXM's; the H200 NVL is limited to 600 W"}},
		{"nvidia-smi/h200-580.159.04-q-bf16-gemm-load-sw-power-cap.txt", "", "SXM", []string{"the H200 SXM's"}},
		// Eight H100 SXM5 without the topology: the board and power alone.
		{"nvidia-smi/gpud-q-8xH100-535.183.01-cuda12.2.txt", "", "SXM", []string{
			"692-2G520-0200-000",
			"700 W max power limit: the H100 SXM's; the H100 PCIe is limited to 350 W, the H100 NVL is limited to 400 W"}},
		// ... and with it: NVLink agrees.
		{"nvidia-smi/gpud-q-8xH100-535.161.08-hw-slowdown-power-brake-active.txt", "nvidia-smi/topo-m-8xH100-NV18-6xmlx5-tabs-empty-cpu-affinity.txt",
			"SXM", []string{"692-2G520-0200-000", "NVLink between GPUs"}},
		{"nvidia-smi/exporter-q-h100-590.48.01-cuda13.1-idle.txt", "nvidia-smi/exporter-topo-m-1xH100-ansi-underline.txt", "SXM", []string{"the H100 SXM's"}},
		// H800 (driver 525, "Power Readings"): the board decides; there is
		// no SKU table for the H800's power.
		{"nvidia-smi/q-i0-H800-driver525-cuda12.0.txt", "", "SXM", []string{"692-2G520-0205-000"}},
		{"nvidia-smi/gpud-q-1xA10-535.129.03.txt", "", "PCIe", []string{"board part number 900-2G133-0020-100: a PCIe card board"}},
		// A GeForce card: no board part number, no table: not told, and the
		// reason says what was read.
		{"nvidia-smi/gpud-q-8xRTX4090-535.154.05-sw-power-cap-active-2gpus.txt", "", "", []string{
			"NVIDIA GeForce RTX 4090, no board part number, 450 W max power limit (no SKU table for this product)"}},
	} {
		t.Run(c.q, func(t *testing.T) {
			s := map[string]string{"nvidia-smi-q": sharedSample(t, c.q)}
			if c.topo != "" {
				s["nvidia-smi-topo"] = sharedSample(t, c.topo)
			}
			f := factsFrom(splitSections(preflightOutput(s, nil)))
			if f.FormFactor != c.form {
				t.Errorf("form factor %q, want %q (%s)", f.FormFactor, c.form, f.FormWhy)
			}
			for _, w := range c.why {
				if !strings.Contains(f.FormWhy, w) {
					t.Errorf("evidence %q lacks %q", f.FormWhy, w)
				}
			}
			if strings.Count(f.FormWhy, "692-2G520") > 2 {
				t.Errorf("eight GPUs saying the same thing are said once: %q", f.FormWhy)
			}
		})
	}
}

// TestFormFactorRules: the edges of each rule.
func TestFormFactorRules(t *testing.T) {
	h200 := func(board string, w float64) GPUFact {
		return GPUFact{Name: "NVIDIA H200", BoardPart: board, MaxPowerW: w}
	}
	for _, c := range []struct {
		name   string
		gpus   []GPUFact
		nvlink bool
		form   string
		why    string
	}{
		{"power alone, the NVL's", []GPUFact{h200("", 600)}, false, "PCIe",
			"600 W max power limit: the H200 NVL's; the H200 SXM allows 700 W"},
		{"power alone, the SXM's", []GPUFact{h200("", 700)}, false, "SXM",
			"700 W max power limit: the H200 SXM's; the H200 NVL is limited to 600 W"},
		{"a limit no SKU has", []GPUFact{h200("", 650)}, false, "",
			"NVIDIA H200, no board part number, 650 W max power limit, no SKU's (H200 SXM 700 W, H200 NVL 600 W); no NVLink peers (one GPU)"},
		{"board and power disagree", []GPUFact{h200("692-2G520-0282-000", 600)}, false, "", "the readings disagree: "},
		{"unknown SKU", []GPUFact{{Name: "NVIDIA X1", BoardPart: "900-2G999-0000-000", MaxPowerW: 300}}, false, "",
			"NVIDIA X1, board part number 900-2G999-0000-000 (a family not known), 300 W max power limit (no SKU table for this product); no NVLink peers (one GPU)"},
		{"nothing read", []GPUFact{{Name: "NVIDIA X1"}}, false, "", "NVIDIA X1, no board part number, no max power limit; no NVLink peers (one GPU)"},
		{"GH200 superchip", []GPUFact{{Name: "NVIDIA GH200 480GB", BoardPart: "900-2G530-0060-000", MaxPowerW: 900}}, false, "",
			"board part number 900-2G530-0060-000: the GH200 Grace Hopper superchip module, neither SXM nor PCIe (900-2G530)"},
		{"A100 SXM4 board", []GPUFact{{Name: "NVIDIA A100", BoardPart: "692-2G506-0210-002", MaxPowerW: 400}}, false, "SXM",
			"the A100's SXM4 module board (692-2G506); 400 W max power limit: the A100 SXM4's; the A100 80GB PCIe is limited to 300 W, the A100 40GB PCIe is limited to 250 W"},
		{"A100 80GB PCIe by name and power", []GPUFact{{Name: "NVIDIA A100 80GB PCIe", MaxPowerW: 300}}, false, "PCIe",
			"product name NVIDIA A100 80GB PCIe; 300 W max power limit: the A100 80GB PCIe's; the A100 SXM4 allows 400 W"},
		{"the NVL is a PCIe card", []GPUFact{{Name: "NVIDIA H100 NVL", MaxPowerW: 400}}, false, "PCIe", "the NVL SKUs are PCIe cards"},
		{"B200 has no PCIe SKU", []GPUFact{{Name: "NVIDIA B200", MaxPowerW: 1000}}, false, "SXM",
			"1000 W max power limit: the B200's; it has no PCIe SKU"},
		{"GB200 is not the B200's table", []GPUFact{{Name: "NVIDIA GB200", MaxPowerW: 1200}}, false, "", "(no SKU table for this product)"},
		{"a bridged pair proves nothing", []GPUFact{{Name: "NVIDIA L40S"}, {Name: "NVIDIA L40S"}}, true, "", "NVIDIA L40S, no board part number"},
		{"GPUs that disagree", []GPUFact{h200("", 700), h200("", 600)}, false, "", "the readings disagree"},
		{"a hostile board part number is bounded", []GPUFact{{Name: "NVIDIA X1", BoardPart: strings.Repeat("9", 5000)}}, false, "",
			"board part number " + strings.Repeat("9", 40) + "… (a family not known)"},
		{"many GPUs saying different things", eightNames(), false, "", "NVIDIA X3, no board part number, no max power limit; and 4 more"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &Facts{GPUs: c.gpus, GPUCount: len(c.gpus), NVLink: c.nvlink}
			form, why := formFactor(f)
			if form != c.form || !strings.Contains(why, c.why) {
				t.Errorf("%q (%s), want %q (%s)", form, why, c.form, c.why)
			}
		})
	}
}

func eightNames() []GPUFact {
	var out []GPUFact
	for i := 0; i < 8; i++ {
		out = append(out, GPUFact{Name: "NVIDIA X" + itoa(i)})
	}
	return out
}

// TestFormVerdictSaysHowOrWhatWasRead: GPU-004's detail is the evidence
// when told, and what was read when not: NOT MEASURED (a WARN was
// counted as judged, and a window could be ACCEPTED over it).
func TestFormVerdictSaysHowOrWhatWasRead(t *testing.T) {
	f := &Facts{GPUs: []GPUFact{{Name: "NVIDIA H200", BoardPart: "692-2G520-0282-000", MaxPowerW: 700}}, GPUCount: 1}
	f.FormFactor, f.FormWhy = formFactor(f)
	v := formVerdict("gpu-01", f, "SXM")
	if v.Status != record.Pass || v.Measured != "SXM" || !strings.Contains(v.Detail, "700 W max power limit: the H200 SXM's") {
		t.Errorf("H200 SXM quoted SXM: %+v", v)
	}
	if v := formVerdict("gpu-01", f, "PCIe"); v.Status != record.Fail {
		t.Errorf("H200 SXM quoted PCIe: %+v", v)
	}
	u := &Facts{GPUs: []GPUFact{{Name: "NVIDIA X1", MaxPowerW: 300}}, GPUCount: 1}
	u.FormFactor, u.FormWhy = formFactor(u)
	v = formVerdict("gpu-02", u, "SXM")
	if v.Status != record.Skip || !strings.HasPrefix(v.Incomplete, "the node's tools do not tell SXM from PCIe: NVIDIA X1, ") ||
		!strings.Contains(v.Detail, "300 W max power limit") || !strings.HasSuffix(v.Incomplete, "quote.form_factor SXM not measured") {
		t.Errorf("unknown SKU: %+v", v)
	}
}

// TestFormFactorFromTheQueryCSV: with -q unreadable, the GPUs known from
// -L, the max power limit comes from preflight's --query-gpu (here the
// H200's genuine telemetry query, which has index and power.max_limit).
func TestFormFactorFromTheQueryCSV(t *testing.T) {
	s := map[string]string{
		"nvidia-smi-q":     "GPU 00000000:00:06.0\n", // cut short: unreadable
		"nvidia-smi-L":     sharedSample(t, "nvidia-smi/h200-580.159.04-L.txt"),
		"nvidia-smi-query": sharedSample(t, "nvidia-smi/h200-580.159.04-query-gpu-telemetry-csv-idle.txt"),
		"nvidia-smi-topo":  sharedSample(t, "nvidia-smi/h200-580.159.04-topo-m-single-gpu-vm.txt"),
	}
	f := factsFrom(splitSections(preflightOutput(s, nil)))
	if len(f.GPUs) != 1 || f.GPUs[0].MaxPowerW != 700 || f.FormFactor != "SXM" ||
		!strings.Contains(f.FormWhy, "700 W max power limit: the H200 SXM's") {
		t.Errorf("facts %+v", f)
	}
	// A cell that is not a power is a problem named by GPU and field.
	s["nvidia-smi-query"] = "index, name, power.max_limit [W]\n0, NVIDIA H200, 700.00 kW\n"
	f = factsFrom(splitSections(preflightOutput(s, nil)))
	if f.GPUs[0].MaxPowerW != 0 || f.FormFactor != "" || !strings.Contains(strings.Join(f.Problems, "\n"), "GPU 0: power.max_limit") {
		t.Errorf("facts %+v", f)
	}
}
