package phases

import (
	"context"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/scripts"
)

// Cleaned is what teardown did on a node.
type Cleaned struct {
	Ended   int      `json:"processes_ended"`
	Actions []string `json:"actions,omitempty"`
}

// Teardown ends every process of the window on every node that was reached
// (quarantined ones too) and removes the window's files. It runs after an
// interrupt or an abort as well.
var Teardown = orchestrator.Phase{
	Name:     "teardown",
	Teardown: true,
	Release:  true,
	Deadline: func(*inventory.Inventory) time.Duration { return 45 * time.Second },
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		e, err := w.Reconnect(ctx, n)
		if err != nil {
			return nil, err
		}
		dir := "$HOME/.gpuaccept/" + w.RunID()
		// The teardown command itself must not carry the window's mark, or
		// it would end itself: it runs without runOn's environment.
		log, _, err := w.Log(ctx, n)
		if err != nil {
			return nil, err
		}
		defer log.Close()
		var out strings.Builder
		cmd := "bash -c " + remote.Quote(scripts.Teardown) + " teardown " + remote.Quote(w.RunID()) + " \"" + dir + "\" " + remote.Quote(stateDir(n))
		if podImager(n) != nil {
			// A pod's home is its own: its image may lack flock.
			cmd = "GPUACCEPT_POD=1 " + cmd
		}
		if f := w.Inv.Phases.Failure; f.Enabled && inventory.On(f.InImage) || w.Inv.Phases.Diag.Image != "" || w.Inv.Phases.Workload.Enabled {
			cmd = "GPUACCEPT_TEARDOWN_CONTAINERS=1 " + cmd
		}
		if w.Inv.Image.Runtime == inventory.RuntimePyxis {
			// The window's named container, which Pyxis keeps on the node.
			cmd = "GPUACCEPT_TEARDOWN_ENROOT=" + remote.Quote(pyxisContainer(w.RunID())) + " " + cmd
		}
		for _, d := range WindowDirs(w) {
			cmd += " " + remote.Quote(d)
		}
		if orchestrator.Releasing(ctx) {
			// The window goes on without it: where the node shares its
			// home or its processes with others, only its own go.
			cmd = "GPUACCEPT_RELEASE_NODE=" + remote.Quote(n.Name) + " " + cmd
		}
		err = e.Run(ctx, remote.Cmd{Command: cmd, Stdout: &out, Stderr: log})
		log.Write([]byte(out.String()))
		if err != nil {
			return nil, err
		}
		c := Cleaned{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if strings.HasPrefix(line, "ended ") {
				c.Ended++
			}
			if line != "" && !strings.HasPrefix(line, "processes ended") {
				c.Actions = append(c.Actions, line)
			}
		}
		if c.Ended > 0 {
			w.Progress.Node(n.Name, "teardown ended %d leftover process(es)", c.Ended)
		}
		return c, nil
	},
	Judge: judgeWindow,
}

// judgeWindow: a node that dropped out (quarantined in any phase) is not
// a node the provider delivered (WIN-001). It is teardown's, the phase
// that closes the window, so it comes after every other verdict.
func judgeWindow(w *orchestrator.Window) []record.Verdict {
	var vs []record.Verdict
	for _, n := range w.Nodes {
		v := record.NewVerdict("WIN-001", n.Name)
		v.Status = record.Pass
		switch q, why := n.Quarantined(); {
		case q && buyerUnreached(w, n):
			v.Status, v.Measured, v.Detail = record.Skip, "not reached", why
		case q:
			v.Status, v.Measured, v.Detail = record.Fail, "quarantined", why
		case n.Released():
			// The buyer's choice (idle.action release), not a fault of
			// the node: what came after it was not measured on it.
			v.Status, v.Measured = record.Warn, "released"
			v.Detail = "released by the idle guard while the window went on: the phases after it did not run on it"
		}
		vs = append(vs, v)
	}
	return vs
}

// WindowDirs are the window's directories outside its home one (staging,
// checkpoint): each is DIR/gpuaccept-<run id>, so teardown removes only
// what this window wrote.
func WindowDirs(w *orchestrator.Window) []string {
	var out []string
	if im := w.Inv.Image; im.Mode == "push" && im.Dir != "" {
		out = append(out, strings.TrimRight(im.Dir, "/")+"/gpuaccept-"+w.RunID())
	}
	if st := w.Inv.Phases.Staging; st.Enabled && st.Dir != "" {
		out = append(out, strings.TrimRight(st.Dir, "/")+"/gpuaccept-"+w.RunID())
	}
	if f := w.Inv.Phases.Failure; f.Enabled && f.Dir != "" {
		out = append(out, strings.TrimRight(f.Dir, "/")+"/gpuaccept-"+w.RunID())
	}
	if c := w.Inv.Phases.Checkpoint; c.Enabled && c.Dir != "" {
		out = append(out, strings.TrimRight(c.Dir, "/")+"/gpuaccept-"+w.RunID())
	}
	return out
}
