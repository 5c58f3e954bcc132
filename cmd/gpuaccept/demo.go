package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"gpuaccept/inventories"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/remote/sshtest"
	"gpuaccept/scripts/standins"
)

// demoProfiles: three healthy nodes and one whose GPU diagnostic fails, so
// the demo shows a rejection and the evidence behind it.
var demoProfiles = []string{"h100", "h100", "h100", "h100-diag-fail"}

// demoInterScale scales each node's inter-node link in the demo's fabric
// model (standins.FabricEnv) from the quote's inter-node bus bandwidth: the
// third node's links run at half rate, so every collective it takes part in
// comes out at half the quote, while its NVLink (intra-node) is sound.
var demoInterScale = []float64{1, 1, 0.5, 1}

func newDemoCmd() *cobra.Command {
	var f windowFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole window on simulated nodes (no root, no network)",
		Long: `Run the acceptance window against four simulated nodes: in-process SSH servers on
loopback whose nvidia-smi, dcgmi and ibstat answer with genuine outputs of real machines.
One node's GPU diagnostic fails, so the window is NOT accepted and gpuaccept exits 1, as it
would on real nodes. Every report it writes is marked SIMULATED.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			work, err := os.MkdirTemp("", "gpuaccept-demo-")
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			defer os.RemoveAll(work)
			exe, err := os.Executable()
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			inv, servers, err := demoNodes(work, exe)
			defer func() {
				for _, s := range servers {
					s.Close()
				}
			}()
			if err != nil {
				return exitWith(exitCouldNotRun, fmt.Errorf("demo: %w", err))
			}
			o := f.options(cmd)
			o.Progress.Line("demo: %d simulated nodes on loopback; %s has a failing GPU diagnostic", len(servers), inv.Nodes[len(inv.Nodes)-1].Name)
			rec, dir, err := orchestrator.Start(contextOf(cmd), inv, phases.All(), o)
			return finish(cmd, rec, dir, err, f.output)
		},
	}
	f.register(cmd)
	return cmd
}

// demoNodes starts one SSH server per node of the embedded demo inventory,
// each with its own home and its own stand-in GPU tools on PATH (wrappers
// that run exe's hidden `standin` command): nvidia-smi, dcgmi and ibstat of
// the node's profile, and the fabric model's mpirun and nccl-tests binaries
// (a simulation: standins.FabricMain). It points the inventory at them.
func demoNodes(work, exe string) (*inventory.Inventory, []*sshtest.Server, error) {
	inv, err := inventory.Parse("demo.yaml (embedded)", inventories.Demo)
	if err != nil {
		return nil, nil, err
	}
	pub, keyFile, err := demoKey(work)
	if err != nil {
		return nil, nil, err
	}
	fabric := standins.FormatFabric(demoFabric(inv))
	if err := demoImage(work, inv); err != nil {
		return nil, nil, err
	}
	var servers []*sshtest.Server
	for i := range inv.Nodes {
		n := &inv.Nodes[i]
		home := filepath.Join(work, n.Name)
		bin := filepath.Join(home, "bin")
		argv0 := []string{exe, "standin"}
		if err := standins.Install(bin, demoProfiles[i%len(demoProfiles)], argv0); err != nil {
			return nil, servers, err
		}
		if err := standins.InstallFabric(bin, argv0); err != nil {
			return nil, servers, err
		}
		if err := standins.InstallPodman(bin, argv0); err != nil {
			return nil, servers, err
		}
		s, err := sshtest.Start(sshtest.Options{
			AuthorizedKeys: []ssh.PublicKey{pub},
			Dir:            home,
			Env: []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home,
				standins.FabricEnv + "=" + fabric,
				standins.FabricNodeEnv + "=" + n.Name,
				standins.FabricRunsEnv + "=" + filepath.Join(home, "fabric-runs"),
				standins.PodmanStoreEnv + "=" + filepath.Join(home, "containers")},
			Name: n.Name,
		})
		if err != nil {
			return nil, servers, err
		}
		servers = append(servers, s)
		n.Address, n.Port = s.Host(), s.Port()
	}
	knownHosts := filepath.Join(work, "known_hosts")
	if err := sshtest.WriteKnownHosts(knownHosts, servers...); err != nil {
		return nil, servers, err
	}
	inv.SSH.IdentityFiles = []string{keyFile}
	inv.SSH.KnownHosts = []string{knownHosts}
	inv.SSH.AcceptNew = false
	inv.SSH.Agent = false
	inv.SSH.Config = "none"
	inv.Simulated = true
	// The nodes' shared filesystem for the checkpoint: one directory that
	// every demo node sees (they all run on this machine).
	inv.Phases.Checkpoint.Dir = filepath.Join(work, "checkpoints")
	if err := os.MkdirAll(inv.Phases.Checkpoint.Dir, 0o755); err != nil {
		return nil, servers, err
	}
	return inv, servers, nil
}

// demoImage writes the demo's image archive and pins it: the coordinator
// pushes it to every node, whose simulated podman loads it, shows its ID
// and "starts" it with the GPUs (standins.PodmanMain). It is set here, not
// in demo.yaml, because the archive is made at run time and the inventory
// checks that an archive exists when it is read.
func demoImage(work string, inv *inventory.Inventory) error {
	archive := filepath.Join(work, "gpuaccept-demo-image.tar")
	id, err := standins.WriteDemoImage(archive)
	if err != nil {
		return fmt.Errorf("demo image: %w", err)
	}
	repo, _, _ := strings.Cut(standins.DemoImageRef, ":")
	inv.Image = inventory.Image{Reference: repo + "@sha256:" + id, Runtime: "podman", Mode: "push", Archive: archive,
		// Under each node's own home: the demo's nodes share this machine's /var/tmp.
		Dir: "images", Relay: "direct", GPUs: "all", Smoke: []string{"nvidia-smi", "-L"}}
	return nil
}

// demoFabric is the demo's fabric model: every node at the quote's inter-
// and intra-node bus bandwidth and GPU count, scaled by demoInterScale.
func demoFabric(inv *inventory.Inventory) []standins.FabricHost {
	q := inv.Quote
	var hosts []standins.FabricHost
	for i, n := range inv.Nodes {
		hosts = append(hosts, standins.FabricHost{
			Name: n.Name, InterGBs: q.InterBusBWGBs * demoInterScale[i%len(demoInterScale)], IntraGBs: q.IntraBusBWGBs, GPUs: q.GPUsPerNode,
		})
	}
	return hosts
}

func demoKey(work string) (ssh.PublicKey, string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "gpuaccept demo")
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(work, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	return sshPub, path, err
}
