package phases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
	"gpuaccept/remote"
)

// The checkpoint test is two phases, not one cluster phase. A checkpoint
// is saved by every node at once and restored by every node at once, and
// no restore may start before every save is durable (with shared storage
// node i reads what node i+1 wrote). That barrier is exactly the runner's
// barrier between phases, so two PerNode phases get it for free, together
// with what a hand-made fan-out inside one cluster phase would have to
// redo: per-node deadlines, per-node results, logs and quarantine, and a
// journal entry between the two steps, so a coordinator lost after the
// save resumes with the restore (the writers' sha256s are in the journal)
// instead of writing again.
const (
	ckptWritePhase   = "checkpoint-write"
	ckptRestorePhase = "checkpoint-restore"
)

// CheckpointWrite saves the checkpoint on every node at once: shards in
// parallel (one per GPU rank), each hashed as it is written and fsynced,
// then the manifest, atomically. The time is the whole blocking save.
var CheckpointWrite = orchestrator.Phase{
	Name:     ckptWritePhase,
	Enabled:  ckptEnabled,
	Deadline: ckptDeadline,
	Own:      ckptOwn,
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		q, tol := w.Inv.Quote.CheckpointGBs, w.Inv.Acceptance.ToleranceFor("CKPT-002")
		runs, err := retested(ctx, w, n.Name, "checkpoint write throughput", func(ctx context.Context, run int) (*CkptSave, error) {
			return ckptWriteOnce(ctx, w, n)
		}, func(r *CkptSave) string {
			if r == nil {
				return ""
			}
			return ckptRateFailed(r.GBs, r.CeilingGBs, q, tol)
		})
		if len(runs) == 0 || runs[len(runs)-1] == nil {
			return nil, err
		}
		res := runs[len(runs)-1]
		for _, r := range runs[:len(runs)-1] {
			res.Earlier = append(res.Earlier, *r)
		}
		return res, err
	},
}

// ckptWriteOnce is one save of the node's checkpoint (a retest writes
// the same shards again, from the same seed).
func ckptWriteOnce(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (*CkptSave, error) {
	c := w.Inv.Phases.Checkpoint
	need := int64(c.Size)
	if inventory.On(c.Shared) {
		need *= int64(len(w.Active()))
	}
	cmd := toolCmd(w.RunID(), n.Name, "checkpoint.sh", "write", remote.Quote(ckptBase(w)), remote.Quote(n.Name), fmt.Sprint(int64(c.Size)), fmt.Sprint(c.Shards),
		remote.Quote(w.RunID()+"/"+n.Name), fmt.Sprint(need))
	out, err := runOn(ctx, w, n, cmd)
	err = ckptScriptError(err)
	res, perr := parseCkptWrite(string(out), ckptBase(w)+"/"+n.Name)
	if err != nil {
		if len(res.Shards) == 0 {
			return nil, err
		}
		return &res, err
	}
	if perr != nil {
		return &res, perr
	}
	if err := res.check(int64(c.Size), c.Shards); err != nil {
		return &res, err
	}
	w.Progress.Node(n.Name, "checkpoint saved: %s in %.3g s (%.3g GB/s)", inventory.Bytes(res.Bytes), res.Seconds, res.GBs)
	return &res, nil
}

// CheckpointRestore restores a checkpoint on every node at once, after
// every save finished: with shared storage node i reads what node i+1
// wrote (the next node whose save succeeded, wrapping around), which
// proves the filesystem shows every node the same bytes; otherwise each
// node reads its own. Every shard is hashed as it is read and compared
// with the sha256 the writer reported while writing.
var CheckpointRestore = orchestrator.Phase{
	Name:     ckptRestorePhase,
	Enabled:  ckptEnabled,
	Deadline: ckptDeadline,
	Own:      ckptOwn,
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
		q, tol := w.Inv.Quote.CheckpointGBs, w.Inv.Acceptance.ToleranceFor("CKPT-003")
		runs, err := retested(ctx, w, n.Name, "checkpoint read throughput", func(ctx context.Context, run int) (*CkptRestore, error) {
			return ckptRestoreOnce(ctx, w, n)
		}, func(r *CkptRestore) string {
			if r == nil {
				return ""
			}
			return ckptRateFailed(r.GBs, r.CeilingGBs, q, tol)
		})
		if len(runs) == 0 || runs[len(runs)-1] == nil {
			return nil, err
		}
		res := runs[len(runs)-1]
		for _, r := range runs[:len(runs)-1] {
			res.Earlier = append(res.Earlier, *r)
		}
		return res, err
	},
	Judge: judgeCheckpoint,
}

