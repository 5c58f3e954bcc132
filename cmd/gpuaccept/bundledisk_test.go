package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"gpuaccept/orchestrator/record"
)

// The window ended well but its reports cannot be written: the command
// fails (exit 3), and stderr says which nodes teardown cleaned and which
// it left, since no bundle will.
func TestABundleThatCannotBeWrittenSaysWhatTeardownLeft(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &record.Run{Schema: record.Schema, ID: "20261204T000000Z-x"}
	for i, n := range []string{"gpu-01", "gpu-02", "gpu-03", "gpu-04"} {
		rec.Nodes = append(rec.Nodes, record.Node{Index: i, Name: n})
		if n != "gpu-04" {
			rec.Phases = append(rec.Phases, record.PhaseResult{Phase: "connect", Node: n, Index: i, Outcome: record.OK})
		} else {
			rec.Phases = append(rec.Phases, record.PhaseResult{Phase: "connect", Node: n, Index: i, Outcome: record.Failed, Error: "timeout"})
		}
	}
	for i, n := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		pr := record.PhaseResult{Phase: "teardown", Node: n, Index: i, Outcome: record.OK}
		if n == "gpu-03" {
			pr.Outcome, pr.Error = record.Failed, "ssh: handshake failed"
		}
		rec.Phases = append(rec.Phases, pr)
	}
	// No security section: the deletion check did not run on any node.
	rec.Phases = append(rec.Phases, record.PhaseResult{Phase: "deletion", Index: -1, Outcome: record.Skipped, Error: "disabled in the inventory"})
	var stdout, stderr bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := finish(cmd, rec, filepath.Join(blocker, "run"), nil, windowFlags{})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitCouldNotRun {
		t.Fatalf("%v, want exit %d", err, exitCouldNotRun)
	}
	out := stderr.String()
	for _, want := range []string{
		"the bundle could not be written: write evidence to",
		"gpu-[01-02]: cleaned (teardown)",
		"gpu-03: left uncleaned: teardown: ssh: handshake failed",
		"gpu-04: never reached",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}
