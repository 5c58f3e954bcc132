package remote

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigPicksItsOneTransport(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"none", Config{Name: "gpu-01"}, "gpu-01: no transport"},
		{"two", Config{Name: "gpu-01", SSH: &SSHConfig{Host: "h"}, Local: &LocalConfig{}}, "gpu-01: 2 transports"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := DialNode(t.Context(), c.cfg)
			var se *SetupError
			if e != nil || !errors.As(err, &se) || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("DialNode = %v, %v; want a setup error starting %q", e, err, c.want)
			}
			if c.cfg.ReachWithin() != 0 || c.cfg.Address() != "" || c.cfg.Via() != "" {
				t.Errorf("a config without one transport still says something of it")
			}
		})
	}
	e, err := DialNode(t.Context(), Config{Name: "here", Local: &LocalConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, ok := e.(*Local); !ok || e.Name() != "here" || e.Addr() != LocalAddress {
		t.Errorf("the local transport dialled %T %q at %q", e, e.Name(), e.Addr())
	}
}

func TestTransportsSayHowLongReachingANodeTakes(t *testing.T) {
	ssh := Config{Name: "gpu-01", SSH: &SSHConfig{Host: "10.0.0.1", Port: 2222, Jump: []string{"bastion", "inner"}}}
	if got, want := ssh.ReachWithin(), 3*(DefaultConnectTimeout+DefaultHandshakeTimeout); got != want {
		t.Errorf("SSH through two jump hosts, default bounds: %s, want %s", got, want)
	}
	ssh.SSH.ConnectTimeout, ssh.SSH.HandshakeTimeout, ssh.SSH.Jump = time.Second, 2*time.Second, nil
	if got := ssh.ReachWithin(); got != 3*time.Second {
		t.Errorf("SSH, one hop, 1s + 2s: %s", got)
	}
	if ssh.Address() != "10.0.0.1" || ssh.SSHPort() != 2222 || !strings.Contains(ssh.Via(), "SSH") || !ssh.SSHLogin() {
		t.Errorf("SSH: address %q, port %d, via %q", ssh.Address(), ssh.SSHPort(), ssh.Via())
	}
	local := Config{Name: "here", Local: &LocalConfig{}}
	if local.ReachWithin() != 0 || local.Address() != LocalAddress || local.SSHPort() != 0 || !strings.Contains(local.Via(), "locally") || local.SSHLogin() {
		t.Errorf("local: within %s, address %q, port %d, via %q", local.ReachWithin(), local.Address(), local.SSHPort(), local.Via())
	}
}

// Package remote does not link client-go: a binary that does not import
// remote/kube (this test's) says so for the node, before the window tries
// anything else, and teardown by label says the same.
func TestKubeWithoutItsTransport(t *testing.T) {
	k := KubeConfig{Node: "k8s-node-3", Image: "img@sha256:00", Labels: map[string]string{"gpuaccept/window": "w"}}
	e, err := DialNode(t.Context(), Config{Name: "gpu-03", Kube: &k})
	var se *SetupError
	if e != nil || !errors.As(err, &se) || !errors.Is(err, ErrNoKube) || !strings.HasPrefix(err.Error(), "gpu-03: kubernetes: ") {
		t.Fatalf("DialNode = %v, %v; want a setup error naming gpu-03 and ErrNoKube", e, err)
	}
	if _, err := DeleteKubePods(t.Context(), k); !errors.Is(err, ErrNoKube) {
		t.Fatalf("DeleteKubePods = %v; want ErrNoKube", err)
	}
	if _, err := ListKubeNodes(t.Context(), k, nil); !errors.Is(err, ErrNoKube) {
		t.Fatalf("ListKubeNodes = %v; want ErrNoKube", err)
	}
	c := Config{Name: "gpu-03", Kube: &k}
	if c.Address() != "k8s-node-3" || !strings.Contains(c.Via(), "Kubernetes API") || c.ReachWithin() != DefaultPodStart+30*time.Second {
		t.Errorf("address %q, via %q, reach within %s", c.Address(), c.Via(), c.ReachWithin())
	}
	d := k.WithDefaults()
	if d.GPUResource != DefaultGPUResource || d.PullPolicy != "IfNotPresent" || d.ActiveDeadline != DefaultActiveDeadline ||
		d.StartTimeout != DefaultPodStart || d.GuardLease < 10*time.Second {
		t.Errorf("defaults %+v", d)
	}
}
