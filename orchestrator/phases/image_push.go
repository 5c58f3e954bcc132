package phases

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// The image phase's push mode: the archive from the coordinator to the
// nodes, along a chain of them or directly.

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
