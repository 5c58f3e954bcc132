package telemetry

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every field the sampler asks for is one the genuine driver lists.
func TestFieldsAreListedByTheDriver(t *testing.T) {
	help := sample(t, "nvidia-smi", "h200-580.159.04-help-query-gpu.txt")
	listed := map[string]bool{}
	for _, l := range strings.Split(help, "\n") {
		if strings.HasPrefix(l, `"`) {
			for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(l, -1) {
				listed[m[1]] = true
			}
		}
	}
	if len(listed) < 200 {
		t.Fatalf("read %d fields from --help-query-gpu: the file is not what it was", len(listed))
	}
	for _, f := range Fields {
		if !listed[f] {
			t.Errorf("field %q is not listed by driver 580.159.04's --help-query-gpu", f)
		}
	}
	// The telemetry capture asked for exactly these, in this order.
	head := strings.SplitN(sample(t, "nvidia-smi", "h200-580.159.04-query-gpu-telemetry-csv-idle.txt"), "\n", 2)[0]
	var names []string
	for _, h := range strings.Split(head, ", ") {
		n, _, _ := strings.Cut(h, " [")
		names = append(names, n)
	}
	if !slices.Equal(names, Fields) {
		t.Errorf("Fields differ from the genuine capture's:\n%v\n%v", Fields, names)
	}
}

func TestQueryArgs(t *testing.T) {
	got := QueryArgs(5 * time.Second)
	want := []string{"--query-gpu=" + strings.Join(Fields, ","), "--format=csv,noheader,nounits", "-lms", "5000"}
	if !slices.Equal(got, want) {
		t.Errorf("QueryArgs(5s) = %q", got)
	}
	if got := QueryArgs(0); got[3] != "1" {
		t.Errorf("QueryArgs(0) loops every %s ms, want 1 (-lms 0 samples once)", got[3])
	}
}

func TestReasonNames(t *testing.T) {
	for mask, want := range map[uint64]string{
		0x1:   "Idle",
		0x4:   "SW Power Cap",
		0x48:  "HW Slowdown, HW Thermal Slowdown",
		0xa0:  "SW Thermal Slowdown, HW Power Brake Slowdown",
		0x1ff: "Idle, Applications Clocks Setting, SW Power Cap, HW Slowdown, Sync Boost, SW Thermal Slowdown, HW Thermal Slowdown, HW Power Brake Slowdown, Display Clock Setting",
		0x400: "0x400",
		0:     "",
	} {
		if got := strings.Join(ReasonNames(mask), ", "); got != want {
			t.Errorf("ReasonNames(%#x) = %q, want %q", mask, got, want)
		}
	}
}
