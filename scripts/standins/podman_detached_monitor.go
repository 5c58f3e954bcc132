package standins

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The container's monitor (conmon's part): its process run, its output logged, its exit recorded.

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
	self, _, _ := procStat(os.Getpid())
	st := ctrState{Status: ctrRunning, Pid: cmd.Process.Pid, StartTicks: ticks, StartedAt: time.Now(),
		MonitorPid: os.Getpid(), MonitorTicks: self}
	writeJSON(state, st)
	err = cmd.Wait()
	log.close()
	st.Status, st.FinishedAt, st.Pid, st.StartTicks, st.MonitorPid, st.MonitorTicks = ctrExited, time.Now(), 0, 0, 0, 0
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
