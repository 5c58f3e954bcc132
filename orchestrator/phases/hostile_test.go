package phases

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/reports"
)

// planted are secrets a node lets slip, each in another shape; none may
// reach the bundle or stderr.
var planted = []string{
	"wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTED", // AWS secret key
	"AKIAPLANTED0000EXAMP",                  // AWS access key ID
	"eyJhbGciOiJIUzI1NiJ9.plantedpayload",   // bearer token
	"hf_plantedplantedplantedplanted0",      // Hugging Face token
	"plantedsignature0",                     // a signed URL's signature
	"plantedpassw0rd",                       // user:password@ in a URL
	"ghp_plantedplantedplantedplanted0123",  // GitHub token
}

// TestAPlantedSecretReachesNoEvidence: a node whose environment (copied
// into nccl-tests' -J report) and tools' output carry secrets of several
// shapes; the bundle (run.json, reports, journal, raw logs) and stderr
// hold none of them.
func TestAPlantedSecretReachesNoEvidence(t *testing.T) {
	inv := fakeInventory(t, 2, fabricQuote+`  staging:
    enabled: true
    dir: /scratch
    fio: false
    sources:
      - {name: data, url: "https://bucket.example.com/d.tar?X-Amz-Signature=plantedsignature0&X-Amz-Credential=AKIAPLANTED0000EXAMP"}
`)
	f := fakeFleet(inv)
	model := fabricHosts(2, "")
	env := `"env":["HOME=/root", "HF_TOKEN=hf_plantedplantedplantedplanted0", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTED", "DB=postgres://app:plantedpassw0rd@db:5432/x", "NCCL_DEBUG=INFO"]`
	for _, n := range inv.Nodes {
		h := f.Host(n.Name)
		answerAsStandin(h, "h100")
		answerFabric(h, model, n.Address)
		answerWindowKey(h, nil)
		h.Reply(`^hostname$`, fake.Reply{Stdout: n.Name + "\nexport AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTED\n",
			Stderr: "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.plantedpayload\n"})
		h.Reply(`_perf -h 2>&1 \| grep -c -e --output_file$`, fake.Reply{Stdout: "1\n"})
		// The -J report: only its env matters here (no results: the text
		// output's stand).
		h.Reply(`^cat ".*\.json" 2>/dev/null && rm -f `, fake.Reply{Stdout: `{"version":2, "args":["all_reduce_perf"], ` + env + `, "nccl_version":22703, "results":[]}`})
		onScript(h, "stage.sh", func(c *fake.Call, a []string) fake.Reply {
			if a[0] == "prepare" {
				return fake.Reply{Stdout: "avail 900000000000\n"}
			}
			return fake.Reply{Stdout: "error data (" + a[4] + "): curl failed (exit 22): GET " + strings.TrimSpace(string(c.Stdin)) + " with token ghp_plantedplantedplantedplanted0123: 403\n", Exit: 1}
		})
	}
	var stderr bytes.Buffer
	phases := []orchestrator.Phase{Connect, Tools, Preflight, Diag, WindowKey, Staging, IntraNode, AllReduce, Teardown}
	rec, dir, err := orchestrator.Start(t.Context(), inv, phases, orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Progress: orchestrator.NewProgress(&stderr, false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := reports.WriteBundle(dir, rec); err != nil {
		t.Fatal(err)
	}
	// The secrets did reach the coordinator: the test would prove nothing
	// if the fake never said them.
	if !strings.Contains(strings.Join(f.Host("h1").Commands(), "\n"), "cat ") {
		t.Fatal("the -J report was never read")
	}
	found := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		// A raw log is read as its reader would: decompressed.
		b := readLog(t, p)
		found++
		for _, s := range planted {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", strings.TrimPrefix(p, dir+"/"), s)
			}
		}
		return nil
	})
	for _, s := range planted {
		if strings.Contains(stderr.String(), s) {
			t.Errorf("stderr holds %q", s)
		}
	}
	if found < 10 {
		t.Fatalf("only %d files in the bundle", found)
	}
	// What the measurement needs is kept.
	raw := readLog(t, filepath.Join(dir, "raw", "h1", "allreduce"+reports.LogSuffix))
	if !bytes.Contains(raw, []byte(`"NCCL_DEBUG=INFO"`)) || bytes.Contains(raw, []byte("HOME=/root")) {
		t.Errorf("the -J report's env in the raw log: %s", raw)
	}
}

// TestAHostileNodeCannotExhaustTheCoordinator: a node whose hostname
// prints 100 MB and whose preflight prints a huge line leaves a bounded
// record, a journal that --resume reads back, and a capped raw log.
func TestAHostileNodeCannotExhaustTheCoordinator(t *testing.T) {
	inv := fakeInventory(t, 2, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100")
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	f.Host("h2").On(`^hostname$`, func(c *fake.Call) fake.Reply {
		for i := 0; i < 100; i++ {
			c.Stdout.Write(chunk)
		}
		return fake.Reply{}
	})
	onScript(f.Host("h2"), "preflight.sh", func(c *fake.Call, _ []string) fake.Reply {
		for i := 0; i < 40; i++ {
			c.Stdout.Write(chunk)
		}
		return fake.Reply{Stdout: "\n"}
	})
	rec, dir, err := orchestrator.Start(t.Context(), inv, []orchestrator.Phase{Connect, Tools, Preflight, Teardown},
		orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial})
	if err != nil {
		t.Fatal(err)
	}
	if err := reports.WriteBundle(dir, rec); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "run.json")); err != nil || st.Size() > 2<<20 {
		t.Errorf("run.json: %v bytes (%v)", st.Size(), err)
	}
	var reached Reached
	json.Unmarshal(resultOf(t, rec, "connect", 1).Data, &reached)
	if len(reached.Hostname) > 260 {
		t.Errorf("a hostname of %d bytes kept", len(reached.Hostname))
	}
	if log := readLog(t, filepath.Join(dir, "raw", "h2", "connect"+reports.LogSuffix)); len(log) > orchestrator.MaxLogBytes+1024 {
		t.Errorf("raw log: %v bytes", len(log))
	} else if tail := string(log[max(0, len(log)-200):]); !strings.Contains(tail, "raw log cut at") {
		t.Errorf("the cut is not said: %q", tail)
	}
	// Every journal line reads back within the limit a resume uses.
	j, err := orchestrator.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sc := bufio.NewScanner(j)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	lines := 0
	for sc.Scan() {
		lines++
		if n := len(sc.Bytes()); n > 16<<20 {
			t.Errorf("journal line %d: %d bytes", lines, n)
		}
	}
	if err := sc.Err(); err != nil || lines < 5 {
		t.Errorf("journal: %d lines, %v", lines, err)
	}
	if v := verdictOf(t, rec, "GPU-001", "h2"); v.Status != record.Fail || !rec.Nodes[1].Quarantined {
		t.Errorf("GPU-001 h2 (its preflight said nothing usable): %+v", v)
	}
}

// readLog is a bundle's file as its reader sees it: a raw log
// decompressed.
func readLog(t *testing.T, path string) []byte {
	t.Helper()
	r, err := reports.OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}
