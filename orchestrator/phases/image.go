package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/remote"
)

// Imaged is what the image phase did on every node.
type Imaged struct {
	Mode      string `json:"mode"` // pull | push
	Reference string `json:"reference"`
	Pin       string `json:"pin"` // the 64 hex digits every node's image must show
	Runtime   string `json:"runtime"`
	Relay     string `json:"relay,omitempty"`
	// Archive is what was pushed: its size and sha256 on the coordinator.
	Archive *Archive `json:"archive,omitempty"`
	// DistributionSecs: from the first byte sent to the last node's copy
	// verified (push).
	DistributionSecs float64               `json:"distribution_seconds,omitempty"`
	Nodes            map[string]*NodeImage `json:"nodes"`
	Lost             map[string]string     `json:"lost,omitempty"`
	// Pyxis: the import through srun --container-image (image.runtime
	// pyxis), or why there was none.
	Pyxis *PyxisImport `json:"pyxis,omitempty"`
}

// Quarantine implements orchestrator.Quarantiner: a node whose image is
// not the pin, or whose container does not start, cannot run the job.
func (r Imaged) Quarantine() map[string]string { return r.Lost }

// Archive is the pushed tarball.
type Archive struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// NodeImage is one node's image.
type NodeImage struct {
	// Copy: how the archive arrived (chain, direct) and its check.
	Via      string  `json:"via,omitempty"`
	Bytes    int64   `json:"bytes,omitempty"`
	CopySecs float64 `json:"copy_seconds,omitempty"`
	// LoadSecs: load (push) or pull time.
	LoadSecs    float64  `json:"load_seconds"`
	ID          string   `json:"image_id,omitempty"`
	RepoDigests []string `json:"repo_digests,omitempty"`
	Match       bool     `json:"match"`
	// Added: the window put this image in the node's runtime (teardown
	// removes it unless image.keep); Before: the node had it already.
	Added  bool   `json:"added,omitempty"`
	Before bool   `json:"already_there,omitempty"`
	Smoke  *Smoke `json:"smoke,omitempty"`
	Error  string `json:"error,omitempty"`
	// NotMeasured: the node lacks image.runtime; its image was neither
	// checked nor started (and the node is not left out for it).
	NotMeasured string `json:"not_measured,omitempty"`
	// Imported is the reference Pyxis said it imported (image.runtime
	// pyxis); ID is then the digest it names. Unverified: the container
	// ran but Pyxis named no image, so the pin is not checked.
	Imported   string `json:"pyxis_imported,omitempty"`
	Unverified string `json:"unverified,omitempty"`
	// Pod is the imageID the cluster's runtime reports for the pod's
	// container (transport kubernetes); ID is then its digest.
	Pod string `json:"pod_image_id,omitempty"`
	// PodStart says why the pod's start is no figure of IMG-001.
	PodStart string `json:"pod_start,omitempty"`
}

// Smoke is the container smoke test on a node.
type Smoke struct {
	Command string    `json:"command"`
	Secs    float64   `json:"seconds"` // start to exit: the container's startup plus the command
	Ready   time.Time `json:"ready"`
	Output  string    `json:"output"`
	Error   string    `json:"error,omitempty"`
}

