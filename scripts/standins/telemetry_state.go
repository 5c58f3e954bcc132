package standins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StateEnv names the environment variable that gives a simulated node's stand-in state directory; without it
// the stand-ins use DefaultStateDir where that directory exists. The lab gives every host its own /srv, so the
// default is per host there; the nccl stand-in (nccl/nccl_perf.c), started by mpirun over ssh without the
// wrappers' environment, finds it the same way.
const StateEnv = "GPUACCEPT_STANDIN_STATE"

// DefaultStateDir is the state directory when StateEnv is unset, used only where it exists.
const DefaultStateDir = "/srv/gpuaccept-standin"

// The state directory holds:
//
//	t0          unix milliseconds of the first nvidia-smi loop start: the origin of SimTelemetryEnv's times
//	busy/<any>  a stand-in workload's marker: its content is the pid that made it; the node's GPUs count as
//	            busy while that process lives (a marker whose process is gone is stale and removed)
//	sys/class/infiniband  the IB counter tree (InstallTelemetry; SysfsIBEnv names it for the node script)
const (
	t0File  = "t0"
	busyDir = "busy"
)

// stateDir is the node's state directory, "" when there is none (a stand-in run outside a simulated node).
func stateDir() string {
	if d := os.Getenv(StateEnv); d != "" {
		return d
	}
	if fi, err := os.Stat(DefaultStateDir); err == nil && fi.IsDir() {
		return DefaultStateDir
	}
	return ""
}

// origin returns the node's t0, writing now as t0 when none is there yet (the first sampler start). A resumed
// window's sampler keeps the first origin, so planted times stay where the lab put them.
func origin(dir string, now time.Time) (time.Time, error) {
	path := filepath.Join(dir, t0File)
	if t, err := readT0(path); err == nil {
		return t, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return time.Time{}, fmt.Errorf("stand-in state: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return readT0(path) // another loop won the race
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("stand-in state: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%d\n", now.UnixMilli())
	if err := errors.Join(werr, f.Close()); err != nil {
		return time.Time{}, fmt.Errorf("stand-in state: %w", err)
	}
	return now, nil
}

// readT0 reads t0; a file being written (empty) reads as an error and is retried by the caller's next tick.
func readT0(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("stand-in state %s: %w", path, err)
	}
	return time.UnixMilli(ms), nil
}

// peekOrigin is t0 when a loop has set it (dmesg reads it; it never sets it).
func peekOrigin(dir string) (time.Time, bool) {
	if dir == "" {
		return time.Time{}, false
	}
	t, err := readT0(filepath.Join(dir, t0File))
	return t, err == nil
}

// MarkBusy records in the node's state directory that process pid loads the node's GPUs, and returns the
// function that removes the mark. Where there is no state directory it does nothing. A process that dies
// without unmarking is noticed by its pid's absence.
func MarkBusy(pid int) (unmark func()) {
	dir := stateDir()
	if dir == "" {
		return func() {}
	}
	bd := filepath.Join(dir, busyDir)
	if err := os.MkdirAll(bd, 0o755); err != nil {
		return func() {}
	}
	path := filepath.Join(bd, strconv.Itoa(pid))
	tmp := filepath.Join(bd, "."+strconv.Itoa(pid)+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return func() {}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return func() {}
	}
	return func() { os.Remove(path) }
}

// busy says whether a live process holds a busy marker. It reads at most 256 markers: a lab host runs a few.
func busy(dir string) bool {
	if dir == "" {
		return false
	}
	bd := filepath.Join(dir, busyDir)
	f, err := os.Open(bd)
	if err != nil {
		return false
	}
	names, _ := f.Readdirnames(256)
	f.Close()
	found := false
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // a marker being written
		}
		b, err := os.ReadFile(filepath.Join(bd, n))
		if err != nil || len(b) > 32 {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue // being written, or not a marker
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			found = true
		} else if errors.Is(err, syscall.ESRCH) {
			os.Remove(filepath.Join(bd, n))
		}
	}
	return found
}
