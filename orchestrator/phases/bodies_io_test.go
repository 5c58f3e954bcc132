package phases

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"gpuaccept/orchestrator/fabric"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/scripts/standins"
)

const (
	pin   = "1dbd2c5e0e3ec4e2a4a3d18e8e3e0f2f5f9f6a2e1b7c3d4e5f60718293a4b5c6"
	other = "77aa2c5e0e3ec4e2a4a3d18e8e3e0f2f5f9f6a2e1b7c3d4e5f60718293a4b5c6"
)

// answerImagePull makes h a podman node that pulls the pin and shows id
// for it (id != pin: the registry served another image).
func answerImagePull(h *fake.Host, id string) {
	h.Reply(`^podman images -q --no-trunc && echo '-- added'`, fake.Reply{Stdout: "sha256:0aa0\n-- added\n"})
	h.Reply(`^echo 'podman sha256:[0-9a-f]+' >> '?/var/tmp/gpuaccept-[^ ]+/images'?$`, fake.Reply{})
	h.Reply(`^podman pull `, fake.Reply{Stdout: "Trying to pull registry.example/train...\nGetting image source signatures\nWriting manifest to image destination\n" + id + "\n"})
	h.Reply(`^podman image inspect `, fake.Reply{Stdout: fmt.Sprintf(`[{"Id": %q, "RepoDigests": ["registry.example/train@sha256:%s"]}]`, id, id)})
	h.Reply(`^podman run --rm --device nvidia.com/gpu=all sha256:`+id+` nvidia-smi -L 2>&1$`, fake.Reply{Stdout: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"})
}

// TestImagePulledAndCheckedAgainstThePin: pull mode; h2's registry gives
// another image, which fails IMG-001 and quarantines h2; h1's starts with
// its GPUs.
func TestImagePulledAndCheckedAgainstThePin(t *testing.T) {
	inv := fakeInventory(t, 2, "image:\n  reference: registry.example/train@sha256:"+pin+"\n  runtime: podman\n")
	f := fakeFleet(inv)
	answerImagePull(f.Host("h1"), pin)
	answerImagePull(f.Host("h2"), other)
	r := runFake(t, inv, f, Image)
	if v := verdictOf(t, r, "IMG-001", "h1"); v.Status != record.Pass || v.Value == nil {
		t.Errorf("IMG-001 h1: %+v", v)
	}
	if v := verdictOf(t, r, "IMG-002", "h1"); v.Status != record.Pass || !strings.Contains(v.Measured, "GPU 0: NVIDIA H100") {
		t.Errorf("IMG-002 h1: %+v", v)
	}
	v := verdictOf(t, r, "IMG-001", "h2")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "not the pin") || !strings.Contains(v.Detail, other) {
		t.Errorf("IMG-001 h2: %+v", v)
	}
	if !r.Nodes[1].Quarantined || !strings.Contains(r.Nodes[1].Reason, "image: ") {
		t.Errorf("h2: %+v", r.Nodes[1])
	}
	if f.Host("h2").Ran(`^podman run`) != 0 {
		t.Error("h2 started an image that is not the pin")
	}
	// The pin was listed as the window's own before the pull, in the
	// window's private directory: teardown removes it even if the
	// coordinator dies right after, and no other user can add to the list.
	var tools ToolsPushed
	if err := json.Unmarshal(resultOf(t, r, "tools", 0).Data, &tools); err != nil || !strings.HasPrefix(tools.State, "/var/tmp/gpuaccept-"+r.ID+".") {
		t.Fatalf("h1's private directory: %+v %v", tools, err)
	}
	if f.Host("h1").Ran(`^echo 'podman sha256:`+pin+`' >> `+regexp.QuoteMeta(tools.State)+`/images$`) != 1 {
		t.Errorf("h1 did not list the pin as the window's: %q", f.Host("h1").Commands())
	}
}

// TestStagingSendsSyntheticDataAndFetchesAPath: synthetic data goes by
// upload, checked against the generator's sum on the node; a path source
// through stage.sh; a node whose copy differs is named (STAGE-001).
func TestStagingSendsSyntheticDataAndFetchesAPath(t *testing.T) {
	inv := fakeInventory(t, 3, `quote:
  staging_gbs: 1
phases:
  staging:
    enabled: true
    dir: /scratch
    fio: false
    window: 1m
    sources:
      - {name: dataset, size: 64KiB}
      - {name: weights, path: /shared/weights}
`)
	f := fakeFleet(inv)
	for _, h := range f.Hosts() {
		sum := "9f" + strings.Repeat("1", 62)
		if h.Name() == "h3" {
			sum = "ee" + strings.Repeat("2", 62) // h3's shared filesystem shows other bytes
		}
		onScript(h, "stage.sh", func(c *fake.Call, a []string) fake.Reply {
			switch a[0] {
			case "prepare":
				return fake.Reply{Stdout: "avail 900000000000\n"}
			case "fetch":
				if a[2] != "weights" || a[3] != "path" || a[4] != "/shared/weights" {
					return fake.Reply{Stdout: "error unexpected fetch " + strings.Join(a, " ") + "\n", Exit: 1}
				}
				return fake.Reply{Stdout: "staged bytes=2000000000 files=3 seconds=1.250 sha256=" + sum + " checksum=tee tool=cp hasher=openssl\n"}
			}
			return fake.Reply{Stdout: "error unknown operation " + a[0] + "\n", Exit: 2}
		})
	}
	r := runFake(t, inv, f, Staging)
	gen := newSynthetic("dataset", 64<<10)
	want, err := gen.sum(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range f.Hosts() {
		file, ok := h.File("/scratch/gpuaccept-" + r.ID + "/dataset")
		if !ok || file.SHA256 != want || file.Size != 64<<10 {
			t.Errorf("%s: dataset %+v, want sha256 %s", h.Name(), file, want)
		}
		var st Staged
		if err := json.Unmarshal(resultOf(t, r, "staging", i).Data, &st); err != nil || len(st.Sources) != 2 || st.Avail != 900000000000 {
			t.Errorf("%s: staged %+v %v", h.Name(), st, err)
		}
	}
	if v := verdictOf(t, r, "STAGE-001", "h1"); v.Status != record.Pass {
		t.Errorf("STAGE-001 h1: %+v", v)
	}
	if v := verdictOf(t, r, "STAGE-001", "h3"); v.Status != record.Fail || !strings.Contains(v.Detail+v.Measured, "weights") {
		t.Errorf("STAGE-001 h3 (its copy differs): %+v", v)
	}
	if v := verdictOf(t, r, "STAGE-002", "h1"); v.Value == nil {
		t.Errorf("STAGE-002 h1 measured nothing: %+v", v)
	}
}

// ckptStore is a fake checkpoint.sh: a save writes the shards into
// storage (shared by every host when one map is given to all), a restore
// reads a writer's back with their sums.
type ckptStore struct {
	mu     sync.Mutex
	shards map[string][]string // writer → sha256 per shard
}

func (s *ckptStore) answer(h *fake.Host, corrupt bool) {
	onScript(h, "checkpoint.sh", func(c *fake.Call, a []string) fake.Reply {
		var b strings.Builder
		switch a[0] {
		case "write":
			node, shards := a[2], 0
			fmt.Sscan(a[4], &shards)
			var size int64
			fmt.Sscan(a[3], &size)
			fmt.Fprintf(&b, "free 900000000000\ngenerator openssl\nceiling 8000000000 1.0\n")
			var sums []string
			for k := 0; k < shards; k++ {
				sum := sha256.Sum256([]byte(fmt.Sprint(node, k)))
				sums = append(sums, hex.EncodeToString(sum[:]))
				fmt.Fprintf(&b, "shard %d %d %s 0.5\n", k, size/int64(shards), sums[k])
			}
			fmt.Fprintf(&b, "manifest %s/%s/manifest.sha256\nseconds 0.5\n", a[1], node)
			s.mu.Lock()
			s.shards[node] = sums
			s.mu.Unlock()
		case "restore":
			writer := a[2]
			s.mu.Lock()
			sums := s.shards[writer]
			s.mu.Unlock()
			for k, sum := range sums {
				fmt.Fprintf(&b, "expect %d %s\n", k, sum)
			}
			fmt.Fprintf(&b, "ceiling 8000000000 1.0\ncache fadvise 0\n")
			for k, sum := range sums {
				if corrupt && k == 0 {
					sum = strings.Repeat("0", 64)
				}
				fmt.Fprintf(&b, "shard %d 8388608 %s 0.25\n", k, sum)
			}
			b.WriteString("seconds 0.25\n")
		}
		return fake.Reply{Stdout: b.String()}
	})
}

// TestCheckpointWriteThenRestoreTheNeighbours: every node saves, then
// reads what the next node wrote on the shared filesystem; a node that
// reads a shard back wrong fails CKPT-001 naming the writer.
func TestCheckpointWriteThenRestoreTheNeighbours(t *testing.T) {
	inv := fakeInventory(t, 3, `quote:
  checkpoint_gbs: 10
phases:
  checkpoint: {enabled: true, dir: /ckpt, size: 16MiB, shards: 2}
`)
	f := fakeFleet(inv)
	store := &ckptStore{shards: map[string][]string{}}
	for _, h := range f.Hosts() {
		store.answer(h, h.Name() == "h2")
	}
	r := runFake(t, inv, f, CheckpointWrite, CheckpointRestore)
	var save CkptSave
	if err := json.Unmarshal(resultOf(t, r, ckptWritePhase, 0).Data, &save); err != nil || len(save.Shards) != 2 || save.Bytes != 16<<20 {
		t.Fatalf("h1 save: %+v %v", save, err)
	}
	var rest CkptRestore
	if err := json.Unmarshal(resultOf(t, r, ckptRestorePhase, 0).Data, &rest); err != nil || rest.Writer != "h2" {
		t.Errorf("h1 restored %+v (%v), want h2's checkpoint", rest, err)
	}
	if v := verdictOf(t, r, "CKPT-001", "h1"); v.Status != record.Pass {
		t.Errorf("CKPT-001 h1: %+v", v)
	}
	if v := verdictOf(t, r, "CKPT-001", "h2"); v.Status != record.Fail || !strings.Contains(v.Measured, "h3") {
		t.Errorf("CKPT-001 h2 (read h3's shard 0 wrong): %+v", v)
	}
	if v := verdictOf(t, r, "CKPT-002", "h1"); v.Value == nil {
		t.Errorf("CKPT-002 h1: %+v", v)
	}
}

// fabricHosts is the fabric model behind the fake fleet's mpirun and
// nccl-tests: rates per host, h3's links at half rate when slow.
func fabricHosts(n int, slow string) string {
	var hosts []standins.FabricHost
	for i := 1; i <= n; i++ {
		h := standins.FabricHost{Name: fmt.Sprintf("192.0.2.%d", 10+i), InterGBs: 370, IntraGBs: 450, GPUs: 8}
		if slices.Contains(strings.Split(slow, ","), fmt.Sprintf("h%d", i)) {
			h.InterGBs = 185
		}
		hosts = append(hosts, h)
	}
	return standins.FormatFabric(hosts)
}

// answerFabric makes h answer mpirun and all_reduce_perf from the fabric
// model, as the demo's nodes do (its hosts are the nodes' fabric
// addresses, which mpirun's -H names).
func answerFabric(h *fake.Host, fabric, addr string) {
	h.On(`(^|; )mpirun |_perf -b `, func(c *fake.Call) fake.Reply { return fabricReply(c, fabric, addr) })
	// After a failed run, the ranks left on every node are ended: none.
	h.Reply(`(?s)^bash -c .* endranks `, fake.Reply{Stdout: "0\n"})
	// No -J: the text output is what the phases read here.
	h.Reply(`_perf -h 2>&1 \| grep -c -e --output_file$`, fake.Reply{Stdout: "0\n"})
}

// fabricReply is the fabric model's answer to a call of mpirun or a
// nccl-tests binary on the node at addr.
func fabricReply(c *fake.Call, fabric, addr string) fake.Reply {
	words := shellWords(c.Command)
	env := []string{standins.FabricEnv + "=" + fabric, standins.FabricNodeEnv + "=" + addr}
	for i, w := range words {
		tool := w[strings.LastIndex(w, "/")+1:]
		if tool == "mpirun" || standins.IsFabricTool(tool) && !strings.Contains(w, "=") {
			args := []string{}
			rest := words[i+1:]
			if k := slices.Index(rest, "-J"); k >= 0 && k+1 < len(rest) {
				// The report is the test's to serve (cat): the model
				// would write it to a path the shell never expanded.
				rest = append(slices.Clone(rest[:k]), rest[k+2:]...)
			}
			for _, a := range rest {
				if a == "$ROOT" {
					// As the shell sets it where the coordinator logs in
					// as root (mpirun refuses root otherwise).
					a = "--allow-run-as-root"
				}
				args = append(args, a)
			}
			for _, e := range words[:i] {
				if strings.Contains(e, "=") && !strings.Contains(e, ";") {
					env = append(env, e)
				}
			}
			var out, errw bytes.Buffer
			rc := standins.FabricMain(tool, args, env, &out, &errw)
			return fake.Reply{Stdout: out.String(), Stderr: errw.String(), Exit: rc}
		}
	}
	return fake.Reply{Exit: 127, Stderr: "fake: no fabric tool in " + c.Command}
}

const fabricQuote = `quote:
  gpus_per_node: 8
  intra_busbw_gbs: 450
  inter_busbw_gbs: 370
  busbw_size: 64MiB
phases:
  allreduce:
    enabled: true
    min_bytes: 64MiB
    max_bytes: 1GiB
    repeats: 2
    timeout: 1m
`

func fabricFleet(t *testing.T, nodes int, slow string) (*fake.Fleet, *inventory.Inventory) {
	return fabricFleetQuoted(t, nodes, slow, fabricQuote)
}

// quickFabricQuote is fabricQuote with one sweep of 2 s: for tests whose
// collective hangs.
var quickFabricQuote = strings.Replace(fabricQuote, "repeats: 2\n    timeout: 1m", "repeats: 1\n    timeout: 2s", 1)

// fabricFleetQuoted is fabricFleet with its own quote and phases.
func fabricFleetQuoted(t *testing.T, nodes int, slow, quote string) (*fake.Fleet, *inventory.Inventory) {
	inv := fakeInventory(t, nodes, quote)
	f := fakeFleet(inv)
	model := fabricHosts(nodes, slow)
	for _, n := range inv.Nodes {
		answerFabric(f.Host(n.Name), model, n.Address)
		answerWindowKey(f.Host(n.Name), nil)
	}
	return f, inv
}

// TestIntraNodeRunsOneProcessOverEveryGPU: -g 8 on each node, judged
// against the quoted NVLink figure.
func TestIntraNodeRunsOneProcessOverEveryGPU(t *testing.T) {
	f, inv := fabricFleet(t, 2, "")
	r := runFake(t, inv, f, IntraNode)
	for _, n := range []string{"h1", "h2"} {
		v := verdictOf(t, r, "NCCL-003", n)
		if v.Status != record.Pass || v.Value == nil || *v.Value < 400 {
			t.Errorf("NCCL-003 %s: %+v", n, v)
		}
		if c := verdictOf(t, r, "NCCL-001", n); c.Status != record.Pass {
			t.Errorf("NCCL-001 %s: %+v", n, c)
		}
	}
	if got := f.Host("h1").Ran(` all_reduce_perf -b 67108864 -e 1073741824 .* -g 8$`); got != 2 {
		t.Errorf("%d -g 8 runs on h1, want 2 (repeats): %q", got, f.Host("h1").Commands())
	}
}

// TestAllReduceAcrossTheClusterMissesTheQuoteOnASlowNode: mpirun over
// every node from the first; the model's slow h3 pulls the cluster's
// busbw under the quote (NCCL-002 FAIL, measured, with the algorithm).
func TestAllReduceAcrossTheClusterMissesTheQuoteOnASlowNode(t *testing.T) {
	f, inv := fabricFleet(t, 3, "h3")
	r := runFake(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-002", "")
	if v.Status != record.Fail || v.Value == nil || *v.Value > 0.9*370 {
		t.Errorf("NCCL-002: %+v", v)
	}
	// The slow node fails the figure again on its retest: two runs of two
	// repeats, both recorded, the FAIL resting on the second.
	if got := f.Host("h1").Ran(`mpirun \$ROOT -np 24 -H 192\.0\.2\.11:8,192\.0\.2\.12:8,192\.0\.2\.13:8 .* -b 67108864 `); got != 4 {
		t.Errorf("%d mpirun sweeps from h1, want 4 (2 repeats, retested once): %q", got, f.Host("h1").Commands())
	}
	if v.Retest == nil || len(v.Retest.Runs) != 2 || v.Retest.Unstable || !v.Retest.Failed() {
		t.Errorf("NCCL-002 retest: %+v", v.Retest)
	}
	if f.Host("h2").Ran(`mpirun`) != 0 {
		t.Error("mpirun ran on a node other than the first")
	}
}

// TestBisectionNamesTheSlowNode: pairs of nodes measured round by round;
// the model's slow h3 is named (NCCL-004).
func TestBisectionNamesTheSlowNode(t *testing.T) {
	f, inv := fabricFleet(t, 4, "h3")
	r := runFake(t, inv, f, WindowKey, AllReduce, Bisection)
	// A named slow node is the verdict's node.
	v := verdictOf(t, r, "NCCL-004", "h3")
	if v.Status != record.Fail || !strings.Contains(v.Measured, "h3") || v.Value == nil {
		t.Errorf("NCCL-004: %+v", v)
	}
	for _, n := range []string{"h1", "h2", "h4"} {
		if strings.Contains(v.Measured, n) {
			t.Errorf("NCCL-004 names a sound node %s: %+v", n, v)
		}
	}
}

// TestABisectionOfPairsAllBelowTheQuoteSaysItWasBlind: every node at half
// the quoted rate, so every pair is, and none stands out; NCCL-004 warns
// that the search could not tell a slow part (not a pass), and with a
// slow node among them names it but says the names want a second look.
func TestABisectionOfPairsAllBelowTheQuoteSaysItWasBlind(t *testing.T) {
	f, inv := fabricFleet(t, 4, "h1,h2,h3,h4")
	r := runFake(t, inv, f, WindowKey, AllReduce, Bisection)
	v := verdictOf(t, r, "NCCL-004", "")
	if v.Status != record.Warn || !strings.Contains(v.Detail, "the typical pair ran at 50% of the quoted 370 GB/s") ||
		strings.Contains(v.Detail, "before blaming") {
		t.Errorf("NCCL-004 with every pair at half the quote: %+v", v)
	}
	f, inv = fabricFleet(t, 4, "h3")
	inv.Quote.InterBusBWGBs *= 4
	r = runFake(t, inv, f, WindowKey, AllReduce, Bisection)
	if v := verdictOf(t, r, "NCCL-004", "h3"); v.Status != record.Fail || !strings.Contains(v.Detail, "of the quoted 1480 GB/s") ||
		!strings.Contains(v.Detail, "before blaming a named part") {
		t.Errorf("NCCL-004 naming h3 with every pair below the quote: %+v", v)
	}
}

func TestAllPairsSlowNeedsAQuoteAndATypicalPairBelowIt(t *testing.T) {
	for _, c := range []struct {
		ref, quoted float64
		want        string
	}{
		{ref: 100, quoted: 0},
		{ref: 0, quoted: 100},
		{ref: 90, quoted: 100},
		{ref: 89, quoted: 100, want: "the typical pair ran at 89% of the quoted 100 GB/s"},
	} {
		got := allPairsSlow(fabric.Bisection{Reference: c.ref}, c.quoted, 0.9)
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("reference %v, quoted %v: %q, want %q", c.ref, c.quoted, got, c.want)
		}
	}
}

// ompiConnectFailed is Open MPI's warning of a TCP connect that failed
// (help-mpi-btl-tcp.txt's layout, a 5-host lab window's words).
const ompiConnectFailed = `--------------------------------------------------------------------------
WARNING: Open MPI failed to TCP connect to a peer MPI process.  This
should not happen.

Your Open MPI job may now hang or fail.

  Local host: h3
  PID:        4242
  Message:    connect() to 192.0.2.11:1025 failed
  Error:      Connection refused (111)
--------------------------------------------------------------------------
`

// TestAFailedCollectiveNamesTheLink: mpirun on h1 fails after Open MPI
// said h3 could not connect to h1's address (the words of a 5-host lab
// window, in Open MPI's help-mpi-btl-tcp.txt layout); the verdict names
// the link h3→h1, not only that the collective did not finish.
func TestAFailedCollectiveNamesTheLink(t *testing.T) {
	f, inv := fabricFleet(t, 3, "")
	f.Host("h1").Intercept(func(c *fake.Call) (fake.Reply, bool) {
		if !strings.Contains(c.Command, "mpirun ") {
			return fake.Reply{}, false
		}
		return fake.Reply{Exit: 1, Stderr: ompiConnectFailed}, true
	})
	r := runFake(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-002", "")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "h3 could not reach h1 (connect() to 192.0.2.11:1025 failed: Connection refused (111) (Open MPI))") {
		t.Errorf("NCCL-002: %+v", v)
	}
	var s Sweeps
	if err := json.Unmarshal(resultOf(t, r, "allreduce", -1).Data, &s); err != nil || len(s.Repeats) == 0 {
		t.Fatalf("allreduce data: %v", err)
	}
	if fs := s.Repeats[0].Faults; len(fs) != 1 || fs[0].From != "h3" || fs[0].To != "h1" {
		t.Errorf("faults: %+v", fs)
	}
	// Open MPI named the link: no pairs are run to find it.
	if s.Pairs != nil || f.Host("h2").Ran(`mpirun`) != 0 {
		t.Errorf("pairs ran though Open MPI named the link: %+v", s.Pairs)
	}
}

// TestAConnectStillInProgressStillRunsThePairs: Open MPI gave up on a
// connect that had not completed (EINPROGRESS, 115); that names where it
// waited, not what was slow (in the lab it named h2→h1 with h4 slowed), so
// the pairs run, and the verdict keeps Open MPI's words next to theirs.
func TestAConnectStillInProgressStillRunsThePairs(t *testing.T) {
	f, inv := fabricFleet(t, 3, "")
	said := strings.Replace(ompiConnectFailed, "Connection refused (111)", "Operation now in progress (115)", 1)
	f.Host("h1").Intercept(func(c *fake.Call) (fake.Reply, bool) {
		if !strings.Contains(c.Command, "mpirun ") || !strings.Contains(c.Command, "192.0.2.13:") {
			return fake.Reply{}, false
		}
		return fake.Reply{Exit: 1, Stderr: said}, true
	})
	r := runFake(t, inv, f, WindowKey, AllReduce)
	var s Sweeps
	if err := json.Unmarshal(resultOf(t, r, "allreduce", -1).Data, &s); err != nil || len(s.Repeats) == 0 {
		t.Fatalf("allreduce data: %v", err)
	}
	if s.Pairs == nil {
		t.Fatalf("no pairs ran after a connect Open MPI gave up on: %+v", s.Repeats[0])
	}
	v := verdictOf(t, r, "NCCL-002", "")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "Operation now in progress (115)") || !strings.Contains(v.Detail, "pair run(s)") {
		t.Errorf("NCCL-002: %+v", v)
	}
}

// TestACollectiveThatHungAtExitIsJudgedOnItsTable: mpirun on h1 prints
// the whole sweep and its footer, then never exits (as at 60 lab hosts);
// the figures are judged, NCCL-001 warns that the launcher hung, the ranks
// are ended, and no pairs go looking for a fault.
func TestACollectiveThatHungAtExitIsJudgedOnItsTable(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 3, "", quickFabricQuote)
	model := fabricHosts(3, "")
	f.Host("h1").Intercept(func(c *fake.Call) (fake.Reply, bool) {
		if !strings.Contains(c.Command, "mpirun ") {
			return fake.Reply{}, false
		}
		r := fabricReply(c, model, inv.Nodes[0].Address)
		if r.Exit != 0 || !strings.Contains(r.Stdout, "Avg bus bandwidth") {
			t.Errorf("the model did not print a whole sweep: %+v", r)
		}
		r.Hang = true
		return r, true
	})
	r := runFake(t, inv, f, WindowKey, AllReduce)
	var s Sweeps
	if err := json.Unmarshal(resultOf(t, r, "allreduce", -1).Data, &s); err != nil || len(s.Repeats) != 1 {
		t.Fatalf("allreduce data: %v %+v", err, s)
	}
	if sw := s.Repeats[0]; sw.Error != "" || sw.Judgement == nil || !strings.Contains(sw.ExitHung, "did not exit within 2s") {
		t.Errorf("sweep: error %q, exit_hung %q, judged %v", sw.Error, sw.ExitHung, sw.Judgement != nil)
	}
	if s.Pairs != nil {
		t.Errorf("pairs ran for a sweep that finished: %+v", s.Pairs)
	}
	if f.Host("h2").Ran(`endranks`) == 0 {
		t.Error("the ranks left by the hung launcher were not ended")
	}
	if v := verdictOf(t, r, "NCCL-002", ""); v.Status != record.Pass || v.Value == nil {
		t.Errorf("NCCL-002 not judged on the printed table: %+v", v)
	}
	if c := verdictOf(t, r, "NCCL-001", ""); c.Status != record.Warn || !strings.Contains(c.Measured, "launcher hung at exit") ||
		!strings.Contains(c.Detail, "sweep 1: the launcher did not exit within 2s") {
		t.Errorf("NCCL-001: %+v", c)
	}
}

