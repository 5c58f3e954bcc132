package labtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/orchestrator/record"
	"gpuaccept/scripts/lab"
)

var stagingHosts = []string{"h1", "h2", "h3"}

// stagingFiles writes n random bytes to dir/name and returns their sha256.
func stagingFile(t *testing.T, dir, name string, n int) string {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// sharedStagingDir is a directory of the lab's shared filesystem for this
// test: its path on the hosts and on the coordinator.
func sharedStagingDir(t *testing.T, l *lab.Lab) (onHosts, here string) {
	t.Helper()
	name := "staging-" + strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	here = filepath.Join(l.SharedDir(), name)
	t.Cleanup(func() { os.RemoveAll(here) })
	return lab.SharedPath + "/" + name, here
}

// stagingInventory writes an inventory over h1..h3 with a staging phase
// into /srv (each host's own) from the given sources (YAML flow maps).
func stagingInventory(t *testing.T, l *lab.Lab, quote string, window string, fio bool, sources ...string) string {
	t.Helper()
	phasesExtra := fmt.Sprintf("  staging:\n    enabled: true\n    dir: /srv/staging\n    fio: %v\n", fio)
	if window != "" {
		phasesExtra += "    window: " + window + "\n"
	}
	phasesExtra += "    sources:\n"
	for _, s := range sources {
		phasesExtra += "      - " + s + "\n"
	}
	return writeInventory(t, l, stagingHosts, quote, phasesExtra)
}

// stagingResults decodes every node's recorded staging.
func stagingResults(t *testing.T, r *record.Run) map[string]phases.Staged {
	t.Helper()
	out := map[string]phases.Staged{}
	for _, p := range r.Phases {
		if p.Phase != "staging" || len(p.Data) == 0 {
			continue
		}
		var s phases.Staged
		if err := json.Unmarshal(p.Data, &s); err != nil {
			t.Fatal(err)
		}
		out[p.Node] = s
	}
	return out
}

func logStaging(t *testing.T, r *record.Run) {
	t.Helper()
	res := stagingResults(t, r)
	for _, h := range stagingHosts {
		s, ok := res[h]
		if !ok {
			t.Logf("%s: no staging data", h)
			continue
		}
		for _, src := range s.Sources {
			if src.Error != "" {
				t.Logf("%s: %-9s %-9s FAILED: %s", h, src.Name, src.Kind, src.Error)
				continue
			}
			t.Logf("%s: %-9s %-9s %9d bytes in %6.3f s = %7.4f GB/s (%s, sha256 %s…, %s)", h, src.Name, src.Kind,
				src.Bytes, src.Seconds, src.GBs, src.Tool, src.SHA256[:12], src.Checksum)
		}
		disk := s.DiskNote
		if d := s.Disk; d != nil {
			disk = fmt.Sprintf("fio direct=%v write %.3f GB/s, read %.3f GB/s", d.Direct, d.WriteGBs, d.ReadGBs)
		}
		t.Logf("%s: total %d bytes in %.3f s = %.4f GB/s, started %s; disk: %s", h, s.Bytes, s.Seconds, s.GBs,
			s.Started.Format("15:04:05.000"), disk)
	}
	for _, v := range r.Verdicts {
		if strings.HasPrefix(v.ID, "STAGE-") {
			node := v.Node
			if node == "" {
				node = "cluster"
			}
			t.Logf("%s %-7s %s  %s | %s | %s", v.ID, node, v.Status, v.Measured, v.Quoted, v.Detail)
		}
	}
}

// TestStagingThreeNodesAtOnce stages a file from the lab's HTTP storage, a
// file from its shared filesystem (sha256 given) and synthetic data to
// h1..h3 at the same time.
func TestStagingThreeNodesAtOnce(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	served := t.TempDir()
	datasetSum := stagingFile(t, served, "dataset.bin", 24<<20)
	url, err := l.Storage(t.Context(), served)
	if err != nil {
		t.Fatal(err)
	}
	onHosts, here := sharedStagingDir(t, l)
	weightsSum := stagingFile(t, here, "weights.bin", 16<<20)
	inv := stagingInventory(t, l, "  staging_gbs: 0.005\n", "2m", true,
		fmt.Sprintf("{name: dataset, url: %q}", url+"/dataset.bin"),
		fmt.Sprintf("{name: weights, path: %s/weights.bin, sha256: %s}", onHosts, weightsSum),
		"{name: tokenizer, size: 8MiB}")
	runs := t.TempDir()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	dir := runDir(t, runs)
	r := readRun(t, dir)
	logStaging(t, r)
	if res.code != 0 {
		for _, v := range r.Verdicts {
			if v.Status == record.Fail {
				t.Logf("%s %s FAIL: %s %s", v.ID, v.Node, v.Measured, v.Detail)
			}
		}
		t.Fatalf("exit %d, want 0 (accepted)\n%s", res.code, res.stderr)
	}
	for _, h := range stagingHosts {
		for _, id := range []string{"STAGE-001", "STAGE-002"} {
			if v := verdict(r, id, h); v.Status != record.Pass {
				t.Errorf("%s %s: %s %s %s", id, h, v.Status, v.Measured, v.Detail)
			}
		}
	}
	for _, id := range []string{"STAGE-002", "STAGE-003"} {
		if v := verdict(r, id, ""); v.Status != record.Pass {
			t.Errorf("%s cluster: %s %s %s", id, v.Status, v.Measured, v.Detail)
		}
	}
	staged := stagingResults(t, r)
	var first, last time.Time
	for _, h := range stagingHosts {
		s := staged[h]
		if len(s.Sources) != 3 || !s.Complete {
			t.Fatalf("%s: %+v", h, s)
		}
		want := map[string]string{"dataset": datasetSum, "weights": weightsSum}
		for _, src := range s.Sources {
			if w, ok := want[src.Name]; ok && src.SHA256 != w {
				t.Errorf("%s: %s sha256 %s, want %s", h, src.Name, src.SHA256, w)
			}
		}
		if got := s.Sources[0]; got.Tool != "curl" || got.Checksum != "tee" || got.Bytes != 24<<20 {
			t.Errorf("%s: dataset %+v", h, got)
		}
		if got := s.Sources[2]; got.Kind != "synthetic" || got.ExpectedFrom != "generator" || got.Bytes != 8<<20 {
			t.Errorf("%s: tokenizer %+v", h, got)
		}
		if first.IsZero() || s.Started.Before(first) {
			first = s.Started
		}
		if s.Started.After(last) {
			last = s.Started
		}
	}
	// At the same time: every node started staging within a moment of the
	// others.
	if d := last.Sub(first); d > 2*time.Second {
		t.Errorf("the nodes started staging %s apart", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "raw", "h2", "staging.log.gz")); err != nil {
		t.Error(err)
	}
	// Teardown removed the window's staging directory.
	for _, h := range stagingHosts {
		left, _ := filepath.Glob(filepath.Join(l.Dir, "hosts", h, "srv", "staging", "gpuaccept-*"))
		if len(left) > 0 {
			t.Errorf("%s: left behind %v", h, left)
		}
	}
	nothingLeft(t, l)
}

// TestStagingMissingSourceIsNamed: a 404, a path that does not exist, a
// tool that is not installed, a missing object and an empty prefix on the
// object store each fail with a message naming the source,
// quickly (no retrying forever), and the nodes' verdicts say so.
func TestStagingMissingSourceIsNamed(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	served := t.TempDir()
	url, err := l.Storage(t.Context(), served)
	if err != nil {
		t.Fatal(err)
	}
	onHosts, _ := sharedStagingDir(t, l)
	store, _ := objectStore(t, l, "gpuaccept-lab", map[string]int{"models/other/w.bin": 1 << 10})
	inv := stagingInventory(t, l, "", "", false,
		fmt.Sprintf("{name: dataset, url: %q}", url+"/no-such-dataset.tar"),
		fmt.Sprintf("{name: weights, path: %s/no-such-weights.bin}", onHosts),
		"{name: blob, url: az://acct/container/blob.bin}",
		fmt.Sprintf("{name: object, url: s3://gpuaccept-lab/no-such-object.bin, endpoint: %q}", store.URL),
		fmt.Sprintf("{name: prefix, url: s3://gpuaccept-lab/models/llama/, endpoint: %q}", store.URL),
		"{name: tokenizer, size: 1MiB}")
	runs := t.TempDir()
	start := time.Now()
	res := gpuaccept(t, "run", inv, "--runs-dir", runs)
	took := time.Since(start)
	r := readRun(t, runDir(t, runs))
	logStaging(t, r)
	if res.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	for _, h := range stagingHosts {
		v := verdict(r, "STAGE-001", h)
		if v.Status != record.Fail {
			t.Errorf("STAGE-001 %s: %s", h, v.Status)
		}
		for _, want := range []string{
			"dataset (" + url + "/no-such-dataset.tar) not staged: curl failed (exit 22): curl: (22) The requested URL returned error: 404",
			"weights (" + onHosts + "/no-such-weights.bin) not staged: no such file or directory on this node",
			"blob (az://acct/container/blob.bin) not staged: azcopy is not installed on this node (needed for az://)",
			"object (s3://gpuaccept-lab/no-such-object.bin) not staged: aws failed (exit 1): download failed: s3://gpuaccept-lab/no-such-object.bin to - An error occurred (404) when calling the HeadObject operation: Not Found",
			"prefix (s3://gpuaccept-lab/models/llama/) not staged: no object under this prefix at " + store.URL,
		} {
			if !strings.Contains(v.Detail, want) {
				t.Errorf("STAGE-001 %s lacks %q:\n%s", h, want, v.Detail)
			}
		}
		if strings.Contains(v.Detail, "tokenizer") {
			t.Errorf("STAGE-001 %s: the synthetic source failed too: %s", h, v.Detail)
		}
	}
	// Every node failed alike: the progress names each node's failed source
	// once, in lines grouped by host range. How many lines depends on how
	// far apart the failures arrived (the grouping holds a line 300 ms), so
	// a loaded machine may print two; never one per node twice.
	named := progressHosts(t, res.stderr, ": staging failed: dataset ("+url+"/no-such-dataset.tar): curl failed")
	if got := strings.Join(named, ","); got != "h1,h2,h3" {
		t.Errorf("progress names %q as failing the dataset, want each of h1,h2,h3 once:\n%s", got, res.stderr)
	}
	if took > time.Minute {
		t.Errorf("the window took %s with missing sources", took)
	}
	nothingLeft(t, l)
}

// TestStagingNodeKilledMidway: h3's link is slow, so its copy of the
// synthetic data is still on the wire when h3 dies; h1 and h2 finish, h3
// is named in the verdicts.
func TestStagingNodeKilledMidway(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	capHosts(t, l, map[string]string{"h3": "20mbit"})
	h3Staging := filepath.Join(l.Dir, "hosts", "h3", "srv", "staging")
	t.Cleanup(func() {
		if err := l.Start(context.Background(), "h3"); err != nil {
			t.Errorf("restart h3: %v", err)
		}
		// Teardown could not reach h3: its partial copy stays.
		os.RemoveAll(h3Staging)
	})
	inv := stagingInventory(t, l, "  staging_gbs: 0.001\n", "5m", false, "{name: weights, size: 48MiB}")
	runs := t.TempDir()
	cmd, errb := startRun(t, inv, runs)
	waitFor(t, 60*time.Second, "h3's copy under way (2 MiB on its disk)", func() bool {
		parts, _ := filepath.Glob(filepath.Join(h3Staging, "gpuaccept-*", ".weights.gpuaccept-part"))
		for _, p := range parts {
			if st, err := os.Stat(p); err == nil && st.Size() > 2<<20 {
				return true
			}
		}
		return false
	})
	if err := l.Kill(t.Context(), "h3"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	t.Logf("window ended %s after h3 was killed", time.Since(killed).Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errb.String())
	}
	r := readRun(t, runDir(t, runs))
	logStaging(t, r)
	for _, h := range []string{"h1", "h2"} {
		for _, id := range []string{"STAGE-001", "STAGE-002"} {
			if v := verdict(r, id, h); v.Status != record.Pass {
				t.Errorf("%s %s: %s %s %s", id, h, v.Status, v.Measured, v.Detail)
			}
		}
	}
	for _, id := range []string{"STAGE-001", "STAGE-002"} {
		if v := verdict(r, id, "h3"); v.Status != record.Fail || !strings.Contains(v.Detail, "connection lost") {
			t.Errorf("%s h3: %s %s", id, v.Status, v.Detail)
		}
	}
	if v := verdict(r, "STAGE-003", ""); v.Status != record.Fail || !strings.Contains(v.Detail, "did not complete staging: h3") {
		t.Errorf("STAGE-003: %s %s", v.Status, v.Detail)
	}
	if v := verdict(r, "STAGE-002", ""); !strings.Contains(v.Measured, "over 2 node(s)") || !strings.Contains(v.Detail, "h3") {
		t.Errorf("aggregate STAGE-002: %s %s", v.Measured, v.Detail)
	}
	if !strings.Contains(errb.String(), "h3: staging failed: weights (synthetic 48MiB): connection lost") {
		t.Errorf("progress does not say h3 was lost while staging:\n%s", errb.String())
	}
}

// objectStore starts the lab's S3-compatible store on the storage host and
// fills bucket with files (key → size of random bytes); it returns the store
// and each key's sha256.
func objectStore(t *testing.T, l *lab.Lab, bucket string, files map[string]int) (*lab.ObjectStore, map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatalf("the aws CLI is needed on the hosts for s3:// sources (apt-get install awscli): %v", err)
	}
	store, err := l.ObjectStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("object store: %v", err)
		}
	})
	sums := map[string]string{}
	for key, size := range files {
		data := make([]byte, size)
		rand.Read(data)
		if err := store.Put(bucket, key, bytes.NewReader(data), int64(size)); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		sums[key] = hex.EncodeToString(h[:])
	}
	return store, sums
}

