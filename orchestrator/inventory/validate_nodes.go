package inventory

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gpuaccept/hostlist"
)

// A fleet is written down in host ranges, the syntax pdsh, ClusterShell
// and Slurm share: an entry whose name is a range ("gpu-[001-128]") is one
// node per name, paired in order with its address range
// ("10.40.1.[11-138]", "10.40.[1-4].[11-42]") and its fabric address
// range, each with the entry's labels. nodes_from adds a node per host of
// a file of host names (one per line, # comments) or of a Slurm nodelist.

// nodeOrigin is where an expanded node was written: its entry's key and,
// for a node of a range or of nodes_from, its own name (errors say both).
type nodeOrigin struct {
	key    string
	member string
}

// keyOf is the inventory key of node i's entry.
func (v *validator) keyOf(i int) string {
	if i < len(v.origins) {
		return v.origins[i].key
	}
	return fmt.Sprintf("nodes[%d]", i)
}

// who prefixes a message about node i with its name when its entry names
// more than one node.
func (v *validator) who(i int) string {
	if i < len(v.origins) && v.origins[i].member != "" {
		return v.origins[i].member + ": "
	}
	return ""
}

// expandNodes replaces the written entries by the nodes they name.
func (v *validator) expandNodes() {
	var nodes []Node
	var origins []nodeOrigin
	for i, n := range v.inv.Nodes {
		key := fmt.Sprintf("nodes[%d]", i)
		if !ranged(n.Name) && !ranged(n.Address) && !ranged(n.FabricAddress) {
			nodes, origins = append(nodes, n), append(origins, nodeOrigin{key: key})
			continue
		}
		names, err := hostlist.Expand(n.Name)
		if err != nil {
			v.rangeProblem(key+".name", n.Name, err)
			continue
		}
		pair := func(field, value string) []string {
			if value == "" {
				return nil
			}
			if !ranged(value) {
				if len(names) > 1 {
					v.problem(key+"."+field, "%q is one host for the %d names of %s: give a range of %d (e.g. 10.0.0.[1-%d])",
						short(value), len(names), short(n.Name), len(names), len(names))
					return nil
				}
				return []string{value}
			}
			hosts, err := hostlist.Expand(value)
			if err != nil {
				v.rangeProblem(key+"."+field, value, err)
				return nil
			}
			if len(hosts) != len(names) {
				v.problem(key+"."+field, "%q names %d hosts, and %s names %d nodes: one each", short(value), len(hosts), short(n.Name), len(names))
				return nil
			}
			return hosts
		}
		addrs, fabric := pair("address", n.Address), pair("fabric_address", n.FabricAddress)
		if v.c.blocked(key+".address") || v.c.blocked(key+".fabric_address") {
			continue
		}
		for j, name := range names {
			m := n
			m.Name = name
			m.Labels = maps.Clone(n.Labels)
			if addrs != nil {
				m.Address = addrs[j]
			}
			if fabric != nil {
				m.FabricAddress = fabric[j]
			}
			nodes, origins = append(nodes, m), append(origins, nodeOrigin{key: key, member: name})
		}
	}
	if v.inv.NodesFrom != "" {
		hosts := v.nodesFrom(v.inv.NodesFrom)
		for _, h := range hosts {
			// A host's first label names it; an IP address is named
			// whole (10.0.0.5: 10-0-0-5), or every node would be "10".
			name, _, _ := strings.Cut(strings.ToLower(h), ".")
			if net.ParseIP(h) != nil {
				name = strings.NewReplacer(".", "-", ":", "-").Replace(strings.ToLower(h))
			}
			nodes, origins = append(nodes, Node{Name: name, Address: h}), append(origins, nodeOrigin{key: "nodes_from", member: h})
		}
	}
	if len(nodes) > hostlist.MaxHosts {
		v.problem("nodes", "%d nodes: more than the %d one window takes", len(nodes), hostlist.MaxHosts)
		nodes, origins = nodes[:hostlist.MaxHosts], origins[:hostlist.MaxHosts]
	}
	v.inv.Nodes, v.origins = nodes, origins
}

// rangeProblem reports a range that does not expand: hostlist's error
// quotes the pattern it stopped at, which is the whole value unless the
// value is a list ("gpu-[1-" said "\"gpu-[1-\": \"gpu-[1-\": a [ without
// its ]").
func (v *validator) rangeProblem(key, value string, err error) {
	if strings.HasPrefix(err.Error(), strconv.Quote(value)+":") {
		v.problem(key, "%v", err)
		return
	}
	v.problem(key, "%q: %v", short(value), err)
}

// ranged says whether s holds a host range or list.
func ranged(s string) bool { return strings.ContainsAny(s, "[,") }

// maxNodesFile bounds a nodes_from file.
const maxNodesFile = 4 << 20

// nodesFrom reads nodes_from: a file (relative to the inventory) of host
// names or host ranges, one per line, # comments; else a nodelist.
func (v *validator) nodesFrom(spec string) []string {
	path := spec
	if !filepath.IsAbs(path) {
		path = filepath.Join(v.dir, path)
	}
	var lines []string
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		if st.Size() > maxNodesFile {
			v.problem("nodes_from", "%s is %d bytes: more than a list of hosts (%d)", path, st.Size(), maxNodesFile)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			v.problem("nodes_from", "%s: %v", path, err)
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), maxNodesFile)
		n := 0
		for sc.Scan() {
			n++
			line, _, _ := strings.Cut(sc.Text(), "#")
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			hosts, err := hostlist.Expand(line)
			if err != nil {
				v.problem("nodes_from", "%s line %d: %q: %v", path, n, short(line), err)
				return nil
			}
			lines = append(lines, hosts...)
		}
		if err := sc.Err(); err != nil {
			v.problem("nodes_from", "%s line %d: %v", path, n+1, err)
			return nil
		}
		if len(lines) == 0 {
			v.problem("nodes_from", "%s names no host", path)
		}
		return lines
	}
	// A nodelist has a range or a list; a bare word is a file's name,
	// and a missing file is said as such (not read as one node).
	if strings.ContainsAny(spec, "/") || !strings.ContainsAny(spec, "[,") {
		v.problem("nodes_from", "%s: no such file (nodes_from is a file of host names or a nodelist such as gpu-[001-128])", path)
		return nil
	}
	hosts, err := hostlist.Expand(spec)
	if err != nil {
		v.problem("nodes_from", "%q is neither a file nor a nodelist: %v", short(spec), err)
		return nil
	}
	return hosts
}
