package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gpuaccept/orchestrator/record"
)

// smallDisk is a directory on a filesystem of its own of size bytes (a
// tmpfs; root only), or "" where none can be mounted.
func smallDisk(t *testing.T, size string) string {
	if os.Geteuid() != 0 {
		return ""
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Logf("no tmpfs (%v): the journal's disk is /dev/full instead", err)
		return ""
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes to a file in dir until its disk is full.
func fill(dir string) error {
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// The bundle's disk fills up mid-window: the window stops after the phase,
// still tears down every node it reached (their raw logs have nowhere to
// go), ends INCOMPLETE saying the disk is full, and stderr says which
// nodes were cleaned and which were left uncleaned.
func TestAFullBundleDiskStillTearsDownAndSaysWhatWasLeft(t *testing.T) {
	runs := smallDisk(t, "256k")
	real := runs != ""
	if !real {
		runs = t.TempDir()
	}
	inv := testInventory(t, "gpu-01", "gpu-02", "gpu-03")
	var c calls
	fillPhase := Phase{Name: "fill", PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
		c.add("fill", n.Name)
		if n.Name != "gpu-01" {
			return nil, nil
		}
		if real {
			return nil, fill(runs)
		}
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		w.j.mu.Lock()
		w.j.f.Close()
		w.j.f = full
		w.j.mu.Unlock()
		return nil, nil
	}}
	teardown := Phase{Name: "teardown", Teardown: true, PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
		c.add("teardown", n.Name)
		log, _, err := w.Log(ctx, n)
		if err != nil {
			return nil, err
		}
		defer log.Close()
		if _, err := log.Write(bytes.Repeat([]byte("ended 4242 python3\n"), 1000)); err != nil {
			return nil, err
		}
		if n.Name == "gpu-03" {
			return nil, errors.New("ssh: connection lost")
		}
		return nil, nil
	}}
	var stderr bytes.Buffer
	ps := []Phase{phase("connect", &c, true, nil), fillPhase, phase("after", &c, false, nil), teardown}
	rec, dir, err := Start(t.Context(), inv, ps, Options{RunsDir: runs, Progress: NewProgress(&stderr, false)})
	if err == nil || !strings.Contains(err.Error(), "the bundle's disk is full: journal") {
		t.Fatalf("err = %v, want the bundle's disk is full", err)
	}
	if rec == nil || !strings.HasPrefix(rec.Aborted, "the bundle's disk is full: journal") {
		t.Fatalf("record: %+v", rec)
	}
	if o := rec.Result().Outcome; o != record.OutcomeIncomplete {
		t.Errorf("outcome %s, want INCOMPLETE", o)
	}
	for _, n := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		if c.get("teardown", n) != 1 {
			t.Errorf("teardown ran %d times on %s, want once", c.get("teardown", n), n)
		}
		if c.get("after", n) != 0 {
			t.Errorf("a phase after the disk filled ran on %s", n)
		}
	}
	out := stderr.String()
	for _, want := range []string{
		"the bundle's disk is full: journal",
		"gpu-[01-02]: cleaned (teardown)",
		"gpu-03: left uncleaned: teardown: ssh: connection lost",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	// What reached the disk stays readable.
	if _, err := readJournal(dir); err != nil {
		t.Errorf("journal: %v", err)
	}
}

// A raw log the disk cannot take fails neither the node nor the phase; it
// ends the window as a full journal does.
func TestARawLogOnAFullDiskFailsNoNode(t *testing.T) {
	inv := testInventory(t, "gpu-01")
	var c calls
	logPhase := Phase{Name: "logs", PerNode: func(ctx context.Context, w *Window, n *Node) (any, error) {
		log, _, err := w.Log(ctx, n)
		if err != nil {
			return nil, err
		}
		l := log.(*cappedLog)
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		l.f.Close()
		l.f, l.w = full, struct {
			io.Writer
			io.Closer
		}{full, io.NopCloser(nil)}
		_, err = io.WriteString(log, "nvidia-smi says\n")
		log.Close()
		return nil, err
	}}
	var stderr bytes.Buffer
	rec, _, err := Start(t.Context(), inv, []Phase{logPhase, phase("after", &c, false, nil)},
		Options{RunsDir: t.TempDir(), Progress: NewProgress(&stderr, false)})
	if err == nil || !strings.Contains(rec.Aborted, "the bundle's disk is full: raw log raw/gpu-01/logs.log") {
		t.Fatalf("err %v, aborted %q", err, rec.Aborted)
	}
	if rec.Phases[0].Outcome != record.OK || c.get("after", "gpu-01") != 0 {
		t.Errorf("phases: %+v, after ran %d", rec.Phases, c.get("after", "gpu-01"))
	}
}
