package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"gpuaccept/inventories"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/scripts/standins"
)

// demoWorkloads are the values of demo --workload: the load test on the
// simulated nodes, of either kind, or none (the demo as it always was).
var demoWorkloads = []string{"none", "inference", "training"}

// demoSlowCompute is the training straggler's factor on its compute
// (standins.SimSlowEnv): 1.5 times the others', clear of the default
// straggler_ratio of 1.1 however loaded the machine.
const demoSlowCompute = "1.5"

// The demo's inference load test: every node serves a simulated model
// (`standin openai-server` in the demo's image, run by the simulated
// podman) and the load generator drives it over the node's own loopback
// address. gpu-03's server is slow (demoSlowServer), so its p95 time to
// first token misses the target and the window names it.
const (
	demoModel = "demo-model"
	// demoOverridesFile is relative: the simulated container's working
	// directory is its node's home, where demoNodes writes it.
	demoOverridesFile = "inference-overrides.json"
	// demoTTFT is the p95 TTFT target: a healthy server's prefill of 128
	// tokens takes 6.4 ms, the slow one's 320 ms; the margin on both sides
	// absorbs a loaded machine's scheduling.
	demoTTFT = "100ms"
)

// demoSlowServer is the slow node's --overrides: a prefill 50 times
// slower than the healthy servers' 20,000 tokens/s and a token every
// 20 ms instead of 10.
const demoSlowServer = `{"prefill_tokens_per_s": 400, "token_delay": "20ms"}`

// demoWorkloadBlocks are the inventory keys --workload inference sets:
// phases.workload and acceptance.workload. No phases.workload.image: the
// servers run in the window's image, the demo's, which the image phase
// loaded (a workload image of its own would be pulled, and the demo's
// nodes have no registry).
func demoWorkloadBlocks(kind string) map[string]any {
	if kind == "training" {
		// The demo's stand-in launcher (the failure test's) runs the
		// job: ddp_train.py's log contract, a step every 500 ms.
		return map[string]any{
			"phases.workload": map[string]any{
				"enabled": true,
				"kind":    "training",
				"training": map[string]any{"python": "gpuaccept-sim-python", "in_image": false,
					"procs_per_node": 2, "steps": 12, "warmup": 3},
			},
			"acceptance.workload": map[string]any{"ready_within": "30s"},
		}
	}
	return map[string]any{
		"phases.workload": map[string]any{
			"enabled": true,
			"kind":    "inference",
			"inference": map[string]any{
				"command": []string{"standin", "openai-server", "--port", "{port}", "--model", demoModel,
					"--ready-after", "1s", "--overrides", demoOverridesFile},
				"model":           demoModel,
				"levels":          []string{"concurrency:1", "concurrency:8"},
				"duration":        "2s",
				"warmup":          "500ms",
				"input_tokens":    map[string]any{"mean": 128},
				"output_tokens":   map[string]any{"mean": 32},
				"request_timeout": "10s",
				"ready_timeout":   "1m",
			},
		},
		"acceptance.workload": map[string]any{
			"ready_within": "30s",
			"at":           "concurrency:8",
			"percentile":   95,
			"ttft":         demoTTFT,
			"error_rate":   0.01,
		},
	}
}

// checkDemoWorkload is --workload's check: a bad value is bad input.
func checkDemoWorkload(kind string) error {
	if !slices.Contains(demoWorkloads, kind) {
		return exitWith(exitBadInput, fmt.Errorf("--workload %q: one of %s", kind, strings.Join(demoWorkloads, ", ")))
	}
	return nil
}

// demoYAML is the embedded demo inventory with the workload of kind
// added, as the keys an inventory would carry: it is read and checked as
// any inventory is.
func demoYAML(kind string) ([]byte, error) {
	if kind == "" || kind == "none" {
		return inventories.Demo, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(inventories.Demo, &doc); err != nil || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s: not YAML: %v", demoEmbedded, err)
	}
	blocks := demoWorkloadBlocks(kind)
	for _, key := range []string{"phases.workload", "acceptance.workload"} {
		var v yaml.Node
		if err := v.Encode(blocks[key]); err != nil {
			return nil, err
		}
		if err := setYAML(doc.Content[0], strings.Split(key, "."), &v); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// demoInventoryFor is demoInventory with the load test of kind.
func demoInventoryFor(quoteFile, kind string) (*inventory.Inventory, inventory.Quote, error) {
	base, err := demoYAML(kind)
	if err != nil {
		return nil, inventory.Quote{}, err
	}
	return demoInventoryOf(base, quoteFile)
}

// demoTraining says whether the window runs the training load test.
func demoTraining(inv *inventory.Inventory) bool {
	w := inv.Phases.Workload
	return w.Enabled && w.Kind == "training"
}

// demoInference says whether the window runs the inference load test.
func demoInference(inv *inventory.Inventory) bool {
	w := inv.Phases.Workload
	return w.Enabled && w.Kind == "inference"
}

// demoLoopback is node i's own loopback address (standins.LoopbackEnv):
// 127.0.1.1 for the first, and on through 127/8 for a fleet.
func demoLoopback(i int) string {
	return fmt.Sprintf("127.0.%d.%d", 1+i/254, 1+i%254)
}

// demoServerOverrides writes each node's server overrides into its home:
// the slow node's slower prefill and decode, nothing for the others.
func demoServerOverrides(home string, i int) error {
	body := "{}\n"
	if i == demoSlow {
		body = demoSlowServer + "\n"
	}
	return os.WriteFile(filepath.Join(home, demoOverridesFile), []byte(body), 0o644)
}

// demoStore is a demo node's podman store (standins.PodmanStoreEnv).
func demoStore(work, node string) string {
	return filepath.Join(work, node, "containers")
}

// demoWorkloadText says what the load test will show, for the progress.
func demoWorkloadText(inv *inventory.Inventory) string {
	if demoTraining(inv) {
		slow := "no node is slowed"
		if demoSlow < len(inv.Nodes) {
			slow = inv.Nodes[demoSlow].Name + " computes " + demoSlowCompute + " times slower"
		}
		return fmt.Sprintf("training load test (%d steps on every node): %s, the straggler ratio %g",
			inv.Phases.Workload.Training.Steps, slow, inv.Phases.Workload.Training.StragglerRatio)
	}
	in := inv.Phases.Workload.Inference
	slow := "no node's server is slowed"
	if demoSlow < len(inv.Nodes) {
		slow = inv.Nodes[demoSlow].Name + "'s server prefills 50 times slower and decodes at half speed"
	}
	return fmt.Sprintf("inference load test (%s, %s each): %s, p95 TTFT target %s", strings.Join(in.Levels, ", "),
		in.Duration, slow, demoTTFT)
}

// demoKillContainers ends whatever the window's teardown left running in
// the demo's nodes' container stores: the simulated containers are this
// machine's processes, and must not outlive the demo.
func demoKillContainers(work string, nodes []inventory.Node) {
	for _, n := range nodes {
		standins.PodmanKillAll(demoStore(work, n.Name))
	}
}
