package fake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gpuaccept/remote"
)

func dial(t *testing.T, f *Fleet, name string) remote.Executor {
	t.Helper()
	e, err := f.Dial(t.Context(), remote.Config{Name: name, SSH: &remote.SSHConfig{Host: "192.0.2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestScriptedAnswersLastRuleWins(t *testing.T) {
	f := NewFleet("a")
	h := f.Host("a")
	h.Reply(`^hostname$`, Reply{Stdout: "a.example\n"})
	h.Reply(`^hostname$`, Reply{Stdout: "second\n"})
	h.Reply(`^false`, Reply{Exit: 3, Stderr: "it broke\n"})
	e := dial(t, f, "a")
	var out strings.Builder
	if err := e.Run(t.Context(), remote.Cmd{Command: "hostname", Stdout: &out, Env: map[string]string{"GPUACCEPT_RUN": "r1"}}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "second\n" {
		t.Errorf("stdout %q, want the later rule's", out.String())
	}
	err := e.Run(t.Context(), remote.Cmd{Command: "false now"})
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || !strings.Contains(ee.StderrTail, "it broke") || ee.Node != "a" {
		t.Errorf("err = %#v, want an ExitError with status 3 and the stderr tail", err)
	}
	err = e.Run(t.Context(), remote.Cmd{Command: "nvidia-smi -L"})
	if !errors.As(err, &ee) || ee.Status != 127 {
		t.Errorf("an unscripted command: %v, want exit 127", err)
	}
	if got := h.Calls()[0].Env["GPUACCEPT_RUN"]; got != "r1" {
		t.Errorf("recorded env %q", got)
	}
	if err := e.Run(t.Context(), remote.Cmd{Command: "x", Env: map[string]string{"1BAD": "v"}}); err == nil {
		t.Error("an invalid environment name was accepted")
	}
}

func TestHangEndsWithTheContextAndIsRecordedAsEnded(t *testing.T) {
	f := NewFleet("a")
	h := f.Host("a").Reply(`sleep`, Reply{Stdout: "started\n", Hang: true})
	e := dial(t, f, "a")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var out strings.Builder
	err := e.Run(ctx, remote.Cmd{Command: "sleep 1000", Stdout: &out})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "a: sleep 1000: ") {
		t.Errorf("err = %v, want the deadline, named", err)
	}
	if out.String() != "started\n" || !h.Calls()[0].Ended || h.Running() != 0 {
		t.Errorf("out %q, ended %v, running %d", out.String(), h.Calls()[0].Ended, h.Running())
	}
}

func TestDropEndsRunningCommandsAndARedialReachesTheHost(t *testing.T) {
	f := NewFleet("a")
	h := f.Host("a").Reply(`train`, Reply{Hang: true}).Reply(`^true$`, Reply{})
	e := dial(t, f, "a")
	done := make(chan error, 1)
	go func() { done <- e.Run(t.Context(), remote.Cmd{Command: "train"}) }()
	for h.Running() == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Drop("cable pulled")
	err := <-done
	if !errors.Is(err, remote.ErrConnectionLost) || !strings.Contains(err.Error(), "cable pulled") {
		t.Errorf("err = %v, want the connection lost", err)
	}
	if !e.Lost() || e.Run(t.Context(), remote.Cmd{Command: "true"}) == nil {
		t.Error("a lost connection still runs commands")
	}
	e2 := dial(t, f, "a")
	if err := e2.Run(t.Context(), remote.Cmd{Command: "true"}); err != nil {
		t.Errorf("redial: %v", err)
	}
	if f.Dials("a") != 2 || h.Open() != 1 {
		t.Errorf("dials %d, open %d", f.Dials("a"), h.Open())
	}
	// A reply that drops the connection says so.
	h.Reply(`^die$`, Reply{Stdout: "bye\n", Drop: true})
	if err := e2.Run(t.Context(), remote.Cmd{Command: "die"}); !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("err = %v", err)
	}
	f.Unreachable("a", errors.New("a: dial 192.0.2.1:22: no route to host"))
	if _, err := f.Dial(t.Context(), remote.Config{Name: "a"}); err == nil || !strings.Contains(err.Error(), "no route") {
		t.Errorf("unreachable: %v", err)
	}
}

func TestUploadsAreCheckedAndKept(t *testing.T) {
	f := NewFleet("a")
	h := f.Host("a")
	e := dial(t, f, "a")
	body := "#!/bin/bash\necho hi\n"
	const sum = "3c4b4a9ab7cd3bdb7ce7a9ffdb2a89b61d0d7ec0a5ba8cd0e46e1cb8e3e5b1d1" // not body's
	if _, err := e.UploadFrom(t.Context(), strings.NewReader(body), int64(len(body)), "bin/x.sh", remote.TransferOptions{SHA256: sum}); err == nil {
		t.Error("a copy whose sum differs was accepted")
	}
	var progressed int64
	r, err := e.UploadFrom(t.Context(), strings.NewReader(body), int64(len(body)), "bin/x.sh", remote.TransferOptions{Progress: func(d, _ int64) { progressed = d }})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := h.File("bin/x.sh")
	if !ok || string(got.Data) != body || got.SHA256 != r.SHA256 || r.Bytes != int64(len(body)) || progressed != r.Bytes {
		t.Errorf("file %+v, result %+v, progress %d", got, r, progressed)
	}
	h.FailUploads(func(_ context.Context, p string) error { return errors.New("a: upload " + p + ": disk full") })
	if _, err := e.UploadFrom(t.Context(), strings.NewReader(body), int64(len(body)), "bin/y.sh", remote.TransferOptions{}); err == nil {
		t.Error("the upload fault was not applied")
	}
}
