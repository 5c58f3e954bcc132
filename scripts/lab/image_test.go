package lab_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
)

// This test owns lab name "imgt" and subnet 10.243.0; other tests that run labs must pick others.
const (
	imgName   = "imgt"
	imgSubnet = "10.243.0"
)

// TestImagesStorageShared proves what the container, staging and checkpoint features need of the lab: podman on
// every host with its own image store and no flags, the offline test image (same ID from either archive,
// corruption caught), the storage host's HTTP server and the shared /shared.
func TestImagesStorageShared(t *testing.T) {
	if why, err := lab.TestSkip(); err != nil {
		t.Fatalf("root on Linux, yet the lab cannot run: %v", err)
	} else if why != "" {
		t.Skipf("lab not supported here: %s (run as root on Linux: sudo go test ./scripts/lab/)", why)
	}
	for _, c := range []string{"ssh", "podman", "runc", "curl"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("the image lab test needs %s: %v (bash scripts/deps.sh)", c, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// the image builds while the lab comes up
	imgDir := t.TempDir()
	var img *lab.TestImage
	var imgErr error
	var imgTook time.Duration
	built := make(chan struct{})
	go func() {
		defer close(built)
		t0 := time.Now()
		img, imgErr = lab.BuildTestImage(ctx, imgDir, 0)
		imgTook = time.Since(t0)
	}()
	l, err := lab.Up(ctx, lab.Options{Name: imgName, Hosts: 3, Subnet: imgSubnet})
	if err != nil {
		<-built
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), imgName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	<-built
	if imgErr != nil {
		t.Fatal(imgErr)
	}
	t.Logf("test image %s %s built in %v (docker-archive %d B, oci-archive %d B)", img.Ref, img.ID, imgTook, img.DockerSize, img.OCISize)
	if img.Ref != lab.TestImageRef {
		t.Fatalf("image ref %q, want %q", img.Ref, lab.TestImageRef)
	}
	if _, err := os.Stat(filepath.Join(imgDir, ".store")); !os.IsNotExist(err) {
		t.Errorf("testimage.sh left its throwaway store behind: %v", err)
	}
	if got := l.ContainerDriver(); got == "" {
		t.Fatal("LAB_CONTAINERS is empty: lab.sh up did not set up podman on the hosts")
	}

	run := func(t *testing.T, host string, args ...string) string {
		t.Helper()
		out, err := l.Exec(ctx, host, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	imageID := func(t *testing.T, host string) string {
		t.Helper()
		return "sha256:" + run(t, host, "podman", "image", "inspect", "--format", "{{.Id}}", lab.TestImageRef)
	}

	t.Run("podman per host", func(t *testing.T) {
		// over ssh, plain podman (no flags): each host's store is its own /srv; all hosts at once
		t0 := time.Now()
		outs, errs := make([]string, len(l.Hosts)), make([]error, len(l.Hosts))
		var wg sync.WaitGroup
		for i, h := range l.Hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = sshTo(ctx, l, l.KnownHosts, 15, h,
					`podman info --format '{{.Store.GraphRoot}} {{.Store.GraphDriverName}} {{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}} {{.Host.EventLogger}}'`)
			}()
		}
		wg.Wait()
		t.Logf("podman info over ssh on %d hosts at once: %v (the first podman call of a host's boot)", len(l.Hosts), time.Since(t0))
		want := "/srv/node/containers/storage " + l.ContainerDriver() + " runc cgroupfs file"
		for i, h := range l.Hosts {
			if errs[i] != nil || outs[i] != want {
				t.Errorf("%s: podman info = %q, %v; want %q", h.Name, outs[i], errs[i], want)
			}
		}
	})

	// h1 loads the docker-archive, h2 the oci-archive, at the same time
	loadTook := make([]time.Duration, 2)
	t.Run("load", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, a := range []string{img.DockerArchive, img.OCIArchive} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				_, errs[i] = l.Exec(ctx, l.Hosts[i].Name, "podman", "load", "-q", "-i", a)
				loadTook[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("podman load: docker-archive on h1 %v, oci-archive on h2 %v (in parallel)", loadTook[0], loadTook[1])
		for _, h := range []string{"h1", "h2"} {
			if got := imageID(t, h); got != img.ID {
				t.Errorf("%s: image ID %s, image.env says %s", h, got, img.ID)
			}
		}
		if got := run(t, "h2", "podman", "image", "inspect", "--format", "{{.Digest}}", lab.TestImageRef); got != img.OCIDigest {
			t.Errorf("h2: digest after loading the oci-archive %s, image.env says %s", got, img.OCIDigest)
		}
		// the stores are per host: on disk, and as podman on h3 sees it
		for _, c := range []struct {
			host string
			has  bool
		}{{"h1", true}, {"h2", true}, {"h3", false}} {
			_, err := os.Stat(filepath.Join(l.ContainerStore(c.host), l.ContainerDriver()+"-images", strings.TrimPrefix(img.ID, "sha256:")))
			if has := err == nil; has != c.has {
				t.Errorf("%s's store holds the image: %v, want %v (%v)", c.host, has, c.has, err)
			}
		}
		if out := run(t, "h3", "podman", "images", "-q"); out != "" {
			t.Errorf("h3 has images it never loaded: %q", out)
		}
	})

	t.Run("run", func(t *testing.T) {
		t0 := time.Now()
		out := run(t, "h1", "podman", "run", "--rm", lab.TestImageRef, "nvidia-smi", "-L")
		took := time.Since(t0)
		if out != lab.TestImageGPULine {
			t.Fatalf("h1: podman run nvidia-smi -L = %q, want %q", out, lab.TestImageGPULine)
		}
		t0 = time.Now()
		// containers.conf's ulimits, and the host's own hostname (host network)
		out = run(t, "h2", "podman", "run", "--rm", lab.TestImageRef, "sh", "-c", "ulimit -n; ulimit -u; hostname")
		t.Logf("podman run --rm: %v on h1, %v on h2", took, time.Since(t0))
		if out != "1024\n4096\nh2" {
			t.Errorf("h2: ulimits and hostname in a container = %q, want 1024, 4096, h2", out)
		}
	})

	t.Run("openai stand-in", func(t *testing.T) {
		// the image's stand-in serves as vLLM's OpenAI API server on the host network (as the inference phase
		// starts a buyer's server), and a client on the host streams a completion from it
		run(t, "h1", "podman", "run", "-d", "--name", "oai", "--network", "host", lab.TestImageRef, "standin",
			"openai-server", "--port", "8000", "--model", "lab-model", "--ready-after", "300ms", "--token-delay", "5ms")
		t.Cleanup(func() { _, _ = l.Exec(context.Background(), "h1", "podman", "rm", "-f", "oai") })
		t0 := time.Now()
		lab.Eventually(t, 20*time.Second, "h1: the stand-in's /health", func() bool {
			out, err := l.Exec(ctx, "h1", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
				"http://127.0.0.1:8000/health")
			return err == nil && strings.TrimSpace(out) == "200"
		})
		ready := time.Since(t0)
		out := run(t, "h1", "curl", "-sSN", "--max-time", "20", "-H", "Content-Type: application/json",
			"http://127.0.0.1:8000/v1/completions", "-d", `{"model":"lab-model","prompt":"one two three",`+
				`"max_tokens":8,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`)
		events := strings.Split(out, "\n\n")
		if len(events) != 10 || strings.Count(out, `"object":"text_completion"`) != 9 ||
			!strings.Contains(events[7], `"finish_reason":"length"`) ||
			!strings.Contains(events[8], `"choices":[],"usage":{"prompt_tokens":3,"total_tokens":11,"completion_tokens":8}`) ||
			events[9] != "data: [DONE]" {
			t.Errorf("h1: the streamed completion (8 token chunks, the usage chunk, [DONE]):\n%s", out)
		}
		t0 = time.Now()
		run(t, "h1", "podman", "stop", "-t", "10", "oai")
		stopped := time.Since(t0)
		if code := run(t, "h1", "podman", "inspect", "--format", "{{.State.ExitCode}}", "oai"); code != "0" {
			t.Errorf("h1: the stand-in's exit code after podman stop: %s, want 0 (a clean exit on SIGTERM)", code)
		}
		if logs := run(t, "h1", "podman", "logs", "oai"); !strings.Contains(logs, "Application startup complete.") {
			t.Errorf("h1: podman logs oai:\n%s", logs)
		}
		t.Logf("h1: openai-server in the test image ready %v after podman run -d, stopped in %v", ready, stopped)
	})

	t.Run("corrupt archive", func(t *testing.T) {
		for _, a := range []string{img.DockerArchive, img.OCIArchive} {
			b, err := os.ReadFile(a)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1 // in the middle: layer data (busybox) in either format
			bad := filepath.Join(t.TempDir(), "flipped-"+filepath.Base(a))
			if err := os.WriteFile(bad, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := l.Exec(ctx, "h3", "podman", "load", "-q", "-i", bad)
			if err == nil {
				if id := imageID(t, "h3"); id == img.ID {
					t.Fatalf("h3: %s with a flipped byte loaded as the good image %s: %s", filepath.Base(a), id, out)
				} else {
					t.Logf("%s with a flipped byte loads as another image, %s", filepath.Base(a), id)
				}
				run(t, "h3", "podman", "rmi", "-f", lab.TestImageRef)
				continue
			}
			if !strings.Contains(out, "Digest did not match") {
				t.Errorf("h3: %s with a flipped byte: load failed, but not on the digest: %s", filepath.Base(a), out)
			}
			t.Logf("%s with a flipped byte: rejected (digest mismatch)", filepath.Base(a))
		}
		if out := run(t, "h3", "podman", "images", "-q"); out != "" {
			t.Errorf("h3 has images after the failed loads: %q", out)
		}
	})

	t.Run("storage http", func(t *testing.T) {
		t0 := time.Now()
		url, err := l.Storage(ctx, imgDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("storage up in %v at %s", time.Since(t0), url)
		if want := "http://" + imgSubnet + ".2:" + strconv.Itoa(lab.DefaultStoragePort); url != want {
			t.Errorf("storage URL %s, want %s", url, want)
		}
		t0 = time.Now()
		out := run(t, "h2", "sh", "-c", "curl -fsS "+url+"/image.oci.tar -o /srv/fetched.tar && sha256sum /srv/fetched.tar")
		t.Logf("h2: curl of the %d B oci-archive: %v", img.OCISize, time.Since(t0))
		if f := strings.Fields(out); len(f) == 0 || f[0] != img.OCISHA256 {
			t.Errorf("h2: fetched oci-archive has sha256 %q, image.env says %s", out, img.OCISHA256)
		}
		b, err := os.ReadFile(filepath.Join(l.Dir, "hosts", "h2", "srv", "fetched.tar"))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != img.OCISHA256 {
			t.Errorf("the fetched bytes in h2's /srv differ from the archive")
		}
		// by name too, and a missing file fails curl -f
		if out := run(t, "h3", "curl", "-fsS", "http://storage:"+strconv.Itoa(lab.DefaultStoragePort)+"/image.env"); !strings.Contains(out, "IMAGE_ID='"+img.ID+"'") {
			t.Errorf("h3: image.env over http://storage = %q", out)
		}
		if out, err := l.Exec(ctx, "h3", "curl", "-fsS", url+"/no-such-file"); err == nil {
			t.Errorf("h3: curl -f of a missing file succeeded: %q", out)
		}
	})

	t.Run("object store", func(t *testing.T) {
		store, err := l.ObjectStore(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := store.Close(); err != nil {
				t.Error(err)
			}
		}()
		if want := "http://" + imgSubnet + ".2:" + strconv.Itoa(lab.DefaultObjectStorePort); store.URL != want {
			t.Errorf("object store URL %s, want %s", store.URL, want)
		}
		if err := store.PutFile("lab-images", "v1/image.oci.tar", img.OCIArchive); err != nil {
			t.Fatal(err)
		}
		// the real aws CLI on a host, with the keys ObjectStore left in the hosts' home
		out := run(t, "h2", "sh", "-c", "aws --endpoint-url "+store.URL+" s3 cp --only-show-errors s3://lab-images/v1/image.oci.tar - | sha256sum")
		if f := strings.Fields(out); len(f) == 0 || f[0] != img.OCISHA256 {
			t.Errorf("h2: s3 copy of the oci-archive has sha256 %q, image.env says %s", out, img.OCISHA256)
		}
		out = run(t, "h3", "aws", "--endpoint-url", store.URL, "s3", "ls", "--recursive", "s3://lab-images/")
		if !strings.Contains(out, strconv.FormatInt(img.OCISize, 10)+" v1/image.oci.tar") {
			t.Errorf("h3: s3 ls = %q", out)
		}
		if out, err := l.Exec(ctx, "h3", "aws", "--endpoint-url", store.URL, "s3", "cp", "s3://lab-images/nope", "-"); err == nil || !strings.Contains(out, "404") {
			t.Errorf("h3: copy of a missing object: %v %q", err, out)
		}
	})

	t.Run("registry", func(t *testing.T) {
		reg, err := l.Registry(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := reg.Close(); err != nil {
				t.Error(err)
			}
		}()
		digest, err := reg.Push(ctx, img.DockerArchive, "gpuaccept-lab:1")
		if err != nil {
			t.Fatal(err)
		}
		ref := reg.Addr + "/gpuaccept-lab:1@" + digest
		run(t, "h2", "podman", "rmi", "-af")
		run(t, "h2", "podman", "pull", "-q", ref)
		if got := "sha256:" + run(t, "h2", "podman", "image", "inspect", "--format", "{{.Id}}", ref); got != img.ID {
			t.Errorf("h2: pulled image ID %s, the archive's %s", got, img.ID)
		}
		if out := run(t, "h2", "podman", "image", "inspect", "--format", "{{.RepoDigests}}", ref); !strings.Contains(out, reg.Addr+"/gpuaccept-lab@"+digest) {
			t.Errorf("h2: repo digests %s lack %s", out, digest)
		}
		bad := reg.Addr + "/gpuaccept-lab:1@sha256:" + strings.Repeat("1", 64)
		if out, err := l.Exec(ctx, "h3", "podman", "pull", bad); err == nil || !strings.Contains(out, "manifest unknown") {
			t.Errorf("h3: pull of a digest the registry lacks: %v %q", err, out)
		}
		run(t, "h2", "podman", "rmi", "-af")
	})

	t.Run("shared", func(t *testing.T) {
		data := make([]byte, 1<<20)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		want := hex.EncodeToString(sum[:])
		// h1 writes a checkpoint (from its own /srv), h2 and h3 read it
		if err := os.WriteFile(filepath.Join(l.Dir, "hosts", "h1", "srv", "ckpt"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "h1", "sh", "-c", "mkdir -p /shared/run1 && cp /srv/ckpt /shared/run1/step-10.ckpt.tmp && mv /shared/run1/step-10.ckpt.tmp /shared/run1/step-10.ckpt")
		for _, h := range []string{"h2", "h3"} {
			if out := run(t, h, "sha256sum", "/shared/run1/step-10.ckpt"); !strings.HasPrefix(out, want+" ") {
				t.Errorf("%s reads %q from /shared, want sha256 %s", h, out, want)
			}
		}
		if b, err := os.ReadFile(filepath.Join(l.SharedDir(), "run1", "step-10.ckpt")); err != nil || sha256.Sum256(b) != sum {
			t.Errorf("the coordinator's SharedDir does not hold the checkpoint: %v", err)
		}
		// /srv stays per host
		if out, err := l.Exec(ctx, "h2", "test", "-e", "/srv/ckpt"); err == nil {
			t.Errorf("h2 sees h1's /srv/ckpt: %q", out)
		}
	})

	t.Run("kill ends containers, restart is a reboot", func(t *testing.T) {
		run(t, "h1", "podman", "run", "-d", "--name", "sleeper", lab.TestImageRef, "sleep", "600")
		ps, err := l.Ps(ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		for _, line := range strings.Split(ps, "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[3] == "sleep" && f[4] == "600" {
				pid, _ = strconv.Atoi(f[0])
			}
		}
		if pid == 0 {
			t.Fatalf("the container's sleep is not among h1's processes (host network namespace):\n%s", ps)
		}
		if err := l.Kill(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		// A SIGKILLed process on a loaded machine takes a moment to exit;
		// one that is a zombie (or gone) did not survive.
		survives := func() bool {
			st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			return err == nil && !strings.Contains(string(st), ") Z ")
		}
		for end := time.Now().Add(5 * time.Second); survives() && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
		if survives() {
			t.Errorf("the container's sleep (pid %d) survived kill", pid)
		}
		if err := l.Start(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		if out := run(t, "h1", "podman", "ps", "-a", "--format", "{{.Names}} {{.State}}"); !strings.EqualFold(out, "sleeper created") {
			t.Errorf("h1 after kill and start: podman ps -a = %q, want the container back to created (as after a reboot)", out)
		}
		if out := run(t, "h1", "podman", "run", "--rm", lab.TestImageRef, "echo", "ok"); out != "ok" {
			t.Errorf("h1 after kill and start: podman run = %q", out)
		}
		if got := imageID(t, "h1"); got != img.ID {
			t.Errorf("h1 after kill and start: image ID %s, want %s (the store survives)", got, img.ID)
		}
	})
}
