package phases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
	"gpuaccept/scripts"
)

// Left is what a fresh connection found of the window on a node after
// teardown: the evidence for the contract's deletion terms.
type Left struct {
	// Checked: the paths, images and markers looked for.
	Checked []string `json:"checked"`
	// Found: what is still there ("file PATH", "key FILE:LINE", "process
	// PID CMD", "container ID (RUNTIME)", "image ID (RUNTIME)").
	Found []string `json:"found,omitempty"`
}

// Deletion checks, after teardown and over a connection of its own, that
// nothing of the window is left on any node it reached: its files (home,
// private, staging, checkpoint and image directories), the window key's
// authorized_keys line, the images it added, its containers and
// processes. It runs whatever befell the window, as teardown does.
var Deletion = orchestrator.Phase{
	Name:     "deletion",
	Teardown: true,
	Enabled:  securityEnabled,
	Own:      func(inv *inventory.Inventory) bool { return inv.Phases.Security.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return orDefault(inv.Phases.Security.Timeout, 2*time.Minute)
	},
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		// A fresh connection: what the window left is looked for the way
		// anyone logging in next would find it.
		e, err := w.Connect(ctx, n)
		if err != nil {
			return nil, err
		}
		res := Left{Checked: []string{nodeDir(w)}}
		args := []string{`"` + nodeDir(w) + `"`}
		for _, p := range append([]string{stateDir(n)}, WindowDirs(w)...) {
			if p != "" {
				res.Checked = append(res.Checked, p)
				args = append(args, remote.Quote(p))
			}
		}
		for _, img := range addedImages(w, n) {
			res.Checked = append(res.Checked, "image "+img)
			args = append(args, remote.Quote("image="+img))
		}
		res.Checked = append(res.Checked, "the window key's authorized_keys line", "processes and containers of the window")
		log, _, err := w.Log(ctx, n)
		if err != nil {
			return nil, err
		}
		defer log.Close()
		var out capture
		// Without the window's mark: the check must not find itself.
		cmd := "bash -c " + remote.Quote(scripts.Left) + " left " + remote.Quote(w.RunID()) + " " + strings.Join(args, " ")
		fmt.Fprintf(log, "$ left.sh %s\n", strings.Join(args, " "))
		err = e.Run(ctx, remote.Cmd{Command: cmd, Stdout: &out, Stderr: log})
		log.Write(out.Bytes())
		if err != nil {
			return nil, err
		}
		checked := false
		for _, line := range strings.Split(string(out.Bytes()), "\n") {
			switch line = strings.TrimSpace(line); {
			case line == "checked":
				checked = true
			case line != "" && len(res.Found) < 100:
				res.Found = append(res.Found, clip(line, 200))
			}
		}
		if !checked {
			return res, fmt.Errorf("the check did not finish: %.200q", strings.TrimSpace(string(out.Bytes())))
		}
		return res, nil
	},
	Judge: judgeDeletion,
}

// addedImages are the images the window put in n's runtime and teardown
// removes ("RUNTIME:sha256:ID"); none when image.keep keeps them.
func addedImages(w *orchestrator.Window, n *orchestrator.Node) []string {
	if w.Inv.Image.Keep {
		return nil
	}
	var im Imaged
	if _, ok := w.Result("image", -1, &im); !ok {
		return nil
	}
	if ni := im.Nodes[n.Name]; ni != nil && ni.Added && isImageID("sha256:"+ni.ID) {
		return []string{im.Runtime + ":sha256:" + ni.ID}
	}
	return nil
}

// judgeDeletion: SEC-004 per node the window reached.
func judgeDeletion(w *orchestrator.Window) []record.Verdict {
	if !securityEnabled(w.Inv) {
		return nil
	}
	var vs []record.Verdict
	for _, n := range w.Nodes {
		v := record.NewVerdict("SEC-004", n.Name)
		var l Left
		r, ok := w.Result("deletion", n.Index, &l)
		switch {
		case !ok:
			v.Status, v.Detail = record.Skip, "the window never reached the node: nothing of it to delete"
		case r.Outcome != record.OK:
			// Unchecked deletion is not deletion.
			v.Status, v.Measured, v.Detail = record.Warn, "not verified", firstNonEmpty(r.Error, string(r.Outcome))
		case len(l.Found) > 0:
			v.Status, v.Measured = record.Fail, fmt.Sprintf("%d thing(s) of the window left after teardown", len(l.Found))
			v.Detail = strings.Join(first(l.Found, 10), "; ")
		default:
			v.Status, v.Measured = record.Pass, fmt.Sprintf("nothing of the window left (%d checks over a fresh connection)", len(l.Checked))
		}
		vs = append(vs, v)
	}
	return vs
}
