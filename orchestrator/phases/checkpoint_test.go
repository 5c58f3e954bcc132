package phases

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts"
)

func TestCkptSource(t *testing.T) {
	cases := []struct {
		saved  []bool
		reader int
		shared bool
		want   int
		ok     bool
	}{
		{[]bool{true, true, true}, 0, true, 1, true},
		{[]bool{true, true, true}, 2, true, 0, true},  // wraps around
		{[]bool{true, false, true}, 0, true, 2, true}, // skips a node whose save failed
		{[]bool{true, false, false}, 1, true, 0, true},
		{[]bool{true}, 0, true, 0, true}, // one node: its own
		{[]bool{false, true}, 1, true, 1, true},
		{[]bool{false, false}, 0, true, -1, false},
		{[]bool{true, true}, 0, false, 0, true}, // local storage: its own
		{[]bool{false, true}, 0, false, 0, false},
	}
	for _, c := range cases {
		got, ok := ckptSource(c.saved, c.reader, c.shared)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ckptSource(%v, %d, shared=%v) = %d, %v; want %d, %v", c.saved, c.reader, c.shared, got, ok, c.want, c.ok)
		}
	}
}

const (
	sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	sumC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func TestParseCkpt(t *testing.T) {
	w, err := parseCkptWrite(`free 1000000000
generator openssl
ceiling 2000000000 1.0
shard 0 500000000 `+sumA+` 0.4
shard 1 500000000 `+sumB+` 0.5
manifest /ckpt/gpuaccept-r/n1/manifest.sha256
seconds 0.5
`, "/ckpt/gpuaccept-r/n1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Bytes != 1e9 || w.GBs != 2 || w.CeilingGBs != 2 || len(w.Shards) != 2 || w.Shards[1].File != "/ckpt/gpuaccept-r/n1/shard-1.bin" || w.Generator != "openssl" {
		t.Fatalf("%+v", w)
	}
	if err := w.check(1e9, 2); err != nil {
		t.Fatal(err)
	}
	if err := w.check(1e9+1, 2); err == nil || !strings.Contains(err.Error(), "shard-0.bin") {
		t.Fatalf("uneven split not checked: %v", err)
	}
	if err := w.check(1e9, 3); err == nil {
		t.Fatal("a missing shard not noticed")
	}
	r, err := parseCkptRestore(`expect 0 `+sumA+`
expect 1 `+sumB+`
ceiling 100 0
cache fadvise 0
shard 0 500000000 `+sumA+` 1
missing 1 /x/shard-1.bin does not exist
seconds 1
`, "/ckpt/gpuaccept-r/n2")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Manifest) != 2 || r.Manifest[1] != sumB || r.Cache != "fadvise" || r.Resident == nil || *r.Resident != 0 ||
		len(r.Shards) != 2 || r.Shards[1].Error != "/x/shard-1.bin does not exist" || r.GBs != 0.5 || r.CeilingGBs != 0 {
		t.Fatalf("%+v", r)
	}
	if _, err := parseCkptWrite("shard 0 12\n", "/d"); err == nil {
		t.Fatal("a short shard line parsed")
	}
}

func ckptWrote(node string, sums ...string) *CkptSave {
	w := &CkptSave{Dir: "/ckpt/gpuaccept-r/" + node, Seconds: 0.5}
	for i, s := range sums {
		w.Shards = append(w.Shards, CkptShard{Index: i, File: w.Dir + "/shard-" + itoa(i) + ".bin", Bytes: 250e6, SHA256: s})
		w.Bytes += 250e6
	}
	w.GBs = float64(w.Bytes) / 1e9 / w.Seconds
	return w
}

func ckptRead(writer *CkptSave, name string, cache string, sums ...string) *CkptRestore {
	r := &CkptRestore{Writer: name, Dir: writer.Dir, Expected: writer.Shards, Cache: cache, Seconds: 0.25}
	zero := int64(0)
	r.Resident = &zero
	for i, s := range sums {
		r.Manifest = append(r.Manifest, writer.Shards[i].SHA256)
		r.Shards = append(r.Shards, CkptShard{Index: i, File: writer.Shards[i].File, Bytes: 250e6, SHA256: s})
		r.Bytes += 250e6
	}
	r.GBs = float64(r.Bytes) / 1e9 / r.Seconds
	return r
}

