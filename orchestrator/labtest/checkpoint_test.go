package labtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

var ckptHosts = []string{"h1", "h2", "h3"}

// ckptInventory: a window over h1..h3 with the checkpoint enabled (32 MiB
// per node in 4 shards) in dir. The quote is low enough for any disk: the
// tests are about correctness; the figures are printed.
func ckptInventory(t *testing.T, l *lab.Lab, dir string, shared bool) string {
	t.Helper()
	return writeInventory(t, l, ckptHosts, "  checkpoint_gbs: 0.0005\n", fmt.Sprintf(`  checkpoint:
    enabled: true
    dir: %s
    size: 32MiB
    shards: 4
    shared: %v
    timeout: 2m
`, dir, shared))
}

// labShared is the lab's /shared as the coordinator sees it.
func labShared(t *testing.T, l *lab.Lab) string {
	t.Helper()
	dir := filepath.Join(l.Dir, "shared")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the lab has no shared filesystem (%s): %v", dir, err)
	}
	return dir
}

// ckptFigures logs what the window measured, node by node.
func ckptFigures(t *testing.T, r *record.Run) {
	t.Helper()
	for i, h := range ckptHosts {
		var w phases.CkptSave
		var rs phases.CkptRestore
		phaseData(t, r, "checkpoint-write", i, &w)
		phaseData(t, r, "checkpoint-restore", i, &rs)
		t.Logf("%s: save %s in %.3g s = %.3g GB/s (%s data, ceiling %.3g GB/s); restore of %s's: %.3g s = %.3g GB/s (cache %s, ceiling %.3g GB/s); GPU idle %.3g s",
			h, inventory.Bytes(w.Bytes), w.Seconds, w.GBs, w.Generator, w.CeilingGBs, rs.Writer, rs.Seconds, rs.GBs, rs.Cache, rs.CeilingGBs, w.Seconds+rs.Seconds)
	}
	t.Logf("cluster: %s", verdict(r, "CKPT-004", "").Measured)
}

