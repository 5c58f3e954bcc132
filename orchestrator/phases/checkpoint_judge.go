package phases

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/inventory"
	"gpuaccept/orchestrator/record"
)

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
			wv.Retest = retestOf(append(slices.Clone(wr.Earlier), *wr), record.UnitGBs, func(x CkptSave) (*float64, string) {
				return &x.GBs, ckptRateFailed(x.GBs, x.CeilingGBs, q.GBs, q.TolWrite)
			})
			if wv.Retest.Failed() {
				wv.Status = record.Fail
			}
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
			rv.Retest = retestOf(append(slices.Clone(r.Earlier), *r), record.UnitGBs, func(x CkptRestore) (*float64, string) {
				return &x.GBs, ckptRateFailed(x.GBs, x.CeilingGBs, q.GBs, q.TolRead)
			})
			if rv.Retest.Failed() {
				rv.Status = record.Fail
			}
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
	// The idle time is of every node saving and restoring at once: the
	// first runs. A retest runs alone, and speaks for its node only.
	first := slices.Clone(nodes)
	for i, n := range first {
		if n.Write != nil && len(n.Write.Earlier) > 0 {
			first[i].Write = &n.Write.Earlier[0]
		}
		if n.Restore != nil && len(n.Restore.Earlier) > 0 {
			first[i].Restore = &n.Restore.Earlier[0]
		}
	}
	if c, ok := ckptCluster(first, q); ok {
		out = append(out, c)
	}
	return out
}

// ckptRateFailed says why a throughput fails the quote at tolerance tol,
// "" when it passes, nothing is quoted, or the node's CPU side alone
// cannot show the quote (inconclusive, a WARN): ckptRateVerdict's rule,
// so the phases retest exactly what it would fail.
func ckptRateFailed(gbs, ceiling, quoted, tol float64) string {
	if quoted <= 0 || gbs/quoted >= tol || (ceiling > 0 && ceiling < quoted*tol) {
		return ""
	}
	return fmt.Sprintf("%.3g GB/s, less than %.3g GB/s", gbs, quoted*tol)
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