// ckptRestoreOnce is one restore on the node (a retest reads the same
// writer's shards again, the page cache emptied again first).
func ckptRestoreOnce(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (*CkptRestore, error) {
	c := w.Inv.Phases.Checkpoint
	var saved []bool
	for _, m := range w.Nodes {
		var wr CkptSave
		r, ok := w.Result(ckptWritePhase, m.Index, &wr)
		saved = append(saved, ok && r.Outcome == record.OK && len(wr.Shards) > 0)
	}
	src, ok := ckptSource(saved, n.Index, inventory.On(c.Shared))
	if !ok {
		if !inventory.On(c.Shared) {
			return nil, errors.New("this node's checkpoint save failed: nothing to restore")
		}
		return nil, errors.New("no node saved a checkpoint: nothing to restore")
	}
	writer := w.Nodes[src]
	var wr CkptSave
	w.Result(ckptWritePhase, src, &wr)
	cmd := toolCmd(w.RunID(), n.Name, "checkpoint.sh", "restore", remote.Quote(ckptBase(w)), remote.Quote(writer.Name), fmt.Sprint(len(wr.Shards)))
	out, err := runOn(ctx, w, n, cmd)
	err = ckptScriptError(err)
	res, perr := parseCkptRestore(string(out), wr.Dir)
	res.Writer, res.WriterIndex, res.Expected = writer.Name, src, wr.Shards
	if err != nil {
		return &res, err
	}
	if perr != nil {
		return &res, perr
	}
	if p := res.Problems(n.Name); len(p) > 0 {
		msg := p[0]
		if len(p) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(p)-1)
		}
		return &res, errors.New(msg)
	}
	w.Progress.Node(n.Name, "checkpoint of %s restored: %s in %.3g s (%.3g GB/s), sha256 match", writer.Name, inventory.Bytes(res.Bytes), res.Seconds, res.GBs)
	return &res, nil
}

func ckptEnabled(inv *inventory.Inventory) bool { return inv.Phases.Checkpoint.Enabled }

// ckptOwn: phases.checkpoint.timeout wins over phases.deadline.
func ckptOwn(inv *inventory.Inventory) bool { return inv.Phases.Checkpoint.Timeout > 0 }

// ckptDeadline: the inventory's timeout, else two minutes plus the size
// at 50 MB/s (a slow network filesystem).
func ckptDeadline(inv *inventory.Inventory) time.Duration {
	c := inv.Phases.Checkpoint
	// Each retest (acceptance.retest) writes or reads the whole size again.
	runs := time.Duration(record.MaxRuns(inv.Acceptance.RetestOr()))
	return orDefault(c.Timeout, runs*(2*time.Minute+time.Duration(float64(c.Size)/50e6*float64(time.Second)).Round(time.Second)))
}

// ckptBase is the window's checkpoint directory on the nodes, the one
// teardown removes (WindowDirs).
func ckptBase(w *orchestrator.Window) string {
	return strings.TrimRight(w.Inv.Phases.Checkpoint.Dir, "/") + "/gpuaccept-" + w.RunID()
}

// ckptSource is whose checkpoint node reader restores: on shared storage
// the next node after it (by index, wrapping around) whose save succeeded,
// itself when it is the only one; on local storage its own, if saved.
func ckptSource(saved []bool, reader int, shared bool) (int, bool) {
	if !shared {
		return reader, reader >= 0 && reader < len(saved) && saved[reader]
	}
	for k := 1; k <= len(saved); k++ {
		if j := (reader + k) % len(saved); saved[j] {
			return j, true
		}
	}
	return -1, false
}

// CkptShard is one shard of a checkpoint, as written or as read.
type CkptShard struct {
	Index   int     `json:"index"`
	File    string  `json:"file"`
	Bytes   int64   `json:"bytes"`
	SHA256  string  `json:"sha256,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Error   string  `json:"error,omitempty"` // could not be read
}

// CkptSave is one node's save.
type CkptSave struct {
	Dir       string      `json:"dir"`
	Generator string      `json:"generator"`        // openssl (AES-CTR) or urandom
	Hasher    string      `json:"hasher,omitempty"` // openssl or sha256sum
	Free      int64       `json:"free_bytes,omitempty"`
	Shards    []CkptShard `json:"shards"`
	Manifest  string      `json:"manifest,omitempty"`
	Bytes     int64       `json:"bytes"`
	Seconds   float64     `json:"seconds"` // shards, fsync, manifest: the blocking save
	GBs       float64     `json:"gbs"`
	// CeilingGBs is what generating and hashing alone reach on the node
	// (every shard at once, to /dev/null): a save near it is bound by the
	// instrument, not by the storage.
	CeilingGBs float64 `json:"ceiling_gbs,omitempty"`
	// Earlier: the saves before this one, when the write throughput
	// failed the quote and was retested; CKPT-002 rests on this one.
	Earlier []CkptSave `json:"earlier_runs,omitempty"`
}

// CkptRestore is one node's restore of one writer's checkpoint.
type CkptRestore struct {
	Writer      string `json:"writer"`
	Hasher      string `json:"hasher,omitempty"` // openssl or sha256sum
	WriterIndex int    `json:"writer_index"`
	Dir         string `json:"dir"`
	// Expected is what the writer reported while writing (the journal);
	// Manifest the sha256s in its manifest.sha256, as read back.
	Expected []CkptShard `json:"expected"`
	Manifest []string    `json:"manifest"`
	Shards   []CkptShard `json:"shards"`
	// Cache says how the page cache was emptied before reading:
	// "fadvise" (the shards' own pages), "drop_caches" (all of it, as
	// root) or "none"; Resident is the shards' bytes still cached
	// (fincore), nil when unknown.
	Cache      string  `json:"cache"`
	Resident   *int64  `json:"resident_bytes,omitempty"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	GBs        float64 `json:"gbs"`
	CeilingGBs float64 `json:"ceiling_gbs,omitempty"` // hashing alone
	// Earlier: the restores before this one, when the read throughput
	// failed the quote and was retested; CKPT-003 rests on this one.
	Earlier []CkptRestore `json:"earlier_runs,omitempty"`
}