// Image puts the pinned image on every node — pulled by each node, or
// pushed from the coordinator along a chain of nodes — checks it against
// the pin, and starts it with the GPUs.
var Image = orchestrator.Phase{
	Name: "image",
	Enabled: func(inv *inventory.Inventory) bool {
		return inv.Image.Reference != "" && inventory.On(inv.Phases.ImagePh.Enabled)
	},
	Own: func(inv *inventory.Inventory) bool { return inv.Phases.ImagePh.Timeout > 0 },
	Deadline: func(inv *inventory.Inventory) time.Duration {
		return orDefault(inv.Phases.ImagePh.Timeout, 30*time.Minute)
	},
	Cluster: func(ctx context.Context, w *orchestrator.Window) (any, error) {
		im := w.Inv.Image
		nodes := w.Active()
		if len(nodes) == 0 {
			return nil, errors.New("no node left in the window")
		}
		res := Imaged{Mode: im.Mode, Reference: im.Reference, Pin: pinOf(im.Reference), Runtime: im.Runtime, Nodes: map[string]*NodeImage{}}
		for _, n := range nodes {
			res.Nodes[n.Name] = &NodeImage{}
		}
		all, onHosts := nodes, podImages(ctx, w, nodes, &res)
		if len(onHosts) == 0 {
			return res, lostImages(all, &res)
		}
		nodes = onHosts
		if im.Runtime == "enroot" {
			return res, fmt.Errorf("image.runtime enroot: loading and checking images with enroot is not supported yet; use docker or podman")
		}
		if im.Runtime == inventory.RuntimePyxis {
			if err := pyxisImage(ctx, w, nodes, &res); err != nil || res.Pyxis.Skip != "" {
				return res, err
			}
			return res, lostImages(all, &res)
		}
		if im.Mode == "push" {
			res.Relay = im.Relay
			if err := push(ctx, w, nodes, &res); err != nil {
				return res, err
			}
		}
		var mu sync.Mutex
		remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
			n := nodes[i]
			mu.Lock()
			ni := res.Nodes[n.Name]
			mu.Unlock()
			if ni.Error != "" {
				return nil, nil
			}
			if has, err := nodeHas(ctx, w, n, res.Runtime); err == nil && !has[res.Runtime] {
				ni.NotMeasured = fmt.Sprintf("%s not installed (image.runtime): the pinned image not measured", res.Runtime)
				return nil, nil
			}
			loadAndCheck(ctx, w, n, &res, ni)
			if ni.Match {
				ni.Smoke = smoke(ctx, w, n, ni)
			}
			return nil, nil
		})
		return res, lostImages(all, &res)
	},
	Judge: judgeImage,
}

// lostImages lists the nodes whose image is not the pin or whose
// container did not start (quarantined after the phase); an error when
// no node has the image, or none could be measured.
func lostImages(nodes []*orchestrator.Node, res *Imaged) error {
	var failed, unmeasured []string
	for _, n := range nodes {
		ni := res.Nodes[n.Name]
		if ni.NotMeasured != "" {
			unmeasured = append(unmeasured, n.Name)
			continue
		}
		why := ni.Error
		if why == "" && ni.Smoke != nil && ni.Smoke.Error != "" {
			why = "the container did not start: " + ni.Smoke.Error
		}
		if why != "" {
			if res.Lost == nil {
				res.Lost = map[string]string{}
			}
			res.Lost[n.Name] = firstLine(why)
			failed = append(failed, n.Name)
		}
	}
	if len(unmeasured) == len(nodes) {
		return orchestrator.Unmeasured(res.Runtime, "%s", res.Nodes[nodes[0].Name].NotMeasured)
	}
	if len(failed) == len(nodes) {
		return fmt.Errorf("no node has the pinned image: %s", res.Lost[nodes[0].Name])
	}
	return nil
}

// pinOf is the digest of a pinned reference, without "sha256:".
func pinOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@sha256:")
	return d
}

// archivePath is where the archive lands on a node: a node-local
// directory (homes may be one NFS export for all nodes).
func archivePath(w *orchestrator.Window) string {
	return strings.TrimRight(w.Inv.Image.Dir, "/") + "/gpuaccept-" + w.RunID() + "/" + filepath.Base(w.Inv.Image.Archive)
}