// TestBisectionNamesASlowLeaf: with the nodes' leaf labels, the pairs go
// inside the leaves first, then across, and a leaf whose every node is
// slow is named as the leaf (one of three: with half the fleet slow no
// pair is typical).
func TestBisectionNamesASlowLeaf(t *testing.T) {
	f, inv := fabricFleet(t, 12, "h5,h6,h7,h8")
	for i := range inv.Nodes {
		inv.Nodes[i].Labels = map[string]string{"leaf": fmt.Sprintf("leaf-%d", i/4+1)}
	}
	r := runFake(t, inv, f, WindowKey, AllReduce, Bisection)
	var b Bisected
	if err := json.Unmarshal(resultOf(t, r, "bisect", -1).Data, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Groups) != 1 || b.Groups[0].String() != "leaf=leaf-2 (h[5-8]): all 4 nodes slow" {
		t.Fatalf("groups %+v\n%+v", b.Groups, b.Pairs)
	}
	for _, p := range b.Pairs {
		if leaf := func(h string) string {
			return inv.Nodes[slices.IndexFunc(inv.Nodes, func(n inventory.Node) bool { return n.Name == h })].Labels["leaf"]
		}; p.Round == 1 && leaf(p.A) != leaf(p.B) {
			t.Errorf("round 1 paired across the leaves: %+v", p)
		}
	}
	v := verdictOf(t, r, "NCCL-004", "h5,h6,h7,h8")
	if v.Status != record.Fail || !strings.HasPrefix(v.Measured, "slow: leaf=leaf-2 (h[5-8]): all 4 nodes slow, in ") {
		t.Errorf("NCCL-004: %+v", v)
	}
}

