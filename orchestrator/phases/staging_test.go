package phases

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/scripts"
)

const (
	stSumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	stSumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	stSumC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

type stagingCanned struct {
	res *Staged
	err error
}

// judgeWith runs a window whose staging phase records the given results,
// and returns its verdicts.
func judgeStagingWith(t *testing.T, st inventory.Staging, quoteGBs float64, results map[string]stagingCanned) []record.Verdict {
	t.Helper()
	inv := &inventory.Inventory{Path: filepath.Join(t.TempDir(), "inv.yaml"), Digest: "x", Provider: "test"}
	for _, n := range []string{"h1", "h2", "h3"} {
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: n, Address: "192.0.2.1"})
	}
	inv.Quote.StagingGBs = quoteGBs
	inv.Acceptance.Tolerance = 0.9
	inv.Phases.Staging = st
	p := Staging
	p.PerNode = func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		r, ok := results[n.Name]
		if !ok {
			return nil, errors.New("no canned result")
		}
		if r.res == nil {
			return nil, r.err
		}
		return r.res, r.err
	}
	rec, _, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{p}, orchestrator.Options{RunsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Verdict
	for _, v := range rec.Verdicts {
		if strings.HasPrefix(v.ID, "STAGE-") {
			out = append(out, v)
		}
	}
	return out
}

func stageVerdict(vs []record.Verdict, id, node string) record.Verdict {
	for _, v := range vs {
		if v.ID == id && v.Node == node {
			return v
		}
	}
	return record.Verdict{ID: id, Node: node, Status: "absent"}
}

var stageT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// staged is a complete staging of a dataset (URL, no sha256 given) and
// synthetic weights, bytes over seconds.
func stagedFixture(datasetSum string, bytes int64, seconds float64) *Staged {
	s := &Staged{Dir: "/scratch/gpuaccept-x", Complete: true, Started: stageT0,
		Ended: stageT0.Add(time.Duration(seconds * float64(time.Second))), Bytes: bytes, Seconds: seconds, GBs: rate(bytes, seconds),
		Disk: &DiskBaseline{Tool: "fio", Direct: true, WriteGBs: 2.5, ReadGBs: 3.1}}
	s.Sources = []StagedSource{
		{Name: "dataset", Kind: "http", From: "http://storage/dataset.tar", Bytes: bytes / 2, Seconds: seconds / 2, GBs: rate(bytes/2, seconds/2), SHA256: datasetSum, Checksum: "tee"},
		{Name: "weights", Kind: "synthetic", From: "synthetic 1GiB", Bytes: bytes / 2, Seconds: seconds / 2, GBs: rate(bytes/2, seconds/2), SHA256: stSumC, Checksum: "after", Expected: stSumC, ExpectedFrom: "generator"},
	}
	return s
}