// loadAndCheck loads (push) or pulls the image and compares it with the
// pin: the image ID (config digest) or a repo digest must be the pin.
func loadAndCheck(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, res *Imaged, ni *NodeImage) {
	rt := remote.Quote(res.Runtime)
	held := imagesHeld(ctx, w, n, res)
	start := time.Now()
	ref := res.Reference
	if res.Mode == "push" {
		out, err := runOn(ctx, w, n, rt+" load -i "+remote.Quote(archivePath(w))+" 2>&1")
		if err != nil {
			ni.Error = fmt.Sprintf("%s load failed: %s (%v)", res.Runtime, lastLine(string(out)), err)
			return
		}
		ref = loadedImage(string(out))
		if ref == "" {
			ni.Error = fmt.Sprintf("%s load did not say what it loaded: %.200s", res.Runtime, strings.TrimSpace(string(out)))
			return
		}
	} else {
		if out, err := runOn(ctx, w, n, rt+" pull "+remote.Quote(ref)+" 2>&1"); err != nil {
			ni.Error = fmt.Sprintf("%s pull %s failed: %s (%v)", res.Runtime, ref, lastLine(string(out)), err)
			return
		}
	}
	ni.LoadSecs = time.Since(start).Seconds()
	out, err := runOn(ctx, w, n, rt+" image inspect "+remote.Quote(ref))
	if err != nil {
		ni.Error = fmt.Sprintf("%s image inspect %s: %v", res.Runtime, ref, err)
		return
	}
	id, digests, err := parseInspect(string(out))
	if err != nil {
		ni.Error = fmt.Sprintf("%s image inspect %s: %v", res.Runtime, ref, err)
		return
	}
	ni.ID, ni.RepoDigests = id, digests
	held.settle(ctx, w, n, ni)
	ni.Match = id == res.Pin
	for _, d := range digests {
		if strings.HasSuffix(d, "@sha256:"+res.Pin) {
			ni.Match = true
		}
	}
	if !ni.Match {
		ni.Error = fmt.Sprintf("the image on the node is not the pin: pinned sha256:%s, the node has image ID sha256:%s%s",
			res.Pin, id, digestList(digests))
	}
}

func digestList(ds []string) string {
	if len(ds) == 0 {
		return " and no repo digest"
	}
	return " and repo digests " + strings.Join(ds, ", ")
}

// loadedImage reads what docker or podman load says it loaded:
// "Loaded image: NAME:TAG", "Loaded image(s): NAME", "Loaded image ID:
// sha256:...".
func loadedImage(out string) string {
	var last string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"Loaded image ID:", "Loaded image(s):", "Loaded image:"} {
			if v, ok := strings.CutPrefix(l, p); ok {
				last = strings.TrimSpace(strings.Split(strings.TrimSpace(v), ",")[0])
			}
		}
	}
	return last
}

// parseInspect reads `docker|podman image inspect REF`: a JSON array of
// one object; docker's Id has a "sha256:" prefix, podman's does not.
func parseInspect(out string) (id string, digests []string, err error) {
	var imgs []struct {
		ID          string   `json:"Id"`
		RepoDigests []string `json:"RepoDigests"`
	}
	text := strings.TrimSpace(out)
	if !strings.HasPrefix(text, "[") {
		if i := strings.Index(text, "\n["); i >= 0 {
			text = text[i+1:] // warnings before the JSON
		}
	}
	if err := json.Unmarshal([]byte(text), &imgs); err != nil || len(imgs) == 0 || imgs[0].ID == "" {
		return "", nil, fmt.Errorf("unexpected output %.200q", strings.TrimSpace(out))
	}
	id = strings.TrimPrefix(imgs[0].ID, "sha256:")
	if !isImageID("sha256:" + id) {
		return "", nil, fmt.Errorf("unexpected image ID %.80q: not 64 hex digits", imgs[0].ID)
	}
	return id, imgs[0].RepoDigests, nil
}

// smoke starts the image with the node's GPUs and runs the smoke command.
func smoke(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, ni *NodeImage) *Smoke {
	im := w.Inv.Image
	args := []string{remote.Quote(im.Runtime), "run", "--rm"}
	if im.GPUs == "all" {
		args = append(args, gpuFlags(im.Runtime)...)
	}
	args = append(args, "sha256:"+ni.ID)
	for _, s := range im.Smoke {
		args = append(args, remote.Quote(s))
	}
	return runSmoke(ctx, w, n, strings.Join(args, " "))
}

// runSmoke runs the smoke command line on n and times it.
func runSmoke(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, command string) *Smoke {
	s := &Smoke{Command: command}
	start := time.Now()
	out, err := runOn(ctx, w, n, s.Command+" 2>&1")
	s.Secs, s.Ready, s.Output = time.Since(start).Seconds(), time.Now().UTC(), strings.TrimSpace(string(out))
	if err != nil {
		s.Error = err.Error()
	}
	return s
}

func humanSize(b int64) string { return inventory.Bytes(b).String() }
