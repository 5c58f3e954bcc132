package phases

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/hostlist"
	"gpuaccept/orchestrator"
	"gpuaccept/orchestrator/slurm"
	"gpuaccept/remote"
)

// relaySbcast sends the archive once to the Slurm login node and from there
// to every node of the window's job with sbcast, which Slurm spreads along
// slurmd's tree: the coordinator's uplink and the login node's each carry
// one copy, not one per node (image.relay: sbcast, the default where the
// nodes are reached by srun). A node without a good copy afterwards gets
// it directly (push).
//
// sbcast writes to every node of the job, as the window's user, following
// a link at its destination, and stops at the first node that fails. So
// it is used only when the job's nodes are exactly the nodes in the phase,
// each of which made its directory private and removed any part there
// first; the copy is created exclusively (no --force), and kept only once
// its size and sha256 are the archive's.
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

	if in, why := jobNodes(ctx, w, login, job); why != "" {
		w.Progress.Line("image: sbcast: %s; sending directly", why)
		return
	} else if extra, missing := sameNodes(in, nodes); extra != "" || missing != "" {
		// Nodes left out of the phase (quarantined, released) are still
		// the job's: sbcast would write there, unchecked.
		w.Progress.Line("image: sbcast sends to every node of job %s, and the phase's are not those (%s); sending directly",
			job, strings.Join(slices.DeleteFunc([]string{extra, missing}, func(s string) bool { return s == "" }), "; "))
		return
	}
	prep := remote.PrivateDirCmd(dir, true) + " && rm -f -- " + remote.Quote(part)
	ready := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return runOn(ctx, w, nodes[i], prep)
	})
	for i, r := range ready {
		if r.Err != nil {
			w.Progress.Node(nodes[i].Name, "image: its directory for sbcast: %s", firstLine(r.Err.Error()))
			w.Progress.Line("image: sbcast writes to every node of the job; sending directly")
			return
		}
	}

	scratch := w.LoginScratch()
	src := scratch + "/" + base
	e, err := execOf(login)
	if err != nil {
		w.Progress.Line("image: sbcast: %s; sending directly", err)
		return
	}
	// The job's end removes it too (a coordinator killed meanwhile).
	defer w.RemoveLoginScratch(context.WithoutCancel(ctx), login)
	tr := w.Progress.Transfer(login.Name, "image", a.Bytes)
	_, err = e.Upload(ctx, a.Path, src, remote.TransferOptions{SHA256: a.SHA256, Mode: 0o600, Progress: func(done, _ int64) { tr.Set(done) }})
	tr.Close()
	if err != nil {
		w.Progress.Line("image: sbcast: the login node's copy: %s; sending directly", firstLine(err.Error()))
		return
	}

	w.Progress.Line("image: sbcast of %s to the %d node(s) of job %s", humanSize(a.Bytes), len(nodes), job)
	start := time.Now()
	// Bounded, so that a node that answers each block just in time leaves
	// the phase time to send directly: 50 MB/s is slow for any fabric.
	limit := time.Minute + time.Duration(a.Bytes/50e6)*time.Second
	if d, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(d)/2)
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	_, err = runOn(sctx, w, login, "sbcast --jobid="+remote.Quote(job)+" "+remote.Quote(src)+" "+remote.Quote(part))
	cancel()
	secs := time.Since(start).Seconds()
	if err != nil {
		// It stops at the first node that fails: the others' parts are
		// short, and go.
		w.Progress.Line("image: sbcast failed after %.1f s: %s; sending directly", secs, firstLine(err.Error()))
		remote.Each(context.WithoutCancel(ctx), len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
			return runOn(ctx, w, nodes[i], "rm -f -- "+remote.Quote(part))
		})
		return
	}
	checks := remote.Each(ctx, len(nodes), remote.FanOut{Limit: w.FanOut()}, func(ctx context.Context, i int) (any, error) {
		return runOn(ctx, w, nodes[i], "bash -c "+remote.Quote(sbcastKeep)+" keep "+remote.Quote(part)+" "+remote.Quote(target)+" "+
			strconv.FormatInt(a.Bytes, 10)+" "+a.SHA256)
	})
	for i, r := range checks {
		n := nodes[i]
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

// jobNodes are the nodes of the window's job as Slurm lists them now; why
// says why they could not be read.
func jobNodes(ctx context.Context, w *orchestrator.Window, login *orchestrator.Node, job string) (names []string, why string) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := runOn(qctx, w, login, "squeue -h -j "+remote.Quote(job)+" -o %N")
	if err != nil {
		return nil, "the job's nodes: " + firstLine(err.Error())
	}
	list := strings.TrimSpace(string(out))
	names, err = hostlist.Expand(list)
	if err != nil || len(names) == 0 {
		return nil, fmt.Sprintf("the job's nodes: squeue said %q", slurm.Printable(list, 80))
	}
	return names, ""
}

// sameNodes compares the job's nodes with the phase's: the job's that the
// phase lacks, and the phase's that the job lacks, as host ranges.
func sameNodes(job []string, nodes []*orchestrator.Node) (extra, missing string) {
	var inPhase []string
	for _, n := range nodes {
		inPhase = append(inPhase, n.Name)
	}
	var e, m []string
	for _, j := range job {
		if !slices.Contains(inPhase, j) {
			e = append(e, j)
		}
	}
	for _, p := range inPhase {
		if !slices.Contains(job, p) {
			m = append(m, p)
		}
	}
	if len(e) > 0 {
		extra = "not in the phase: " + hostlist.Compress(e)
	}
	if len(m) > 0 {
		missing = "not in the job: " + hostlist.Compress(m)
	}
	return extra, missing
}

// sbcastKeep moves sbcast's part into place on a node when its size and
// sha256 are the archive's, and removes it when they are not. It prints
// "SIZE SUM" of the part; exit 98: no match (or no part).
//
//	bash -c SCRIPT keep PART TARGET SIZE SUM
const sbcastKeep = `set -u
p=$1 t=$2 size=$3 want=$4
if [ ! -f "$p" ] || [ -L "$p" ] || [ ! -O "$p" ]; then echo "no copy of ours at $p" >&2; exit 98; fi
chmod 600 -- "$p" || exit 96
got=$(stat -c %s -- "$p") || exit 96
sum=$({ openssl dgst -sha256 -r <"$p" 2>/dev/null || sha256sum <"$p"; } | cut -c1-64)
echo "$got $sum"
if [ "$got" != "$size" ] || [ "$sum" != "$want" ]; then rm -f -- "$p"; exit 98; fi
mv -f -T -- "$p" "$t"
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
