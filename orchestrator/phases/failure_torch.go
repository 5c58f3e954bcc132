package phases

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// TorchVersion is the PyTorch a node ran the failure test with: the
// launcher's (torch.__version__ of the Python that runs
// torch.distributed.run, in the image when the job runs there) and the
// workers' (what ddp_train.py's start lines said; empty for a command of
// the buyer's own that does not say). Elastic recovery differs between
// versions (2.4 changed how a rejoining node finds the job's store), so a
// result means little without them.
type TorchVersion struct {
	Launcher string `json:"launcher,omitempty"`
	Workers  string `json:"workers,omitempty"`
	// Error: why the launcher's version is not known (no torch there).
	Error string `json:"error,omitempty"`
}

// torchProbeWithin bounds the version probe: a container start and
// torch's import take seconds, and in the lab with the machine loaded (a
// load of 50 on 2 cores) a minute was not enough for one node of three.
const torchProbeWithin = 3 * time.Minute

// torchVersionWord is what a version may look like ("2.11.0+cu130",
// "1.13.0a0", "2.6.0+debian"); anything else from a node is not recorded.
var torchVersionWord = regexp.MustCompile(`^[0-9][0-9A-Za-z.+_-]{0,63}$`)

// probeTorch records every node's launcher PyTorch before the job starts:
// the same Python as the launch, in the image when the job runs there.
func (j *failureJob) probeTorch(ctx context.Context, nodes []*orchestrator.Node) {
	j.each(ctx, nodes, func(ctx context.Context, n *orchestrator.Node) {
		pctx, cancel := context.WithTimeout(ctx, torchProbeWithin)
		defer cancel()
		out, _ := runOn(pctx, j.w, n, j.torchProbe(n))
		v := TorchVersion{}
		if line, ok := strings.CutPrefix(lastLine(string(out)), "torch "); ok && torchVersionWord.MatchString(line) {
			v.Launcher = line
		} else {
			// What the node said last says why (No module named
			// torch); the command line in err does not.
			v.Error = clip(firstNonEmpty(strings.TrimSpace(lastLine(string(out))), "no answer"), 200)
			if pctx.Err() != nil {
				v.Error = fmt.Sprintf("no answer within %s", torchProbeWithin)
			}
		}
		j.mu.Lock()
		j.res.Torch[n.Name] = v
		j.mu.Unlock()
	})
	j.w.Progress.Line("failure: %s", torchText(j.res.Nodes, j.res.Torch))
	j.mu.Lock()
	j.torch.launcherTorch = map[string]string{}
	for name, v := range j.res.Torch {
		j.torch.launcherTorch[name] = v.Launcher
	}
	j.mu.Unlock()
}

// torchProbe is the command that prints "torch VERSION" with the
// launcher's Python (torch.distributed.run imported: the launcher runs).
func (j *failureJob) torchProbe(n *orchestrator.Node) string {
	args := []string{remote.Quote(j.f.Python), "-c", remote.Quote(`import torch, torch.distributed.run; print("torch", torch.__version__)`)}
	if id := j.torch.imageID(n); id != "" {
		// Generation 0: the container's name is the probe's own.
		args = j.torch.inImageArgs(n, 0, id, failureDir(j.w), nil, args)
	}
	// The job's directory first (the image mounts it), made private as the
	// launch makes it: a mkdir -p alone would follow another user's link.
	// Errors on stdout: their last line says why there is no version.
	dir := failureDir(j.w)
	return fmt.Sprintf("cd && %s && mkdir -p %s && exec %s 2>&1", remote.PrivateDirCmd(path.Dir(dir), false), remote.Quote(dir+"/ckpt"), strings.Join(args, " "))
}

// workerTorch adds what the workers' start lines said to the record.
func (j *failureJob) workerTorch(events []JobEvent) {
	for _, e := range events {
		if e.Kind != "start" || e.Torch == "" || !torchVersionWord.MatchString(e.Torch) {
			continue
		}
		v := j.res.Torch[e.Node]
		if v.Workers == "" {
			v.Workers = e.Torch
			j.res.Torch[e.Node] = v
		}
	}
}

// torchText says which PyTorch ran where, one clause per distinct answer:
// "PyTorch 2.6.0 on h[1-3]"; "PyTorch 2.11.0 (workers 2.11.0+cu130) on
// gpu-01; gpu-02: no torch: ...".
func torchText(nodes []string, torch map[string]TorchVersion) string {
	if len(torch) == 0 {
		return ""
	}
	by := map[string][]string{}
	var order []string
	for _, n := range nodes {
		v, ok := torch[n]
		if !ok {
			continue
		}
		var k string
		switch {
		case v.Launcher == "" && v.Workers != "":
			k = fmt.Sprintf("PyTorch %s (workers; the launcher's: %s)", v.Workers, v.Error)
		case v.Launcher == "":
			k = "no PyTorch: " + v.Error
		case v.Workers != "" && v.Workers != v.Launcher:
			k = fmt.Sprintf("PyTorch %s (workers %s)", v.Launcher, v.Workers)
		default:
			k = "PyTorch " + v.Launcher
		}
		if _, seen := by[k]; !seen {
			order = append(order, k)
		}
		by[k] = append(by[k], n)
	}
	var parts []string
	for _, k := range order {
		if strings.HasPrefix(k, "no PyTorch") {
			parts = append(parts, hostlist.Compress(by[k])+": "+k)
		} else {
			parts = append(parts, k+" on "+hostlist.Compress(by[k]))
		}
	}
	return strings.Join(slices.Compact(parts), "; ")
}
