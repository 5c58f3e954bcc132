package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	yaml "go.yaml.in/yaml/v3"

	"gpuaccept/hostlist"
	"gpuaccept/inventories"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/remote"
	"gpuaccept/remote/sshtest"
	"gpuaccept/scripts/standins"
)

// demoProfile: healthy nodes and a last one whose GPU diagnostic fails, so
// the demo shows a rejection and the evidence behind it.
func demoProfile(i, nodes int) string {
	if i == nodes-1 {
		return "h100-diag-fail"
	}
	return "h100"
}

// demoSlow is the node whose inter-node links run at half rate with --seed
// 0, the default (the demo's fabric model, standins.FabricEnv, scales the
// simulated hardware's inter-node bus bandwidth, the embedded quote's):
// every collective it takes part in comes out at half the quote, while its
// NVLink (intra-node) is sound. The third node, with three or more.
const demoSlow = 2

// demoXid is what the degraded node's telemetry shows besides (gpu-03 at
// seed 0, none with a seed that degrades no node): Xid 94 (a contained ECC
// error, a genuine line's text) on its GPU 5, four seconds after its
// sampler started, which HEALTH-012 names.
const demoXid = "xid:94@4:gpu=5"

// demoXidOn is the node demoXid is planted on: the one whose inter-node
// links the seed degraded (demoFabricText's rule), "" when none is.
func demoXidOn(hosts []standins.FabricHost, hw inventory.Quote) string {
	for _, h := range hosts {
		if h.InterGBs < 0.96*hw.InterBusBWGBs {
			return h.Name
		}
	}
	return ""
}

// maxDemoNodes bounds demo --nodes: each is an SSH server in this process.
const maxDemoNodes = 2000

// demoDegradations are the fractions of the healthy rate a seed other than
// 0 may give the degraded node's inter-node links: each clear of the
// demo's thresholds (NCCL-002 passes at 0.9 of the quote, the bisection
// calls a pair slow below 0.8 of the typical pair), whatever the other
// nodes' ±3%. 1: no node degraded.
var demoDegradations = []float64{0.4, 0.5, 0.6, 0.7, 0.85, 0.95, 1}

// demoEmbedded names the embedded inventory in errors and run.json.
const demoEmbedded = "demo.yaml (embedded)"

