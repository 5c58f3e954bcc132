package standins

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// detachedNode is a simulated node for podman's detached containers: a store, and a PATH with the
// commands the tests run "in" the image (with the GPUs, so the node's PATH is the container's).
type detachedNode struct {
	t   *testing.T
	exe string
	env []string
}

func newDetachedNode(t *testing.T) *detachedNode {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	scripts := map[string]string{
		// Answers SIGTERM with exit 3, from a child it waits for: the whole group gets the signal. Its
		// streams reach the log through pipes of their own: the pause orders its two lines there.
		"serve": "echo started\nsleep 0.2\necho warming >&2\ntrap 'echo got TERM; exit 3' TERM\nwhile :; do sleep 0.05; done\n",
		// Ignores SIGTERM (and so do its children): only SIGKILL ends it.
		"stubborn": "trap '' TERM\necho stubborn\nwhile :; do sleep 0.05; done\n",
		"die":      "echo bye\nexit 7\n",
		"chatty":   "i=0\nwhile [ $i -lt 500 ]; do echo \"line $i\"; i=$((i+1)); done\nprintf 'no newline'\n",
		"args":     "for a in \"$@\"; do echo \"[$a]\"; done\necho \"env=$GREETING\"\necho \"cwd=$(pwd)\"\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)
	n := &detachedNode{t: t, exe: standinBinary(t), env: []string{PodmanStoreEnv + "=" + filepath.Join(dir, "store"),
		"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home}}
	archive := filepath.Join(dir, "demo.tar")
	t.Cleanup(func() { PodmanKillAll(filepath.Join(dir, "store")) })
	if _, errOut, code := n.podman("run", "-d", DemoImageRef, "sh"); code != 125 || !strings.Contains(errOut, "Error: "+DemoImageRef+": image not known") {
		t.Fatalf("run -d of an image not loaded: exit %d %q", code, errOut)
	}
	id, err := WriteDemoImage(archive)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := n.podman("load", "-q", "-i", archive); code != 0 {
		t.Fatalf("load: exit %d %q", code, errOut)
	}
	// The demo pins its image as NAME@sha256:ID; another digest or name is not it.
	for ref, want := range map[string]int{"localhost/gpuaccept-demo@sha256:" + id: 0, "gpuaccept-demo@sha256:" + id: 0,
		"localhost/other@sha256:" + id: 125, "localhost/gpuaccept-demo@sha256:" + strings.Repeat("0", 64): 125} {
		if _, errOut, code := n.podman("image", "inspect", ref); code != want {
			t.Errorf("image inspect %s: exit %d, want %d: %q", ref, code, want, errOut)
		}
	}
	return n
}

// podman runs the stand-in as a program, as a node's wrapper does: every call a process of its own.
func (n *detachedNode) podman(args ...string) (string, string, int) {
	n.t.Helper()
	cmd := exec.Command(n.exe, append([]string{Podman}, args...)...)
	cmd.Env = n.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		n.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// start runs a detached container with the GPUs: args are run's flags, then the command after "--".
func (n *detachedNode) start(args ...string) string {
	n.t.Helper()
	i := slices.Index(args, "--")
	run := append([]string{"run", "-d", "--network", "host", "--device", "nvidia.com/gpu=all"}, args[:i]...)
	out, errOut, code := n.podman(append(append(run, DemoImageRef), args[i+1:]...)...)
	if code != 0 || !regexp.MustCompile(`^[0-9a-f]{64}\n$`).MatchString(out) {
		n.t.Fatalf("run -d %v: exit %d stdout %q stderr %q", args, code, out, errOut)
	}
	return strings.TrimSpace(out)
}

func (n *detachedNode) inspect(format, ref string) string {
	n.t.Helper()
	out, errOut, code := n.podman("inspect", "--format", format, ref)
	if code != 0 {
		n.t.Fatalf("inspect %s %s: exit %d %q", format, ref, code, errOut)
	}
	return strings.TrimSpace(out)
}

// waitFor polls until cond holds (a container's process is its own: it runs on while the test checks).
func (n *detachedNode) waitFor(what string, cond func() bool) {
	n.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			n.t.Fatalf("after 10s: %s", what)
		}
	}
}

func TestPodmanDetachedStartPsLogsStopRm(t *testing.T) {
	n := newDetachedNode(t)
	id := n.start("--name", "web", "--label", "gpuaccept.window=w1", "--label", "role=server", "--", "serve")
	other := n.start("--label", "gpuaccept.window=w2", "--", "serve")

	ps := func(args ...string) string {
		t.Helper()
		out, errOut, code := n.podman(append([]string{"ps"}, args...)...)
		if code != 0 {
			t.Fatalf("ps %v: exit %d %q", args, code, errOut)
		}
		return out
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-a", "--filter", "label=gpuaccept.window=w1", "--format", "{{.ID}}"}, id[:12] + "\n"},
		{[]string{"-a", "--filter", "label=gpuaccept.window=w1", "--format", "{{.Names}}"}, "web\n"},
		{[]string{"-a", "--filter=label=gpuaccept.window=w2", "-q", "--no-trunc"}, other + "\n"},
		// Label filters all hold.
		{[]string{"-a", "--filter", "label=gpuaccept.window=w1", "--filter", "label=role=client", "-q"}, ""},
		{[]string{"-a", "--filter", "label=gpuaccept.window", "--format", "{{.Names}} {{.State}}"}, ""},
	} {
		got := ps(c.args...)
		if c.want == "" && len(c.args) == 5 {
			// Both containers carry the key: the newest first.
			lines := strings.Split(strings.TrimSpace(got), "\n")
			if len(lines) != 2 || !strings.HasSuffix(lines[1], "web running") {
				t.Errorf("ps %v: %q", c.args, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("ps %v: %q, want %q", c.args, got, c.want)
		}
	}
	if got := n.inspect("{{.State.Running}}", "web"); got != "true" {
		t.Fatalf("running: %q", got)
	}
	if got := n.inspect("{{.State.Running}} {{.Name}}", id[:12]); got != "true web" {
		t.Fatalf("by ID prefix: %q", got)
	}

	// Its output is logged as it comes, stdout and stderr apart.
	n.waitFor("web's log", func() bool { _, e, _ := n.podman("logs", "web"); return e == "warming\n" })
	// --tail counts the lines of both streams.
	if out, errOut, code := n.podman("logs", "--tail", "1", "web"); code != 0 || out != "" || errOut != "warming\n" {
		t.Errorf("logs --tail 1: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := n.podman("logs", "--tail", "2", "web"); code != 0 || out != "started\n" || errOut != "warming\n" {
		t.Errorf("logs --tail 2: exit %d %q %q", code, out, errOut)
	}

	// A name is one container's.
	if _, errOut, code := n.podman("run", "-d", "--name", "web", DemoImageRef, "sh"); code != 125 ||
		!strings.Contains(errOut, `Error: creating container storage: the container name "web" is already in use by `+id+`. You have to remove that container to be able to reuse that name: that name is already in use`) {
		t.Errorf("name in use: exit %d %q", code, errOut)
	}
	// A running container is removed only by force.
	if _, errOut, code := n.podman("rm", "web"); code != 2 || !strings.Contains(errOut, "container state improper") {
		t.Errorf("rm of a running container: exit %d %q", code, errOut)
	}

	pid, _ := strconv.Atoi(n.inspect("{{.State.Pid}}", "web"))
	if out, errOut, code := n.podman("stop", "-t", "5", "web"); code != 0 || out != "web\n" {
		t.Fatalf("stop: exit %d %q %q", code, out, errOut)
	}
	if got := n.inspect("{{.State.Running}} {{.State.ExitCode}}", "web"); got != "false 3" {
		t.Errorf("after stop: %q, want the script's exit on SIGTERM", got)
	}
	if err := syscall.Kill(-pid, 0); err != syscall.ESRCH {
		t.Errorf("the container's process group %d outlived stop: %v", pid, err)
	}
	if out, _, _ := n.podman("logs", "web"); !strings.HasSuffix(out, "got TERM\n") {
		t.Errorf("the log after stop: %q", out)
	}
	if got := ps("--format", "{{.Names}}"); got != strings.Split(n.inspect("{{.Name}}", other), "\n")[0]+"\n" {
		t.Errorf("ps without -a lists %q", got)
	}
	if got := ps("-a", "--filter", "name=^web$", "--format", "{{.Status}}"); !strings.HasPrefix(got, "Exited (3) ") {
		t.Errorf("ps -a status: %q", got)
	}

	// rm -f stops a running one; a missing one is no error with -f, and an error without.
	if out, errOut, code := n.podman("rm", "-f", "-t", "2", "web", other, "nosuch"); code != 0 || out != "web\n"+other+"\n" {
		t.Errorf("rm -f: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := n.podman("rm", "nosuch"); code != 1 || !strings.Contains(errOut, `Error: no container with name or ID "nosuch" found: no such container`) {
		t.Errorf("rm of a missing container: exit %d %q", code, errOut)
	}
	for _, verb := range [][]string{{"stop"}, {"logs"}, {"kill"}} {
		if _, errOut, code := n.podman(append(verb, "web")...); code != 125 || !strings.Contains(errOut, "no such container") {
			t.Errorf("%s of a removed container: exit %d %q", verb, code, errOut)
		}
	}
	if _, errOut, code := n.podman("inspect", "--format", "{{.State.Running}}", "web"); code != 125 || errOut != "Error: no such object: \"web\"\n" {
		t.Errorf("inspect of a removed container: exit %d %q", code, errOut)
	}
	if got := ps("-a", "-q"); got != "" {
		t.Errorf("ps -a after rm: %q", got)
	}
}

func TestPodmanDetachedStopKillsWhatIgnoresTerm(t *testing.T) {
	n := newDetachedNode(t)
	n.start("--name", "hard", "--", "stubborn")
	n.waitFor("hard's log", func() bool { o, _, _ := n.podman("logs", "hard"); return o == "stubborn\n" })
	began := time.Now()
	if out, errOut, code := n.podman("stop", "--time=1", "hard"); code != 0 || out != "hard\n" {
		t.Fatalf("stop: exit %d %q %q", code, out, errOut)
	}
	if took := time.Since(began); took < time.Second {
		t.Errorf("stop -t 1 of a container that ignores SIGTERM took %v: no grace period", took)
	}
	if got := n.inspect("{{.State.Status}} {{.State.ExitCode}}", "hard"); got != "exited 137" {
		t.Errorf("after SIGKILL: %q", got)
	}
	// kill: SIGKILL by default, only of a running container.
	n.start("--name", "k", "--", "serve")
	if out, _, code := n.podman("kill", "k"); code != 0 || out != "k\n" {
		t.Fatalf("kill: exit %d %q", code, out)
	}
	n.waitFor("k to exit", func() bool { return n.inspect("{{.State.Running}}", "k") == "false" })
	if got := n.inspect("{{.State.ExitCode}}", "k"); got != "137" {
		t.Errorf("killed: exit code %s", got)
	}
	if _, errOut, code := n.podman("kill", "k"); code != 125 || !strings.Contains(errOut, "can only kill running containers") {
		t.Errorf("kill of an exited container: exit %d %q", code, errOut)
	}
}

func TestPodmanDetachedProcessThatDies(t *testing.T) {
	n := newDetachedNode(t)
	n.start("--name", "brief", "--", "die")
	n.waitFor("brief to exit", func() bool { return n.inspect("{{.State.Running}}", "brief") == "false" })
	if got := n.inspect("{{.State.Status}} {{.State.ExitCode}}", "brief"); got != "exited 7" {
		t.Errorf("a process that ended: %q", got)
	}
	if out, _, _ := n.podman("ps", "-a", "--format", "{{.Names}} {{.Status}}"); !strings.HasPrefix(out, "brief Exited (7) ") {
		t.Errorf("ps -a: %q", out)
	}
	// Killed from outside the container (an OOM killer, a tenant): Exited too.
	n.start("--name", "victim", "--", "serve")
	pid, _ := strconv.Atoi(n.inspect("{{.State.Pid}}", "victim"))
	syscall.Kill(pid, syscall.SIGKILL)
	n.waitFor("victim to exit", func() bool { return n.inspect("{{.State.Running}}", "victim") == "false" })
	if got := n.inspect("{{.State.ExitCode}}", "victim"); got != "137" {
		t.Errorf("a process killed from outside: exit code %s", got)
	}
	// The monitor killed, then the process: Exited, the exit code lost, and said so.
	n.start("--name", "orphan", "--", "serve")
	var mon, proc int
	fmt.Sscan(n.inspect("{{.State.ConmonPid}} {{.State.Pid}}", "orphan"), &mon, &proc)
	if mon <= 1 || proc <= 1 || mon == proc {
		t.Fatalf("orphan: monitor %d, process %d", mon, proc)
	}
	syscall.Kill(mon, syscall.SIGKILL)
	syscall.Kill(-proc, syscall.SIGKILL)
	n.waitFor("orphan to exit", func() bool { return n.inspect("{{.State.Running}}", "orphan") == "false" })
	if got := n.inspect("{{.State.ExitCode}} {{.State.Error}}", "orphan"); got != "-1 the container's monitor is gone: its exit code was lost" {
		t.Errorf("a container whose monitor died: %q", got)
	}
	// A long log, its last line without a newline: whole, or its tail.
	n.start("--name", "chatty", "--", "chatty")
	n.waitFor("chatty to exit", func() bool { return n.inspect("{{.State.Running}}", "chatty") == "false" })
	var all strings.Builder
	for i := range 500 {
		fmt.Fprintf(&all, "line %d\n", i)
	}
	if out, _, code := n.podman("logs", "chatty"); code != 0 || out != all.String()+"no newline" {
		t.Errorf("logs of 500 lines and a partial one: exit %d, %d bytes, ends %q", code, len(out), out[max(0, len(out)-30):])
	}
	if out, _, _ := n.podman("logs", "--tail", "3", "chatty"); out != "line 498\nline 499\nno newline" {
		t.Errorf("logs --tail 3: %q", out)
	}
	if out, _, _ := n.podman("logs", "--tail=0", "chatty"); out != "" {
		t.Errorf("logs --tail=0: %q", out)
	}
	// --rm: gone once it ended.
	n.start("--rm", "--name", "once", "--", "die")
	n.waitFor("once to be removed", func() bool {
		o, _, _ := n.podman("ps", "-a", "--format", "{{.Names}}")
		return !strings.Contains(o, "once")
	})
	// Arguments, -e and the working directory (the node's home).
	n.start("--name", "a", "-e", "GREETING=hi there", "--", "args", "one two", "")
	n.waitFor("a's log", func() bool { o, _, _ := n.podman("logs", "a"); return strings.Contains(o, "cwd=") })
	home := strings.TrimPrefix(n.env[2], "HOME=")
	if o, _, _ := n.podman("logs", "a"); o != "[one two]\n[]\nenv=hi there\ncwd="+home+"\n" {
		t.Errorf("the command's arguments, env and directory: %q", o)
	}
	// Without the GPUs only what the simulated image holds runs.
	if _, errOut, code := n.podman("run", "-d", "--name", "nogpu", DemoImageRef, "serve"); code != 127 || !strings.Contains(errOut, "executable file `serve` not found") {
		t.Errorf("run -d without GPUs: exit %d %q", code, errOut)
	}
	// As with crun, the container was created before its command failed to start.
	if out, _, _ := n.podman("ps", "-a", "--filter", "name=nogpu", "--format", "{{.Status}}"); out != "Created\n" {
		t.Errorf("a container whose command was not found: %q", out)
	}
}

func TestWithLoopbackHost(t *testing.T) {
	for _, c := range []struct {
		in, want []string
		loopback string
	}{
		{[]string{"standin", "openai-server", "--port", "8000"}, []string{"standin", "openai-server", "--host", "127.0.1.3", "--port", "8000"}, "127.0.1.3"},
		{[]string{"standin", "openai-server", "--host", "0.0.0.0"}, []string{"standin", "openai-server", "--host", "0.0.0.0"}, "127.0.1.3"},
		{[]string{"standin", "openai-server", "--host=::1"}, []string{"standin", "openai-server", "--host=::1"}, "127.0.1.3"},
		{[]string{"standin", "openai-server"}, []string{"standin", "openai-server"}, ""},
		{[]string{"vllm", "serve", "m"}, []string{"vllm", "serve", "m"}, "127.0.1.3"},
	} {
		if got := withLoopbackHost(c.in, c.loopback); !slices.Equal(got, c.want) {
			t.Errorf("withLoopbackHost(%q, %q) = %q, want %q", c.in, c.loopback, got, c.want)
		}
	}
}

// TestSettleARemovedContainer: a --rm container whose process ended and whose
// monitor removed it between the two reads of its state is gone, not a
// container whose monitor died (that raced `run -d` of a quick command into
// exit 126).
func TestSettleARemovedContainer(t *testing.T) {
	c := &container{dir: filepath.Join(t.TempDir(), "removed")}
	c.state = ctrState{Status: ctrRunning, Pid: 1 << 30, MonitorPid: 1 << 30}
	if c.settle() {
		t.Errorf("a removed container settled as %+v", c.state)
	}
	dir := t.TempDir()
	c = &container{dir: dir}
	c.state = ctrState{Status: ctrRunning, Pid: 1 << 30, MonitorPid: 1 << 30}
	if err := writeJSON(filepath.Join(dir, "state.json"), c.state); err != nil {
		t.Fatal(err)
	}
	if !c.settle() || c.state.Error != "the container's monitor is gone: its exit code was lost" {
		t.Errorf("a container whose monitor is gone: %+v", c.state)
	}
}
