package standins

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Detached containers of the demo's podman: `run -d` starts the command as a background process on the node,
// supervised by a monitor (a second invocation of this program, as podman's conmon is to podman) that logs its
// output in podman's k8s-file format and records how it ended. Every later invocation (ps, logs, stop, kill, rm,
// inspect) reads the container's state from the node's store, so they need not share a process. The words and
// exit codes are podman 4.3's.

// LoopbackEnv names the loopback address a simulated node's services listen on and are reached at. The demo's
// nodes all run on one machine, so they cannot all listen on 127.0.0.1:8000: each node gets its own address of
// 127/8 (Linux routes all of it to lo). The demo's podman passes it to `standin openai-server` as --host, and the
// inference phase's load generator reaches the server there (127.0.0.1 when it is unset).
const LoopbackEnv = "GPUACCEPT_LOOPBACK"

// podmanMonitorVerb is the monitor's invocation: not a podman command, never typed by anyone.
const podmanMonitorVerb = "__gpuaccept-conmon"

// Container states as podman names them.
const (
	ctrCreated = "created"
	ctrRunning = "running"
	ctrExited  = "exited"
)

// ctrConfig is what `run` fixed about a container; it does not change after.
type ctrConfig struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Image      string            `json:"image"` // as the run named it
	ImageID    string            `json:"image_id"`
	ImageName  string            `json:"image_name"`
	Command    []string          `json:"command"`
	Exe        string            `json:"exe"` // the command's resolved path
	Env        []string          `json:"env,omitempty"`
	Dir        string            `json:"dir"`
	Labels     map[string]string `json:"labels"`
	AutoRemove bool              `json:"auto_remove"`
	Created    time.Time         `json:"created"`
}

