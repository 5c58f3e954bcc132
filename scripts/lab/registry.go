package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultRegistryPort is the port of the lab's container registry on the storage host.
const DefaultRegistryPort = 5000

// Registry is a container registry on the lab's storage host: the CNCF distribution registry (Debian's
// docker-registry), plain HTTP, images on disk under the lab's directory. Every host's podman is told it is
// insecure (no TLS), so a plain `podman pull SUBNET.2:5000/NAME:TAG@sha256:…` works there as a pull from a
// cluster's registry does.
type Registry struct {
	Addr string // "SUBNET.2:5000": the host part of an image reference
	lab  *Lab
	cmd  *exec.Cmd
	done chan error
}

// Registry starts the lab's container registry on the storage host (starting that host when it is not up)
// and returns once it answers. It runs in the storage host's network namespace: Kill of the storage host ends
// it, Close ends it too. Needs docker-registry (make deps) and podman on the hosts.
func (l *Lab) Registry(ctx context.Context) (*Registry, error) {
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		return nil, fmt.Errorf("lab %s: registry: docker-registry is not installed (apt-get install docker-registry)", l.Name)
	}
	if l.ContainerDriver() == "" {
		return nil, fmt.Errorf("lab %s: registry: the hosts have no podman (it was not installed when the lab came up)", l.Name)
	}
	ns, subnet, err := l.storageHost(ctx)
	if err != nil {
		return nil, fmt.Errorf("lab %s: registry: %w", l.Name, err)
	}
	addr := subnet + ".2:" + strconv.Itoa(DefaultRegistryPort)
	dir := filepath.Join(l.Dir, "registry")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("lab %s: registry: %w", l.Name, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("lab %s: registry: %w", l.Name, err)
	}
	cfg := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: 0.0.0.0:%d\n",
		filepath.Join(dir, "data"), DefaultRegistryPort)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("lab %s: registry: %w", l.Name, err)
	}
	// Every host's podman: this registry speaks HTTP.
	insecure := fmt.Sprintf("# gpuaccept lab %s: its registry (Registry) speaks plain HTTP\n[[registry]]\nlocation = %q\ninsecure = true\n", l.Name, addr)
	for _, h := range l.Hosts {
		d := filepath.Join(l.Dir, "hosts", h.Name, "containers", "etc", "registries.conf.d")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("lab %s: registry: %s: %w", l.Name, h.Name, err)
		}
		if err := os.WriteFile(filepath.Join(d, "gpuaccept-lab-registry.conf"), []byte(insecure), 0o644); err != nil {
			return nil, fmt.Errorf("lab %s: registry: %s: %w", l.Name, h.Name, err)
		}
	}
	log, err := os.OpenFile(filepath.Join(dir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab %s: registry: %w", l.Name, err)
	}
	defer log.Close()
	// nsenter execs the registry: the process is the registry, in its own session (no terminal's ^C).
	cmd := exec.Command("nsenter", "--net="+ns, bin, "serve", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lab %s: registry: %w", l.Name, err)
	}
	r := &Registry{Addr: addr, lab: l, cmd: cmd, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := r.ping(ctx); err == nil {
			return r, nil
		} else if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("lab %s: registry: not answering at %s after 15s: %w (log %s)", l.Name, addr, err, log.Name())
		}
		select {
		case err := <-r.done:
			r.done <- err
			return nil, fmt.Errorf("lab %s: registry: docker-registry exited: %v (log %s)", l.Name, err, log.Name())
		case <-ctx.Done():
			r.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *Registry) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v2/: %s", resp.Status)
	}
	return nil
}

// Push puts an image archive (docker-archive or oci-archive) in the registry as Addr/repoTag ("name:tag") and
// returns the manifest digest the registry holds it under ("sha256:…"): what a pull pins. podman does it, with
// a throwaway store, so the machine's own image store is not touched.
func (r *Registry) Push(ctx context.Context, archive, repoTag string) (string, error) {
	st, err := os.MkdirTemp("/tmp", "gpa-push-") // short: podman limits the runroot's length
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(st)
	podman := func(args ...string) (string, error) {
		full := append([]string{"--root", st + "/r", "--runroot", st + "/rr", "--tmpdir", st + "/t", "--storage-driver", "vfs"}, args...)
		out, err := exec.CommandContext(ctx, "podman", full...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("registry push: podman %s: %w: %s", args[0], err, tail(string(out), 1000))
		}
		return string(out), nil
	}
	out, err := podman("load", "-q", "-i", archive)
	if err != nil {
		return "", err
	}
	var loaded string
	for _, line := range strings.Split(out, "\n") {
		for _, p := range []string{"Loaded image: ", "Loaded image(s): "} {
			if rest, ok := strings.CutPrefix(line, p); ok {
				loaded, _, _ = strings.Cut(strings.TrimSpace(rest), ",")
			}
		}
	}
	if loaded == "" {
		return "", fmt.Errorf("registry push: podman load did not say what it loaded: %s", tail(out, 500))
	}
	digestFile := filepath.Join(st, "digest")
	if _, err := podman("push", "-q", "--tls-verify=false", "--digestfile", digestFile, loaded, "docker://"+r.Addr+"/"+repoTag); err != nil {
		return "", err
	}
	b, err := os.ReadFile(digestFile)
	if err != nil {
		return "", fmt.Errorf("registry push: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Close stops the registry and takes the hosts' insecure-registry entry away.
func (r *Registry) Close() error {
	var err error
	if r.cmd.Process != nil {
		if kerr := r.cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			err = kerr
		}
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		err = errors.Join(err, fmt.Errorf("lab %s: registry: still running 10s after kill", r.lab.Name))
	}
	for _, h := range r.lab.Hosts {
		os.Remove(filepath.Join(r.lab.Dir, "hosts", h.Name, "containers", "etc", "registries.conf.d", "gpuaccept-lab-registry.conf"))
	}
	return err
}
