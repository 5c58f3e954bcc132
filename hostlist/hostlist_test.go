package hostlist

import (
	"slices"
	"strings"
	"testing"
)

// The cases are the documented examples of Slurm (scontrol show
// hostnames, slurm_hostlist_create(3)), ClusterShell (nodeset) and pdsh.
func TestExpand(t *testing.T) {
	for in, want := range map[string]string{
		"linux[1-3,6]":        "linux1 linux2 linux3 linux6",
		"tux[0-5,12,20-25]":   "tux0 tux1 tux2 tux3 tux4 tux5 tux12 tux20 tux21 tux22 tux23 tux24 tux25",
		"node1,node[2-5,12]":  "node1 node2 node3 node4 node5 node12",
		"gpu-[08-11]":         "gpu-08 gpu-09 gpu-10 gpu-11",
		"gpu-[001-003]":       "gpu-001 gpu-002 gpu-003",
		"da[2-3]c[1-2]":       "da2c1 da2c2 da3c1 da3c2",
		"10.40.[1-2].[11-12]": "10.40.1.11 10.40.1.12 10.40.2.11 10.40.2.12",
		"node[1-10/3]":        "node1 node4 node7 node10",
		"rack[1-2]-gpu":       "rack1-gpu rack2-gpu",
		"plain":               "plain",
		"a[1],b[2-3], c":      "a1 b2 b3 c",
		"n[98-101]":           "n98 n99 n100 n101",
	} {
		got, err := Expand(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("Expand(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"gpu-[1-":          "without its ]",
		"gpu-1]":           "without its [",
		"gpu-[a-b]":        "not a number or a range",
		"gpu-[5-1]":        "runs backwards",
		"gpu-[1-3/0]":      "step must be at least 1",
		"gpu-[1-[2]]":      "do not nest",
		"gpu-[1-1000000]":  "more than 100000",
		"x[1-400]y[1-400]": "more than 100000",
	} {
		if _, err := Expand(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Expand(%q): %v, want an error saying %q", in, err, why)
		}
	}
}

func TestCompressIsExpandsInverse(t *testing.T) {
	for names, want := range map[string]string{
		"gpu-03 gpu-17 gpu-18 gpu-19": "gpu-[03,17-19]",
		"gpu-01":                      "gpu-01",
		"h1 h2 h3 h10":                "h[1-3,10]",
		"gpu-09 gpu-10":               "gpu-[09-10]",
		"node9 node10":                "node[9-10]",
		"login gpu-2 gpu-1":           "login,gpu-[1-2]",
		"rack1-gpu rack2-gpu":         "rack[1-2]-gpu",
		"10.40.1.11 10.40.1.12":       "10.40.1.[11-12]",
		"gpu-01 gpu-01 gpu-02":        "gpu-[01-02]",
		"a1 b1 a2":                    "a[1-2],b1",
	} {
		in := strings.Fields(names)
		got := Compress(in)
		if got != want {
			t.Errorf("Compress(%q) = %q, want %q", names, got, want)
		}
		back, err := Expand(got)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(back)
		uniq := slices.Compact(slices.Sorted(slices.Values(in)))
		if !slices.Equal(back, uniq) {
			t.Errorf("Expand(Compress(%q)) = %q", names, back)
		}
	}
}
