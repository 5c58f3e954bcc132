package labtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

var testImage struct {
	sync.Once
	im  *lab.TestImage
	err error
}

// labImage builds the lab's test image once (busybox-static, FROM scratch,
// saved as docker-archive and oci-archive).
func labImage(t *testing.T) *lab.TestImage {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("the image tests need podman (make deps installs it): %v", err)
	}
	testImage.Do(func() {
		dir, err := os.MkdirTemp("", "gpuaccept-img-")
		if err != nil {
			testImage.err = err
			return
		}
		testImage.im, testImage.err = lab.BuildTestImage(context.Background(), dir, 0)
	})
	if testImage.err != nil {
		t.Fatalf("build the test image: %v", testImage.err)
	}
	return testImage.im
}

// withImage appends an image section to an inventory file.
func withImage(t *testing.T, inv, archive, pin, relay string) {
	t.Helper()
	appendInventory(t, inv, "image:\n  reference: \"localhost/gpuaccept-lab:1@sha256:"+pin+"\"\n  runtime: podman\n  archive: "+
		archive+"\n  gpus: none\n  dir: /srv\n  relay: "+relay+"\n")
}

// TestImagePushedAlongTheChain: the coordinator sends the archive once, to
// h1; each host passes it on as it arrives; every host loads it, its ID is
// the pin, and the container starts.
func TestImagePushedAlongTheChain(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	id := strings.TrimPrefix(img.ID, "sha256:")
	prepare(t, l, nil)
	hosts := []string{"h1", "h2", "h3", "h4"}
	for _, archive := range []string{img.DockerArchive, img.OCIArchive} {
		inv := writeInventory(t, l, hosts, "", "")
		withImage(t, inv, archive, id, "chain")
		res, r := runWindow(t, inv)
		var im phases.Imaged
		phaseData(t, r, "image", -1, &im)
		for _, h := range hosts {
			ni := im.Nodes[h]
			if ni == nil || ni.Via != "chain" || !ni.Match || ni.Smoke == nil || !strings.Contains(ni.Smoke.Output, "GPU 0:") {
				t.Fatalf("%s: %s on %s: %+v\n%s", archive, "image", h, ni, res.stderr)
			}
			for _, v := range []string{"IMG-001", "IMG-002"} {
				if got := verdict(r, v, h); got.Status != record.Pass {
					t.Errorf("%s %s %s: %+v", archive, v, h, got)
				}
			}
		}
		v := verdict(r, "IMG-003", "")
		t.Logf("%s: %s; smoke on h4: %.2f s", archive, v.Measured, im.Nodes["h4"].Smoke.Secs)
		if v.Status != record.Pass {
			t.Errorf("IMG-003 %+v", v)
		}
	}
	nothingLeft(t, l)
}

// TestTamperedArchiveIsNamed: an archive that is not the pinned image
// (another image's, or one with a flipped byte) fails every node, with the
// pin and what the node actually has.
func TestTamperedArchiveIsNamed(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	id := strings.TrimPrefix(img.ID, "sha256:")
	prepare(t, l, nil)
	hosts := []string{"h1", "h2"}
	other, err := lab.BuildTestImage(t.Context(), t.TempDir(), 4096)
	if err != nil {
		t.Fatalf("a second image: %v", err)
	}
	flipped := filepath.Join(t.TempDir(), "image.docker.tar")
	data, err := os.ReadFile(img.DockerArchive)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01 // inside the layer
	if err := os.WriteFile(flipped, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, archive, want string }{
		{"another image", other.DockerArchive, "is not the pin: pinned sha256:" + id + ", the node has image ID sha256:"},
		{"a flipped byte", flipped, "podman load failed"},
	} {
		emptyStores(t, l, hosts...)
		inv := writeInventory(t, l, hosts, "", "")
		withImage(t, inv, tc.archive, id, "chain")
		res, r := runWindow(t, inv)
		if res.code != 1 {
			t.Errorf("%s: exit %d, want 1", tc.name, res.code)
		}
		for _, h := range hosts {
			v := verdict(r, "IMG-001", h)
			t.Logf("%s on %s: %s %s", tc.name, h, v.Status, v.Detail)
			if v.Status != record.Fail || !strings.Contains(v.Detail, tc.want) {
				t.Errorf("%s: IMG-001 %s = %+v", tc.name, h, v)
			}
			if n := r.Nodes[l.Host(h).Index]; !n.Quarantined {
				t.Errorf("%s: %s not quarantined", tc.name, h)
			}
			// What the window loaded, pin or not, went at teardown.
			if got := hostImages(t, l, h); got != "" {
				t.Errorf("%s: %s still has %q after teardown", tc.name, h, got)
			}
		}
	}
	nothingLeft(t, l)
}

// emptyStores removes every image from the hosts' podman stores: podman
// skips a layer it already has, so an image left by an earlier test would
// hide what a window does.
func emptyStores(t *testing.T, l *lab.Lab, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		if out, err := l.Exec(t.Context(), h, "podman", "rmi", "-af"); err != nil {
			t.Fatalf("%s: podman rmi: %v\n%s", h, err, out)
		}
	}
}

// hostImages is what a host's podman store holds ("sha256:ID" lines).
func hostImages(t *testing.T, l *lab.Lab, host string) string {
	t.Helper()
	out, err := l.Exec(t.Context(), host, "podman", "images", "-q", "--no-trunc")
	if err != nil {
		t.Fatalf("%s: podman images: %v\n%s", host, err, out)
	}
	return strings.TrimSpace(out)
}