func TestCheckpointVerdicts(t *testing.T) {
	q := ckptQuote{GBs: 1, TolWrite: 0.9, TolRead: 0.9, TolIO: 0.9}
	w1, w2, w3 := ckptWrote("n1", sumA, sumB), ckptWrote("n2", sumB, sumC), ckptWrote("n3", sumC, sumA)
	w3.Seconds, w3.GBs = 2, 0.25 // n3 saves slowly
	nodes := []ckptNode{
		{Name: "n1", Write: w1, Restore: ckptRead(w2, "n2", "fadvise", sumB, sumA), RestoreErr: "shard-1.bin ..."}, // n2's shard 1 flipped
		{Name: "n2", Write: w2, Restore: ckptRead(w3, "n3", "none", sumC, sumA)},                                   // cache not dropped
		{Name: "n3", Write: w3, Restore: ckptRead(w1, "n1", "drop_caches", sumA, sumB)},
		{Name: "n4", Absent: "diag failed: ..."},
	}
	vs := checkpointVerdicts(nodes, q)
	get := func(id, node string) record.Verdict {
		for _, v := range vs {
			if v.ID == id && v.Node == node {
				return v
			}
		}
		t.Fatalf("no %s for %q in %+v", id, node, vs)
		return record.Verdict{}
	}
	bad := get("CKPT-001", "n1")
	if bad.Status != record.Fail || !strings.Contains(bad.Measured, "1 of 2 shards written by n2") ||
		!strings.Contains(bad.Detail, "shard-1.bin written by n2 (/ckpt/gpuaccept-r/n2/shard-1.bin)") ||
		!strings.Contains(bad.Detail, "read on n1 "+sumA+", written "+sumC) {
		t.Errorf("corruption not named: %+v", bad)
	}
	if v := get("CKPT-001", "n3"); v.Status != record.Pass || !strings.Contains(v.Measured, "written by n1") {
		t.Errorf("%+v", v)
	}
	if v := get("CKPT-002", "n3"); v.Status != record.Fail || *v.Ratio != 0.25 {
		t.Errorf("slow save: %+v", v)
	}
	if v := get("CKPT-002", "n1"); v.Status != record.Pass || v.Quoted != "1 GB/s per node" {
		t.Errorf("%+v", v)
	}
	if v := get("CKPT-003", "n2"); v.Status != record.Warn || !strings.Contains(v.Detail, "not dropped") {
		t.Errorf("a read that may be RAM passes: %+v", v)
	}
	if v := get("CKPT-003", "n3"); v.Status != record.Pass || !strings.Contains(v.Detail, "dropped before reading (drop_caches") ||
		!strings.Contains(v.Detail, "GPU idle on n3: save 2 s + restore 0.25 s = 2.25 s") {
		t.Errorf("%+v", v)
	}
	for _, id := range []string{"CKPT-001", "CKPT-002", "CKPT-003"} {
		if v := get(id, "n4"); v.Status != record.Skip || v.Detail != "diag failed: ..." {
			t.Errorf("quarantined node: %+v", v)
		}
	}
	// The cluster waits for the slowest save (n3) and the slowest restore.
	c := get("CKPT-004", "")
	if c.Status != record.Fail || !strings.HasPrefix(c.Measured, "2.25 s idle: save 2 s (slowest n3) + restore 0.25 s") ||
		!strings.Contains(c.Measured, "aggregate write 0.75 GB/s, read 6 GB/s") || !strings.HasPrefix(c.Quoted, "1 s (500MB saved and restored") {
		t.Errorf("cluster: %+v", c)
	}

	// Not quoted: measured, SKIP.
	vs = checkpointVerdicts(nodes[2:3], ckptQuote{TolWrite: 0.9, TolRead: 0.9, TolIO: 0.9})
	for _, v := range vs {
		if v.ID != "CKPT-001" && (v.Status != record.Skip || v.Measured == "" || !strings.Contains(v.Detail, "not stated in the quote")) {
			t.Errorf("unquoted: %+v", v)
		}
	}

	// A checkpoint the reader cannot see: the directory is not shared.
	gone := &CkptRestore{Writer: "n2", Expected: w2.Shards}
	vs = checkpointVerdicts([]ckptNode{{Name: "n1", Write: w1, Restore: gone, RestoreErr: "checkpoint: /ckpt/gpuaccept-r/n2/manifest.sha256 is not there"}}, q)
	if v := vs[0]; v.Status != record.Fail || !strings.Contains(v.Detail, "manifest.sha256 is not there") || !strings.Contains(v.Detail, "one shared filesystem") {
		t.Errorf("unseen checkpoint: %+v", v)
	}

	// A CPU too slow to show the quote: inconclusive, not a failure.
	w1.CeilingGBs = 0.5
	w1.GBs = 0.45
	vs = checkpointVerdicts([]ckptNode{{Name: "n1", Write: w1}}, q)
	if v := vs[1]; v.Status != record.Warn || !strings.Contains(v.Detail, "inconclusive") {
		t.Errorf("ceiling: %+v", v)
	}
}

