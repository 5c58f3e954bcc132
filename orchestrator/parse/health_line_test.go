package parse

import (
	"fmt"
	"testing"
)

func TestKernelLineEvents(t *testing.T) {
	for _, tc := range []struct {
		line   string
		before []string
		want   string
	}{
		{"[  12.5] NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error",
			nil, "[{xid 0000:19:00 48}]"},
		{"NVRM: Xid (PCI:0000:b3:00): 79, pid=1, GPU has fallen off the bus.", nil,
			"[{xid 0000:b3:00 79} {off-bus 0000:b3:00 0}]"},
		{"nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 22013, Non-fatal, Link 44", nil, "[{sxid 0000:07:00.0 22013}]"},
		{"NVRM: fallen off the bus and is not responding to commands.",
			[]string{"NVRM: unrelated", "NVRM: The NVIDIA GPU 0000:b3:00.0", "NVRM: (PCI ID: 10de:2330) installed in this system has"},
			"[{off-bus 0000:b3:00.0 0}]"},
		{"NVRM: fallen off the bus and is not responding to commands.",
			[]string{"NVRM: The NVIDIA GPU 0000:b3:00.0", "NVRM: a", "NVRM: b"}, "[{off-bus  0}]"},
		{"a note quoting `NVRM: Xid (PCI:0000:19:00): 48, x`", nil, "[]"},
		{"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04", nil, "[]"},
	} {
		var got []struct {
			Kind, Device string
			Code         int
		}
		for _, e := range KernelLineEvents(tc.line, tc.before...) {
			got = append(got, struct {
				Kind, Device string
				Code         int
			}{e.Kind, e.Device, e.Code})
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%.50q: %s, want %s", tc.line, s, tc.want)
		}
	}
}
