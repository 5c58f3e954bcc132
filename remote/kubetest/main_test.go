// Package kubetest proves the Kubernetes executor (remote/kube's Node) against a
// real Kubernetes: the lab's two-node cluster (scripts/lab/kube.sh), brought
// up for the test run and torn down after it. It needs root on Linux and
// the lab's packages (scripts/deps.sh); the Kubernetes binaries are built
// once and cached (~6-7 minutes on a fresh 2-core machine). Where the
// cluster cannot run the tests skip and say why.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpuaccept/scripts/lab"
)

// The cluster's directory is this package's own.
const kubeDir = "/tmp/gpuaccept-kube-kt"

var (
	theKube *lab.Kube
	skipWhy string
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	why, err := lab.KubeSkip()
	if err != nil {
		fmt.Fprintf(os.Stderr, "root on Linux, yet the lab's Kubernetes cannot run: %v\n", err)
		return 1
	}
	if why != "" {
		skipWhy = why
		return m.Run()
	}
	if dir := os.Getenv("GPUACCEPT_KUBE_DIR"); dir != "" {
		// A cluster a person started (kube.sh up --dir DIR): used, left running.
		k, err := lab.ReadKube(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		theKube = k
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // a fresh machine builds first
	// Two nodes, each its own kubelet and containerd on this machine:
	// mpirun between pods needs a second.
	k, err := lab.StartKubeNodes(ctx, kubeDir, 4, 2)
	cancel()
	switch {
	case err != nil && ctx.Err() == nil && isBuild(err):
		skipWhy = err.Error()
		return m.Run()
	case err != nil:
		fmt.Fprintf(os.Stderr, "lab kube up: %v\n", err)
		_ = (&lab.Kube{Dir: kubeDir}).Down(context.Background())
		return 1
	}
	theKube = k
	code := m.Run()
	if os.Getenv("GPUACCEPT_KEEP_KUBE") != "" {
		fmt.Fprintf(os.Stderr, "GPUACCEPT_KEEP_KUBE: the cluster stays up, KUBECONFIG=%s\n", k.Kubeconfig)
		return code
	}
	if err := k.Down(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "lab kube down: %v\n", err)
		code = 1
	}
	return code
}

func isBuild(err error) bool { return errors.Is(err, lab.ErrKubeBuild) }

// zeroPin is a pinned reference the lab's containerd does not hold: the
// tests that give the pods the lab's own image (their Dialer) pin this.
const zeroPin = "localhost/gpuaccept-kube@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// writeInventory writes an inventory of the lab's cluster into dir: head's
// top-level keys (image, quote, ...), then the kubernetes section reaching
// k's API in namespace default with kube's keys. It returns its path.
func writeInventory(t *testing.T, dir string, k *lab.Kube, head, kube string) string {
	t.Helper()
	path := filepath.Join(dir, "inventory.yaml")
	text := "provider: lab\n" + head + "kubernetes:\n  kubeconfig: " + k.Kubeconfig + "\n  namespace: default\n" + kube
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// needKube skips when the lab's Kubernetes cannot run here, with the reason.
func needKube(t *testing.T) *lab.Kube {
	t.Helper()
	if theKube == nil {
		t.Skipf("the lab's Kubernetes cannot run here: %s", skipWhy)
	}
	return theKube
}
