package standins_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
	"gpuaccept/scripts/standins"
)

func podman(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := standins.PodmanMain(args, env, &out, &errb)
	return out.String(), errb.String(), code
}

func TestPodmanStandinLoadsInspectsAndRuns(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "demo.tar")
	id, err := standins.WriteDemoImage(archive)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := standins.WriteDemoImage(filepath.Join(dir, "again.tar")); again != id {
		t.Fatalf("the demo image is not the same twice: %s then %s", id, again)
	}
	// A node whose PATH has an nvidia-smi.
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte("#!/bin/sh\necho \"GPU 0: sim $*\"\n"), 0o755)
	env := []string{standins.PodmanStoreEnv + "=" + filepath.Join(dir, "store"), "PATH=" + bin + ":/usr/bin:/bin"}

	if _, stderr, code := podman(t, env, "image", "inspect", "sha256:"+id); code != 125 || !strings.Contains(stderr, "image not known") {
		t.Fatalf("before load: exit %d %q", code, stderr)
	}
	stdout, stderr, code := podman(t, env, "load", "-i", archive)
	if code != 0 || stdout != "Loaded image: "+standins.DemoImageRef+"\n" || !strings.Contains(stderr, "Copying config sha256:"+id) {
		t.Fatalf("load: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	for _, ref := range []string{standins.DemoImageRef, "sha256:" + id, id[:12], "gpuaccept-demo:1"} {
		stdout, stderr, code = podman(t, env, "image", "inspect", ref)
		var got []struct {
			ID          string `json:"Id"`
			RepoTags    []string
			RepoDigests []string
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || len(got) != 1 || got[0].ID != id ||
			len(got[0].RepoDigests) != 1 || !strings.HasPrefix(got[0].RepoDigests[0], "localhost/gpuaccept-demo@sha256:") {
			t.Fatalf("inspect %s: exit %d %q %q", ref, code, stdout, stderr)
		}
	}
	stdout, _, code = podman(t, env, "run", "--rm", "--device", "nvidia.com/gpu=all", "sha256:"+id, "nvidia-smi", "-L")
	if code != 0 || stdout != "GPU 0: sim -L\n" {
		t.Fatalf("run with GPUs: exit %d %q", code, stdout)
	}
	// Without the GPUs the container has no nvidia-smi.
	if _, stderr, code = podman(t, env, "run", "--rm", "sha256:"+id, "nvidia-smi", "-L"); code != 127 || !strings.Contains(stderr, "nvidia-smi") {
		t.Fatalf("run without GPUs: exit %d %q", code, stderr)
	}
	if _, stderr, code = podman(t, env, "run", "--bogus", "sha256:"+id); code != 125 || !strings.Contains(stderr, "unknown flag: --bogus") {
		t.Fatalf("bad flag: exit %d %q", code, stderr)
	}
	if _, stderr, code = podman(t, env, "load", "-i", "/etc/hostname"); code != 125 || !strings.Contains(stderr, "supported image formats") {
		t.Fatalf("load of a non-archive: exit %d %q", code, stderr)
	}
}

// The stand-in and the real podman, given the same archives (the lab's test image, docker- and oci-archive),
// must agree on the image ID and names, and print inspect's fields in the same order with the same indent.
func TestPodmanStandinAgreesWithRealPodman(t *testing.T) {
	if skip, err := lab.TestSkip(); err != nil {
		t.Fatal(err)
	} else if skip != "" {
		t.Skip(skip)
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman missing: bash scripts/deps.sh installs it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ti, err := lab.BuildTestImage(ctx, filepath.Join(dir, "img"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A throwaway store for the real podman (short paths: podman limits the runroot's length).
	st, err := os.MkdirTemp("/tmp", "gpa-pm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(st) })
	real := func(args ...string) (string, string) {
		full := append([]string{"--root", st + "/r", "--runroot", st + "/rr", "--tmpdir", st + "/t", "--storage-driver", "vfs"}, args...)
		cmd := exec.CommandContext(ctx, "podman", full...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("podman %v: %v: %s", args, err, errb.String())
		}
		return out.String(), errb.String()
	}
	for _, archive := range []string{ti.DockerArchive, ti.OCIArchive} {
		env := []string{standins.PodmanStoreEnv + "=" + filepath.Join(dir, "store-"+filepath.Base(archive))}
		realOut, _ := real("load", "-i", archive)
		simOut, _, code := podman(t, env, "load", "-i", archive)
		if code != 0 || simOut != realOut {
			t.Errorf("%s: load says %q, podman says %q", filepath.Base(archive), simOut, realOut)
		}
		realJSON, _ := real("image", "inspect", ti.Ref)
		simJSON, _, code := podman(t, env, "image", "inspect", ti.Ref)
		if code != 0 {
			t.Fatalf("stand-in inspect exit %d", code)
		}
		if rk, sk := keyLines(realJSON), keyLines(simJSON); rk != sk || strings.Count(rk, "\n") < 20 {
			t.Errorf("%s: inspect's fields differ\npodman:\n%s\nstand-in:\n%s", filepath.Base(archive), rk, sk)
		}
		var r, s []map[string]any
		json.Unmarshal([]byte(realJSON), &r)
		json.Unmarshal([]byte(simJSON), &s)
		for _, k := range []string{"Id", "RepoTags", "Architecture", "Os", "Created", "RootFS", "History"} {
			if rj, sj := mustJSON(r[0][k]), mustJSON(s[0][k]); rj != sj {
				t.Errorf("%s: %s: podman %s, stand-in %s", filepath.Base(archive), k, rj, sj)
			}
		}
		if "sha256:"+s[0]["Id"].(string) != ti.ID {
			t.Errorf("stand-in ID %v, the archive's config digest %s", s[0]["Id"], ti.ID)
		}
		realIDs, _ := real("images", "-q", "--no-trunc")
		simIDs, _, code := podman(t, env, "images", "-q", "--no-trunc")
		if code != 0 || simIDs != realIDs || simIDs != ti.ID+"\n" {
			t.Errorf("%s: images -q --no-trunc: stand-in %q, podman %q", filepath.Base(archive), simIDs, realIDs)
		}
		realRm, _ := real("rmi", "-f", ti.ID)
		simRm, _, code := podman(t, env, "rmi", "-f", ti.ID)
		if code != 0 || simRm != realRm {
			t.Errorf("%s: rmi -f: stand-in %q, podman %q", filepath.Base(archive), simRm, realRm)
		}
		realGone, _ := real("rmi", "-f", ti.ID)
		simGone, _, code := podman(t, env, "rmi", "-f", ti.ID)
		if code != 0 || simGone != realGone {
			t.Errorf("%s: rmi -f of a removed image: stand-in %q (exit %d), podman %q", filepath.Base(archive), simGone, code, realGone)
		}
		if left, _, _ := podman(t, env, "images", "-q", "--no-trunc"); left != "" {
			t.Errorf("%s: the stand-in still lists %q after rmi", filepath.Base(archive), left)
		}
		real("rmi", "-a", "-f")
	}
}

// keyLines is the JSON's top-level key lines with their indent: the field order and layout.
func keyLines(js string) string {
	var out []string
	for _, l := range strings.Split(js, "\n") {
		if strings.HasPrefix(l, "          \"") && !strings.HasPrefix(l, "           ") {
			out = append(out, strings.SplitN(l, ":", 2)[0])
		}
	}
	return strings.Join(out, "\n")
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