// CacheDropped reports whether the read came from storage rather than
// RAM, and in words how it was made sure of.
func (r *CkptRestore) CacheDropped() (bool, string) {
	switch {
	case r.Cache == "none":
		return false, "page cache not dropped (no fadvise, not root): the read may be from RAM"
	case r.Resident != nil && *r.Resident > 0:
		return false, fmt.Sprintf("page cache dropped (%s) but %s of the shards still cached: the read may be partly from RAM", r.Cache, inventory.Bytes(*r.Resident))
	case r.Resident != nil:
		return true, fmt.Sprintf("page cache dropped before reading (%s; fincore: none of it cached)", r.Cache)
	default:
		return true, fmt.Sprintf("page cache dropped before reading (%s)", r.Cache)
	}
}

// Problems names every way the restore differs from the save: a shard
// missing, unreadable or not byte-exact (with both sha256s), a manifest
// that disagrees with what its writer reported.
func (r *CkptRestore) Problems(reader string) []string {
	var out []string
	got := map[int]CkptShard{}
	for _, s := range r.Shards {
		got[s.Index] = s
	}
	for _, e := range r.Expected {
		s, ok := got[e.Index]
		name := fmt.Sprintf("shard-%d.bin written by %s (%s)", e.Index, r.Writer, e.File)
		switch {
		case !ok:
			out = append(out, name+": not read on "+reader)
		case s.Error != "":
			out = append(out, fmt.Sprintf("%s: cannot be read on %s: %s", name, reader, s.Error))
		case s.SHA256 != e.SHA256:
			size := ""
			if s.Bytes != e.Bytes {
				size = fmt.Sprintf(", %d bytes where %d were written", s.Bytes, e.Bytes)
			}
			out = append(out, fmt.Sprintf("%s: sha256 read on %s %s, written %s%s", name, reader, s.SHA256, e.SHA256, size))
		}
	}
	if len(r.Expected) == 0 {
		out = append(out, fmt.Sprintf("no record of what %s wrote", r.Writer))
	}
	for i, e := range r.Expected {
		switch {
		case i >= len(r.Manifest) || r.Manifest[i] == "":
			out = append(out, fmt.Sprintf("%s/manifest.sha256 written by %s lacks shard-%d.bin", r.Dir, r.Writer, e.Index))
		case r.Manifest[i] != e.SHA256:
			out = append(out, fmt.Sprintf("%s/manifest.sha256 written by %s: shard-%d.bin is %s there, %s when written", r.Dir, r.Writer, e.Index, r.Manifest[i], e.SHA256))
		}
	}
	return out
}

// check: every shard there, at its size, the sizes adding up.
func (c *CkptSave) check(size int64, shards int) error {
	if len(c.Shards) != shards {
		return fmt.Errorf("%d of %d shards written", len(c.Shards), shards)
	}
	per, extra := size/int64(shards), size%int64(shards)
	for _, s := range c.Shards {
		want := per
		if int64(s.Index) < extra {
			want++
		}
		if s.Bytes != want {
			return fmt.Errorf("%s: %d bytes written, want %d (disk full?)", s.File, s.Bytes, want)
		}
		if len(s.SHA256) != 64 {
			return fmt.Errorf("%s: no sha256", s.File)
		}
	}
	if c.Seconds <= 0 {
		return errors.New("the save was not timed")
	}
	return nil
}

// ckptScriptError: the script says what went wrong on its last line of
// stderr ("checkpoint: ..."); that line is the error (the raw log keeps
// the whole command and all of stderr).
func ckptScriptError(err error) error {
	var exit *remote.ExitError
	if !errors.As(err, &exit) || exit.Signal != "" {
		return err
	}
	lines := strings.Split(strings.TrimSpace(exit.StderrTail), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); strings.HasPrefix(last, "checkpoint: ") {
		return errors.New(last)
	}
	return err
}
