package slurm

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
)

func TestSpecArgs(t *testing.T) {
	s := Spec{Name: "gpuaccept-x", Partition: "gpu", Account: "acme", QOS: "high", NodeList: "gpu[01-04]", Exclusive: true,
		GRES: "gpu:h100:8", Constraint: "h100&ib", Time: 61*time.Minute + time.Second, Extra: []string{"--constraint=h100 nvl", "--reservation=acc"}}
	got := strings.Join(s.Args(), " ")
	want := "--no-shell --wait-all-nodes=1 --no-kill --job-name=gpuaccept-x --partition=gpu --account=acme --qos=high --gres=gpu:h100:8 --constraint=h100&ib " +
		"--nodelist=gpu[01-04] --nodes=4 --exclusive --time=62 --constraint=h100 nvl --reservation=acc"
	if got != want {
		t.Errorf("args\n got %s\nwant %s", got, want)
	}
	// Each argument one word to salloc, whatever it holds.
	if c := s.Command(); !strings.Contains(c, "'--constraint=h100 nvl'") || !strings.HasPrefix(c, "salloc --no-shell ") {
		t.Errorf("command %s", c)
	}
	if got := strings.Join(Spec{Name: "w", Nodes: 2}.Args(), " "); got != "--no-shell --wait-all-nodes=1 --no-kill --job-name=w --nodes=2" {
		t.Errorf("least: %s", got)
	}
}

func TestJobIDsAreDigits(t *testing.T) {
	for id, ok := range map[string]bool{"7": true, "123456789012": true, "": false, "7;rm": false, "1234567890123": false, "-1": false} {
		if validJobID(id) != ok {
			t.Errorf("%q: %v", id, !ok)
		}
	}
}

// fakeLogin answers every command with out on stdout and err.
type fakeLogin struct {
	out  string
	err  error
	last string
}

func (f *fakeLogin) Name() string { return "slurm-login" }
func (f *fakeLogin) Run(_ context.Context, c remote.Cmd) error {
	f.last = c.Command
	io.WriteString(c.Stdout, f.out)
	return f.err
}

// sbatch --test-only carries the allocation's options, not salloc's
// --no-shell; its answer is Slurm's line, its refusal an error with
// Slurm's reasons, a greeting ignored and the node's bytes made
// printable.
func TestTestOnly(t *testing.T) {
	s := Spec{Name: "gpuaccept-check", Partition: "gpu", Nodes: 2, Exclusive: true}
	f := &fakeLogin{out: "Welcome to the cluster\nsbatch: Job 5 to start at 2026-12-06T11:00:39 using 4 processors on nodes h[1-2] in partition lab\n"}
	said, err := TestOnly(t.Context(), f, s)
	if err != nil || !strings.HasPrefix(said, "sbatch: Job 5 to start") {
		t.Errorf("granted: %q, %v", said, err)
	}
	if !strings.HasPrefix(f.last, "sbatch --test-only --wait-all-nodes=1 --no-kill --job-name=gpuaccept-check --partition=gpu") ||
		strings.Contains(f.last, "--no-shell") || !strings.Contains(f.last, " --wrap=true") {
		t.Errorf("command: %s", f.last)
	}
	f = &fakeLogin{out: "sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition \x1b[31mname\n",
		err: &remote.ExitError{Node: "slurm-login", Status: 1}}
	if _, err := TestOnly(t.Context(), f, s); err == nil || !strings.Contains(err.Error(), "would not grant the allocation: sbatch: error: invalid partition specified: nope; allocation failure: Invalid partition [31mname") {
		t.Errorf("refused: %v", err)
	}
	f = &fakeLogin{err: &remote.ConnectionLostError{Node: "slurm-login", Reason: "gone"}}
	if _, err := TestOnly(t.Context(), f, s); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("lost: %v", err)
	}
}