// manifestSum is the sha256 stage.sh gives a directory: that of the
// `sha256sum` lines of its files ("./relative/path"), sorted by path.
func manifestSum(sums map[string]string, prefix string) string {
	var paths []string
	for key := range sums {
		if strings.HasPrefix(key, prefix) {
			paths = append(paths, "./"+strings.TrimPrefix(key, prefix))
		}
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "%s  %s\n", sums[prefix+strings.TrimPrefix(p, "./")], p)
	}
	h := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(h[:])
}

// TestStagingFromObjectStore stages one object (sha256 given) and a prefix
// of three objects from the lab's S3-compatible store to h1..h3 with the
// real aws CLI on each host, at the endpoint the inventory names.
func TestStagingFromObjectStore(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	store, sums := objectStore(t, l, "gpuaccept-lab", map[string]int{
		"datasets/train.bin":         24 << 20,
		"models/llama/config.json":   2 << 10,
		"models/llama/shard-0.bin":   8 << 20,
		"models/llama/tok/vocab.bin": 1 << 20,
	})
	// 2 MB/s a node: the aws CLI is CPU-bound on the lab's two shared cores
	// (4.1-4.5 MB/s a node on a slow day; a 5 MB/s quote failed CI).
	inv := stagingInventory(t, l, "  staging_gbs: 0.002\n", "2m", false,
		fmt.Sprintf("{name: dataset, url: s3://gpuaccept-lab/datasets/train.bin, endpoint: %q, sha256: %s}", store.URL, sums["datasets/train.bin"]),
		fmt.Sprintf("{name: weights, url: s3://gpuaccept-lab/models/llama/, endpoint: %q}", store.URL))
	res, r := runWindow(t, inv)
	logStaging(t, r)
	if res.code != 0 {
		t.Fatalf("exit %d, want 0 (accepted)\n%s", res.code, res.stderr)
	}
	weightsSum := manifestSum(sums, "models/llama/")
	for h, s := range stagingResults(t, r) {
		if len(s.Sources) != 2 || !s.Complete {
			t.Fatalf("%s: %+v", h, s)
		}
		if got := s.Sources[0]; got.Kind != "s3" || got.Tool != "aws" || got.Checksum != "tee" || got.Bytes != 24<<20 ||
			got.SHA256 != sums["datasets/train.bin"] || got.Endpoint != store.URL {
			t.Errorf("%s: dataset %+v", h, got)
		}
		if got := s.Sources[1]; got.Tool != "aws" || got.Checksum != "after" || got.Files != 3 ||
			got.Bytes != 2<<10+8<<20+1<<20 || got.SHA256 != weightsSum {
			t.Errorf("%s: weights %+v, want sha256 %s", h, got, weightsSum)
		}
	}
	for _, h := range stagingHosts {
		if v := verdict(r, "STAGE-001", h); v.Status != record.Pass {
			t.Errorf("STAGE-001 %s: %s %s", h, v.Status, v.Detail)
		}
	}
	nothingLeft(t, l)
}