// ctrState is how the container stands; the monitor writes it as its process starts and ends.
type ctrState struct {
	Status     string    `json:"status"`
	Pid        int       `json:"pid,omitempty"`
	StartTicks uint64    `json:"start_ticks,omitempty"` // the pid's start time in /proc, against pid reuse
	ExitCode   int       `json:"exit_code"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

type container struct {
	dir string
	ctrConfig
	state ctrState
}

func containersDir(store string) string { return filepath.Join(store, "containers") }

// lockContainers serializes what must see the store whole (a name taken, a container removed) across the
// invocations of podman on a node.
func lockContainers(store string) (func(), error) {
	if err := os.MkdirAll(containersDir(store), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(containersDir(store), ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readContainer(dir string) (*container, error) {
	c := &container{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &c.ctrConfig); err != nil {
		return nil, err
	}
	if b, err = os.ReadFile(filepath.Join(dir, "state.json")); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &c.state); err != nil {
		return nil, err
	}
	c.settle()
	return c, nil
}

// settle makes a container whose process is gone read as exited, even when its monitor could not say so (it
// was killed): its exit code is then unknown, and says so in State.Error.
func (c *container) settle() {
	if c.state.Status != ctrRunning || c.alive() {
		return
	}
	// The monitor writes the exit as soon as it reaps the process: give it a moment.
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		b, err := os.ReadFile(filepath.Join(c.dir, "state.json"))
		var st ctrState
		if err == nil && json.Unmarshal(b, &st) == nil && st.Status != ctrRunning {
			c.state = st
			return
		}
	}
	c.state.Status, c.state.ExitCode, c.state.FinishedAt = ctrExited, -1, time.Now()
	c.state.Error = "the container's monitor is gone: its exit code was lost"
}

// alive says whether the container's process runs: the pid exists, started when the monitor recorded, and is
// not a zombie.
func (c *container) alive() bool {
	if c.state.Status != ctrRunning || c.state.Pid <= 1 {
		return false
	}
	ticks, state, ok := procStat(c.state.Pid)
	return ok && ticks == c.state.StartTicks && state != "Z" && state != "X"
}

// procStat reads a process's start time (clock ticks since boot) and state from /proc/PID/stat.
func procStat(pid int) (uint64, string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	// The command name may hold spaces and parentheses: the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, "", false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	return ticks, f[0], err == nil
}

// containers lists the store's containers, newest first, as podman ps does.
func containers(store string) []*container {
	entries, _ := os.ReadDir(containersDir(store))
	var out []*container
	for _, e := range entries {
		if !e.IsDir() || len(e.Name()) != 64 {
			continue
		}
		if c, err := readContainer(filepath.Join(containersDir(store), e.Name())); err == nil {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *container) int { return b.Created.Compare(a.Created) })
	return out
}

var errNoContainer = errors.New("no such container")

// findContainer resolves a name, an ID or an unambiguous prefix of one (podman's lookup).
func findContainer(store, ref string) (*container, error) {
	var byPrefix []*container
	for _, c := range containers(store) {
		if c.Name == ref || c.ID == ref {
			return c, nil
		}
		if ref != "" && strings.HasPrefix(c.ID, ref) {
			byPrefix = append(byPrefix, c)
		}
	}
	if len(byPrefix) == 1 {
		return byPrefix[0], nil
	}
	return nil, fmt.Errorf("no container with name or ID %q found: %w", ref, errNoContainer)
}

// runOptions are the parts of a `podman run` command line the stand-in acts on.
type runOptions struct {
	detach, remove, gpus bool
	name                 string
	labels               map[string]string
	env                  []string
	image                string
	command              []string
}

// runValueFlags take a value (the next argument, or after "="); the ones not in the switch below are accepted
// and do not change what the simulated container does.
var runValueFlags = map[string]bool{"--device": true, "--gpus": true, "--name": true, "-e": true, "--env": true,
	"--network": true, "--net": true, "-v": true, "--volume": true, "-u": true, "--user": true, "-w": true,
	"--workdir": true, "--security-opt": true, "--ipc": true, "--shm-size": true, "--ulimit": true,
	"--entrypoint": true, "--label": true, "-l": true, "--pull": true, "--stop-timeout": true, "--pid": true,
	"--cap-add": true, "--hostname": true, "--log-driver": true, "--cgroupns": true, "--userns": true}

var runBoolFlags = map[string]bool{"-d": true, "--detach": true, "--rm": true, "-i": true, "-t": true,
	"-it": true, "--init": true, "--privileged": true}

func parseRun(args []string) (runOptions, error) {
	o := runOptions{labels: map[string]string{}}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a, v, hasV := strings.Cut(args[i], "=")
		switch {
		case runBoolFlags[a] && !hasV:
			switch a {
			case "-d", "--detach":
				o.detach = true
			case "--rm":
				o.remove = true
			}
		case runValueFlags[a]:
			if !hasV {
				if i+1 >= len(args) {
					return o, fmt.Errorf("flag needs an argument: %s", a)
				}
				i++
				v = args[i]
			}
			switch a {
			case "--device":
				o.gpus = o.gpus || strings.HasPrefix(v, "nvidia.com/gpu=")
			case "--gpus":
				o.gpus = true
			case "--name":
				o.name = v
			case "--label", "-l":
				k, lv, _ := strings.Cut(v, "=")
				o.labels[k] = lv
			case "-e", "--env":
				if !strings.Contains(v, "=") {
					// -e NAME passes the variable through; unset, it is left out.
					continue
				}
				o.env = append(o.env, v)
			}
		default:
			return o, fmt.Errorf("unknown flag: %s", a)
		}
	}
	if i >= len(args) {
		return o, errors.New("requires at least 1 arg(s), only received 0")
	}
	o.image, o.command = args[i], args[i+1:]
	return o, nil
}

// runDetached says whether a run command line asks for a detached container.
func runDetached(args []string) bool {
	o, err := parseRun(args)
	return err == nil && o.detach
}

// podmanRunDetached creates the container, starts its monitor and prints its ID once the process runs.
func podmanRunDetached(store string, args, env []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\nSee 'podman run --help'\n", err)
		return 125
	}
	img, err := findImage(store, o.image)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	command := o.command
	if len(command) == 0 {
		var c struct {
			Config struct{ Cmd []string } `json:"config"`
		}
		_ = json.Unmarshal(img.Config, &c)
		command = c.Config.Cmd
	}
	if len(command) == 0 {
		fmt.Fprintln(stderr, "Error: no command or entrypoint provided, and no CMD or ENTRYPOINT from image")
		return 125
	}
	command = withLoopbackHost(command, lookupEnv(env, LoopbackEnv))
	self, err := selfArgv(append([]string{"run"}, args...))
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	// The simulated image holds standin (as the lab's test image does, at /usr/local/bin) and nothing else
	// runnable; the GPU tools come with the GPUs, as with CDI devices.
	var exe string
	if o.gpus || command[0] == StandinCommand {
		exe, err = lookPath(command[0], lookupEnv(env, "PATH"))
	} else {
		err = errors.New("not in the simulated image")
	}
	// Created first, as podman does: a name in use is said before a command that is not found.
	c, code := createContainer(store, o, img, command, exe, env, stderr)
	if c == nil {
		return code
	}
	if err != nil {
		if c.AutoRemove {
			removeContainer(store, c)
		}
		fmt.Fprintf(stderr, "Error: crun: executable file `%s` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found\n", command[0])
		return 127
	}
	mon := exec.Command(self[0], append(self[1:], podmanMonitorVerb, c.ID)...)
	mon.Env, mon.Dir = env, c.dir
	// Its own session: the container outlives the SSH session that started it, as a real one does.
	mon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := mon.Start(); err != nil {
		fmt.Fprintf(stderr, "Error: starting the container's monitor: %v\n", err)
		return 125
	}
	go mon.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := readContainer(c.dir)
		if err == nil && cur.state.Status != ctrCreated || err != nil && c.AutoRemove {
			if err == nil && cur.state.Error != "" {
				fmt.Fprintf(stderr, "Error: %s\n", cur.state.Error)
				return 126
			}
			fmt.Fprintln(stdout, c.ID)
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(stderr, "Error: container %s did not start within 10s\n", c.ID)
	return 125
}

// withLoopbackHost gives `standin openai-server` the node's loopback address (LoopbackEnv) to listen on,
// unless the command names a --host of its own.
func withLoopbackHost(command []string, loopback string) []string {
	if loopback == "" || len(command) < 2 || command[0] != StandinCommand || command[1] != "openai-server" {
		return command
	}
	for _, a := range command[2:] {
		if a == "--host" || strings.HasPrefix(a, "--host=") {
			return command
		}
	}
	out := append([]string{}, command[:2]...)
	return append(append(out, "--host", loopback), command[2:]...)
}

// selfArgv is the command line that runs this program's podman again: os.Args up to "podman" (gpuaccept
// standin podman, or standin podman). args must be what PodmanMain was given, the tail of os.Args.
func selfArgv(args []string) ([]string, error) {
	n := len(os.Args) - len(args) - 1
	if n < 1 || os.Args[n] != Podman || !slices.Equal(os.Args[n+1:], args) {
		return nil, errors.New("podman run -d: the simulated podman must be run as a program (its monitor runs it again)")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return append([]string{exe}, os.Args[1:n+1]...), nil
}

func createContainer(store string, o runOptions, img *storedImage, command []string, exe string, env []string, stderr io.Writer) (*container, int) {
	unlock, err := lockContainers(store)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return nil, 125
	}
	defer unlock()
	existing := containers(store)
	if o.name != "" {
		for _, c := range existing {
			if c.Name == o.name {
				fmt.Fprintf(stderr, "Error: creating container storage: the container name %q is already in use by %s. You have to remove that container to be able to reuse that name: that name is already in use\n", o.name, c.ID)
				return nil, 125
			}
		}
	}
	var raw [32]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	name := o.name
	for name == "" || slices.ContainsFunc(existing, func(c *container) bool { return c.Name == name }) {
		name = randomName()
	}
	imageName := o.image
	if len(img.Names) > 0 {
		imageName = img.Names[0]
	}
	// The container's working directory: the node's home, where the demo puts what a container is given.
	dir := lookupEnv(env, "HOME")
	if dir == "" {
		dir, _ = os.Getwd()
	}
	c := &container{dir: filepath.Join(containersDir(store), id), ctrConfig: ctrConfig{ID: id, Name: name,
		Image: o.image, ImageID: img.ID, ImageName: imageName, Command: command, Exe: exe, Env: o.env, Dir: dir,
		Labels: o.labels, AutoRemove: o.remove, Created: time.Now()}, state: ctrState{Status: ctrCreated}}
	err = os.Mkdir(c.dir, 0o700)
	if err == nil {
		err = writeJSON(filepath.Join(c.dir, "config.json"), c.ctrConfig)
	}
	if err == nil {
		err = writeJSON(filepath.Join(c.dir, "state.json"), c.state)
	}
	if err != nil {
		os.RemoveAll(c.dir)
		fmt.Fprintf(stderr, "Error: creating container storage: %v\n", err)
		return nil, 125
	}
	return c, 0
}

var (
	nameLeft  = []string{"admiring", "brave", "clever", "eager", "focused", "gallant", "happy", "jolly", "keen", "nifty", "quirky", "serene"}
	nameRight = []string{"babbage", "curie", "darwin", "euler", "feynman", "gauss", "hopper", "kepler", "lovelace", "noether", "shannon", "turing"}
)

func randomName() string {
	var b [2]byte
	rand.Read(b[:])
	return nameLeft[int(b[0])%len(nameLeft)] + "_" + nameRight[int(b[1])%len(nameRight)]
}

// podmanMonitor runs the container's process and waits for it, as conmon does: its output to the container's
// log, its start and its exit to the container's state.
func podmanMonitor(store, id string, env []string) int {
	if len(id) != 64 || strings.ContainsAny(id, "/.") {
		return 125
	}
	c, err := readContainer(filepath.Join(containersDir(store), id))
	if err != nil {
		return 125
	}
	state := filepath.Join(c.dir, "state.json")
	logf, err := os.OpenFile(filepath.Join(c.dir, "ctr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		writeJSON(state, ctrState{Status: ctrExited, ExitCode: 126, Error: err.Error(), FinishedAt: time.Now()})
		return 0
	}
	defer logf.Close()
	log := &k8sLog{w: bufio.NewWriter(logf)}
	cmd := exec.Command(c.Exe, c.Command[1:]...)
	cmd.Args[0] = c.Command[0]
	cmd.Env, cmd.Dir = append(append([]string{}, env...), c.Env...), c.Dir
	cmd.Stdout, cmd.Stderr = log.stream("stdout"), log.stream("stderr")
	// Its own process group: stop and kill signal the whole container, as a PID namespace's end does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		writeJSON(state, ctrState{Status: ctrExited, ExitCode: 126, Error: err.Error(), FinishedAt: time.Now()})
		return 0
	}
	ticks, _, _ := procStat(cmd.Process.Pid)
	st := ctrState{Status: ctrRunning, Pid: cmd.Process.Pid, StartTicks: ticks, StartedAt: time.Now()}
	writeJSON(state, st)
	err = cmd.Wait()
	log.close()
	st.Status, st.FinishedAt, st.Pid, st.StartTicks = ctrExited, time.Now(), 0, 0
	if ps := cmd.ProcessState; ps != nil {
		st.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.ExitCode = 128 + int(ws.Signal())
		}
	} else if err != nil {
		st.ExitCode, st.Error = 126, err.Error()
	}
	writeJSON(state, st)
	if c.AutoRemove {
		if unlock, err := lockContainers(store); err == nil {
			os.RemoveAll(c.dir)
			unlock()
		}
	}
	return 0
}

// k8sLog writes a container's output as podman's k8s-file log driver does: one line per line of output,
// "TIMESTAMP STREAM F|P TEXT", F for a full line, P for a part of one (cut at 16 KiB, or the output's end).
type k8sLog struct {
	mu sync.Mutex
	w  *bufio.Writer
	// open holds each stream's line so far.
	open map[string][]byte
}

const k8sLogMaxLine = 16 << 10

func (l *k8sLog) stream(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open == nil {
			l.open = map[string][]byte{}
		}
		buf := append(l.open[name], p...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			l.line(name, "F", buf[:i])
			buf = buf[i+1:]
		}
		for len(buf) >= k8sLogMaxLine {
			l.line(name, "P", buf[:k8sLogMaxLine])
			buf = buf[k8sLogMaxLine:]
		}
		l.open[name] = append([]byte(nil), buf...)
		return len(p), l.w.Flush()
	})
}

func (l *k8sLog) line(stream, tag string, text []byte) {
	fmt.Fprintf(l.w, "%s %s %s %s\n", time.Now().Format(time.RFC3339Nano), stream, tag, text)
}

func (l *k8sLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range []string{"stdout", "stderr"} {
		if len(l.open[s]) > 0 {
			l.line(s, "P", l.open[s])
		}
	}
	l.w.Flush()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
