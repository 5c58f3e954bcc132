package phases

import (
	"context"
	"path"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator"
	"gpuaccept/remote"
)

// relaySbcast sends the archive once to the Slurm login node and from there
// to every node of the window's job with sbcast, which Slurm spreads along
// slurmd's tree: the coordinator's uplink and the login node's each carry
// one copy, not one per node (image.relay: sbcast, the default where the
// nodes are reached by srun). sbcast writes into a part file in the
// window's directory, which each node has made private first; a node keeps
// the copy only once its size and sha256 are the archive's. A node
// without one gets it directly afterwards (push).
func relaySbcast(ctx context.Context, w *orchestrator.Window, nodes []*orchestrator.Node, res *Imaged) {
	job := w.SlurmJob()
	if job == "" {
		w.Progress.Line("image: sbcast needs the window's own Slurm job, and it has none; sending directly")
		return
	}
	login, err := w.SlurmLogin(ctx)
	if err != nil {
		w.Progress.Line("image: sbcast: %s; sending directly", firstLine(err.Error()))
		return
	}
	target := archivePath(w)
	dir, base := path.Dir(target), path.Base(target)
	part := dir + "/." + base + ".gpuaccept-sbcast"
	a := res.Archive

	// Each node's directory first: sbcast writes into what is there.
	ready := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return runOn(ctx, w, nodes[i], remote.PrivateDirCmd(dir, true))
	})
	var have []*orchestrator.Node
	for i, r := range ready {
		if r.Err != nil {
			w.Progress.Node(nodes[i].Name, "image: sbcast: %s", firstLine(r.Err.Error()))
			continue
		}
		have = append(have, nodes[i])
	}
	if len(have) == 0 {
		return
	}

	scratch := w.LoginScratch()
	src := scratch + "/" + base
	e, err := execOf(login)
	if err != nil {
		w.Progress.Line("image: sbcast: %s; sending directly", err)
		return
	}
	defer func() {
		// The job's end removes it too (a coordinator killed here).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := runOn(cctx, w, login, "rm -rf -- "+remote.Quote(scratch)); err != nil {
			w.Progress.Line("image: the login node's copy in %s not removed: %s", scratch, firstLine(err.Error()))
		}
	}()
	tr := w.Progress.Transfer(login.Name, "image", a.Bytes)
	_, err = e.Upload(ctx, a.Path, src, remote.TransferOptions{SHA256: a.SHA256, Progress: func(done, _ int64) { tr.Set(done) }})
	tr.Close()
	if err != nil {
		w.Progress.Line("image: sbcast: the login node's copy: %s; sending directly", firstLine(err.Error()))
		return
	}

	w.Progress.Line("image: sbcast of %s to the %d node(s) of job %s", humanSize(a.Bytes), len(have), job)
	start := time.Now()
	// --force: a part left by an earlier try is written over.
	_, err = runOn(ctx, w, login, "sbcast --jobid="+job+" --force "+remote.Quote(src)+" "+remote.Quote(part))
	secs := time.Since(start).Seconds()
	if err != nil {
		// sbcast stops at a node it cannot reach; the others may have
		// their copy, which the check below finds.
		w.Progress.Line("image: sbcast: %s", firstLine(err.Error()))
	}
	checks := remote.Each(ctx, len(have), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return runOn(ctx, w, have[i], "bash -c "+remote.Quote(sbcastKeep)+" keep "+remote.Quote(part)+" "+remote.Quote(target)+" "+
			strconv.FormatInt(a.Bytes, 10)+" "+a.SHA256)
	})
	for i, r := range checks {
		n := have[i]
		got, sum := sbcastSaid(r.Value)
		switch {
		case r.Err == nil:
			ni := res.Nodes[n.Name]
			ni.Via, ni.Bytes, ni.CopySecs = "sbcast", a.Bytes, secs
		case got != "":
			w.Progress.Node(n.Name, "image: the sbcast copy does not match (%s bytes, sha256 %s; expected %d, %s); sending it directly",
				got, sum, a.Bytes, a.SHA256)
		default:
			w.Progress.Node(n.Name, "image: no sbcast copy (%s); sending it directly", firstLine(r.Err.Error()))
		}
	}
}

// sbcastKeep moves sbcast's part into place on a node when its size and
// sha256 are the archive's, and removes it when they are not. It prints
// "SIZE SUM" of the part; exit 98: no match (or no part).
//
//	bash -c SCRIPT keep PART TARGET SIZE SUM
const sbcastKeep = `set -u
p=$1 t=$2 size=$3 want=$4
if [ ! -f "$p" ] || [ -L "$p" ] || [ ! -O "$p" ]; then echo "no copy of ours at $p" >&2; exit 98; fi
got=$(stat -c %s -- "$p") || exit 96
sum=$({ openssl dgst -sha256 -r <"$p" 2>/dev/null || sha256sum <"$p"; } | cut -c1-64)
echo "$got $sum"
if [ "$got" != "$size" ] || [ "$sum" != "$want" ]; then rm -f -- "$p"; exit 98; fi
chmod 600 -- "$p" && mv -f -T -- "$p" "$t"
`

// sbcastSaid reads sbcastKeep's "SIZE SUM" from a node: words of at most
// 20 and 64 characters, else nothing (a node's words are printed).
func sbcastSaid(v any) (size, sum string) {
	out, _ := v.([]byte)
	f := strings.Fields(string(out))
	if len(f) != 2 || len(f[0]) > 20 || len(f[1]) != 64 {
		return "", ""
	}
	if _, err := strconv.ParseInt(f[0], 10, 64); err != nil {
		return "", ""
	}
	for _, c := range f[1] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return "", ""
		}
	}
	return f[0], f[1]
}