func TestStagingJudgesThroughputWindowAndChecksums(t *testing.T) {
	st := inventory.Staging{Enabled: true, Dir: "/scratch", Window: 30 * time.Second}
	vs := judgeStagingWith(t, st, 1, map[string]stagingCanned{
		"h1": {res: stagedFixture(stSumA, 20e9, 10)}, // 2 GB/s
		"h2": {res: stagedFixture(stSumA, 24e9, 12)}, // 2 GB/s
		"h3": {res: stagedFixture(stSumA, 20e9, 40)}, // 0.5 GB/s, over the window
	})
	for _, c := range []struct {
		id, node string
		want     record.Status
	}{
		{"STAGE-001", "h1", record.Pass}, {"STAGE-001", "h2", record.Pass}, {"STAGE-001", "h3", record.Pass},
		{"STAGE-002", "h1", record.Pass}, {"STAGE-002", "h2", record.Pass}, {"STAGE-002", "h3", record.Fail},
		{"STAGE-002", "", record.Fail}, // 64 GB in 40 s = 1.6 GB/s against 3 × 1 GB/s
		{"STAGE-003", "", record.Fail},
	} {
		if v := stageVerdict(vs, c.id, c.node); v.Status != c.want {
			t.Errorf("%s %s: %s, want %s (%+v)", c.id, c.node, v.Status, c.want, v)
		}
	}
	if v := stageVerdict(vs, "STAGE-003", ""); !strings.Contains(v.Measured, "slowest node h3: 40.00 s") || !strings.Contains(v.Detail, "h3 40.0 s") || v.Quoted != "30s setup window" {
		t.Errorf("STAGE-003 = %+v", v)
	}
	v := stageVerdict(vs, "STAGE-002", "h1")
	if v.Ratio == nil || *v.Ratio != 2 || v.Quoted != "1 GB/s" || !strings.Contains(v.Detail, "fio, O_DIRECT): write 2.5 GB/s, read 3.1 GB/s") {
		t.Errorf("STAGE-002 h1 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-001", "h1"); !strings.Contains(v.Detail, "same on 3 of 3 nodes") || !strings.Contains(v.Detail, "= generator") {
		t.Errorf("STAGE-001 h1 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-002", ""); !strings.Contains(v.Measured, "over 3 node(s) (59.60 GiB in 40.00 s)") || v.Quoted != "3 × 1 GB/s" {
		t.Errorf("aggregate = %+v", v)
	}
}

func TestStagingNamesTheNodeWhoseCopyDiffers(t *testing.T) {
	st := inventory.Staging{Enabled: true, Dir: "/scratch"}
	vs := judgeStagingWith(t, st, 0, map[string]stagingCanned{
		"h1": {res: stagedFixture(stSumA, 2e9, 1)},
		"h2": {res: stagedFixture(stSumB, 2e9, 1)},
		"h3": {res: stagedFixture(stSumA, 2e9, 1)},
	})
	v := stageVerdict(vs, "STAGE-001", "h2")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "dataset: sha256 "+stSumB+", expected "+stSumA+" (what 2 of 3 nodes staged)") {
		t.Errorf("STAGE-001 h2 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-001", "h1"); v.Status != record.Pass {
		t.Errorf("STAGE-001 h1 = %+v", v)
	}
	// Not quoted, no window: SKIP, with the figures.
	if v := stageVerdict(vs, "STAGE-002", "h1"); v.Status != record.Skip || !strings.Contains(v.Measured, "2 GB/s") {
		t.Errorf("STAGE-002 h1 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-003", ""); v.Status != record.Skip || v.Measured == "" {
		t.Errorf("STAGE-003 = %+v", v)
	}
}

func TestStagingChecksAgainstTheInventory(t *testing.T) {
	st := inventory.Staging{Enabled: true, Dir: "/scratch"}
	bad := stagedFixture(stSumB, 2e9, 1)
	bad.Sources[0].Expected, bad.Sources[0].ExpectedFrom = stSumA, "inventory"
	good := stagedFixture(stSumA, 2e9, 1)
	good.Sources[0].Expected, good.Sources[0].ExpectedFrom = stSumA, "inventory"
	// Two nodes that disagree with no sha256 to settle it: both fail.
	vs := judgeStagingWith(t, st, 0, map[string]stagingCanned{"h1": {res: bad}, "h2": {res: good}, "h3": {res: nil, err: errors.New("boom")}})
	if v := stageVerdict(vs, "STAGE-001", "h1"); v.Status != record.Fail || !strings.Contains(v.Detail, "expected "+stSumA+" (from the inventory)") {
		t.Errorf("STAGE-001 h1 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-001", "h2"); v.Status != record.Pass {
		t.Errorf("STAGE-001 h2 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-001", "h3"); v.Status != record.Fail || !strings.Contains(v.Detail, "boom") {
		t.Errorf("STAGE-001 h3 = %+v", v)
	}

	a, b := stagedFixture(stSumA, 2e9, 1), stagedFixture(stSumB, 2e9, 1)
	vs = judgeStagingWith(t, st, 0, map[string]stagingCanned{"h1": {res: a}, "h2": {res: b}})
	for _, n := range []string{"h1", "h2"} {
		if v := stageVerdict(vs, "STAGE-001", n); v.Status != record.Fail || !strings.Contains(v.Detail, "the nodes disagree") {
			t.Errorf("STAGE-001 %s = %+v", n, v)
		}
	}
	if v := stageVerdict(vs, "STAGE-001", "h1"); !strings.Contains(v.Detail, "h1 aaaaaaaaaaaa…, h2 bbbbbbbbbbbb…") {
		t.Errorf("STAGE-001 h1 does not list the nodes' sums: %q", v.Detail)
	}
}

func TestStagingMarksANodeThatDidNotFinish(t *testing.T) {
	st := inventory.Staging{Enabled: true, Dir: "/scratch", Window: time.Minute}
	lost := stagedFixture(stSumA, 2e9, 1)
	lost.Complete = false
	lost.Sources[1] = StagedSource{Name: "weights", Kind: "synthetic", From: "synthetic 1GiB", Expected: stSumC, ExpectedFrom: "generator",
		Error: "h3: connection lost: EOF"}
	lost.Bytes = 1e9
	vs := judgeStagingWith(t, st, 1, map[string]stagingCanned{
		"h1": {res: stagedFixture(stSumA, 2e9, 1)},
		"h2": {res: stagedFixture(stSumA, 2e9, 1)},
		"h3": {res: lost, err: errors.New("weights (synthetic 1GiB): h3: connection lost: EOF")},
	})
	if v := stageVerdict(vs, "STAGE-001", "h3"); v.Status != record.Fail || !strings.Contains(v.Detail, "weights (synthetic 1GiB) not staged: h3: connection lost") {
		t.Errorf("STAGE-001 h3 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-002", "h3"); v.Status != record.Fail || !strings.Contains(v.Detail, "did not complete") {
		t.Errorf("STAGE-002 h3 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-003", ""); v.Status != record.Fail || !strings.Contains(v.Detail, "h3: weights (synthetic 1GiB): h3: connection lost") {
		t.Errorf("STAGE-003 = %+v", v)
	}
	if v := stageVerdict(vs, "STAGE-002", ""); !strings.Contains(v.Measured, "over 2 node(s)") || !strings.Contains(v.Detail, "h3") || v.Status != record.Pass {
		t.Errorf("aggregate = %+v", v)
	}
	for _, n := range []string{"h1", "h2"} {
		for _, id := range []string{"STAGE-001", "STAGE-002"} {
			if v := stageVerdict(vs, id, n); v.Status != record.Pass {
				t.Errorf("%s %s = %+v", id, n, v)
			}
		}
	}
}

func TestStagingDisabledJudgesNothing(t *testing.T) {
	if vs := judgeStagingWith(t, inventory.Staging{}, 1, nil); len(vs) != 0 {
		t.Errorf("verdicts for a disabled phase: %+v", vs)
	}
}

func TestSyntheticIsDeterministicAndSeekable(t *testing.T) {
	const size = 3<<20 + 17
	g := newSynthetic("weights", size)
	all, err := io.ReadAll(io.NewSectionReader(g, 0, size))
	if err != nil || len(all) != size {
		t.Fatalf("read %d bytes, %v", len(all), err)
	}
	again, _ := io.ReadAll(io.NewSectionReader(newSynthetic("weights", size), 0, size))
	if !bytes.Equal(all, again) {
		t.Fatal("the same name gives different data")
	}
	other, _ := io.ReadAll(io.NewSectionReader(newSynthetic("dataset", size), 0, size))
	if bytes.Equal(all[:64], other[:64]) {
		t.Fatal("different names give the same data")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		off := r.Int64N(size)
		buf := make([]byte, r.IntN(70000))
		n, err := g.ReadAt(buf, off)
		want := all[off:min(off+int64(len(buf)), size)]
		if n != len(want) || !bytes.Equal(buf[:n], want) || (n < len(buf)) != (err == io.EOF) {
			t.Fatalf("ReadAt(%d bytes, %d) = %d, %v", len(buf), off, n, err)
		}
	}
	sum, err := g.sum(t.Context())
	h := sha256.Sum256(all)
	if err != nil || sum != hex.EncodeToString(h[:]) {
		t.Fatalf("sum %s %v", sum, err)
	}
}

// stageScript runs the node script here, as a node would.
func stageScript(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	return stageScriptEnv(t, nil, args...)
}

// stageScriptEnv runs stage.sh as the staging phase does: a fetch's
// source on stdin, its argv naming it as records show it.
func stageScriptEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	var stdin string
	if len(args) > 4 && args[0] == "fetch" {
		stdin = args[4] + "\n"
		args = append([]string(nil), args...)
		args[4] = redact.URL(args[4])
	}
	cmd := exec.Command("bash", append([]string{"-c", scripts.Stage, "stage"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

func TestStageScriptCopiesAndHashes(t *testing.T) {
	src := t.TempDir()
	data := bytes.Repeat([]byte("gpuaccept"), 100000)
	if err := os.WriteFile(filepath.Join(src, "a.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(src, "tree", "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "tree", "x"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(src, "tree", "sub", "y"), []byte("yy\n"), 0o644)
	dst := filepath.Join(t.TempDir(), "gpuaccept-run")

	out, err := stageScript(t, "prepare", dst)
	if err != nil || !strings.HasPrefix(out, "avail ") {
		t.Fatalf("prepare: %v %q", err, out)
	}
	out, err = stageScript(t, "fetch", dst, "file", "path", filepath.Join(src, "a.bin"))
	kv, ok := stagedLine([]byte(out))
	h := sha256.Sum256(data)
	if err != nil || !ok || kv["sha256"] != hex.EncodeToString(h[:]) || kv["bytes"] != "900000" || kv["checksum"] != "tee" || kv["files"] != "1" {
		t.Fatalf("fetch file: %v %q", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "file")); !bytes.Equal(got, data) {
		t.Fatal("the copy differs")
	}
	out, err = stageScript(t, "fetch", dst, "tree", "path", filepath.Join(src, "tree"))
	kv, ok = stagedLine([]byte(out))
	if err != nil || !ok || kv["files"] != "2" || kv["bytes"] != "5" || kv["checksum"] != "after" {
		t.Fatalf("fetch tree: %v %q", err, out)
	}
	mf, _ := os.ReadFile(filepath.Join(dst, ".tree.sha256"))
	ms := sha256.Sum256(mf)
	if kv["sha256"] != hex.EncodeToString(ms[:]) || !strings.Contains(string(mf), "  ./sub/y\n") {
		t.Fatalf("tree sha256 %s is not that of its manifest %q", kv["sha256"], mf)
	}

	out, err = stageScript(t, "fetch", dst, "gone", "path", filepath.Join(src, "nope"))
	if err == nil || stageError([]byte(out), err, "gone ("+filepath.Join(src, "nope")+"): ").Error() != "no such file or directory on this node" {
		t.Fatalf("missing path: %v %q", err, out)
	}
	if _, e := exec.LookPath("azcopy"); e == nil {
		t.Skip("azcopy is installed here: no tool to miss")
	}
	out, err = stageScript(t, "fetch", dst, "obj", "az", "az://account/container/key")
	why, missing := missingTool([]byte(out), "obj (az://account/container/key): ")
	if err == nil || !missing || why != "azcopy is not installed on this node (needed for az://)" {
		t.Fatalf("az without azcopy: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(dst, ".obj.gpuaccept-part")); err == nil {
		t.Error("a failed copy left its part file")
	}
}

func TestStageErrorPrefersTheScriptsWords(t *testing.T) {
	err := stageError([]byte("error data (http://x/d): curl failed (exit 22): curl: (22) The requested URL returned error: 404\n"),
		errors.New("exit 1"), "data (http://x/d): ")
	if err.Error() != "curl failed (exit 22): curl: (22) The requested URL returned error: 404" {
		t.Errorf("got %q", err)
	}
	if err := stageError(nil, errors.New("connection lost"), "x"); err.Error() != "connection lost" {
		t.Errorf("got %q", err)
	}
}

// TestStageScriptKeepsASignedURLOutOfArgv: the URL's query (a signed
// URL's credential) reaches curl in a file, never in any argv, and the
// script's words show it without the query.
func TestStageScriptKeepsASignedURLOutOfArgv(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	data := bytes.Repeat([]byte("weights"), 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("X-Amz-Signature") != "s3cr3tsig" {
			http.Error(w, "unsigned", http.StatusForbidden)
			return
		}
		w.Write(data)
	}))
	defer srv.Close()
	bin := t.TempDir()
	argv := filepath.Join(bin, "argv")
	wrapper := "#!/bin/bash\nprintf '%s\\n' \"$0\" \"$@\" >>" + argv + "\nexec " + curl + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "gpuaccept-run")
	signed := srv.URL + "/w.bin?X-Amz-Signature=s3cr3tsig&X-Amz-Expires=300"
	out, err := stageScriptEnv(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "fetch", dst, "weights", "http", signed)
	kv, ok := stagedLine([]byte(out))
	if err != nil || !ok || kv["tool"] != "curl" || kv["bytes"] != fmt.Sprint(len(data)) {
		t.Fatalf("fetch: %v %q", err, out)
	}
	got, _ := os.ReadFile(argv)
	if strings.Contains(string(got), "s3cr3tsig") || strings.Contains(out, "s3cr3tsig") || !strings.Contains(string(got), "-K") {
		t.Errorf("the signature reached argv or the output:\nargv: %s\nout: %s", got, out)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "gpuaccept-url.*")); len(left) > 0 {
		t.Errorf("the URL file was left behind: %v", left)
	}
	// A refusal names the source as shown, never with its query.
	out, err = stageScriptEnv(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "fetch", dst, "weights", "http", srv.URL+"/w.bin?X-Amz-Signature=wrong")
	if err == nil || strings.Contains(out, "wrong") || !strings.Contains(out, "error weights ("+srv.URL+"/w.bin?…)") {
		t.Errorf("refused: %v %q", err, out)
	}
}
