package standins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	Status     string `json:"status"`
	Pid        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"` // the pid's start time in /proc, against pid reuse
	// The monitor's own pid and start time: while it lives, an exit it has not written yet is coming.
	MonitorPid   int       `json:"monitor_pid,omitempty"`
	MonitorTicks uint64    `json:"monitor_ticks,omitempty"`
	ExitCode     int       `json:"exit_code"`
	Error        string    `json:"error,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`
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
	if !c.settle() {
		return nil, fmt.Errorf("container %s was removed as it ended: %w", c.ID, errNoContainer)
	}
	return c, nil
}

// settle makes a container whose process is gone read as exited, even when its monitor could not say so (it
// was killed): its exit code is then unknown, and says so in State.Error. It returns false when the container
// went while it looked: its monitor removed it (--rm) after recording its end.
func (c *container) settle() bool {
	if c.state.Status != ctrRunning || c.alive() {
		return true
	}
	// The monitor writes the exit once it has reaped the process and logged its last output: wait for it
	// while it lives (a loaded machine may take a while), bounded.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		b, err := os.ReadFile(filepath.Join(c.dir, "state.json"))
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		var st ctrState
		if err == nil && json.Unmarshal(b, &st) == nil && st.Status != ctrRunning {
			c.state = st
			return true
		}
		if !running(c.state.MonitorPid, c.state.MonitorTicks) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.state.Status, c.state.ExitCode, c.state.FinishedAt = ctrExited, -1, time.Now()
	c.state.Error = "the container's monitor is gone: its exit code was lost"
	return true
}

// alive says whether the container's process runs: the pid exists, started when the monitor recorded, and is
// not a zombie.
func (c *container) alive() bool {
	return c.state.Status == ctrRunning && running(c.state.Pid, c.state.StartTicks)
}

// running says whether pid is the process that started at ticks and is not a zombie.
func running(pid int, ticks uint64) bool {
	if pid <= 1 {
		return false
	}
	t, state, ok := procStat(pid)
	return ok && t == ticks && state != "Z" && state != "X"
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
