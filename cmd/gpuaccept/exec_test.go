package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
)

func TestExecGroupsIdenticalOutputs(t *testing.T) {
	inv, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	servers, err := demoNodes(t.TempDir(), binary, inv, demoFabric(inv.Nodes, hw, 0), "")
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// Every node prints its stand-in profile; gpu-04's differs, and it
	// fails.
	err = execAll(t.Context(), &out, inv, `cat "$HOME/bin/PROFILE"; grep -q fail "$HOME/bin/PROFILE" && exit 4; true`, execOptions{output: "text"})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNotAccepted {
		t.Fatalf("want exit 1, got %v", err)
	}
	got := out.String()
	for _, want := range []string{
		"gpu-[01-03]\n----------------\nh100\n",
		"gpu-04\n----------------\nh100-diag-fail\n",
		"gpu-[01-03]: exit 0\n",
		"gpu-04: exit 4\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// execDemo brings up the demo's nodes (in-process SSH servers running
// real commands) for an exec test, and selects those nodes names as
// --nodes does.
func execDemo(t *testing.T, nodes string) *inventory.Inventory {
	t.Helper()
	inv, hw, err := demoInventory("")
	if err != nil {
		t.Fatal(err)
	}
	servers, err := demoNodes(t.TempDir(), binary, inv, demoFabric(inv.Nodes, hw, 0), "")
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if inv, err = orchestrator.SelectNodes(inv, nodes); err != nil {
		t.Fatal(err)
	}
	return inv
}

// A node that prints without end costs the head and the tail of what it
// printed, and its command ends at --timeout, named as timed out (exec
// held everything: 3 GB in 10 s, and had no timeout).
func TestExecBoundsANodeThatPrintsWithoutEnd(t *testing.T) {
	inv := execDemo(t, "gpu-[01-02]")
	var out bytes.Buffer
	start := time.Now()
	err := execAll(t.Context(), &out, inv, `yes "$(printf 'line\033[2J')"`, execOptions{output: "text", timeout: 3 * time.Second})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNotAccepted {
		t.Fatalf("want exit 1, got %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("exec took %s with --timeout 3s", d)
	}
	got := out.String()
	// Each node's output is its own (cut at another place), shown escaped.
	if n := len(strings.ReplaceAll(got, `\x1b`, "\x1b")); n > 2*(2*execKeep+200)+200 {
		t.Errorf("%d bytes of output kept for 2 nodes", n)
	}
	for _, want := range []string{"gpu-[01-02]: timed out after 3s\n", " bytes of output cut here]\n", `line\x1b[2J`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%.400s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "gpu-03") {
		t.Errorf("a raw escape, or a node --nodes left out:\n%.400s", got)
	}
}

// -o json: per node its exit code, status, each stream bounded with its
// byte count and whether it was cut, and how long it took.
func TestExecJSON(t *testing.T) {
	// gpu-04's stand-in profile is the failing one (TestExecGroupsIdenticalOutputs).
	inv := execDemo(t, "gpu-[03-04]")
	var out bytes.Buffer
	err := execAll(t.Context(), &out, inv, `if grep -q fail "$HOME/bin/PROFILE"; then echo out; echo err >&2; exit 3; fi; head -c 200000 /dev/zero | tr '\0' x`,
		execOptions{output: "json", timeout: 30 * time.Second})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNotAccepted {
		t.Fatalf("want exit 1, got %v\n%s", err, out.String())
	}
	var doc struct {
		Nodes []execJSON `json:"nodes"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Nodes) != 2 {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var failed, big *execJSON
	for i := range doc.Nodes {
		if n := &doc.Nodes[i]; n.Stdout == "out\n" {
			failed = n
		} else {
			big = n
		}
	}
	if failed == nil || failed.ExitCode == nil || *failed.ExitCode != 3 || failed.Status != "exit 3" || failed.Stderr != "err\n" ||
		failed.StdoutTruncated || failed.StdoutBytes != 4 || failed.TimedOut || failed.Duration <= 0 {
		t.Errorf("the failing node: %+v\n%.600s", failed, out.String())
	}
	if big == nil || big.ExitCode == nil || *big.ExitCode != 0 || !big.StdoutTruncated || big.StdoutBytes != 200000 ||
		len(big.Stdout) > 2*execKeep+100 || !strings.Contains(big.Stdout, "bytes of output cut here") {
		t.Errorf("the node that printed 200,000 bytes: exit %v truncated %v bytes %d kept %d", big.ExitCode, big.StdoutTruncated, big.StdoutBytes, len(big.Stdout))
	}
}

// --nodes takes run's syntax and gives run's errors; a bad --timeout or
// --output is an error too, before any node is reached.
func TestExecFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "gpu-[03-09]"}, `--nodes "gpu-[03-09]": gpu-[05-09] not in`},
		{[]string{"--nodes", "gpu-[1-"}, `--nodes "gpu-[1-": `},
		{[]string{"--timeout", "0s"}, "--timeout 0s: must be above 0"},
		{[]string{"-o", "yaml"}, `--output: "yaml" is not text or json`},
	} {
		args := append(append([]string{"exec", cleanOffer}, c.args...), "--", "true")
		res := gpuaccept(t, "../..", args...)
		if res.code != exitBadInput || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s", c.args, res.code, c.want, res.stderr)
		}
	}
}
