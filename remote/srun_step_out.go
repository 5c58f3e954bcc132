package remote

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// What a shared step's tasks print (srun_step.sh, srun_step.pl), read
// line by line: each line marked by srun with the task's number, so that
// a node speaks only for itself.

// stepOutput reads the step's stdout: "N: FRAME" lines, N the task's
// number srun marks them with.
type stepOutput struct {
	// mu: Write and flush may meet, when the login node's session ends
	// before its output is read to the end.
	mu   sync.Mutex
	b    *stepBatch
	line []byte
	long bool // the current line is past stepLineBytes: dropped
}

func (o *stepOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			o.keep(p)
			break
		}
		o.keep(p[:i])
		o.end()
		p = p[i+1:]
	}
	return n, nil
}

func (o *stepOutput) keep(p []byte) {
	if len(o.line)+len(p) > stepLineBytes {
		o.long = true
		return
	}
	o.line = append(o.line, p...)
}

func (o *stepOutput) end() {
	if !o.long {
		o.b.line(string(o.line))
	}
	o.line, o.long = o.line[:0], false
}

func (o *stepOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.line) > 0 {
		o.end()
	}
}

// stepSayKeep bounds the lines kept of what is no frame.
const stepSayKeep = 16

// line takes one line of the step's stdout.
func (b *stepBatch) line(l string) {
	num, frame, ok := strings.Cut(l, ": ")
	// srun pads the number to the width of the last one with spaces
	// (" 7: " among 32 tasks; Slurm 22.05), or zeros in other versions.
	num = strings.TrimLeft(num, " ")
	task, err := strconv.Atoi(num)
	b.mu.Lock()
	if !ok || err != nil || task < 0 || num[0] == '+' || num[0] == '-' {
		b.noise = keepLine(b.noise, l)
		b.mu.Unlock()
		return
	}
	// A frame ends with a dot; srun gives the pieces of one it got in
	// parts as lines of their own, in order, each marked with the task.
	if !strings.HasSuffix(frame, ".") {
		if b.pieces == nil {
			b.pieces = map[int]string{}
		}
		if len(b.pieces[task])+len(frame) <= stepLineBytes {
			b.pieces[task] += frame
		}
		b.mu.Unlock()
		return
	}
	frame = strings.TrimSuffix(b.pieces[task]+frame, ".")
	delete(b.pieces, task)
	op, rest, _ := strings.Cut(frame, " ")
	t, known := b.tasks[task]
	switch {
	case op == "s":
		b.claim(task, rest)
		b.mu.Unlock()
		return
	case !known || t == nil:
		b.noise = keepLine(b.noise, l)
		b.mu.Unlock()
		return
	case op == "o" || op == "e":
		done := t.done
		b.mu.Unlock()
		data, err := hex.DecodeString(rest)
		switch {
		case err != nil:
			b.mu.Lock()
			t.said = keepLine(t.said, frame)
			b.mu.Unlock()
		case done:
		case op == "o":
			t.write(t.cmd.Stdout, data)
		default:
			t.tail.Write(data)
			t.write(t.cmd.Stderr, data)
		}
		return
	}
	defer b.mu.Unlock()
	switch op {
	case "x":
		var status, signal int
		if _, err := fmt.Sscanf(rest, "%d %d", &status, &signal); err != nil {
			t.said = keepLine(t.said, frame)
			return
		}
		if t.lost && b.notStarted {
			// The coordinator ended the stream itself: Slurm had not
			// started the step within its bound.
			b.finish(t, &StepNotStartedError{Node: t.s.name, Command: Shorten(t.cmd.Command, 120), After: b.p.stepStart})
			return
		}
		if t.lost {
			// The guard stopped the command when the step's stream fell
			// silent: srun stopped passing it on (its buffers full of a
			// node that reads none), and the command's end says nothing
			// of the node.
			b.finish(t, &StepAbortedError{Node: t.s.name, Command: Shorten(t.cmd.Command, 120),
				Reason: fmt.Sprintf("the job step it shared with other nodes' commands stopped passing the coordinator's stream on "+
					"(the node's guard hears it at least every %s), and the guard stopped the command", max(b.p.lease, time.Second))})
			return
		}
		b.finish(t, t.exit(status, signal))
	case "g":
		t.lost = true
	case "n":
		if strings.HasPrefix(rest, "there is no working perl") {
			// For good: no perl now, none later. Another cause (a table
			// cut short) may not come again.
			t.s.alone.Store(true)
		}
		b.finish(t, errStepAlone)
	default:
		t.said = keepLine(t.said, frame)
	}
}

// claim takes a task's word that it runs on node. A node that is not the
// step's, or that another task already claimed, is a lie or a mistake:
// both tasks' output then counts for nothing, and the node's command
// fails with the reason.
func (b *stepBatch) claim(task int, node string) {
	b.started = true
	if _, said := b.tasks[task]; said {
		return
	}
	if b.claimed == nil {
		b.claimed = map[string]int{}
	}
	var t *stepTask
	for _, o := range b.order {
		if o.s.node == node {
			t = o
		}
	}
	if other, dup := b.claimed[node]; dup || t == nil {
		b.tasks[task] = nil
		if dup {
			b.tasks[other] = nil
		}
		if t != nil {
			// Which of the two ran there is not known: the node's answer
			// is lost, and is no failure of its own.
			b.finish(t, &StepAbortedError{Node: t.s.name, Command: Shorten(t.cmd.Command, 120),
				Reason: fmt.Sprintf("tasks %d and %d of the job step both said they ran on %s: neither's output counts", other, task, printableWord(node))})
		}
		return
	}
	b.claimed[node] = task
	b.tasks[task] = t
	t.started = true
}

// exit is the outcome of a command that ended with status, or died by
// signal.
func (t *stepTask) exit(status, signal int) error {
	switch {
	case signal != 0:
		name := strings.TrimPrefix(unix.SignalName(syscall.Signal(signal)), "SIG")
		if name == "" {
			name = strconv.Itoa(signal)
		}
		return &ExitError{Node: t.s.name, Command: t.cmd.Command, Status: -1, Signal: name, StderrTail: t.tail.String()}
	case status != 0:
		return &ExitError{Node: t.s.name, Command: t.cmd.Command, Status: status, StderrTail: t.tail.String()}
	}
	return nil
}

func keepLine(lines []string, l string) []string {
	if len(lines) >= stepSayKeep {
		return lines
	}
	if len(l) > srunLineBytes {
		l = l[:srunLineBytes]
	}
	return append(lines, l)
}

func lines(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return strings.Join(l, "\n") + "\n"
}

// aborted says whether srun gave the step up ("step_launch_notify_io_failure:
// aborting, io error with slurmstepd on node 33", "Aborting, io error and
// missing step on node 4"): every task of it ended then, not by itself.
func (s *srunLines) aborted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abort
}

// taskEnded is srun's report of how tasks ended ("srun: error: h3: task
// 2: Exited with exit code 1", "srun: error: h[3-4]: tasks 2-3: Killed").
var taskEnded = regexp.MustCompile(`^srun: error: \S+: tasks? [0-9,-]+: `)