func newDemoCmd() *cobra.Command {
	var f windowFlags
	var seed int64
	var quoteFile, serve, workload string
	var burnin bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole window on simulated nodes (no root, no network)",
		Long: `Run the acceptance window against four simulated nodes: in-process SSH servers on
loopback whose nvidia-smi, dcgmi and ibstat answer with genuine outputs of real machines.
One node's GPU diagnostic fails, so the window is NOT accepted and gpuaccept exits 1, as it
would on real nodes. Every report it writes is marked SIMULATED.

--nodes N runs N simulated nodes instead (1 to 2000; the last one's diagnostic fails, the
third one's links are slow), to see the output at a fleet's size; --nodes with a host range
(gpu-[01-02]) runs on some of the four, as run --nodes does.

--seed N varies the simulated fabric, the same way for the same N: which node's inter-node
links are degraded and to what fraction (none, with some seeds), and every other node's link
rates within ±3%. 0, the default, is the demo as described: gpu-03's links at half rate.
--quote FILE replaces the embedded quote with FILE's quote: mapping (checked as an inventory's
quote is); the simulated hardware stays the same, so the verdicts show what that quote promised.

--workload inference adds the load test: every node serves a simulated model from the demo's
image and gpuaccept's load generator drives it from the node itself; gpu-03's server is slow,
so its p95 time to first token misses the target. --workload training runs a training job
over every node instead (the failure test's simulated launcher); gpu-03 computes 1.5 times
slower and is named the straggler.

--burnin adds a 10-second burn-in: each iteration the compute rate on every simulated GPU at once
(a genuine H200's 668.7 TFLOP/s), the intra-node all-reduce, and DCGM's targeted stress (the
simulated dcgmi), then the cluster all-reduce over every node (and with --workload training the
training job); gpu-03's GPU 3 computes 20% slower and is named, and gpu-02's all-reduce sags to
0.7 × from the third iteration, which the drift (first quarter against the last) names.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if err := checkDemoWorkload(workload); err != nil {
				return err
			}
			// Before anything starts: a bad quote file is bad input
			// (exit 2), named with its line and key.
			inv, hw, err := demoInventoryFor(quoteFile, workload)
			if err != nil {
				return err
			}
			if burnin {
				demoAddBurnin(inv)
			}
			// --nodes N: that many simulated nodes; a host range picks
			// some of them, as run --nodes does.
			if n, err := strconv.Atoi(strings.TrimSpace(f.nodes)); err == nil {
				if n < 1 || n > maxDemoNodes {
					return exitWith(exitBadInput, fmt.Errorf("--nodes %d: the demo runs 1 to %d simulated nodes", n, maxDemoNodes))
				}
				demoResize(inv, n)
				f.nodes = ""
			}
			work, err := os.MkdirTemp("", "gpuaccept-demo-")
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			defer os.RemoveAll(work)
			defer demoKillContainers(work, inv.Nodes)
			exe, err := os.Executable()
			if err != nil {
				return exitWith(exitCouldNotRun, err)
			}
			fabric := demoFabric(inv.Nodes, hw, seed)
			servers, err := demoNodes(work, exe, inv, fabric, demoXidOn(fabric, hw))
			defer func() {
				for _, s := range servers {
					s.Close()
				}
			}()
			if err != nil {
				return exitWith(exitCouldNotRun, fmt.Errorf("demo: %w", err))
			}
			if serve != "" {
				if quoteFile != "" || f.selection() != nil {
					return exitWith(exitBadInput, fmt.Errorf("--serve writes the demo's own inventory: no --quote, --only, --skip or --nodes range (--nodes N sets its size)"))
				}
				if err := serveDemo(contextOf(cmd), cmd.OutOrStdout(), inv, serve); err != nil {
					return exitWith(exitCouldNotRun, fmt.Errorf("demo --serve: %w", err))
				}
				return nil
			}
			o := f.options(cmd)
			o.Selection = f.selection()
			if err := orchestrator.CheckSelection(inv, phases.All(), o.Selection); err != nil {
				return exitWith(exitBadInput, err)
			}
			// The last node's diagnostic fails: said when the window has it.
			failing := inv.Nodes[len(inv.Nodes)-1].Name
			if sel := o.Selection; sel != nil && sel.Nodes != "" {
				if names, err := hostlist.Expand(sel.Nodes); err == nil && !slices.Contains(names, failing) {
					failing = ""
				}
			}
			if failing != "" {
				o.Progress.Line("demo: %d simulated nodes on loopback; %s has a failing GPU diagnostic", len(servers), failing)
			} else {
				o.Progress.Line("demo: %d simulated nodes on loopback", len(servers))
			}
			o.Progress.Line("demo: seed %d: %s", seed, demoFabricText(fabric, hw))
			if x := demoXidOn(fabric, hw); x != "" {
				o.Progress.Line("demo: %s's GPU 5 logs an Xid 94 (contained ECC error) a few seconds in", x)
			}
			if quoteFile != "" {
				o.Progress.Line("demo: the quote of %s", quoteFile)
			}
			if demoInference(inv) || demoTraining(inv) {
				o.Progress.Line("demo: %s", demoWorkloadText(inv))
			}
			if burnin {
				o.Progress.Line("demo: a %s burn-in; GPU %d of %s computes %.0f%% slower", demoBurninFor, demoGemmSlowGPU,
					inv.Nodes[min(demoSlow, len(inv.Nodes)-1)].Name, (1-demoGemmSlow)*100)
				if demoSagNode < len(inv.Nodes) {
					o.Progress.Line("demo: %s's intra-node all-reduce sags to %.1f × from the burn-in's iteration %d",
						inv.Nodes[demoSagNode].Name, demoSag, demoSagFrom)
				}
			}
			rec, dir, err := orchestrator.Start(contextOf(cmd), inv, phases.All(), o)
			if rec != nil {
				if werr := writeDemoBillingExport(dir, rec); werr != nil {
					o.Progress.Line("demo: %s: %v", demoBillingExport, werr)
				} else if rec.Ledger != nil {
					o.Progress.Line("demo: the bundle's %s bills it as an honest provider would: gpuaccept bill DIR DIR/%s",
						demoBillingExport, demoBillingExport)
				}
			}
			return finish(cmd, rec, dir, err, f)
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&seed, "seed", 0, "vary the simulated fabric: which node is degraded and how much (0: gpu-03 at half rate)")
	cmd.Flags().StringVar(&quoteFile, "quote", "", "a YAML file whose quote: mapping replaces the demo's quote")
	cmd.Flags().StringVar(&workload, "workload", "none", "the load test on every node: "+strings.Join(demoWorkloads, " or "))
	cmd.Flags().BoolVar(&burnin, "burnin", false, "add a 10-second burn-in (compute rate, all-reduces, stress; one GPU 20% slower, one all-reduce sags)")
	// For the fleet benchmark: the nodes in this process, the window in another.
	cmd.Flags().StringVar(&serve, "serve", "", "write an inventory of the simulated nodes to FILE and serve them until interrupted")
	cmd.Flags().MarkHidden("serve")
	return cmd
}

// demoInventory is the embedded demo inventory, its quote replaced by
// quoteFile's when one is given, and the simulated hardware: the embedded
// quote, whose GPUs and link rates the demo's nodes have whatever another
// quote promises.
func demoInventory(quoteFile string) (*inventory.Inventory, inventory.Quote, error) {
	return demoInventoryOf(inventories.Demo, quoteFile)
}

// demoInventoryOf is demoInventory of the demo inventory demo.
func demoInventoryOf(demo []byte, quoteFile string) (*inventory.Inventory, inventory.Quote, error) {
	inv, err := inventory.Parse(demoEmbedded, demo)
	if err != nil {
		return nil, inventory.Quote{}, err
	}
	hw := inv.Quote
	if quoteFile == "" {
		return inv, hw, nil
	}
	merged, err := demoWithQuote(quoteFile, demo)
	if err != nil {
		return nil, hw, err
	}
	// Named after the quote file, whose lines come first and unchanged:
	// a problem with the quote is reported at its line and key there.
	inv, err = inventory.Parse(quoteFile, merged)
	if err != nil {
		return nil, hw, err
	}
	inv.Path = demoEmbedded + " with the quote of " + quoteFile
	return inv, hw, nil
}

// demoWithQuote reads quoteFile, which must hold one mapping, quote:, and
// no other key, and returns it followed by the demo inventory without its
// own quote: one inventory in which the quote's lines are the file's.
func demoWithQuote(quoteFile string, demo []byte) ([]byte, error) {
	bad := func(line int, key, format string, args ...any) error {
		return &inventory.Error{File: quoteFile, Problems: []inventory.Problem{{Line: line, Key: key, Message: fmt.Sprintf(format, args...)}}}
	}
	data, err := os.ReadFile(quoteFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, bad(0, "", "cannot read: %v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, bad(0, "", "not YAML: %v", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, bad(more.Line, "", "one YAML document only: a quote: mapping")
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	if root == nil || root.Kind != yaml.MappingNode {
		line := 0
		if root != nil {
			line = root.Line
		}
		return nil, bad(line, "", "expected a mapping with one key, quote: (as in an inventory)")
	}
	var problems []inventory.Problem
	found := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Value != "quote":
			problems = append(problems, inventory.Problem{Line: k.Line, Key: k.Value,
				Message: "not read: a --quote file holds only quote: (the demo's nodes, phases and the rest are its own)"})
		case v.Kind != yaml.MappingNode:
			found = true
			problems = append(problems, inventory.Problem{Line: v.Line, Key: "quote",
				Message: "expected a mapping (gpu_model, gpus_per_node, price_per_gpu_hour, ...: see inventories/README.md)"})
		default:
			found = true
		}
	}
	if !found {
		problems = append(problems, inventory.Problem{Line: root.Line, Key: "quote", Message: "missing: a --quote file is a quote: mapping"})
	}
	if len(problems) > 0 {
		return nil, &inventory.Error{File: quoteFile, Problems: problems}
	}
	if root.Style&yaml.FlowStyle != 0 {
		// {quote: {...}}: written again as a block, which the demo's own
		// keys can follow.
		root.Style = 0
		if data, err = yaml.Marshal(root); err != nil {
			return nil, bad(0, "", "%v", err)
		}
	}
	// A document end marker would end the inventory with the quote.
	body := bytes.TrimRight(data, " \t\r\n")
	if end := []byte("\n..."); bytes.HasSuffix(body, end) {
		body = body[:len(body)-len(end)]
	}
	rest, err := demoWithoutQuote(demo)
	if err != nil {
		return nil, err
	}
	return append(append(body, '\n'), rest...), nil
}

// demoWithoutQuote is the demo inventory's text without its quote: block.
func demoWithoutQuote(demo []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(demo, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a mapping: %v", demoEmbedded, err)
	}
	lines := bytes.SplitAfter(demo, []byte("\n"))
	keys := doc.Content[0].Content
	for i := 0; i+1 < len(keys); i += 2 {
		if keys[i].Value != "quote" {
			continue
		}
		from, to := keys[i].Line-1, len(lines)
		if i+2 < len(keys) {
			to = keys[i+2].Line - 1
		}
		return bytes.Join(append(lines[:from:from], lines[to:]...), nil), nil
	}
	return nil, fmt.Errorf("%s: no quote", demoEmbedded)
}

// demoNodes starts one SSH server per node of the demo inventory, each
// with its own home and its own stand-in GPU tools on PATH (wrappers that
// run exe's hidden `standin` command): nvidia-smi, dcgmi and ibstat of the
// node's profile, and the fabric model's mpirun and nccl-tests binaries (a
// simulation of fabric: standins.FabricMain). It points inv at them.
func demoNodes(work, exe string, inv *inventory.Inventory, hosts []standins.FabricHost, xidOn string) ([]*sshtest.Server, error) {
	authorized, keyFile, err := demoKey(work)
	if err != nil {
		return nil, err
	}
	fabric := standins.FormatFabric(hosts)
	if err := demoImage(work, inv); err != nil {
		return nil, err
	}
	var servers []*sshtest.Server
	for i := range inv.Nodes {
		n := &inv.Nodes[i]
		home := filepath.Join(work, n.Name)
		bin := filepath.Join(home, "bin")
		argv0 := []string{exe, "standin"}
		if err := standins.Install(bin, demoProfile(i, len(inv.Nodes)), argv0); err != nil {
			return servers, err
		}
		// Telemetry: the node's stand-in state (a workload's busy marker
		// makes its GPUs read loaded) and, on the slow node, an Xid in its
		// kernel log a few seconds into the sampler, as a genuine one reads.
		state := filepath.Join(home, "standin-state")
		tel := standins.Telemetry{State: state}
		if n.Name == xidOn {
			tel.Plant = demoXid
		}
		if err := standins.InstallTelemetry(bin, demoProfile(i, len(inv.Nodes)), argv0, tel); err != nil {
			return servers, err
		}
		if err := standins.InstallFabric(bin, argv0); err != nil {
			return servers, err
		}
		if err := standins.InstallPodman(bin, argv0); err != nil {
			return servers, err
		}
		// The simulated image's own program (the lab's image carries it
		// too): what a workload's container runs, a model server say.
		if err := standins.InstallStandin(bin, argv0); err != nil {
			return servers, err
		}
		if demoInference(inv) {
			if err := demoServerOverrides(home, i); err != nil {
				return servers, err
			}
		}
		env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home,
			standins.FabricEnv + "=" + fabric,
			standins.FabricNodeEnv + "=" + n.Name,
			standins.FabricRunsEnv + "=" + filepath.Join(home, "fabric-runs"),
			standins.PodmanStoreEnv + "=" + demoStore(work, n.Name),
			standins.LoopbackEnv + "=" + demoLoopback(i),
			standins.StateEnv + "=" + state}
		if inv.Phases.Burnin.Enabled {
			if err := demoGemmScript(bin, i, inv.Quote.GPUModel); err != nil {
				return servers, err
			}
			if i == demoSagNode {
				if err := demoSagScript(bin, argv0, hosts, n.Name); err != nil {
					return servers, err
				}
			}
		}
		if demoTraining(inv) && i == demoSlow {
			env = append(env, standins.SimSlowEnv+"="+demoSlowCompute)
		}
		s, err := sshtest.Start(sshtest.Options{
			AuthorizedKeyLines: []string{authorized},
			Dir:                home,
			Env:                env,
			Name:               n.Name,
		})
		if err != nil {
			return servers, err
		}
		servers = append(servers, s)
		n.Address, n.Port = s.Host(), s.Port()
	}
	knownHosts := filepath.Join(work, "known_hosts")
	if err := sshtest.WriteKnownHosts(knownHosts, servers...); err != nil {
		return servers, err
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
		return servers, err
	}
	return servers, nil
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

// demoResize makes the demo's nodes n: gpu-01 … (zero-padded to the width
// of n), each at the loopback address the demo's servers will get, the
// demo.yaml settings kept; past 4 nodes, up to 64 at a time.
func demoResize(inv *inventory.Inventory, n int) {
	width := max(2, len(strconv.Itoa(n)))
	tmpl := inv.Nodes[0]
	inv.Nodes = make([]inventory.Node, n)
	for i := range inv.Nodes {
		name := fmt.Sprintf("gpu-%0*d", width, i+1)
		inv.Nodes[i] = inventory.Node{Name: name, Address: tmpl.Address, User: tmpl.User, FabricAddress: name}
	}
	if n > 4 {
		inv.SSH.Concurrency = min(n, 64)
	}
}

// demoFabric is the demo's fabric model: every node at the simulated
// hardware's inter- and intra-node bus bandwidth and GPU count (hw, the
// embedded quote), scaled by demoScales for seed.
func demoFabric(nodes []inventory.Node, hw inventory.Quote, seed int64) []standins.FabricHost {
	inter, intra := demoScales(seed, len(nodes))
	var hosts []standins.FabricHost
	for i, n := range nodes {
		hosts = append(hosts, standins.FabricHost{
			Name: n.Name, InterGBs: tenth(hw.InterBusBWGBs * inter[i]), IntraGBs: tenth(hw.IntraBusBWGBs * intra[i]), GPUs: hw.GPUsPerNode,
		})
	}
	return hosts
}

func tenth(x float64) float64 { return math.Round(x*10) / 10 }

// demoScales are the nodes' inter- and intra-node link rates as fractions
// of the hardware's. Seed 0 is demoInterScale. Any other seed draws, from
// a splitmix64 sequence seeded with it (a fixed algorithm: a seed means the
// same fabric in every build), the degraded node (any of them: the one
// whose diagnostic fails is quarantined, and its links then do not show),
// its fraction (demoDegradations), and the other rates within ±3%.
func demoScales(seed int64, nodes int) (inter, intra []float64) {
	inter, intra = make([]float64, nodes), make([]float64, nodes)
	if seed == 0 {
		for i := range nodes {
			inter[i], intra[i] = 1, 1
			if i == demoSlow {
				inter[i] = 0.5
			}
		}
		return inter, intra
	}
	r := splitmix(seed)
	slow := r.intn(nodes)
	frac := demoDegradations[r.intn(len(demoDegradations))]
	for i := range nodes {
		inter[i], intra[i] = 0.97+0.06*r.unit(), 0.97+0.06*r.unit()
		if i == slow && frac < 1 {
			inter[i] = frac
		}
	}
	return inter, intra
}

// demoFabricText says what the seed made of the fabric, for the progress.
func demoFabricText(hosts []standins.FabricHost, hw inventory.Quote) string {
	var slow []string
	for _, h := range hosts {
		if h.InterGBs < 0.96*hw.InterBusBWGBs {
			slow = append(slow, fmt.Sprintf("%s's inter-node links at %.0f%% (%g GB/s)", h.Name, 100*h.InterGBs/hw.InterBusBWGBs, h.InterGBs))
		}
	}
	if len(slow) == 0 {
		return "no node's links degraded"
	}
	return strings.Join(slow, ", ")
}

// splitmix is splitmix64: small, and fully specified.
type splitmix uint64

func (s *splitmix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *splitmix) intn(n int) int { return int(s.next() % uint64(n)) }

// unit is uniform in [0, 1).
func (s *splitmix) unit() float64 { return float64(s.next()>>11) / (1 << 53) }

// demoKey makes the coordinator's login key for the demo's nodes (the
// private half in work, 0600) and returns its authorized_keys line.
func demoKey(work string) (string, string, error) {
	key, err := remote.NewWindowKey("gpuaccept-demo")
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(work, "id_ed25519")
	if err := os.WriteFile(path, key.PrivatePEM, 0o600); err != nil {
		return "", "", err
	}
	return key.AuthorizedKey, path, nil
}
