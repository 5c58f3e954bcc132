package inventory

import (
	"strings"
	"testing"
)

func TestEnrootURI(t *testing.T) {
	pin := "sha256:" + strings.Repeat("0a", 32)
	for _, tc := range []struct{ ref, want string }{
		{"10.231.0.2:5000/gpuaccept-lab:1@" + pin, "10.231.0.2:5000#gpuaccept-lab:" + pin},
		{"nvcr.io/nvidia/pytorch:24.12-py3@" + pin, "nvcr.io#nvidia/pytorch:" + pin},
		{"localhost/lab@" + pin, "localhost#lab:" + pin},
		{"library/ubuntu@" + pin, "library/ubuntu:" + pin}, // Docker Hub: no '#'
		{"ubuntu:22.04@" + pin, "ubuntu:" + pin},
	} {
		got, err := EnrootURI(tc.ref)
		if err != nil || got != tc.want {
			t.Errorf("EnrootURI(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	for _, bad := range []string{"nvcr.io/nvidia/pytorch:24.12", "nvcr.io/NVIDIA/PyTorch@" + pin, "nvcr.io/@" + pin,
		"/srv/img@" + pin, "./img@" + pin, ".hidden/img@" + pin} { // Pyxis: a squashfs file on the node
		if got, err := EnrootURI(bad); err == nil {
			t.Errorf("EnrootURI(%q) = %q, accepted", bad, got)
		}
	}
}
