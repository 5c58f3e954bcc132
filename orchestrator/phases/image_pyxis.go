package phases

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
)

// PyxisImport is how the image reached the nodes under image.runtime
// pyxis: a step per node, from the Slurm login node, with
// srun --container-image.
type PyxisImport struct {
	// URI is the pin as enroot's URI, what --container-image was given.
	URI string `json:"uri,omitempty"`
	// Skip says why nothing was imported: the login node's srun lists no
	// --container-image (the cluster has no Pyxis). The window goes on
	// without the container.
	Skip string `json:"skip,omitempty"`
	// Secs: from the first step's start to the last node's step done
	// (every node imports from the registry at once).
	Secs float64 `json:"seconds,omitempty"`
}

// pyxisNoOption is the reason the image phase skips where srun has no
// Pyxis.
const pyxisNoOption = slurm.NoPyxis

// pyxisImage imports the pin on every node with a step of its own under
// srun --container-image (the step's command is the smoke command, run in
// the container), and reads what Pyxis said it imported: the reference
// Pyxis names must carry the pin's digest, by which enroot asked the
// registry for the manifest. Where srun has no Pyxis, nothing is imported
// and res.Pyxis.Skip says why.
func pyxisImage(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, res *Imaged) error {
	uri, err := inventory.EnrootURI(res.Reference)
	if err != nil {
		return fmt.Errorf("image.reference: %w", err)
	}
	res.Pyxis = &PyxisImport{URI: uri}
	login, err := w.SlurmLogin(ctx)
	if err != nil {
		return err
	}
	// An srun that cannot be run is the window's error, naming the login
	// node; one without --container-image is the cluster's answer.
	found, err := slurm.Pyxis(ctx, login.Exec())
	if err != nil {
		return err
	}
	if !found {
		res.Pyxis.Skip = pyxisNoOption
		w.Progress.Line("image: %s; the window goes on without the container", pyxisNoOption)
		return nil
	}
	var mu sync.Mutex
	start := time.Now()
	remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		n := nodes[i]
		cmd := pyxisStep(w, n, uri)
		t0 := time.Now()
		out, err := runOn(ctx, w, login, cmd+" 2>&1")
		secs, ready := time.Since(t0).Seconds(), time.Now().UTC()
		words := parsePyxis(string(out))
		mu.Lock()
		defer mu.Unlock()
		ni := res.Nodes[n.Name]
		judgePyxisStep(res, ni, uri, words, err)
		ni.LoadSecs = secs
		ni.Smoke = &Smoke{Command: cmd, Secs: secs, Ready: ready, Output: words.Output}
		if err != nil {
			ni.Smoke.Error = err.Error()
		}
		return nil, nil
	})
	res.Pyxis.Secs = time.Since(start).Seconds()
	return nil
}

// judgePyxisStep records what one node's step says: the image Pyxis
// imported and whether its digest is the pin, or why it failed.
//
// Pyxis's "imported docker image" repeats the reference the window gave
// it, which enroot pulled by the pin's digest: so the line must be that
// reference exactly. enroot checks the image's layers and config against
// the manifest it fetched by that digest, not the manifest itself; IMG-001
// says as much.
func judgePyxisStep(res *Imaged, ni *NodeImage, uri string, words pyxisWords, err error) {
	if len(words.Imported) > 0 {
		ni.Imported = slurm.Printable(words.Imported[0], 200)
		ni.ID = digestOf(ni.Imported)
	}
	switch {
	case ni.Imported != "" && words.Imported[0] != uri:
		ni.Error = fmt.Sprintf("Pyxis imported %s, not the pin's %s", ni.Imported, uri)
	case ni.Imported != "":
		ni.Match = true
	case err != nil && len(words.Errors) > 0:
		ni.Error = "srun --container-image: " + slurm.Printable(words.failure(), 300)
	case err != nil && words.notStarted() != "":
		// Slurm never ran the step: nothing of the node was measured.
		ni.NotMeasured = "srun did not run the import step: " + words.notStarted()
	case err != nil && len(words.Slurm) > 0:
		ni.Error = "srun --container-image: " + words.Slurm[len(words.Slurm)-1]
	case err != nil:
		ni.Error = fmt.Sprintf("srun --container-image: %v", err)
	default:
		// The step ran in a container Pyxis named no image for (a Pyxis
		// that does not print the reference): the pin is not checked.
		ni.Unverified = "Pyxis did not say which image it imported: the pin is not checked"
	}
}

