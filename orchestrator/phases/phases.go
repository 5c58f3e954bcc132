// Package phases holds the steps of an acceptance window, one small file
// each, as data for the orchestrator.
package phases

import (
	"context"
	"fmt"
	"io"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// All is the window in order. Teardown runs last, whatever happened.
func All() []orchestrator.Phase {
	return []orchestrator.Phase{Connect, Tools, Telemetry, Preflight, Security, Diag, WindowKey, Image, Staging, IntraNode, AllReduce, Bisection,
		CheckpointWrite, CheckpointRestore, Training, Inference, Burnin, FailurePhase, IdleCheck, Teardown, Deletion}
}

// runOn runs command on the node with the window's mark in its
// environment (teardown finds leftovers by it) and keeps everything the
// node said in the raw log of the work ctx carries (the phase's, or the
// one orchestrator.WithLog names). It returns stdout.
func runOn(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string) ([]byte, error) {
	return runIn(ctx, w, n, command, nil)
}

// runIn is runOn with stdin.
func runIn(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string, stdin io.Reader) ([]byte, error) {
	return runLogged(ctx, w, n, command, stdin, nil)
}

// runBoth is runOn that also keeps what the command said on stderr
// (bounded, as stdout is): where Open MPI says which peer it could not
// reach.
func runBoth(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string) ([]byte, []byte, error) {
	var errs capture
	out, err := runCaptured(ctx, w, n, command, nil, nil, &errs)
	return out, errs.Bytes(), err
}

// runLogged is runIn whose stdout reaches the raw log through filter (when
// set) once the command ended: a report that copies an environment is
// logged with only what the measurement needs (redact.NCCLEnv).
func runLogged(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string, stdin io.Reader, filter func(string) string) ([]byte, error) {
	return runCaptured(ctx, w, n, command, stdin, filter, nil)
}

// runCaptured is runLogged whose stderr also goes to errs, when set.
func runCaptured(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string, stdin io.Reader, filter func(string) string, errs io.Writer) ([]byte, error) {
	e, err := execOf(n)
	if err != nil {
		return nil, err
	}
	log, _, err := w.Log(ctx, n)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	fmt.Fprintf(log, "$ %s\n", firstLine(command))
	var out capture
	stdout := io.MultiWriter(&out, log)
	if filter != nil {
		stdout = &out
	}
	var stderr io.Writer = log
	if errs != nil {
		stderr = io.MultiWriter(errs, log)
	}
	err = e.Run(ctx, remote.Cmd{
		Command: command,
		Env:     nodeEnv(w, n),
		Stdin:   stdin,
		Stdout:  stdout,
		Stderr:  stderr,
	})
	b := out.Bytes()
	if filter != nil {
		b = []byte(filter(string(b)))
		log.Write(b)
	}
	if err != nil {
		fmt.Fprintf(log, "# %v\n", err)
	}
	return b, err
}

// execOf is n's executor, or why there is none.
// nodeEnv marks a command of the window on node n: teardown finds the
// window's processes by GPUACCEPT_RUN, and a node released early (the idle
// guard) only its own by GPUACCEPT_NODE, where nodes share one machine's
// processes (the lab, the demo).
func nodeEnv(w *orchestrator.Window, n *orchestrator.Node) map[string]string {
	return map[string]string{"GPUACCEPT_RUN": w.RunID(), "GPUACCEPT_NODE": n.Name}
}

func execOf(n *orchestrator.Node) (remote.Executor, error) {
	e := n.Exec()
	if e == nil {
		return nil, fmt.Errorf("%s: not connected", n.Name)
	}
	return e, nil
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i] + " ..."
		}
	}
	return s
}
