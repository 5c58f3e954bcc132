package parse

import (
	"strings"
	"testing"
)

// TestBoardPartAndMaxPower reads what tells SKUs apart from the genuine -q
// outputs, under both drivers' section names.
func TestBoardPartAndMaxPower(t *testing.T) {
	for _, c := range []struct {
		sample, board string
		maxW          float64
	}{
		{"nvidia-smi/h200-580.159.04-q-idle.txt", "692-2G520-0282-000", 700},
		{"nvidia-smi/h200-580.159.04-q-d-clock-perf-power-temp-ecc-retire-remap-idle.txt", "", 700}, // -q -d: no identity
		{"nvidia-smi/q-i0-H800-driver525-cuda12.0.txt", "692-2G520-0205-000", 700},                  // "Power Readings"
		{"nvidia-smi/gpud-q-1xA10-535.129.03.txt", "900-2G133-0020-100", 150},
		{"nvidia-smi/gpud-q-8xRTX4090-535.154.05-sw-power-cap-active-2gpus.txt", "", 450}, // Board Part Number: N/A
	} {
		g := ok(NvidiaSmiQ(readSample(t, c.sample))).must(t).GPUs[0]
		eq(t, c.sample+" board part", BoardPartNumber(g), c.board)
		w, err := MaxPowerLimitW(g)
		if err != nil {
			t.Errorf("%s: %v", c.sample, err)
		}
		eq(t, c.sample+" max power limit", w, c.maxW)
	}
	q := ok(NvidiaSmiQ(strings.Replace(readSample(t, "nvidia-smi/h200-580.159.04-q-idle.txt"),
		"Max Power Limit                                : 700.00 W", "Max Power Limit                                : 700.00 kW", 1))).must(t)
	if _, err := MaxPowerLimitW(q.GPUs[0]); err == nil || !strings.Contains(err.Error(), `"700.00 kW"`) {
		t.Errorf("a limit in another unit: err = %v", err)
	}
}

func TestCSVWatts(t *testing.T) {
	for in, want := range map[string]float64{"700.00 W": 700, "700.00": 700, "[N/A]": 0, "": 0, "[Not Supported]": 0} {
		if w, err := CSVWatts(in); err != nil || w != want {
			t.Errorf("%q: %v, %v", in, w, err)
		}
	}
	for _, in := range []string{"700.00 kW", "W", "many W"} {
		if _, err := CSVWatts(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
