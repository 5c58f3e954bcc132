package phases

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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
		if im.Runtime == "enroot" {
			return res, fmt.Errorf("image.runtime enroot: loading and checking images with enroot is not supported yet; use docker or podman")
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
			return res, orchestrator.Unmeasured(res.Runtime, "%s", res.Nodes[nodes[0].Name].NotMeasured)
		}
		if len(failed) == len(nodes) {
			return res, fmt.Errorf("no node has the pinned image: %s", res.Lost[nodes[0].Name])
		}
		return res, nil
	},
	Judge: judgeImage,
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

// push distributes the archive: along a chain of nodes (each keeps a copy
// and forwards it as it arrives), through Slurm's sbcast from the login
// node, or directly; any node without a verified copy afterwards gets one
// straight from the coordinator.
func push(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, res *Imaged) error {
	a, err := hashFile(w.Inv.Image.Archive)
	if err != nil {
		return err
	}
	res.Archive = a
	start := time.Now()
	relay := w.Inv.Image.Relay
	switch {
	case relay == "chain" && len(nodes) > 1:
		relayChain(ctx, w, nodes, res)
	case relay == "sbcast":
		relaySbcast(ctx, w, nodes, res)
	}
	var missing []*orchestrator.Node
	for _, n := range nodes {
		if res.Nodes[n.Name].Via == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 && (relay == "chain" && len(nodes) > 1 || relay == "sbcast") {
		w.Progress.Line("image: sending the archive directly to %d node(s) the %s did not reach", len(missing), relay)
	}
	results := remote.Each(ctx, len(missing), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		n := missing[i]
		tr := w.Progress.Transfer(n.Name, "image", a.Bytes)
		defer tr.Close()
		e, err := execOf(n)
		if err != nil {
			return nil, err
		}
		r, err := e.Upload(ctx, a.Path, archivePath(w), remote.TransferOptions{
			Progress: func(done, _ int64) { tr.Set(done) }})
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	for i, r := range results {
		ni := res.Nodes[missing[i].Name]
		if r.Err != nil {
			ni.Error = fmt.Sprintf("the archive could not be sent: %v", r.Err)
			continue
		}
		tr := r.Value.(remote.TransferResult)
		ni.Via, ni.Bytes, ni.CopySecs = "direct", tr.Bytes, tr.Elapsed.Seconds()
	}
	res.DistributionSecs = time.Since(start).Seconds()
	return nil
}

// relayChain streams the archive into the first node, which passes it on
// (scripts/node/relay.sh, each node running its own pushed copy) over the
// window's ssh key.
func relayChain(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, res *Imaged) {
	f, err := os.Open(res.Archive.Path)
	if err != nil {
		res.Nodes[nodes[0].Name].Error = err.Error()
		return
	}
	defer f.Close()
	args := []string{remote.Quote(archivePath(w)), res.Archive.SHA256, "\"" + nodeDir(w) + "/ssh/config\"", remote.Quote(nodes[0].Name)}
	for _, n := range nodes[1:] {
		args = append(args, remote.Quote(n.Name+"="+w.FabricHost(n)))
	}
	cmd := "cd && " + toolCmd(w.RunID(), nodes[0].Name, "relay.sh", args...)
	w.Progress.Node(nodes[0].Name, "image: relaying %s along %d nodes", humanSize(res.Archive.Bytes), len(nodes))
	tr := w.Progress.Transfer(nodes[0].Name, "image (chain)", res.Archive.Bytes)
	defer tr.Close()
	in := &countingReader{r: f, report: tr.Set}
	out, err := runIn(ctx, w, nodes[0], cmd, in)
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[0] != "relay" {
			continue
		}
		ni, ok := res.Nodes[f[1]]
		if !ok {
			continue
		}
		bytes, _ := strconv.ParseInt(f[3], 10, 64)
		secs, _ := strconv.ParseFloat(f[4], 64)
		switch f[2] {
		case "ok":
			ni.Via, ni.Bytes, ni.CopySecs = "chain", bytes, secs
		case "bad":
			w.Progress.Node(f[1], "image: the relayed copy does not match (sha256 %s, expected %s); sending it directly", f[5], res.Archive.SHA256)
		default:
			w.Progress.Node(f[1], "image: the chain did not reach it: %s", strings.Join(f[5:], " "))
		}
	}
	if err != nil {
		w.Progress.Node(nodes[0].Name, "image: relay: %s", firstLine(err.Error()))
	}
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
	s := &Smoke{Command: strings.Join(args, " ")}
	start := time.Now()
	out, err := runOn(ctx, w, n, s.Command+" 2>&1")
	s.Secs, s.Ready, s.Output = time.Since(start).Seconds(), time.Now().UTC(), strings.TrimSpace(string(out))
	if err != nil {
		s.Error = err.Error()
	}
	return s
}

func hashFile(path string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, fmt.Errorf("image archive %s: %w", path, err)
	}
	return &Archive{Path: path, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// countingReader reports bytes read.
type countingReader struct {
	r      io.Reader
	n      int64
	report func(done int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	if c.report != nil {
		c.report(c.n)
	}
	return k, err
}

func humanSize(b int64) string { return inventory.Bytes(b).String() }
