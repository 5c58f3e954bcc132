package phases

// The harness of the phase bodies' unit tests: a window run by the real
// runner over remote/fake hosts. Each host answers as the node scripts
// and tools would (the formats are the real ones: preflight.sh's
// sections, the stand-ins' nvidia-smi and dcgmi, the fabric model's
// nccl-tests), so a body is exercised end to end without the lab.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote/fake"
	"gpuaccept/scripts"
)

// fakeInventory is an inventory of nodes h1..hN (addresses from the
// documentation range) with body appended: YAML keys after nodes.
func fakeInventory(t *testing.T, nodes int, body string) *inventory.Inventory {
	t.Helper()
	var b strings.Builder
	b.WriteString("provider: fake\nregion: test\nsimulated: true\nssh:\n  user: root\n  config: none\nnodes:\n")
	for i := 1; i <= nodes; i++ {
		fmt.Fprintf(&b, "  - {name: h%d, address: 192.0.2.%d}\n", i, 10+i)
	}
	b.WriteString(body)
	path := filepath.Join(t.TempDir(), "fake.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatalf("fake inventory: %v\n%s", err, b.String())
	}
	return inv
}

// fakeFleet is a host for every node of inv, answering hostname, the
// window's private directory (as mktemp -d would, kept by the host so a
// resumed window finds it) and teardown as a sound node does.
func fakeFleet(inv *inventory.Inventory) *fake.Fleet {
	f := fake.NewFleet()
	for i, n := range inv.Nodes {
		h := f.Add(fake.NewHost(n.Name))
		h.Reply(`^hostname$`, fake.Reply{Stdout: n.Name + "\n"})
		var mu sync.Mutex
		made := map[string]bool{}
		h.On(`(?s)^bash -c .* private `, func(c *fake.Call) fake.Reply {
			w := shellWords(c.Command)
			prev, prefix := w[len(w)-2], w[len(w)-1]
			mu.Lock()
			defer mu.Unlock()
			if made[prev] && strings.HasPrefix(prev, prefix) {
				return fake.Reply{Stdout: prev + "\n"}
			}
			dir := fmt.Sprintf("%s%010d", prefix, 1000+i*100+len(made))
			made[dir] = true
			return fake.Reply{Stdout: dir + "\n"}
		})
		h.On(`(?s)^(GPUACCEPT_TEARDOWN_ENROOT=gpuaccept-\S+ )?(GPUACCEPT_TEARDOWN_CONTAINERS=1 )?(GPUACCEPT_POD=1 )?bash -c .* teardown `, func(c *fake.Call) fake.Reply {
			return fake.Reply{Stdout: "removed $HOME/.gpuaccept/window\nprocesses ended: 0\n"}
		})
		h.Reply(`(?s)^bash -c .* left `, fake.Reply{Stdout: "checked\n"})
		h.On(`^cd && cd \S+ && tar -x -o -f `+archiveName, func(c *fake.Call) fake.Reply { return unpack(h, c.Command) })
		answerSecurity(h, soundPosture)
		answerTools(h, allTools) // a sound node has what it is asked for
		fakeSampler(h, nil)
	}
	return f
}

// unpack is the tools phase's unpack on a fake node: the uploaded archive
// becomes its files, which sha256sum and wc -c report as a node's would.
func unpack(h *fake.Host, command string) fake.Reply {
	dir := shellWords(strings.TrimPrefix(command, "cd && cd "))[0]
	a, ok := h.File(dir + "/" + archiveName)
	if !ok || a.Data == nil {
		return fake.Reply{Stderr: "tar: " + archiveName + ": Cannot open: No such file or directory\n", Exit: 2}
	}
	var sums, sizes strings.Builder
	tr := tar.NewReader(bytes.NewReader(a.Data))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		body, _ := io.ReadAll(tr)
		h.Put(dir+"/"+hdr.Name, body)
		f, _ := h.File(dir + "/" + hdr.Name)
		fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, hdr.Name)
		fmt.Fprintf(&sizes, "%d %s\n", f.Size, hdr.Name)
	}
	h.Remove(dir + "/" + archiveName)
	return fake.Reply{Stdout: sums.String() + sizes.String()}
}

// soundPosture is what security.sh prints on a node a buyer can sign
// for, section by section (the residue section is made from the
// directories it is given).
var soundPosture = map[string]string{
	"sshd":       "source sshd -T -f /etc/ssh/sshd_config\npasswordauthentication no\nkbdinteractiveauthentication no\npermitrootlogin prohibit-password\npermitemptypasswords no\nusepam yes\npubkeyauthentication yes\n",
	"accounts":   "root:0:/bin/bash\n",
	"authorized": "",
	"foreign":    "",
	"gpu-apps":   "",
	"mounts":     "/ /dev/nvme0n1p1 ext4\n",
}

// answerSecurity makes h answer security.sh with posture's sections (a
// section absent from it: the tool is not installed, rc 127).
func answerSecurity(h *fake.Host, posture map[string]string) {
	onScript(h, "security.sh", func(c *fake.Call, a []string) fake.Reply {
		var b strings.Builder
		for _, name := range []string{"sshd", "accounts", "authorized", "foreign", "gpu-apps", "containers", "mounts", "residue"} {
			out, ok := posture[name]
			rc := 0
			switch {
			case name == "residue" && !ok:
				for _, d := range a[1:] {
					out += d + " absent\n"
				}
			case !ok:
				rc = 127
			}
			fmt.Fprintf(&b, "@@gpuaccept@@ begin %s\n%s@@gpuaccept@@ end %s rc=%d\n", name, out, name, rc)
		}
		return fake.Reply{Stdout: b.String()}
	})
}

