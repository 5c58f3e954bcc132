package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/slurm"
)

// A window in its own allocation journals its header before the grant:
// status names the job and takes the nodes from the allocation, asked
// for, granted, then given back.
func TestStatusShowsTheSlurmJob(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	j := &burninJournal{t: t, dir: t.TempDir()}
	j.add(map[string]any{"type": "start", "at": t0, "run": burninHeader(t0, nil, "1h0m0s")})
	j.add(map[string]any{"type": "slurm", "at": t0, "key": "job", "value": "4242"})
	show := func() string {
		st, err := orchestrator.ReadStatus(j.dir, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		printStatus(&out, j.dir, st, t0.Add(time.Minute))
		return out.String()
	}
	if got := show(); !strings.Contains(got, "slurm: job 4242 asked for, not granted yet\nnodes: 0") {
		t.Errorf("asked for:\n%s", got)
	}
	a := slurm.Allocation{JobID: "4242", NodeList: "gpu[01-02]", Nodes: []slurm.Node{{Name: "gpu01"}, {Name: "gpu02"}}}
	b, _ := json.Marshal(a)
	j.add(map[string]any{"type": "slurm", "at": t0.Add(time.Second), "key": "allocation", "value": string(b)})
	if got := show(); !strings.Contains(got, "slurm: job 4242 holds gpu[01-02] (2 node(s))\nnodes: 2") {
		t.Errorf("granted:\n%s", got)
	}
	j.add(map[string]any{"type": "slurm", "at": t0.Add(2 * time.Second), "key": "cancelled", "value": "4242"})
	if got := show(); !strings.Contains(got, "slurm: job 4242 (gpu[01-02]), given back") {
		t.Errorf("given back:\n%s", got)
	}
}
