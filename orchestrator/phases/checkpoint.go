package phases

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
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
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
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
			return res, err
		}
		if perr != nil {
			return res, perr
		}
		if err := res.check(int64(c.Size), c.Shards); err != nil {
			return res, err
		}
		w.Progress.Node(n.Name, "checkpoint saved: %s in %.3g s (%.3g GB/s)", inventory.Bytes(res.Bytes), res.Seconds, res.GBs)
		return res, nil
	},
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
	PerNode: func(ctx context.Context, w *orchestrator.Window, n *orchestrator.Node) (any, error) {
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
			return res, err
		}
		if perr != nil {
			return res, perr
		}
		if p := res.Problems(n.Name); len(p) > 0 {
			msg := p[0]
			if len(p) > 1 {
				msg += fmt.Sprintf(" (and %d more)", len(p)-1)
			}
			return res, errors.New(msg)
		}
		w.Progress.Node(n.Name, "checkpoint of %s restored: %s in %.3g s (%.3g GB/s), sha256 match", writer.Name, inventory.Bytes(res.Bytes), res.Seconds, res.GBs)
		return res, nil
	},
	Judge: judgeCheckpoint,
}

func ckptEnabled(inv *inventory.Inventory) bool { return inv.Phases.Checkpoint.Enabled }

