package phases

import (
	"slices"
	"testing"
)

func TestLoadedImage(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"Getting image source signatures\nCopying blob 1234\nWriting manifest to image destination\nLoaded image: localhost/gpuaccept-lab:1\n", "localhost/gpuaccept-lab:1"},
		{"Loaded image(s): localhost/a:1,localhost/a:latest\n", "localhost/a:1"},
		{"Loaded image ID: sha256:0123abcd\n", "sha256:0123abcd"},
		{"open x.tar: no such file or directory\n", ""},
	} {
		if got := loadedImage(tc.out); got != tc.want {
			t.Errorf("loadedImage(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

func TestParseInspect(t *testing.T) {
	hex := "5d0da3dc976460b72c77d94c8a1ad043720b0416bfc16c52c45d4847e53fadb6"
	for _, tc := range []struct {
		out     string
		id      string
		digests []string
	}{
		{`[{"Id": "` + hex + `", "Digest": "sha256:1", "RepoDigests": null}]`, hex, nil},                             // podman, loaded
		{`[{"Id": "sha256:` + hex + `", "RepoDigests": ["repo/x@sha256:abc"]}]`, hex, []string{"repo/x@sha256:abc"}}, // docker, pulled
		{"WARN[0000] something\n[\n {\n  \"Id\": \"" + hex + "\",\n  \"RepoDigests\": []\n }\n]\n", hex, []string{}},
	} {
		id, ds, err := parseInspect(tc.out)
		if err != nil || id != tc.id || !slices.Equal(ds, tc.digests) {
			t.Errorf("parseInspect(%q) = %q %q %v", tc.out, id, ds, err)
		}
	}
	for _, bad := range []string{"", "Error: no such image", `[]`, `[{"Id": ""}]`} {
		if _, _, err := parseInspect(bad); err == nil {
			t.Errorf("parseInspect(%q) accepted", bad)
		}
	}
	if got := pinOf("localhost/lab:1@sha256:" + hex); got != hex {
		t.Errorf("pinOf = %q", got)
	}
}