// TestAFailedCollectiveThatSaidNothingIsFoundByPairs: every run that
// includes h4 hangs and prints nothing (as a dead NIC does), so the
// all-reduce's output names no node; pairs of nodes then name h4 from its
// failures with partners proven good, and the verdicts say so.
func TestAFailedCollectiveThatSaidNothingIsFoundByPairs(t *testing.T) {
	f, inv := fabricFleetQuoted(t, 5, "", quickFabricQuote)
	for _, n := range inv.Nodes {
		f.Host(n.Name).Intercept(func(c *fake.Call) (fake.Reply, bool) {
			if strings.Contains(c.Command, "mpirun ") && strings.Contains(c.Command, "192.0.2.14:") {
				return fake.Reply{Hang: true}, true
			}
			return fake.Reply{}, false
		})
	}
	r := runFake(t, inv, f, WindowKey, AllReduce)
	var s Sweeps
	if err := json.Unmarshal(resultOf(t, r, "allreduce", -1).Data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Pairs == nil {
		t.Fatalf("no pairs ran after the collective failed: %+v", s)
	}
	if got := s.Pairs.SlowNodes; len(got) != 1 || got[0] != "h4" {
		t.Errorf("pairs named %v, want h4: %+v", got, s.Pairs.Pairs)
	}
	v := verdictOf(t, r, "NCCL-002", "h4")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "did not finish within 2s") ||
		!strings.Contains(v.Detail, "pairs name node h4 (failed with ") {
		t.Errorf("NCCL-002: %+v", v)
	}
	t.Logf("NCCL-002: %s", v.Detail)
	if c := verdictOf(t, r, "NCCL-001", "h4"); c.Status != record.Fail || !strings.Contains(c.Detail, "pairs name node h4") {
		t.Errorf("NCCL-001: %+v", c)
	}
	for _, p := range s.Pairs.Pairs {
		if (p.A == "h4" || p.B == "h4") != (p.Err != "") {
			t.Errorf("pair %s+%s: %q", p.A, p.B, p.Err)
		}
	}
}

// TestAFailureOnlyTheWholeSetShowsIsSaidSo: the five-node run fails
// without a word while every pair runs clean; the verdict says the fault
// is in no one node or link, and names no node.
func TestAFailureOnlyTheWholeSetShowsIsSaidSo(t *testing.T) {
	f, inv := fabricFleet(t, 5, "")
	f.Host("h1").Intercept(func(c *fake.Call) (fake.Reply, bool) {
		if strings.Contains(c.Command, "mpirun ") && strings.Contains(c.Command, " -np 40 ") {
			return fake.Reply{Exit: 1}, true
		}
		return fake.Reply{}, false
	})
	r := runFake(t, inv, f, WindowKey, AllReduce)
	v := verdictOf(t, r, "NCCL-002", "")
	if v.Status != record.Fail || !strings.Contains(v.Detail, "every pair ran (") ||
		!strings.Contains(v.Detail, "the collective fails only over the whole set of 5 nodes") {
		t.Errorf("NCCL-002: %+v", v)
	}
}