// ckptDeadline: the inventory's timeout, else two minutes plus the size
// at 50 MB/s (a slow network filesystem).
func ckptDeadline(inv *inventory.Inventory) time.Duration {
	c := inv.Phases.Checkpoint
	return orDefault(c.Timeout, 2*time.Minute+time.Duration(float64(c.Size)/50e6*float64(time.Second)).Round(time.Second))
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

// parseCkptWrite reads checkpoint.sh write's output; dir is the node's
// checkpoint directory.
func parseCkptWrite(out, dir string) (CkptSave, error) {
	res := CkptSave{Dir: dir}
	lines, err := ckptLines(out)
	for _, f := range lines {
		switch f[0] {
		case "generator":
			res.Generator = f[1]
		case "hasher":
			res.Hasher = f[1]
		case "free":
			res.Free, _ = strconv.ParseInt(f[1], 10, 64)
		case "ceiling":
			res.CeilingGBs = ckptRate(f)
		case "shard":
			s, serr := ckptShardLine(f, dir)
			if serr != nil {
				return res, serr
			}
			res.Shards = append(res.Shards, s)
			res.Bytes += s.Bytes
		case "manifest":
			res.Manifest = f[1]
		case "seconds":
			res.Seconds, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if res.Seconds > 0 {
		res.GBs = float64(res.Bytes) / 1e9 / res.Seconds
	}
	return res, err
}

// parseCkptRestore reads checkpoint.sh restore's output; dir is the
// writer's checkpoint directory.
func parseCkptRestore(out, dir string) (CkptRestore, error) {
	res := CkptRestore{Dir: dir}
	lines, err := ckptLines(out)
	for _, f := range lines {
		switch f[0] {
		case "hasher":
			res.Hasher = f[1]
		case "expect":
			k, _ := strconv.Atoi(f[1])
			if k >= 0 && k < 1<<16 && len(f) > 2 {
				for len(res.Manifest) <= k {
					res.Manifest = append(res.Manifest, "")
				}
				res.Manifest[k] = f[2]
			}
		case "ceiling":
			res.CeilingGBs = ckptRate(f)
		case "cache":
			res.Cache = f[1]
			if len(f) > 2 {
				if n, perr := strconv.ParseInt(f[2], 10, 64); perr == nil {
					res.Resident = &n
				}
			}
		case "shard":
			s, serr := ckptShardLine(f, dir)
			if serr != nil {
				return res, serr
			}
			res.Shards = append(res.Shards, s)
			res.Bytes += s.Bytes
		case "missing":
			k, _ := strconv.Atoi(f[1])
			res.Shards = append(res.Shards, CkptShard{Index: k, File: fmt.Sprintf("%s/shard-%d.bin", dir, k),
				Error: strings.Join(f[2:], " ")})
		case "seconds":
			res.Seconds, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if res.Seconds > 0 {
		res.GBs = float64(res.Bytes) / 1e9 / res.Seconds
	}
	return res, err
}

// ckptLines splits the script's output into fields, one fact a line; a
// known word without its value is an error.
func ckptLines(out string) ([][]string, error) {
	want := map[string]int{"generator": 2, "hasher": 2, "free": 2, "ceiling": 3, "shard": 5, "manifest": 2, "seconds": 2,
		"expect": 3, "cache": 2, "missing": 2}
	var lines [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, known := want[f[0]]
		if !known {
			continue
		}
		if len(f) < n {
			return lines, fmt.Errorf("checkpoint: output not understood: %q", line)
		}
		lines = append(lines, f)
	}
	return lines, nil
}

func ckptShardLine(f []string, dir string) (CkptShard, error) {
	k, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	secs, err3 := strconv.ParseFloat(f[4], 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return CkptShard{}, fmt.Errorf("checkpoint: output not understood: %q: %w", strings.Join(f, " "), err)
	}
	return CkptShard{Index: k, File: fmt.Sprintf("%s/shard-%d.bin", dir, k), Bytes: n, SHA256: f[3], Seconds: secs}, nil
}

// ckptRate: GB/s of a "ceiling BYTES SECONDS" line.
func ckptRate(f []string) float64 {
	n, _ := strconv.ParseFloat(f[1], 64)
	s, _ := strconv.ParseFloat(f[2], 64)
	if s <= 0 {
		return 0
	}
	return n / 1e9 / s
}

// ckptNode is what the judge knows of one node: its save, its restore,
// and why it has none.
type ckptNode struct {
	Name       string
	Absent     string // why the node took no part (quarantined), "" if it did
	Write      *CkptSave
	WriteErr   string
	Restore    *CkptRestore
	RestoreErr string
}

// ckptQuote is what the judge compares with.
type ckptQuote struct {
	GBs                      float64 // per node, write and read alike; 0: not quoted
	TolWrite, TolRead, TolIO float64
}

func judgeCheckpoint(w *orchestrator.Window) []record.Verdict {
	if !ckptEnabled(w.Inv) {
		return nil
	}
	var nodes []ckptNode
	for _, n := range w.Nodes {
		cn := ckptNode{Name: n.Name}
		var wr CkptSave
		if r, ok := w.Result(ckptWritePhase, n.Index, &wr); ok {
			if len(r.Data) > 0 {
				cn.Write = &wr
			}
			cn.WriteErr = r.Error
		}
		var rr CkptRestore
		if r, ok := w.Result(ckptRestorePhase, n.Index, &rr); ok {
			if len(r.Data) > 0 {
				cn.Restore = &rr
			}
			cn.RestoreErr = r.Error
		}
		if q, why := n.Quarantined(); q && cn.Write == nil && cn.WriteErr == "" {
			cn.Absent = why
		}
		nodes = append(nodes, cn)
	}
	a := w.Inv.Acceptance
	return checkpointVerdicts(nodes, ckptQuote{GBs: w.Inv.Quote.CheckpointGBs,
		TolWrite: a.ToleranceFor("CKPT-002"), TolRead: a.ToleranceFor("CKPT-003"), TolIO: a.ToleranceFor("CKPT-004")})
}

// checkpointVerdicts judges the checkpoint: per node, the restore it did
// (CKPT-001), its save's throughput (CKPT-002) and its read's (CKPT-003);
// for the cluster, how long training would sit idle for a blocking save
// and a restore, which the slowest node sets (CKPT-004).
func checkpointVerdicts(nodes []ckptNode, q ckptQuote) []record.Verdict {
	v := record.NewVerdict
	var out []record.Verdict
	for _, n := range nodes {
		exact, wv, rv := v("CKPT-001", n.Name), v("CKPT-002", n.Name), v("CKPT-003", n.Name)
		if n.Absent != "" {
			for _, x := range []*record.Verdict{&exact, &wv, &rv} {
				x.Status, x.Detail = record.Skip, n.Absent
			}
			out = append(out, exact, wv, rv)
			continue
		}
		// The save.
		switch {
		case n.Write == nil && n.WriteErr == "":
			wv.Status, wv.Detail = record.Skip, "not run"
		case n.Write == nil || n.Write.Seconds <= 0:
			wv.Status, wv.Detail = record.Fail, firstNonEmpty(n.WriteErr, "the save was not timed")
		default:
			wr := n.Write
			wv.Measured = fmt.Sprintf("%.3g GB/s (%s in %.3g s, %d shards, fsync)", wr.GBs, inventory.Bytes(wr.Bytes), wr.Seconds, len(wr.Shards))
			wv.Measure(wr.GBs, record.UnitGBs)
			ckptRateVerdict(&wv, wr.GBs, wr.CeilingGBs, q.GBs, q.TolWrite, "generating and hashing the data")
			if n.WriteErr != "" {
				wv.Status, wv.Detail = record.Fail, n.WriteErr
			}
		}
		// The restore.
		r := n.Restore
		switch {
		case r == nil && n.RestoreErr == "":
			exact.Status, exact.Detail = record.Skip, "not run"
			rv.Status, rv.Detail = record.Skip, "not run"
		case r == nil:
			exact.Status, exact.Detail = record.Fail, n.RestoreErr
			rv.Status, rv.Detail = record.Fail, n.RestoreErr
		case len(r.Shards) == 0:
			// Nothing was read: the writer's checkpoint is not there.
			exact.Status, exact.Measured, exact.Detail = record.Fail, "nothing restored of "+r.Writer+"'s checkpoint", firstNonEmpty(n.RestoreErr, "no shard read")
			if r.Writer != n.Name {
				exact.Detail += "; is the checkpoint directory one shared filesystem on every node?"
			}
			rv.Status, rv.Detail = record.Fail, exact.Detail
		default:
			exact.Measured = fmt.Sprintf("%d shards (%s) written by %s", len(r.Shards), inventory.Bytes(r.Bytes), r.Writer)
			if p := r.Problems(n.Name); len(p) > 0 {
				exact.Status, exact.Detail = record.Fail, strings.Join(p, "; ")
				exact.Measured = fmt.Sprintf("%d of %d shards written by %s not restored exactly", ckptBad(r), len(r.Expected), r.Writer)
				if ckptBad(r) == 0 {
					exact.Measured = "the manifest written by " + r.Writer + " differs from what it reported"
				}
			} else if n.RestoreErr != "" {
				exact.Status, exact.Detail = record.Fail, n.RestoreErr
			} else {
				exact.Status, exact.Detail = record.Pass, "sha256 of every shard as read equals the writer's, computed while writing"
				exact.Measured += ", sha256 match"
			}
			if r.Seconds <= 0 {
				rv.Status, rv.Detail = record.Fail, firstNonEmpty(n.RestoreErr, "the read was not timed")
				break
			}
			rv.Measured = fmt.Sprintf("%.3g GB/s (%s of %s's in %.3g s)", r.GBs, inventory.Bytes(r.Bytes), r.Writer, r.Seconds)
			rv.Measure(r.GBs, record.UnitGBs)
			ckptRateVerdict(&rv, r.GBs, r.CeilingGBs, q.GBs, q.TolRead, "hashing")
			dropped, how := r.CacheDropped()
			rv.Detail = ckptJoin("; ", rv.Detail, how)
			if !dropped && rv.Status == record.Pass {
				rv.Status = record.Warn
			}
			if n.Write != nil && n.Write.Seconds > 0 {
				rv.Detail = ckptJoin("; ", rv.Detail, fmt.Sprintf("GPU idle on %s: save %.3g s + restore %.3g s = %.3g s",
					n.Name, n.Write.Seconds, r.Seconds, n.Write.Seconds+r.Seconds))
			}
		}
		out = append(out, exact, wv, rv)
	}
	if c, ok := ckptCluster(nodes, q); ok {
		out = append(out, c)
	}
	return out
}

// ckptRateVerdict sets a throughput verdict's status against the quote.
// A figure near what the node's CPU side alone reaches says more about
// the instrument than the storage: it is noted, and a miss it explains is
// a WARN (inconclusive), not a FAIL.
func ckptRateVerdict(v *record.Verdict, gbs, ceiling, quoted, tol float64, what string) {
	bound := ceiling > 0 && gbs >= 0.8*ceiling
	if bound {
		v.Detail = fmt.Sprintf("near the node's ceiling for %s alone (%.3g GB/s): a lower bound of the storage's rate", what, ceiling)
	}
	if quoted <= 0 {
		v.Status, v.Detail = record.Skip, ckptJoin("; ", "not stated in the quote", v.Detail)
		return
	}
	ratio := gbs / quoted
	v.Quoted, v.Ratio, v.Tolerance = fmt.Sprintf("%.3g GB/s per node", quoted), &ratio, &tol
	v.Status = record.Pass
	if ratio < tol {
		v.Status = record.Fail
		if ceiling > 0 && ceiling < quoted*tol {
			v.Status = record.Warn
			v.Detail = fmt.Sprintf("inconclusive: the node's CPU manages %.3g GB/s for %s alone, less than the %.3g GB/s needed to show the quote", ceiling, what, quoted*tol)
		}
	}
}

// ckptCluster: training on every node waits for the slowest save and the
// slowest restore; the aggregate rates are all the bytes over those times.
func ckptCluster(nodes []ckptNode, q ckptQuote) (record.Verdict, bool) {
	v := record.NewVerdict("CKPT-004", "")
	var save, restore float64
	var saveOn, restoreOn string
	var wrote, read, size int64
	var without []string
	for _, n := range nodes {
		if n.Absent != "" {
			continue
		}
		ok := false
		if wr := n.Write; wr != nil && wr.Seconds > 0 && n.WriteErr == "" {
			wrote += wr.Bytes
			size = max(size, wr.Bytes)
			if wr.Seconds > save {
				save, saveOn = wr.Seconds, n.Name
			}
			ok = true
		}
		if r := n.Restore; r != nil && r.Seconds > 0 {
			read += r.Bytes
			if r.Seconds > restore {
				restore, restoreOn = r.Seconds, n.Name
			}
		} else {
			ok = false
		}
		if !ok {
			without = append(without, n.Name)
		}
	}
	if save == 0 && restore == 0 {
		return v, false
	}
	if save == 0 || restore == 0 {
		v.Status, v.Detail = record.Fail, "no node completed both the save and the restore"
		return v, true
	}
	idle := save + restore
	v.Measured = fmt.Sprintf("%.3g s idle: save %.3g s (slowest %s) + restore %.3g s (slowest %s); aggregate write %.3g GB/s, read %.3g GB/s",
		idle, save, saveOn, restore, restoreOn, float64(wrote)/1e9/save, float64(read)/1e9/restore)
	v.Measure(idle, record.UnitSeconds)
	if len(without) > 0 {
		v.Detail = "without " + strings.Join(without, ", ") + " (save or restore failed)"
	}
	if q.GBs <= 0 {
		v.Status, v.Detail = record.Skip, ckptJoin("; ", "not stated in the quote", v.Detail)
		return v, true
	}
	quoted := 2 * float64(size) / 1e9 / q.GBs
	ratio := quoted / idle
	v.Quoted = fmt.Sprintf("%.3g s (%s saved and restored at %.3g GB/s per node)", quoted, inventory.Bytes(size), q.GBs)
	v.Ratio, v.Tolerance = &ratio, &q.TolIO
	v.Status = record.Pass
	if ratio < q.TolIO {
		v.Status = record.Fail
	}
	if math.IsInf(ratio, 0) || math.IsNaN(ratio) {
		v.Status, v.Ratio = record.Fail, nil
	}
	return v, true
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

// ckptBad counts the shards a restore did not get back exactly.
func ckptBad(r *CkptRestore) int {
	got := map[int]CkptShard{}
	for _, s := range r.Shards {
		got[s.Index] = s
	}
	bad := 0
	for _, e := range r.Expected {
		if s, ok := got[e.Index]; !ok || s.Error != "" || s.SHA256 != e.SHA256 {
			bad++
		}
	}
	return bad
}

func ckptJoin(sep string, s ...string) string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return strings.Join(out, sep)
}