// TestCheckpointAcrossNodes: every node saves to the lab's shared
// filesystem at once, then restores its neighbour's (h1 reads h2's, h2
// h3's, h3 h1's) with the page cache dropped, byte-exact; teardown
// removes the window's checkpoint directory.
func TestCheckpointAcrossNodes(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	shared := labShared(t, l)
	inv := ckptInventory(t, l, "/shared", true)
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	for i, h := range ckptHosts {
		writer := ckptHosts[(i+1)%len(ckptHosts)]
		for _, id := range []string{"CKPT-001", "CKPT-002", "CKPT-003"} {
			if v := verdict(r, id, h); v.Status != record.Pass {
				t.Errorf("%s %s: %s %s %s", id, h, v.Status, v.Measured, v.Detail)
			}
		}
		if v := verdict(r, "CKPT-001", h); !strings.Contains(v.Measured, "written by "+writer) {
			t.Errorf("%s did not restore %s's checkpoint: %s", h, writer, v.Measured)
		}
		var rs phases.CkptRestore
		phaseData(t, r, "checkpoint-restore", i, &rs)
		if rs.Writer != writer || len(rs.Shards) != 4 || rs.Bytes != 32<<20 || rs.Dir != "/shared/gpuaccept-"+r.ID+"/"+writer {
			t.Errorf("%s restored %+v", h, rs)
		}
		if dropped, how := rs.CacheDropped(); !dropped {
			t.Errorf("%s: %s", h, how)
		}
		if _, err := os.Stat(filepath.Join(dir, "raw", h, "checkpoint-write.log.gz")); err != nil {
			t.Errorf("no raw log of %s's save", h)
		}
	}
	if v := verdict(r, "CKPT-004", ""); v.Status != record.Pass {
		t.Errorf("CKPT-004: %+v", v)
	}
	if res.code != 0 {
		t.Errorf("exit %d, want 0\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	ckptFigures(t, r)
	if _, err := os.Stat(filepath.Join(shared, "gpuaccept-"+r.ID)); !os.IsNotExist(err) {
		t.Errorf("teardown left the checkpoint directory (%v)", err)
	}
	nothingLeft(t, l)
}

// TestCheckpointFlippedByteIsNamed: the coordinator dies after every node
// saved (the journal says checkpoint-write is done) and while h1 is about
// to restore; a byte of a shard h2 wrote is flipped on the shared
// filesystem; the resumed window restores without saving again and names
// the shard, its writer and both sha256s.
func TestCheckpointFlippedByteIsNamed(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	shared := labShared(t, l)
	inv := ckptInventory(t, l, "/shared", true)
	// h1 hashes what it restores late: the hasher (openssl, or sha256sum
	// without it) given a shard file (the save hashes its stdin) waits
	// first. Nothing in gpuaccept knows.
	const pause = 10 * time.Second
	var wrappers []string
	for _, tool := range []string{"openssl", "sha256sum"} {
		wrapper := filepath.Join(l.BinDir("h1"), tool)
		script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *.bin*) sleep %g;; esac\nexec /usr/bin/%s \"$@\"\n", pause.Seconds(), tool)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		wrappers = append(wrappers, wrapper)
	}
	removeWrappers := func() {
		for _, w := range wrappers {
			os.Remove(w)
		}
	}
	t.Cleanup(removeWrappers)

	runs := t.TempDir()
	cmd := exec.CommandContext(t.Context(), binary, "run", inv, "--runs-dir", runs)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	waitFor(t, 2*time.Minute, "every node saved its checkpoint", func() bool {
		if entries, _ := os.ReadDir(runs); len(entries) == 1 {
			dir = filepath.Join(runs, entries[0].Name())
			return slices.Contains(journalTypes(t, dir), "done:checkpoint-write")
		}
		return false
	})
	waitFor(t, 30*time.Second, "h1 restoring", func() bool { return slowRunning(t, l, "h1", pause) })
	cmd.Process.Kill()
	_ = cmd.Wait()
	waitFor(t, 10*time.Second, "no process of ours left after the coordinator died", func() bool {
		for _, h := range l.Hosts {
			if ps, _ := l.Ps(t.Context(), h.Name); ours(ps) != "" {
				return false
			}
		}
		return true
	})
	if types := journalTypes(t, dir); slices.Contains(types, "done:checkpoint-restore") {
		t.Fatalf("the coordinator was killed too late: %v", types)
	}
	removeWrappers()

	// Flip one bit of h2's shard-1.bin, through the coordinator's view of
	// the shared filesystem.
	id := filepath.Base(dir)
	shard := filepath.Join(shared, "gpuaccept-"+id, "h2", "shard-1.bin")
	f, err := os.OpenFile(shard, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	at := int64(32<<20/4/3 + 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	flipped := hex.EncodeToString(sum[:])

	res := gpuaccept(t, "run", "--resume", dir)
	if res.code != 1 {
		t.Fatalf("resume: exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	r := readRun(t, dir)
	var saved phases.CkptSave
	phaseData(t, r, "checkpoint-write", 1, &saved)
	v := verdict(r, "CKPT-001", "h1")
	want := []string{"shard-1.bin written by h2 (/shared/gpuaccept-" + id + "/h2/shard-1.bin)",
		"read on h1 " + flipped, "written " + saved.Shards[1].SHA256}
	for _, w := range want {
		if v.Status != record.Fail || !strings.Contains(v.Detail, w) {
			t.Errorf("CKPT-001 h1 = %s %q, detail lacks %q:\n%s", v.Status, v.Measured, w, v.Detail)
		}
	}
	t.Logf("CKPT-001 h1: %s: %s", v.Measured, v.Detail)
	for _, h := range []string{"h2", "h3"} {
		if v := verdict(r, "CKPT-001", h); v.Status != record.Pass {
			t.Errorf("CKPT-001 %s: %s %s", h, v.Status, v.Detail)
		}
	}
	// The save ran once: the resumed window restored what was journaled.
	writes := 0
	for _, p := range r.Phases {
		if p.Phase == "checkpoint-write" {
			writes++
		}
	}
	if writes != len(ckptHosts) || len(r.Resumed) != 1 {
		t.Errorf("%d checkpoint-write results, %d resumes; want %d and 1", writes, len(r.Resumed), len(ckptHosts))
	}
	if !strings.Contains(res.stderr, "h1: checkpoint-restore failed: shard-1.bin written by h2") {
		t.Errorf("progress does not name the shard:\n%s", res.stderr)
	}
	if _, err := os.Stat(filepath.Join(shared, "gpuaccept-"+id)); !os.IsNotExist(err) {
		t.Errorf("teardown left the checkpoint directory (%v)", err)
	}
	nothingLeft(t, l)
}

// TestCheckpointLocalDisks: with shared: false every node restores its own
// checkpoint from its own /srv. The same directory declared shared is
// caught: no node sees its neighbour's checkpoint.
func TestCheckpointLocalDisks(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	res, r := runWindow(t, ckptInventory(t, l, "/srv", false))
	for i, h := range ckptHosts {
		for _, id := range []string{"CKPT-001", "CKPT-002", "CKPT-003"} {
			if v := verdict(r, id, h); v.Status != record.Pass {
				t.Errorf("%s %s: %s %s %s", id, h, v.Status, v.Measured, v.Detail)
			}
		}
		var rs phases.CkptRestore
		phaseData(t, r, "checkpoint-restore", i, &rs)
		if rs.Writer != h || rs.Dir != "/srv/gpuaccept-"+r.ID+"/"+h {
			t.Errorf("%s restored %s from %s, want its own", h, rs.Writer, rs.Dir)
		}
		// /srv/gpuaccept-standin is the lab's (the telemetry stand-ins' state), not the window's
		left, _ := filepath.Glob(filepath.Join(l.Dir, "hosts", h, "srv", "gpuaccept-*"))
		left = slices.DeleteFunc(left, func(p string) bool { return p == l.StandinState(h) })
		if len(left) > 0 {
			t.Errorf("teardown left %v", left)
		}
	}
	if res.code != 0 {
		t.Errorf("exit %d, want 0\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	ckptFigures(t, r)

	// /srv is every host's own: declared shared, it fails the cross-node
	// restore on every node, naming whose checkpoint was not there.
	res, r = runWindow(t, ckptInventory(t, l, "/srv", true))
	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	for i, h := range ckptHosts {
		writer := ckptHosts[(i+1)%len(ckptHosts)]
		v := verdict(r, "CKPT-001", h)
		if v.Status != record.Fail || !strings.Contains(v.Detail, "/srv/gpuaccept-"+r.ID+"/"+writer+"/manifest.sha256 is not there as seen from "+h) ||
			!strings.Contains(v.Detail, "one shared filesystem") {
			t.Errorf("CKPT-001 %s: %s %s", h, v.Status, v.Detail)
		}
		if v := verdict(r, "CKPT-002", h); v.Status != record.Pass {
			t.Errorf("CKPT-002 %s: %s %s", h, v.Status, v.Detail)
		}
	}
	t.Logf("CKPT-001 h1 on a directory that is not shared: %s", verdict(r, "CKPT-001", "h1").Detail)
	nothingLeft(t, l)
}
