package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	yaml "go.yaml.in/yaml/v3"
)

// Load reads and checks the inventory at path. Any problem, including a
// file that cannot be read, is an *Error listing every problem found.
// Environment variables GPUACCEPT_<SECTION>_<KEY> override scalar keys.
// It gives up after maxParse (LoadContext also when its context ends).
func Load(path string) (*Inventory, error) {
	return LoadContext(context.Background(), path)
}

// Parse checks an inventory held in memory (the demo embeds one); name
// stands for its file in errors, and relative paths in it are resolved
// against name's directory.
func Parse(name string, data []byte) (*Inventory, error) {
	return parse(name, data, os.LookupEnv)
}

func load(path string, env lookupEnv) (*Inventory, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, readError(path, err)
	}
	return parse(path, data, env)
}

// readLimited reads at most one byte more than an inventory may hold, so
// that a wrong path (a device, a huge log) fails fast.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSize+1))
}

// readError is an *Error too, so the CLI has one rule for bad input (exit
// 2); errors.Is(err, fs.ErrNotExist) still works through Unwrap.
func readError(path string, err error) error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: path, Problems: []Problem{{Message: "cannot read: " + msg}}, cause: err}
}

func parse(name string, data []byte, env lookupEnv) (*Inventory, error) {
	c := newCollector(name)
	root := readTree(data, c)
	if root == nil {
		return nil, c.err()
	}
	if !indexTree(root, c) {
		return nil, c.err()
	}
	inv := decode(data, c, env)
	if inv != nil {
		restoreMaps(inv, c.idx)
		validate(inv, c, filepath.Dir(name))
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	inv.Path = name
	sum := sha256.Sum256(data)
	inv.Digest = hex.EncodeToString(sum[:])
	return inv, nil
}

// restoreMaps reads label keys and requirement IDs again from the tree, as
// written: viper lower-cases every key it reads.
func restoreMaps(inv *Inventory, idx *docIndex) {
	for i := range inv.Nodes {
		if m, ok := decodeMap[string](idx.values[fmt.Sprintf("nodes[%d].labels", i)]); ok {
			inv.Nodes[i].Labels = m
		}
	}
	if m, ok := decodeMap[float64](idx.values["acceptance.thresholds"]); ok {
		inv.Acceptance.Thresholds = m
	}
	if m, ok := decodeMap[float64](idx.values["acceptance.regression_by_id"]); ok {
		inv.Acceptance.RegressionByID = m
	}
}

// decodeMap decodes a mapping entry by entry (merges applied), skipping
// the entries that do not decode: those are reported already, and the
// rest must keep their case for validation to name them right.
func decodeMap[T any](n *yaml.Node) (map[string]T, bool) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, false
	}
	var raw map[string]yaml.Node
	if err := guard(func() error { return n.Decode(&raw) }); err != nil {
		return nil, false
	}
	m := make(map[string]T, len(raw))
	for k, v := range raw {
		var val T
		if err := guard(func() error { return v.Decode(&val) }); err == nil {
			m[k] = val
		}
	}
	return m, true
}