func TestCkptManifestDiffers(t *testing.T) {
	w := ckptWrote("n2", sumA, sumB)
	r := ckptRead(w, "n2", "fadvise", sumA, sumB)
	r.Manifest[1] = sumC
	p := r.Problems("n1")
	if len(p) != 1 || !strings.Contains(p[0], "manifest.sha256 written by n2: shard-1.bin is "+sumC) {
		t.Fatalf("%q", p)
	}
}

// The node script itself, run locally: a save, a restore that matches, a
// flipped byte that does not and is named.
func TestCheckpointScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	base := filepath.Join(t.TempDir(), "gpuaccept-run")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("bash", append([]string{"-c", scripts.Checkpoint, "checkpoint"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		return string(out)
	}
	const size, shards = 1<<20 + 5, 3
	out := run("write", base, "n1", itoa(size), itoa(shards), "seed", itoa(size))
	w, err := parseCkptWrite(out, base+"/n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.check(size, shards); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if w.Generator == "" || w.CeilingGBs <= 0 {
		t.Errorf("%+v", w)
	}
	m, err := os.ReadFile(base + "/n1/manifest.sha256")
	if err != nil || !strings.Contains(string(m), w.Shards[2].SHA256+"  shard-2.bin") {
		t.Fatalf("manifest %q (%v)", m, err)
	}
	if entries, _ := os.ReadDir(base + "/n1"); len(entries) != shards+1 {
		t.Errorf("the checkpoint directory holds %d entries, want the shards and the manifest", len(entries))
	}
	data, _ := os.ReadFile(w.Shards[0].File)
	if zeros := strings.Count(string(data[:4096]), "\x00"); zeros > 100 {
		t.Errorf("the data is mostly zeros (%d of 4096)", zeros)
	}
	restore := func() *CkptRestore {
		r, err := parseCkptRestore(run("restore", base, "n1", itoa(shards)), base+"/n1")
		if err != nil {
			t.Fatal(err)
		}
		r.Writer, r.Expected = "n1", w.Shards
		return &r
	}
	r := restore()
	if p := r.Problems("n2"); len(p) > 0 || r.Bytes != size || r.Cache == "" {
		t.Fatalf("%q %+v", p, r)
	}
	// Flip one byte of shard 1.
	f, err := os.OpenFile(w.Shards[1].File, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, 12345)
	b[0] ^= 0x01
	f.WriteAt(b, 12345)
	f.Sync() // clean pages: the restore's fadvise drops them (no drop_caches as root)
	f.Close()
	r = restore()
	p := r.Problems("n2")
	if len(p) != 1 || !strings.Contains(p[0], "shard-1.bin written by n1") || !strings.Contains(p[0], "written "+w.Shards[1].SHA256) {
		t.Fatalf("flipped byte: %q", p)
	}
	t.Logf("save %.3g GB/s (ceiling %.3g), read %.3g GB/s (ceiling %.3g, cache %s); %s", w.GBs, w.CeilingGBs, r.GBs, r.CeilingGBs, r.Cache, p[0])

	// Without a working openssl the data comes from /dev/urandom.
	stub := t.TempDir()
	if err := os.WriteFile(filepath.Join(stub, "openssl"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", stub+":"+os.Getenv("PATH"))
	out = run("write", base, "n2", "1000", "2", "seed", "1000")
	if w, err := parseCkptWrite(out, base+"/n2"); err != nil || w.Generator != "urandom" || w.check(1000, 2) != nil {
		t.Errorf("fallback generator: %+v %v\n%s", w, err, out)
	}

	// A checkpoint directory that is not there (a filesystem not mounted)
	// is not made: the save fails and says so.
	cmd := exec.Command("bash", "-c", scripts.Checkpoint, "checkpoint", "write", "/nonexistent/gpuaccept-run", "n1", "1000", "1", "s", "1")
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "checkpoint: /nonexistent does not exist on") {
		t.Errorf("missing directory: %v %s", err, msg)
	}
}