// TestImageRemovedUnlessItWasThere: teardown removes the image the window
// loaded, leaves the one a node had before the window, and leaves every
// one with image.keep.
func TestImageRemovedUnlessItWasThere(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	id := strings.TrimPrefix(img.ID, "sha256:")
	prepare(t, l, nil)
	hosts := []string{"h1", "h2"}
	emptyStores(t, l, hosts...)
	t.Cleanup(func() {
		for _, h := range hosts {
			l.Exec(context.Background(), h, "podman", "rmi", "-af")
		}
	})
	// h2 has the image before the window.
	if err := os.WriteFile(filepath.Join(l.Dir, "hosts", "h2", "srv", "preloaded.tar"), mustRead(t, img.DockerArchive), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Exec(t.Context(), "h2", "podman", "load", "-i", "/srv/preloaded.tar"); err != nil {
		t.Fatalf("h2: preload: %v\n%s", err, out)
	}
	os.Remove(filepath.Join(l.Dir, "hosts", "h2", "srv", "preloaded.tar"))

	inv := writeInventory(t, l, hosts, "", "")
	withImage(t, inv, img.DockerArchive, id, "chain")
	res, r := runWindow(t, inv)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var im phases.Imaged
	phaseData(t, r, "image", -1, &im)
	if ni := im.Nodes["h1"]; !ni.Added || ni.Before {
		t.Errorf("h1: %+v, want added", ni)
	}
	if ni := im.Nodes["h2"]; ni.Added || !ni.Before {
		t.Errorf("h2: %+v, want already there", ni)
	}
	if got := hostImages(t, l, "h1"); got != "" {
		t.Errorf("h1 still has %q after teardown", got)
	}
	if got := hostImages(t, l, "h2"); got != img.ID {
		t.Errorf("h2 has %q after teardown, want the image it had before (%s)", got, img.ID)
	}
	var td phases.Cleaned
	phaseData(t, r, "teardown", 0, &td)
	if !slices.Contains(td.Actions, "removed image "+img.ID+" (podman)") {
		t.Errorf("h1's teardown does not say it removed the image: %q", td.Actions)
	}
	if left, _ := filepath.Glob("/var/tmp/gpuaccept-" + r.ID + ".*"); len(left) > 0 {
		t.Errorf("teardown left %v", left)
	}

	// image.keep: the loaded image stays.
	appendInventory(t, inv, "  keep: true\n")
	if res, r = runWindow(t, inv); res.code != 0 {
		t.Fatalf("keep: exit %d\n%s", res.code, res.stderr)
	}
	var kept phases.Imaged
	phaseData(t, r, "image", -1, &kept)
	if ni := kept.Nodes["h1"]; !ni.Added {
		t.Errorf("keep: h1 %+v, want added", ni)
	}
	for _, h := range hosts {
		if got := hostImages(t, l, h); got != img.ID {
			t.Errorf("keep: %s has %q after teardown, want %s", h, got, img.ID)
		}
	}
	nothingLeft(t, l)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImagePulledFromTheRegistry: every node pulls the pinned image from
// the lab's registry (the distribution registry on the storage host), its
// repo digest is the pin, the container starts, and teardown removes what
// was pulled; a pin the registry does not hold fails every node with the
// registry's answer.
func TestImagePulledFromTheRegistry(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	prepare(t, l, nil)
	reg, err := l.Registry(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("registry: %v", err)
		}
	})
	digest, err := reg.Push(t.Context(), img.DockerArchive, "gpuaccept-lab:1")
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"h1", "h2", "h3"}
	emptyStores(t, l, hosts...)
	pullInventory := func(ref string) string {
		inv := writeInventory(t, l, hosts, "", "")
		appendInventory(t, inv, "image:\n  reference: \""+ref+"\"\n  runtime: podman\n  mode: pull\n  gpus: none\n")
		return inv
	}

	res, r := runWindow(t, pullInventory(reg.Addr+"/gpuaccept-lab:1@"+digest))
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var im phases.Imaged
	phaseData(t, r, "image", -1, &im)
	for _, h := range hosts {
		ni := im.Nodes[h]
		if ni == nil || !ni.Match || !ni.Added || ni.LoadSecs <= 0 || "sha256:"+ni.ID != img.ID ||
			!slices.Contains(ni.RepoDigests, reg.Addr+"/gpuaccept-lab@"+digest) || ni.Smoke == nil || !strings.Contains(ni.Smoke.Output, "GPU 0:") {
			t.Errorf("%s: %+v", h, ni)
			continue
		}
		t.Logf("%s: pulled in %.2f s, image ID %s…, smoke %.2f s", h, ni.LoadSecs, ni.ID[:12], ni.Smoke.Secs)
		for _, v := range []string{"IMG-001", "IMG-002"} {
			if got := verdict(r, v, h); got.Status != record.Pass {
				t.Errorf("%s %s: %+v", v, h, got)
			}
		}
		if got := hostImages(t, l, h); got != "" {
			t.Errorf("%s still has %q after teardown", h, got)
		}
	}

	missing := "sha256:" + strings.Repeat("1", 64)
	res, r = runWindow(t, pullInventory(reg.Addr+"/gpuaccept-lab:1@"+missing))
	if res.code != 1 {
		t.Errorf("a pin the registry lacks: exit %d, want 1", res.code)
	}
	for _, h := range hosts {
		v := verdict(r, "IMG-001", h)
		if v.Status != record.Fail || !strings.Contains(v.Detail, "podman pull "+reg.Addr+"/gpuaccept-lab:1@"+missing+" failed") ||
			!strings.Contains(v.Detail, "manifest unknown") {
			t.Errorf("IMG-001 %s: %s %s", h, v.Status, v.Detail)
		}
	}
	t.Logf("a pin the registry lacks, on h1: %s", verdict(r, "IMG-001", "h1").Detail)
	nothingLeft(t, l)
}
