package labtest

import (
	"strings"
	"testing"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
)

// TestImageBySbcast: a window of transport srun pushes the pinned image to
// four hosts that take no SSH from the coordinator. The coordinator sends
// one copy to the login node h1; sbcast sends it to the hosts of the
// window's job; each keeps its copy only once size and sha256 match,
// loads it, and its image is the pin. The login node's copy is gone after,
// as is everything of the window on the hosts and in the queue.
func TestImageBySbcast(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	id := strings.TrimPrefix(img.ID, "sha256:")
	if err := l.Slurm(t.Context()); err != nil {
		t.Fatal(err)
	}
	prepare(t, l, nil)
	noSSHFromTheCoordinator(t, l, srunHosts)
	inv := srunInventory(t, l, "")
	withImage(t, inv, img.DockerArchive, id, "sbcast")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs, "--only", "connect,tools,image,teardown,deletion")
	r := readRun(t, runDir(t, runs))
	var im phases.Imaged
	phaseData(t, r, "image", -1, &im)
	if im.Relay != "sbcast" || !strings.Contains(res.stderr, "image: sbcast of ") {
		t.Errorf("relay %q; stderr:\n%s", im.Relay, res.stderr)
	}
	for _, h := range srunHosts {
		ni := im.Nodes[h]
		if ni == nil || ni.Via != "sbcast" || ni.Bytes != im.Archive.Bytes || !ni.Match {
			t.Fatalf("%s: %+v\n%s", h, ni, res.stderr)
		}
		if v := verdict(r, "IMG-001", h); v.Status != record.Pass {
			t.Errorf("IMG-001 %s: %s %q", h, v.Status, v.Detail)
		}
	}
	if v := verdict(r, "IMG-003", ""); v.Status != record.Pass {
		t.Errorf("IMG-003: %s %q", v.Status, v.Detail)
	} else {
		t.Logf("IMG-003: %s; sbcast to 4 hosts in %.2f s", v.Measured, im.Nodes["h2"].CopySecs)
	}
	if out, err := l.Exec(t.Context(), "h1", "sh", "-c", "ls -a /srv"); err != nil || strings.Contains(string(out), "-login") {
		t.Errorf("the login node's copy is left: %s %v", out, err)
	}
	if q := slurmQueue(t, l); q != "" {
		t.Errorf("left in the queue: %s", q)
	}
	nothingLeft(t, l)
}
