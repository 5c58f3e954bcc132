package phases

import "testing"

// TestSrunFirstEnded: srun's lines after a rank failed under
// --kill-on-bad-exit (the order srun prints them in), the lines a CI run's
// sweep error held, which named no node.
func TestSrunFirstEnded(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"srun: error: h2: task 0: Exited with exit code 1\nsrun: launch/slurm: _step_signal: Terminating StepId=28.39\n" +
			"srun: error: h5: task 3: Terminated\nsrun: error: h4: task 2: Terminated\nsrun: Force Terminated StepId=28.39\n",
			"task 0 on h2 ended the step first (srun: Exited with exit code 1)"},
		{"srun: error: h[3-4]: tasks 1-2: Terminated\n", ""},
		{"srun: error: gpu-07: tasks 8-15: Killed\n", "tasks 8-15 on gpu-07 ended the step first (srun: Killed)"},
		{"no srun here\n", ""},
		// After srun began ending the step, what it says is its own doing.
		{"srun: launch/slurm: _step_signal: Terminating StepId=9.3\nsrun: error: h4: task 2: Killed\n", ""},
		{"srun: error: gpu-03: task 5: Out Of Memory\nsrun: launch/slurm: _step_signal: Terminating StepId=9.3\n",
			"task 5 on gpu-03 ended the step first (srun: Out Of Memory)"},
		{"srun: error: gpu-03: task 5: Segmentation fault (core dumped)\n",
			"task 5 on gpu-03 ended the step first (srun: Segmentation fault (core dumped))"},
	} {
		if got := srunFirstEnded(tc.in); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}
