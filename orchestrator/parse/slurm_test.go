package parse

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func slurmSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "slurm", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScontrolReadsTheLabsSlurm(t *testing.T) {
	job := ScontrolRecord(slurmSample(t, "scontrol-show-job-running.txt"))
	if job["JobId"] != "4" || job["JobState"] != "RUNNING" || job["NodeList"] != "h[1-2]" || job["JobName"] != "gpuaccept-sample" ||
		job["AllocNode:Sid"] == "" || job["CPUs/Task"] != "1" || job["TimeLimit"] != "00:05:00" {
		t.Errorf("job: %v", job)
	}
	nodes := ScontrolRecords(slurmSample(t, "scontrol-show-node-drained.txt"), "Reason")
	if len(nodes) != 3 {
		t.Fatalf("%d node records, want 3", len(nodes))
	}
	h3 := nodes[2]
	if h3["NodeName"] != "h3" || h3["State"] != "IDLE+DRAIN" || h3["Reason"] != "bad gpu 3 [root@2026-12-06T08:25:10]" ||
		h3["NodeAddr"] != "10.245.0.13" || h3["Gres"] != "(null)" || !strings.HasPrefix(h3["OS"], "Linux 6.") {
		t.Errorf("h3: %v", h3)
	}
	if _, ok := nodes[0]["Reason"]; ok {
		t.Errorf("h1 has no reason: %v", nodes[0])
	}
	// A reason that reads like a field stays the reason's.
	r := ScontrolRecord("NodeName=g1 State=DOWN+DRAIN Reason=ECC count=5 on GPU 2 [ops@2026-01-01T00:00:00]", "Reason")
	if r["Reason"] != "ECC count=5 on GPU 2 [ops@2026-01-01T00:00:00]" || r["count"] != "" {
		t.Errorf("reason: %v", r)
	}
}

func TestSallocJob(t *testing.T) {
	for _, tc := range []struct {
		line    string
		id      string
		granted bool
	}{
		{"salloc: Granted job allocation 4", "4", true},
		{"salloc: Pending job allocation 5", "5", false},
		{"salloc: job 5 queued and waiting for resources", "5", false},
		{"salloc: Job aborted due to signal", "", false},
		{"salloc: Granted job allocation 12345678901234567890", "", false},
		{"xsalloc: Granted job allocation 4", "", false},
	} {
		if id, g := SallocJob(tc.line); id != tc.id || g != tc.granted {
			t.Errorf("%q: %q %v, want %q %v", tc.line, id, g, tc.id, tc.granted)
		}
	}
	for _, line := range strings.Split(slurmSample(t, "salloc-pending-aborted.txt"), "\n")[:1] {
		if id, g := SallocJob(line); id != "5" || g {
			t.Errorf("the lab's pending salloc: %q %v", id, g)
		}
	}
}

func FuzzScontrolRecord(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "slurm", "scontrol-show-node-drained.txt")); err == nil {
		f.Add(string(b))
	}
	f.Add("A=b c=d e f=")
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range ScontrolRecords(s, "Reason") {
			if len(r) > maxScontrolFields+1 {
				t.Fatalf("%d fields", len(r))
			}
		}
	})
}
