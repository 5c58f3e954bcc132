package standins

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Telemetry is how InstallTelemetry sets up one simulated node's telemetry.
type Telemetry struct {
	// State is the node's state directory (StateEnv), emptied and made anew: no t0, no busy marker, a fresh IB
	// tree. In the lab it is the host's /srv/gpuaccept-standin seen from the coordinator, so that the stand-ins
	// started outside the wrappers (the nccl stand-in under mpirun) find it as DefaultStateDir.
	State string
	// Plant is SimTelemetryEnv's value for this node ("" plants nothing); checked here, so that a bad list
	// fails the lab's setup rather than the window.
	Plant string
}

// InstallTelemetry rewrites dir's nvidia-smi wrapper (Install must have written dir) so that it runs with
// StateEnv and SimTelemetryEnv set, writes a dmesg wrapper when the plan has Xid events (and removes an old one
// otherwise: then the node's own dmesg answers), and lays out the IB tree under State/sys/class/infiniband when
// the profile's node has ibstat. The node script finds that tree through SysfsIBEnv, which the lab sets in every
// host's sshd (IBTreeInHost).
func InstallTelemetry(dir, profileName string, argv0 []string, t Telemetry) error {
	p, err := lookup(profileName)
	if err != nil {
		return err
	}
	if err := checkArgv0(argv0); err != nil {
		return err
	}
	if t.State == "" || !filepath.IsAbs(t.State) {
		return fmt.Errorf("standins: InstallTelemetry: state directory %q: want an absolute path", t.State)
	}
	pl, err := parsePlan(t.Plant)
	if err != nil {
		return fmt.Errorf("standins: InstallTelemetry: %w", err)
	}
	if p.smiQuery != "" {
		l, err := parseSMILog(p.queryText())
		if err != nil {
			return fmt.Errorf("standins: InstallTelemetry: %w", err)
		}
		if g := pl.maxGPU(); g >= len(l.gpus) {
			return fmt.Errorf("standins: InstallTelemetry: %s: gpu=%d, but profile %s has %d GPUs",
				SimTelemetryEnv, g, p.name, len(l.gpus))
		}
	}
	if err := os.RemoveAll(t.State); err != nil {
		return fmt.Errorf("standins: InstallTelemetry: %w", err)
	}
	if err := os.MkdirAll(t.State, 0o755); err != nil {
		return fmt.Errorf("standins: InstallTelemetry: %w", err)
	}
	if err := writeIBTree(filepath.Join(t.State, "sys", "class", "infiniband"), p); err != nil {
		return err
	}
	env := []string{"env", StateEnv + "=" + t.State, SimTelemetryEnv + "=" + t.Plant}
	if p.has(NvidiaSMI) {
		words := slices.Concat(env, argv0, []string{"--profile", p.name, NvidiaSMI})
		what := fmt.Sprintf("%s (simulated node, profile %s)", NvidiaSMI, p.name)
		if err := writeWrapper(filepath.Join(dir, NvidiaSMI), what, words); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, Dmesg)
	if !pl.has(evXid) {
		if b, err := os.ReadFile(path); err == nil && isWrapper(b) {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("standins: InstallTelemetry: %w", err)
			}
		}
		return nil
	}
	words := slices.Concat(env, argv0, []string{"--profile", p.name, Dmesg})
	return writeWrapper(path, fmt.Sprintf("%s (simulated node's kernel log: planted lines only, profile %s)",
		Dmesg, p.name), words)
}
