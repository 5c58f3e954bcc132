package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	yaml "go.yaml.in/yaml/v3"

	"gpuaccept/orchestrator/inventory"
)

// serveDemo keeps the demo's simulated nodes up, in this process, until
// ctx ends, with an inventory that reaches them written to path: a `run`
// of that inventory in another process is then the coordinator alone,
// whose CPU, memory and bundle the fleet benchmark measures apart from
// the nodes'. It prints "serving N nodes" on out once they answer.
func serveDemo(ctx context.Context, out io.Writer, inv *inventory.Inventory, path string) error {
	data, err := demoServedInventory(inv)
	if err != nil {
		return err
	}
	// The inventory names files relative to itself: the demo's key,
	// known_hosts and image archive are absolute paths in its work dir.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	if _, err := inventory.Load(path); err != nil {
		return fmt.Errorf("the served inventory %s does not load: %w", path, err)
	}
	fmt.Fprintf(out, "serving %d nodes; inventory %s\n", len(inv.Nodes), path)
	<-ctx.Done()
	return nil
}

// demoServedInventory is demo.yaml with the nodes, key, known_hosts,
// image and checkpoint directory demoNodes set: the same window as the
// demo's, read from a file.
func demoServedInventory(inv *inventory.Inventory) ([]byte, error) {
	kind := "none"
	if inv.Phases.Workload.Enabled {
		kind = inv.Phases.Workload.Kind
	}
	demo, err := demoYAML(kind)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(demo, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	type node struct {
		Name          string `yaml:"name"`
		Address       string `yaml:"address"`
		Port          int    `yaml:"port"`
		FabricAddress string `yaml:"fabric_address"`
	}
	var nodes []node
	for _, n := range inv.Nodes {
		nodes = append(nodes, node{n.Name, n.Address, n.Port, n.FabricAddress})
	}
	im := inv.Image
	sets := []struct {
		path  []string
		value any
	}{
		{[]string{"nodes"}, nodes},
		{[]string{"ssh", "identity_files"}, inv.SSH.IdentityFiles},
		{[]string{"ssh", "known_hosts"}, inv.SSH.KnownHosts},
		{[]string{"ssh", "concurrency"}, inv.SSH.Concurrency},
		{[]string{"image"}, map[string]any{"reference": im.Reference, "runtime": im.Runtime, "mode": im.Mode,
			"archive": im.Archive, "dir": im.Dir, "relay": im.Relay, "gpus": im.GPUs, "smoke": im.Smoke}},
		{[]string{"phases", "checkpoint", "dir"}, inv.Phases.Checkpoint.Dir},
	}
	for _, s := range sets {
		var v yaml.Node
		if err := v.Encode(s.value); err != nil {
			return nil, err
		}
		if err := setYAML(root, s.path, &v); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	b.WriteString("# Written by gpuaccept demo --serve: simulated nodes on loopback, up while it runs.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// setYAML sets the key path of mapping m to v, making the mappings on the
// way that are not there.
func setYAML(m *yaml.Node, path []string, v *yaml.Node) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("demo.yaml: %s is not a mapping", path[0])
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == path[0] {
			if len(path) == 1 {
				m.Content[i+1] = v
				return nil
			}
			return setYAML(m.Content[i+1], path[1:], v)
		}
	}
	k := &yaml.Node{Kind: yaml.ScalarNode, Value: path[0]}
	if len(path) == 1 {
		m.Content = append(m.Content, k, v)
		return nil
	}
	child := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, k, child)
	return setYAML(child, path[1:], v)
}
