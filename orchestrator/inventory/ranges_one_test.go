package inventory

import (
	"errors"
	"testing"
)

// One mistake in a node range is one error, at its line and key: a count
// mismatch also said "at least one node is required" and "the failure
// test needs at least 2 nodes, got 0" of the nodes it could not name.
func TestARangeMistakeIsOneError(t *testing.T) {
	failure := "phases:\n  checkpoint: {dir: /shared/ckpt}\n  failure: {enabled: true, victim: gpu-04}\n"
	for _, c := range []struct{ nodes, key, want string }{
		{`[{name: "gpu-[01-04]", address: "10.0.0.[1-3]"}]`, "nodes[0].address",
			`"10.0.0.[1-3]" names 3 hosts, and gpu-[01-04] names 4 nodes: one each`},
		{`[{name: "gpu-[01-04]", address: 10.0.0.1}]`, "nodes[0].address",
			`"10.0.0.1" is one host for the 4 names of gpu-[01-04]: give a range of 4 (e.g. 10.0.0.[1-4])`},
		{`[{name: "gpu-[1-", address: 10.0.0.1}]`, "nodes[0].name", `"gpu-[1-": a [ without its ]`},
	} {
		_, err := parseText(t, rangesHead+"nodes: "+c.nodes+"\n"+failure)
		var ie *Error
		if !errors.As(err, &ie) {
			t.Fatalf("%s: %v", c.nodes, err)
		}
		if len(ie.Problems) != 1 {
			t.Errorf("%s: %d errors for one mistake:\n%v", c.nodes, len(ie.Problems), err)
			continue
		}
		p := ie.Problems[0]
		if p.Key != c.key || p.Line != 3 || p.Message != c.want {
			t.Errorf("%s: line %d key %s: %s; want line 3, %s: %s", c.nodes, p.Line, p.Key, p.Message, c.key, c.want)
		}
	}
}