// pyxisStep is the srun command that imports the image on node n and
// runs the smoke command in it: a step of the window's own allocation
// where it holds one (or a job of its own in the inventory's partition).
func pyxisStep(w *orchestrator.Window, n *orchestrator.Node, uri string) string {
	args := append(containerGPUs(w), "srun")
	args = append(args, slurmPlacement(w)...)
	args = append(args, "--nodes=1", "--ntasks=1", "--nodelist="+remote.Quote(w.FabricHost(n)),
		"--job-name="+remote.Quote("gpuaccept-"+w.RunID()+"-image"), "--container-image="+remote.Quote(uri),
		"--container-name="+remote.Quote(pyxisContainer(w.RunID())))
	// A step sees no GPU it does not ask for: under transport srun the
	// steps' own options carry the nodes' GRES; otherwise the options the
	// inventory gives the collectives' srun (slurm.srun_args) do.
	extra := w.Inv.Slurm.SrunArgs
	if w.Inv.Transport == inventory.TransportSrun {
		extra = w.Inv.Slurm.StepArgs
	}
	for _, a := range extra {
		args = append(args, remote.Quote(a))
	}
	for _, s := range w.Inv.Image.Smoke {
		args = append(args, remote.Quote(s))
	}
	return strings.Join(args, " ")
}

// pyxisContainer is the name of the window's container on every node
// (--container-name): Pyxis keeps a named container on the node after its
// step, and a later step given the name reuses it instead of importing the
// image again, so each node imports once. One window's own (its run ID):
// teardown removes it (teardown.sh), as Pyxis never does.
func pyxisContainer(runID string) string { return "gpuaccept-" + runID }

// slurmPlacement: a step of the window's job, which holds the nodes
// (exclusively: a job of its own would wait for them forever), else the
// inventory's partition and account.
func slurmPlacement(w *orchestrator.Window) []string {
	if job := w.SlurmJob(); job != "" {
		return []string{"--jobid=" + job, "--overlap"}
	}
	var args []string
	if sl := w.Inv.Slurm; sl.Partition != "" {
		args = append(args, "--partition="+remote.Quote(sl.Partition))
	}
	if sl := w.Inv.Slurm; sl.Account != "" {
		args = append(args, "--account="+remote.Quote(sl.Account))
	}
	return args
}

// containerImageArgs are the srun options that run a collective in the
// pinned image: where the image phase imported it through Pyxis (the
// nodes it failed on are quarantined, out of the collective). Without
// Pyxis (or without the image phase) the collective runs on the nodes
// themselves, as the image phase said.
func containerImageArgs(w *orchestrator.Window) []string {
	var res Imaged
	if _, ok := w.Result("image", -1, &res); !ok {
		return nil
	}
	return imageArgsOf(w.Inv.Image.Runtime, w.RunID(), &res)
}

// imageArgsOf: --container-name of the window's container, which the
// image phase imported on each node, where it imported through Pyxis on at
// least one; --container-image with the same URI beside it, so that a
// node whose container is gone imports the pin again rather than failing
// the step (Pyxis skips the import where the name exists).
func imageArgsOf(runtime, runID string, res *Imaged) []string {
	if runtime != inventory.RuntimePyxis || res.Pyxis == nil || res.Pyxis.Skip != "" || res.Pyxis.URI == "" {
		return nil
	}
	for _, ni := range res.Nodes {
		if ni.Match {
			return []string{"--container-image=" + remote.Quote(res.Pyxis.URI), "--container-name=" + remote.Quote(pyxisContainer(runID))}
		}
	}
	return nil
}

// containerGPUs are the variables, set before srun (which passes its
// environment to the step, and Pyxis the step's to the container), that
// give a container the node's GPUs with image.gpus all: enroot's NVIDIA
// hook does nothing without NVIDIA_VISIBLE_DEVICES, and without compute
// among the capabilities mounts nvidia-smi's libraries only. NGC images set
// both themselves.
func containerGPUs(w *orchestrator.Window) []string {
	if w.Inv.Image.GPUs != "all" {
		return nil
	}
	return []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"}
}
