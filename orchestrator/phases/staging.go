package phases

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/parse"
	"gpuaccept/orchestrator/record"
	"gpuaccept/orchestrator/redact"
	"gpuaccept/remote"
)

// Staged is what staging did on one node.
type Staged struct {
	Dir string `json:"dir"`
	// Avail is the free space of Dir's filesystem before staging (df).
	Avail   int64          `json:"avail_bytes,omitempty"`
	Sources []StagedSource `json:"sources"`
	// Bytes, Seconds and GBs are over the sources that were staged;
	// Seconds is the wall time from the first source's start to the last
	// one's end on the coordinator's clock (the sources are staged one
	// after the other, every node at once).
	Bytes    int64     `json:"bytes"`
	Seconds  float64   `json:"seconds"`
	GBs      float64   `json:"gbs"` // 10⁹ bytes per second
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`
	Complete bool      `json:"complete"` // every source staged
	// Disk is the local disk's own sequential bandwidth (fio), next to
	// which the staging throughput reads; DiskNote says why there is none.
	Disk     *DiskBaseline `json:"disk_baseline,omitempty"`
	DiskNote string        `json:"disk_note,omitempty"`
	// Earlier: the runs before this one, when its throughput failed the
	// quote and was retested (acceptance.retest); STAGE-002 rests on this
	// run, the last.
	Earlier []Staged `json:"earlier_runs,omitempty"`
}

// StagedSource is one source on one node.
type StagedSource struct {
	Name string `json:"name"`
	// Kind: path, http, s3, gs, az or synthetic.
	Kind string `json:"kind"`
	From string `json:"from"` // the path or URL; "synthetic <size>" for generated data
	// Endpoint is the S3-compatible store an s3:// URL was read from.
	Endpoint string `json:"endpoint,omitempty"`
	Tool     string `json:"tool,omitempty"`
	// Missing: the node lacks the tool this kind of source needs (the
	// script's words); the source was not staged, and not measured.
	Missing string `json:"missing,omitempty"`
	Bytes   int64  `json:"bytes"`
	Files   int    `json:"files,omitempty"`
	// Seconds is measured on the node for paths and URLs (the copy, its
	// checksum and fsync), on the coordinator for synthetic data (the
	// upload, its fsync and the node's sha256sum of what it holds).
	Seconds float64 `json:"seconds"`
	GBs     float64 `json:"gbs"`
	SHA256  string  `json:"sha256,omitempty"`
	// Checksum says how the node computed SHA256: "tee" (the bytes went
	// through sha256sum as they were written) or "after" (sha256sum read
	// the copy back; for a directory, the sha256 of its sorted manifest).
	Checksum string `json:"checksum,omitempty"`
	// Hasher computed SHA256 on the node: openssl, or sha256sum where the
	// node has no openssl (several times slower: it can bound the figure).
	Hasher string `json:"hasher,omitempty"`
	// Expected is the sha256 the copy must have: the inventory's, else
	// the generator's for synthetic data; empty: the nodes must agree.
	Expected     string `json:"expected_sha256,omitempty"`
	ExpectedFrom string `json:"expected_from,omitempty"` // "inventory" or "generator"
	Error        string `json:"error,omitempty"`
}

// DiskBaseline is a short sequential write then read of the staging
// directory's disk.
type DiskBaseline struct {
	Tool     string  `json:"tool"`
	Version  string  `json:"version,omitempty"`
	Command  string  `json:"command"`
	Direct   bool    `json:"direct"` // O_DIRECT; else buffered with an fsync at the end of the write
	WriteGBs float64 `json:"write_gbs"`
	ReadGBs  float64 `json:"read_gbs"`
}

// Staging copies the dataset and weights to every node's local disk at
// the same time, as a training job's setup does: bytes, seconds and
// throughput per node and in aggregate, checksums verified, against the
// quoted staging throughput and the planned setup window. Not gating: a
// node that cannot stage is still fit for the GPU tests, and its verdicts
// name it.
var Staging = orchestrator.Phase{
	Name:    "staging",
	Enabled: func(inv *inventory.Inventory) bool { return inv.Phases.Staging.Enabled },
	Own: func(inv *inventory.Inventory) bool {
		return inv.Phases.Staging.Timeout > 0 || inv.Phases.Staging.Window > 0
	},
	Deadline: func(inv *inventory.Inventory) time.Duration {
		st := inv.Phases.Staging
		// Each retest (acceptance.retest) stages everything again.
		runs := time.Duration(record.MaxRuns(inv.Acceptance.RetestOr()))
		switch {
		case st.Timeout > 0:
			return st.Timeout
		case st.Window > 0:
			// Room to measure by how much a slow node misses the window,
			// and for the disk baseline.
			return runs * (2*st.Window + 2*time.Minute)
		}
		return runs * time.Hour
	},
	PerNode: stageNode,
	Judge:   judgeStaging,
}

// StagingDir is the window's own directory under phases.staging.dir (the
// one teardown removes).
func StagingDir(w *orchestrator.Window) string {
	return strings.TrimRight(w.Inv.Phases.Staging.Dir, "/") + "/gpuaccept-" + w.RunID()
}

// stageOnce is one run of the staging: the directory made afresh, every
// source staged, the disk's baseline.
func stageOnce(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (*Staged, error) {
	st := w.Inv.Phases.Staging
	res := &Staged{Dir: StagingDir(w)}
	out, err := runOn(ctx, w, n, stageCommand(w, n, "prepare", res.Dir))
	if err != nil {
		return nil, stageError(out, err, "")
	}
	if f := strings.Fields(string(out)); len(f) == 2 && f[0] == "avail" {
		res.Avail, _ = strconv.ParseInt(f[1], 10, 64)
	}
	var problems []string
	res.Started = time.Now().UTC()
	for i, src := range st.Sources {
		if err := stopped(ctx, n); err != nil {
			for _, rest := range st.Sources[i:] {
				s := sourceOf(rest)
				s.Error = "not staged: " + err.Error()
				res.Sources = append(res.Sources, s)
			}
			problems = append(problems, fmt.Sprintf("%d source(s) not staged: %v", len(st.Sources)-i, err))
			break
		}
		s := stageSource(ctx, w, n, res.Dir, src)
		res.Sources = append(res.Sources, s)
		if s.Error != "" {
			problems = append(problems, fmt.Sprintf("%s (%s): %s", s.Name, s.From, s.Error))
			continue
		}
		res.Bytes += s.Bytes
		w.Progress.Node(n.Name, "staged %s: %s in %.2f s (%s), sha256 %s (%s)",
			s.Name, sizeText(s.Bytes), s.Seconds, gbsText(s.GBs), shortSum(s.SHA256), checksumText(s.Checksum))
	}
	res.Ended = time.Now().UTC()
	res.Seconds = res.Ended.Sub(res.Started).Seconds()
	res.GBs = rate(res.Bytes, res.Seconds)
	res.Complete = len(problems) == 0
	if stopped(ctx, n) == nil {
		res.Disk, res.DiskNote = diskBaseline(ctx, w, n, res.Dir)
	} else {
		res.DiskNote = "not measured: staging was cut short"
	}
	if !res.Complete {
		if why := unstaged(res.Sources); len(why) > 0 && len(why) == len(problems) {
			return res, orchestrator.Unmeasured("staging", "%s: staging not measured", strings.Join(why, "; "))
		}
		return res, errors.New(strings.Join(problems, "; "))
	}
	line := fmt.Sprintf("staging done: %s in %.2f s (%s)", sizeText(res.Bytes), res.Seconds, gbsText(res.GBs))
	if d := res.Disk; d != nil {
		line += fmt.Sprintf("; local disk (fio) write %s, read %s", gbsText(d.WriteGBs), gbsText(d.ReadGBs))
	}
	w.Progress.Node(n.Name, "%s", line)
	return res, nil
}

// stopped says why no more work can be done on the node: the phase's
// deadline or an interrupt, or the connection is gone.
func stopped(ctx context.Context, n *orchestrator.Node) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := n.Exec()
	if e == nil {
		return errors.New("not connected")
	}
	if e.Lost() {
		return remote.ErrConnectionLost
	}
	return nil
}

// sourceOf describes a source before it is staged.
func sourceOf(src inventory.StagingSource) StagedSource {
	s := StagedSource{Name: src.Name, Expected: src.SHA256, Endpoint: src.Endpoint}
	if src.SHA256 != "" {
		s.ExpectedFrom = "inventory"
	}
	switch {
	case src.Path != "":
		s.Kind, s.From = "path", src.Path
	case src.URL != "":
		// Every record shows the URL without a query (a signed URL's
		// signature); the node gets the whole URL on stdin only.
		scheme, _, _ := strings.Cut(src.URL, "://")
		s.Kind, s.From = scheme, redact.URL(src.URL)
		if scheme == "https" {
			s.Kind = "http"
		}
	default:
		s.Kind, s.From = "synthetic", "synthetic "+src.Size.String()
	}
	return s
}

// stageSource copies one source to dir/<name> on the node: through the
// node script for paths and URLs, by SFTP from the coordinator for
// synthetic data.
func stageSource(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, dir string, src inventory.StagingSource) StagedSource {
	s := sourceOf(src)
	var sent atomic.Int64 // bytes sent so far, for synthetic data
	defer stillStaging(w, n, s.Name, &sent)()
	if s.Kind == "synthetic" {
		return stageSynthetic(ctx, w, n, dir, src, s, &sent)
	}
	// The source itself travels on stdin, never in argv (which every user
	// of the node sees in ps): the command line names it as shown.
	out, err := runIn(ctx, w, n, stageCommand(w, n, "fetch", dir, s.Name, s.Kind, s.From, s.Endpoint), strings.NewReader(sourceText(src)+"\n"))
	if err != nil {
		s.Error = stageError(out, err, s.Name+" ("+s.From+"): ").Error()
		if why, ok := missingTool(out, s.Name+" ("+s.From+"): "); ok {
			s.Missing, s.Error = why, why
		}
		return s
	}
	kv, ok := stagedLine(out)
	if !ok {
		s.Error = fmt.Sprintf("the node's staging script said nothing understood: %q", strings.TrimSpace(string(out)))
		return s
	}
	s.Bytes, _ = strconv.ParseInt(kv["bytes"], 10, 64)
	s.Files, _ = strconv.Atoi(kv["files"])
	s.Seconds, _ = strconv.ParseFloat(kv["seconds"], 64)
	s.SHA256, s.Checksum, s.Tool, s.Hasher = kv["sha256"], kv["checksum"], kv["tool"], kv["hasher"]
	s.GBs = rate(s.Bytes, s.Seconds)
	return s
}

// stageSynthetic sends the generated data to the node over SFTP, streamed
// from the generator (nothing held in memory or written locally); the node
// hashes what it holds once it is written, and the upload fails unless
// that is what was sent.
func stageSynthetic(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, dir string, src inventory.StagingSource, s StagedSource, sent *atomic.Int64) StagedSource {
	size := int64(src.Size)
	gen := newSynthetic(src.Name, size)
	sum, err := w.Shared("staging/synthetic/"+src.Name, func() (any, error) { return gen.sum(ctx) })
	if err != nil {
		s.Error = "generate: " + err.Error()
		return s
	}
	s.Tool, s.Checksum = "sftp", "after"
	if s.Expected == "" {
		s.Expected, s.ExpectedFrom = sum.(string), "generator"
	}
	log, _, lerr := w.Log(ctx, n)
	if lerr == nil {
		defer log.Close()
		fmt.Fprintf(log, "# upload %s (%d bytes of %s, sha256 %s) to %s/%s\n", s.Name, size, syntheticGenerator, sum, dir, s.Name)
	}
	e, err := execOf(n)
	if err != nil {
		s.Error = "not connected"
		return s
	}
	tr := w.Progress.Transfer(n.Name, "staging "+s.Name, size)
	r, err := e.UploadFrom(ctx, gen, size, dir+"/"+s.Name, remote.TransferOptions{
		SHA256:   sum.(string),
		Progress: func(done, _ int64) { sent.Store(done); tr.Set(done) },
	})
	tr.Close()
	if log != nil && lerr == nil {
		if err != nil {
			fmt.Fprintf(log, "# %v\n", err)
		} else {
			fmt.Fprintf(log, "# sent %d bytes in %s; the node's sha256sum of its copy: %s\n", r.Bytes, r.Elapsed.Round(time.Millisecond), r.SHA256)
		}
	}
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Bytes, s.Files, s.SHA256 = r.Bytes, 1, r.SHA256
	s.Seconds = r.Elapsed.Seconds()
	s.GBs = rate(s.Bytes, s.Seconds)
	return s
}

// stillStagingEvery is how often a long copy says it is still going.
const stillStagingEvery = 30 * time.Second

// stillStaging reports a long copy every stillStagingEvery until the
// returned func is called.
func stillStaging(w *orchestrator.Window, n *orchestrator.Node, name string, sent *atomic.Int64) func() {
	start := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(stillStagingEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				msg := fmt.Sprintf("staging %s: still copying after %s", name, time.Since(start).Round(time.Second))
				if b := sent.Load(); b > 0 {
					msg += fmt.Sprintf(", %s sent", sizeText(b))
				}
				w.Progress.Node(n.Name, "%s", msg)
			}
		}
	}()
	return func() { close(stop); <-done }
}

// sourceText is what stage.sh fetches: the path or the whole URL.
func sourceText(src inventory.StagingSource) string {
	if src.URL != "" {
		return src.URL
	}
	return src.Path
}

func stageCommand(w *orchestrator.Window, n *orchestrator.Node, op, dir string, args ...string) string {
	words := []string{remote.Quote(op), remote.Quote(dir)}
	for _, a := range args {
		words = append(words, remote.Quote(a))
	}
	return toolCmd(w.RunID(), n.Name, "stage.sh", words...)
}

// stagedLine finds the script's "staged k=v ..." line.
func stagedLine(out []byte) (map[string]string, bool) {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "staged" {
			continue
		}
		kv := map[string]string{}
		for _, p := range f[1:] {
			if k, v, ok := strings.Cut(p, "="); ok {
				kv[k] = v
			}
		}
		return kv, true
	}
	return nil, false
}

// stageError prefers the script's own words ("error NAME (SOURCE): why")
// to the exit status; known is a prefix the caller names itself.
func stageError(out []byte, err error, known string) error {
	for _, line := range strings.Split(string(out), "\n") {
		if msg, ok := strings.CutPrefix(line, "error "); ok {
			return errors.New(strings.TrimPrefix(msg, known))
		}
	}
	return err
}

// fioFile is the disk baseline's scratch file in the staging directory.
const fioFile = ".gpuaccept-fio"

// diskBaseline runs a short, bounded fio sequential write then read in the
// staging directory: O_DIRECT first; where the filesystem refuses it,
// buffered with an fsync at the end of the write (fio invalidates the page
// cache before the read).
func diskBaseline(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node, dir string) (*DiskBaseline, string) {
	if !inventory.On(w.Inv.Phases.Staging.Fio) {
		return nil, "not measured: phases.staging.fio is off"
	}
	const absent = "gpuaccept: no fio"
	tries := []struct {
		flags  string
		direct bool
	}{
		{"--ioengine=libaio --iodepth=16 --direct=1", true},
		{"--ioengine=psync --direct=0", false},
	}
	var failures []string
	for _, t := range tries {
		fio := fmt.Sprintf("fio --output-format=json --directory=%s --filename=%s --size=256M --bs=1M --runtime=10 %s "+
			"--name=seqwrite --rw=write --end_fsync=1 --name=seqread --stonewall --rw=read", remote.Quote(dir), fioFile, t.flags)
		cmd := fmt.Sprintf("command -v fio >/dev/null 2>&1 || { echo %s; exit 0; }; %s; rc=$?; rm -f %s/%s; exit $rc",
			remote.Quote(absent), fio, remote.Quote(dir), fioFile)
		out, err := runOn(ctx, w, n, cmd)
		if strings.TrimSpace(string(out)) == absent {
			return nil, "not measured: fio is not installed on the node"
		}
		if ctx.Err() != nil {
			return nil, "not measured: " + ctx.Err().Error()
		}
		r, perr := parse.Fio(string(out))
		if perr == nil && r.WriteBW() > 0 && r.ReadBW() > 0 {
			return &DiskBaseline{Tool: "fio", Version: r.Version, Command: fio, Direct: t.direct,
				WriteGBs: r.WriteBW() / 1e9, ReadGBs: r.ReadBW() / 1e9}, ""
		}
		why := perr
		if why == nil {
			why = err
		}
		if why == nil {
			why = errors.New("no bandwidth in the report")
		}
		mode := "buffered"
		if t.direct {
			mode = "O_DIRECT"
		}
		failures = append(failures, fmt.Sprintf("%s: %s", mode, firstLine(why.Error())))
	}
	return nil, "fio failed: " + strings.Join(failures, "; ")
}

// syntheticGenerator names the synthetic data's generator in the
// evidence: the AES-128-CTR keystream (counter from 0) under a key that
// is the first 16 bytes of sha256(syntheticSeed + source name), so the
// same name and size give the same bytes and sha256 in every window.
const (
	syntheticGenerator = "AES-128-CTR keystream, key sha256(\"gpuaccept staging v1:\" + name)[:16]"
	syntheticSeed      = "gpuaccept staging v1:"
)

// synthetic is deterministic pseudo-random data, readable at any offset
// (CTR mode), so it can be hashed, sent and resent without being stored.
type synthetic struct {
	block cipher.Block
	size  int64
}

func newSynthetic(name string, size int64) synthetic {
	key := sha256.Sum256([]byte(syntheticSeed + name))
	b, err := aes.NewCipher(key[:16])
	if err != nil {
		panic(err) // a 16-byte key is always valid
	}
	return synthetic{block: b, size: size}
}

// ReadAt serves the keystream bytes [off, off+len(p)).
func (s synthetic) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("synthetic: negative offset")
	}
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if rest := s.size - off; int64(n) > rest {
		n = int(rest)
	}
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off/aes.BlockSize))
	ctr := cipher.NewCTR(s.block, iv[:])
	if skip := off % aes.BlockSize; skip > 0 {
		var tmp [aes.BlockSize]byte
		ctr.XORKeyStream(tmp[:skip], tmp[:skip])
	}
	clear(p[:n])
	ctr.XORKeyStream(p[:n], p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// sum is the sha256 of the whole data.
func (s synthetic) sum(ctx context.Context) (string, error) {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < s.size; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := s.ReadAt(buf, off)
		h.Write(buf[:n])
		off += int64(n)
		if err != nil && err != io.EOF {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func rate(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / seconds / 1e9
}

func sizeText(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func gbsText(gbs float64) string {
	if gbs > 0 && gbs < 0.01 {
		return fmt.Sprintf("%.2f MB/s", gbs*1000)
	}
	return fmt.Sprintf("%.3g GB/s", gbs)
}

func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

func checksumText(how string) string {
	switch how {
	case "tee":
		return "hashed while written"
	case "after":
		return "hashed on the node after writing"
	}
	return how
}
