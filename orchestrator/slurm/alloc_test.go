package slurm

import (
	"strings"
	"testing"
	"time"
)

func TestSpecArgs(t *testing.T) {
	s := Spec{Name: "gpuaccept-x", Partition: "gpu", Account: "acme", QOS: "high", NodeList: "gpu[01-04]", Exclusive: true,
		GRES: "gpu:h100:8", Time: 61*time.Minute + time.Second, Extra: []string{"--constraint=h100 nvl", "--reservation=acc"}}
	got := strings.Join(s.Args(), " ")
	want := "--no-shell --wait-all-nodes=1 --no-kill --job-name=gpuaccept-x --partition=gpu --account=acme --qos=high --gres=gpu:h100:8 " +
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
