package lab

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

//go:embed kube.sh
var kubeScriptSource []byte

var kubeEmbed = &embedded{name: "kube", content: kubeScriptSource}

// Kube is the lab's Kubernetes (kube.sh): etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and, for each node, a containerd and a kubelet on this machine (127.0.0.1), each node advertising GPUs as the
// extended resource nvidia.com/gpu, and the pod image imported into containerd (pods use imagePullPolicy
// Never). Its pods' host network is this machine's.
type Kube struct {
	Dir        string // kube.sh --dir: every file of the cluster (logs/ for a post-mortem)
	Kubeconfig string // a token user, context "lab", namespace default
	Node       string // the node's name
	API        string // https://127.0.0.1:PORT
	Image      string // the pod image's reference (localhost/gpuaccept-kube:1)
	ImageID    string // its config digest, sha256:...
	// ImageRef is the image pinned by its manifest's digest
	// (localhost/gpuaccept-kube@sha256:...), a name the nodes hold it by
	// too: an inventory's image.reference, with image_pull_policy Never.
	ImageRef string
	GPUs     int    // nvidia.com/gpu the node advertises
	Bin      string // where the Kubernetes binaries are cached
	// Nodes are every node's name (Node first) and NodeIPs their
	// addresses, the host network of their pods: kube.sh up --nodes N runs
	// a kubelet and a containerd of their own for each on this machine.
	Nodes, NodeIPs []string
}

// KubeCommands are what kube.sh up needs besides the Kubernetes binaries (scripts/deps.sh installs them).
var KubeCommands = []string{"etcd", "containerd", "ctr", "curl", "openssl", "setsid", "unshare", "runc", "podman", "busybox"}

// KubeSkip decides for a test suite, as TestSkip does: a reason to skip when this machine cannot run the lab's
// Kubernetes at all (not root on Linux, GPUACCEPT_NO_LAB), an error when it is root but a package is missing
// (there the tests must fail, not quietly skip). Binaries that are neither cached nor buildable (no Go, no module
// proxy) are found by StartKube, whose error the suite then gives as its reason to skip.
func KubeSkip() (skip string, err error) {
	if os.Getenv("GPUACCEPT_NO_LAB") != "" {
		return "GPUACCEPT_NO_LAB is set (make unit)", nil
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return "the lab's Kubernetes needs root on Linux (containerd, the kubelet and its mounts)", nil
	}
	var missing []string
	for _, c := range KubeCommands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni (containernetworking-plugins)")
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("the lab's Kubernetes needs %v (bash scripts/deps.sh)", missing)
	}
	return "", nil
}

// ErrKubeBuild is StartKube's error when the Kubernetes binaries are not cached and cannot be built here.
var ErrKubeBuild = errors.New("the Kubernetes binaries are not cached and could not be built")

// BuildKube builds and caches the Kubernetes binaries once (kube.sh build: ~6-7 minutes on 2 cores on a fresh
// machine, under a second once cached) and returns their directory.
func BuildKube(ctx context.Context) (string, error) {
	out, err := runKube(ctx, "build")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrKubeBuild, err)
	}
	dir := lastLine(out)
	if dir == "" {
		return "", fmt.Errorf("%w: kube.sh build said nothing", ErrKubeBuild)
	}
	return dir, nil
}

// StartKube starts the lab's Kubernetes in dir (a fresh one: whatever ran there is torn down first) with gpus
// nvidia.com/gpu on its node, and returns once the node is Ready and advertises them.
func StartKube(ctx context.Context, dir string, gpus int) (*Kube, error) {
	return StartKubeNodes(ctx, dir, gpus, 1)
}

// StartKubeNodes is StartKube with nodes nodes, each with its own kubelet and containerd on this machine and an
// address of its own.
func StartKubeNodes(ctx context.Context, dir string, gpus, nodes int) (*Kube, error) {
	if _, err := BuildKube(ctx); err != nil {
		return nil, err
	}
	up := func() error {
		_, _ = runKube(context.Background(), "down", "--dir", dir)
		_, err := runKube(ctx, "up", "--dir", dir, "--gpus", strconv.Itoa(gpus), "--nodes", strconv.Itoa(nodes))
		return err
	}
	err := up()
	if err != nil && ctx.Err() == nil {
		// Twice in one session on the 2-core machine, right after another
		// cluster of the same directory went down, the first kubelet died
		// at its start with an empty log; the next start held. What the
		// daemons said is kept in the error, and the start tried once more.
		first := fmt.Errorf("%w; the daemons' logs then:\n%s", err, kubeLogs(dir))
		if err = up(); err != nil {
			return nil, fmt.Errorf("%w; the start before it: %w", err, first)
		}
		fmt.Fprintf(os.Stderr, "lab kube: the cluster started at the second try; the first: %v\n", first)
	}
	if err != nil {
		return nil, err
	}
	return ReadKube(dir)
}

// kubeLogs is the end of every daemon's log under dir, for an error.
func kubeLogs(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "== %s (%d bytes)\n%s\n", filepath.Base(f), len(data), tail(string(data), 1500))
	}
	return b.String()
}

// ReadKube reads dir/env, as kube.sh up writes it.
func ReadKube(dir string) (*Kube, error) {
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, fmt.Errorf("lab kube: %w", err)
	}
	env := parseEnv(b)
	gpus, _ := strconv.Atoi(env["KUBE_GPUS"])
	k := &Kube{Dir: dir, Kubeconfig: env["KUBECONFIG"], Node: env["KUBE_NODE"], API: env["KUBE_API"],
		Image: env["KUBE_IMAGE"], ImageID: env["KUBE_IMAGE_ID"], GPUs: gpus, Bin: env["KUBE_BIN"],
		Nodes: strings.Fields(env["KUBE_NODES"]), NodeIPs: strings.Fields(env["KUBE_NODE_IPS"]), ImageRef: env["KUBE_IMAGE_REF"]}
	if len(k.Nodes) == 0 {
		k.Nodes = []string{k.Node}
	}
	if k.Kubeconfig == "" || k.Node == "" || k.Image == "" {
		return nil, fmt.Errorf("lab kube: %s is incomplete: %q", filepath.Join(dir, "env"), b)
	}
	return k, nil
}

// Down stops every daemon of the cluster and every pod's processes, unmounts what they mounted and removes Dir.
func (k *Kube) Down(ctx context.Context) error {
	_, err := runKube(ctx, "down", "--dir", k.Dir)
	return err
}

// SetGPUs makes the node advertise n nvidia.com/gpu (capacity; the kubelet derives allocatable).
func (k *Kube) SetGPUs(ctx context.Context, n int) error {
	if _, err := runKube(ctx, "gpus", "--dir", k.Dir, strconv.Itoa(n)); err != nil {
		return err
	}
	k.GPUs = n
	return nil
}

// runKube runs the embedded kube.sh; errors read "lab kube: OP: exit status N: <stderr>".
func runKube(ctx context.Context, args ...string) (string, error) {
	path, err := kubeEmbed.path()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	var stderr string
	out, err := runCmdFiles(ctx, cmd, &stderr)
	if err != nil {
		return out, fmt.Errorf("lab kube: %s: %w: %s", args[0], err, tail(stderr, 2000))
	}
	return out, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Pid is the process ID of one of the cluster's daemons (etcd, containerd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet), for a test that stops or kills it.
func (k *Kube) Pid(daemon string) (int, error) {
	b, err := os.ReadFile(filepath.Join(k.Dir, "pids", daemon+".pid"))
	if err != nil {
		return 0, fmt.Errorf("lab kube: %s: %w", daemon, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
