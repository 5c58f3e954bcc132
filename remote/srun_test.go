package remote

import (
	"bytes"
	"strings"
	"testing"
)

// splitLines is what srunSplit must do, line by line: Slurm's lines apart,
// the command's passed on whole.
func splitLines(in string) (cmd string, slurm []string) {
	for _, l := range strings.SplitAfter(in, "\n") {
		if l == "" {
			continue
		}
		if isSlurmStart(l) {
			if strings.TrimRight(l, "\r\n") != stepStarted { // the step's sign, not kept
				slurm = append(slurm, strings.TrimRight(l, "\n"))
			}
			continue
		}
		cmd += l
	}
	return cmd, slurm
}

func isSlurmStart(l string) bool {
	for _, p := range slurmPrefixes {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// Whatever the writes' sizes, the command's stderr arrives byte for byte
// and Slurm's lines are kept apart, as the line-by-line reading has them.
func FuzzSrunSplit(f *testing.F) {
	f.Add("out\nsrun: error: h2: task 0: Killed\nmore", uint8(3))
	f.Add("slurmstepd-h2: error: *** STEP 1.24 ON h2 CANCELLED ***\nsrun: error: h2: task 0: Killed\n", uint8(1))
	f.Add("sru\nsrun:x\nsrun: \n\nslurmstepd: x", uint8(2))
	f.Add("ab\nsrun: error: Node failure on h3\n", uint8(4))
	f.Add(stepStarted+"\nout\n"+stepStarted+"x\n", uint8(5))
	f.Fuzz(func(t *testing.T, in string, chunk uint8) {
		step := int(chunk%16) + 1
		var cmd bytes.Buffer
		w := &srunSplit{cmd: &cmd, tail: NewStderrTail(), srun: &srunLines{node: "h2"}}
		for i := 0; i < len(in); i += step {
			w.Write([]byte(in[i:min(len(in), i+step)]))
		}
		w.flush()
		wantCmd, wantSlurm := splitLines(in)
		if cmd.String() != wantCmd {
			t.Fatalf("the command's stderr: got %q, want %q", cmd.String(), wantCmd)
		}
		if len(wantSlurm) > srunKeep {
			wantSlurm = wantSlurm[len(wantSlurm)-srunKeep:]
		}
		for i := range wantSlurm {
			if len(wantSlurm[i]) > srunLineBytes {
				wantSlurm[i] = wantSlurm[i][:srunLineBytes]
			}
		}
		if strings.Join(w.srun.lines, "\n") != strings.Join(wantSlurm, "\n") {
			t.Fatalf("Slurm's lines: got %q, want %q", w.srun.lines, wantSlurm)
		}
	})
}

// The step's first line says it started, and is nobody's stderr.
func TestSrunStepStartedLine(t *testing.T) {
	var cmd bytes.Buffer
	started := make(chan struct{})
	w := &srunSplit{cmd: &cmd, tail: NewStderrTail(), srun: &srunLines{node: "h2", started: started}}
	w.Write([]byte("srun: Job step creation temporarily disabled, retrying\ngpuaccept-step: sta"))
	select {
	case <-started:
		t.Fatal("started before the line ended")
	default:
	}
	w.Write([]byte("rted\nhello\n" + stepStarted + "\n"))
	w.flush()
	select {
	case <-started:
	default:
		t.Fatal("not started")
	}
	if cmd.String() != "hello\n" || w.srun.String() == "" || strings.Contains(w.srun.String(), "gpuaccept-step") {
		t.Errorf("stderr %q, srun's %q", cmd.String(), w.srun.String())
	}
}

// srun's words say when the node went away, and only then.
func TestSrunLost(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"srun: error: Node failure on h3", "Node failure on h3"},
		{"srun: error: Unable to create step for job 2: Requested node configuration is not available", "Unable to create step for job 2: Requested node configuration is not available"},
		{"srun: error: h2: task 0: Exited with exit code 3", ""},
		{"srun: error: h2: task 0: Killed", ""},
	} {
		s := &srunLines{node: "h2"}
		s.add(c.line + "\n")
		if got := s.lost(); got != c.want {
			t.Errorf("%q: lost %q, want %q", c.line, got, c.want)
		}
	}
	s := &srunLines{node: "h2", lines: []string{"srun: error: h2: task 0: Exited with exit code 3", "srun: error: something else"}}
	if got := s.String(); got != "srun: error: something else\n" {
		t.Errorf("tail %q: the task's end is the exit status's to say", got)
	}
}