// answerWindowKey makes h install the window key as windowkey.sh does:
// the restricted line it printed, from the arguments it was given.
func answerWindowKey(h *fake.Host, seen func(c *fake.Call, args []string)) {
	onScript(h, "windowkey.sh", func(c *fake.Call, a []string) fake.Reply {
		if seen != nil {
			seen(c, a)
		}
		if len(a) != 6 {
			return fake.Reply{Exit: 1, Stderr: fmt.Sprintf("windowkey.sh: %d arguments", len(a))}
		}
		return fake.Reply{Stdout: fmt.Sprintf("authorized restrict,from=%q,expiry-time=\"20261201230000\" %s\n", a[5], a[1])}
	})
	// The uploaded private key renamed into place, as mv does.
	h.On(`^cd && mv -f -- \S+/ssh/id_ed25519\.\S+ \S+/ssh/id_ed25519$`, func(c *fake.Call) fake.Reply {
		w := shellWords(c.Command)
		if !c.Host.Rename(w[len(w)-2], w[len(w)-1]) {
			return fake.Reply{Exit: 1, Stderr: "mv: cannot stat '" + w[len(w)-2] + "': No such file or directory\n"}
		}
		return fake.Reply{}
	})
}

// runFake runs phases over the fleet as a window does (connect and tools
// first, teardown last, whatever is given in between).
func runFake(t *testing.T, inv *inventory.Inventory, f *fake.Fleet, middle ...orchestrator.Phase) *record.Run {
	t.Helper()
	phases := append(append([]orchestrator.Phase{Connect, Tools}, middle...), Teardown)
	rec, _, err := orchestrator.Start(t.Context(), inv, phases, orchestrator.Options{RunsDir: t.TempDir(), Dial: f.Dial, Tool: "test"})
	if err != nil {
		t.Fatalf("window: %v", err)
	}
	return rec
}

// toolRun matches toolCmd's line: the checked copy of a pushed script,
// then its arguments.
var toolRun = regexp.MustCompile(`f="\$HOME/\.gpuaccept/([^/]+)/bin/([^/]+)/([^"]+)";.* bash "\$f" ?(.*)$`)

// toolPath matches toolCheck's part of a line: the pushed file's path.
var toolPath = regexp.MustCompile(`f="\$HOME/\.gpuaccept/([^/]+)/bin/([^/]+)/([^"]+)";`)

// onScript answers the runs of pushed script name on h as toolCmd's check
// would: exit 96 when the copy the tools phase pushed is missing or not
// this binary's; otherwise handler, given the script's arguments.
func onScript(h *fake.Host, name string, handler func(c *fake.Call, args []string) fake.Reply) {
	h.On(`/bin/[^/]+/`+regexp.QuoteMeta(name)+`".* bash "\$f"`, func(c *fake.Call) fake.Reply {
		m := toolRun.FindStringSubmatch(strings.ReplaceAll(c.Command, "\n", " "))
		if m == nil || m[3] != name {
			return fake.Reply{Exit: 127, Stderr: "fake: unscripted tool run: " + c.Command}
		}
		if reply, ok := pushedCheck(c, m[1], m[3]); !ok {
			return reply
		}
		return handler(c, shellWords(m[4]))
	})
}

// pushedCheck is toolCheck on a fake host: the file at the pushed path
// with the sha256 of this binary's copy.
func pushedCheck(c *fake.Call, runID, name string) (fake.Reply, bool) {
	want := ""
	for _, f := range scripts.Pushed() {
		if f.Name == name {
			want = scripts.SHA256(f.Body)
		}
	}
	got, ok := c.Host.File(toolsDir(runID, c.Host.Name()) + "/" + name)
	if !ok || got.SHA256 != want {
		return fake.Reply{Exit: 96, Stderr: "gpuaccept: " + name + " is missing or is not the copy pushed at the start of the window\n"}, false
	}
	return fake.Reply{}, true
}

// shellWords splits a command line into words as a POSIX shell would for
// the quoting gpuaccept writes: '...' (with '\” inside), "..." and bare
// words. Expansions stay as written.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			i++
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

func TestShellWordsReadsRemoteQuote(t *testing.T) {
	got := shellWords(`a 'b c' 'it'\''s' "x y" --k="$HOME/v" plain`)
	want := []string{"a", "b c", "it's", "x y", "--k=$HOME/v", "plain"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%q, want %q", got, want)
	}
}

// verdictOf is the verdict id gave node ("" for the cluster).
func verdictOf(t *testing.T, r *record.Run, id, node string) record.Verdict {
	t.Helper()
	for _, v := range r.Verdicts {
		if v.ID == id && v.Node == node {
			return v
		}
	}
	t.Fatalf("no verdict %s for %q among %d", id, node, len(r.Verdicts))
	return record.Verdict{}
}

// resultOf is phase's recorded result on node index i (-1: the cluster).
func resultOf(t *testing.T, r *record.Run, phase string, i int) record.PhaseResult {
	t.Helper()
	for j := len(r.Phases) - 1; j >= 0; j-- {
		if p := r.Phases[j]; p.Phase == phase && p.Index == i {
			return p
		}
	}
	t.Fatalf("no %s result for node %d", phase, i)
	return record.PhaseResult{}
}

// jsonOf decodes a result's data.
func jsonOf(r record.PhaseResult, v any) error { return json.Unmarshal(r.Data, v) }
