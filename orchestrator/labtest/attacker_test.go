package labtest

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/scripts/lab"
)

// plantOnceRunning has the unprivileged user on host wait until a window
// command shows in ps (every one exports GPUACCEPT_RUN=<run id>), then run
// plant with $id set to the run ID (before the phases that write there
// start). The returned function waits for it and gives the run ID.
func plantOnceRunning(t *testing.T, l *lab.Lab, host, plant string) func() string {
	t.Helper()
	watch := `for i in $(seq 1200); do
  id=$(ps -eo args | grep -o 'GPUACCEPT_RUN=[^ ;]*-` + labWindow + `-[0-9a-f]*' | head -1 | sed "s/.*=//; s/'//g")
  [ -n "$id" ] && break; sleep 0.05
done
[ -n "$id" ] || { echo "no window seen"; exit 1; }
umask 0; ` + plant + ` && echo "planted $id"`
	said := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := l.ExecAsMallory(ctx, host, watch)
		if err != nil {
			out += err.Error()
		}
		said <- out
	}()
	return func() string {
		t.Helper()
		out := <-said
		m := regexp.MustCompile(`planted (\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s never planted: %s", lab.MalloryName, out)
		}
		return m[1]
	}
}

// TestImageUploadRefusesWhatAnotherUserPlanted: another user of h1 reads
// the run ID from ps once the window starts and makes the image phase's
// directory in /var/tmp theirs first, with a link to root's file where the
// upload's part file goes. The window as root refuses the directory,
// naming the node and the path; root's file is untouched.
func TestImageUploadRefusesWhatAnotherUserPlanted(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	id := strings.TrimPrefix(img.ID, "sha256:")
	prepare(t, l, nil)
	const host = "h1"
	victim, intact := l.RootFile(t, host)
	part := "." + filepath.Base(img.DockerArchive) + ".gpuaccept-part"
	planted := plantOnceRunning(t, l, host, `mkdir "/var/tmp/gpuaccept-$id" && ln -s `+victim+` "/var/tmp/gpuaccept-$id/`+part+`"`)
	inv := writeInventory(t, l, []string{host}, "", "")
	// The image phase's directory is the default, in /var/tmp.
	appendInventory(t, inv, "image:\n  reference: \"localhost/gpuaccept-lab:1@sha256:"+id+"\"\n  runtime: podman\n  archive: "+
		img.DockerArchive+"\n  gpus: none\n  relay: direct\n")
	res, r := runWindow(t, inv)
	run := planted()
	dir := "/var/tmp/gpuaccept-" + run
	t.Cleanup(func() { l.Exec(context.Background(), host, "rm", "-rf", dir) })
	if run != r.ID {
		t.Fatalf("%s planted for run %s, the window was %s", lab.MalloryName, run, r.ID)
	}
	var im phases.Imaged
	phaseData(t, r, "image", -1, &im)
	ni := im.Nodes[host]
	want := host + ": upload " + dir + "/" + filepath.Base(img.DockerArchive) + ": not the window's own directory: refusing " + dir + ": it is owned by uid "
	if ni == nil || !strings.Contains(ni.Error, want) {
		t.Errorf("image on %s: %+v, want an error with %q\n%s", host, ni, want, res.stderr)
	}
	// What the other user made is theirs, not residue of the window.
	if v := verdict(r, "SEC-004", host); strings.Contains(v.Detail, dir) {
		t.Errorf("SEC-004 counts another user's %s as the window's: %+v", dir, v)
	}
	intact()
}

// TestCheckpointRefusesWhatAnotherUserPlanted: the checkpoint directory is
// a scratch filesystem every user may write (sticky, as /var/tmp). Another
// user of h1 makes <dir>/gpuaccept-<run id> theirs first, with a link to
// root's file where h1's first shard goes. h1's save is refused with the
// path and whose it is; root's file is untouched.
func TestCheckpointRefusesWhatAnotherUserPlanted(t *testing.T) {
	l := needLab(t)
	prepare(t, l, nil)
	const host = "h1"
	scratch := fmt.Sprintf("/var/tmp/gpuaccept-scratch-%d", time.Now().UnixNano())
	if out, err := l.Exec(t.Context(), host, "mkdir", "-m", "1777", scratch); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { l.Exec(context.Background(), host, "rm", "-rf", scratch) })
	victim, intact := l.RootFile(t, host)
	base := scratch + `/gpuaccept-$id`
	planted := plantOnceRunning(t, l, host, `mkdir -p "`+base+`/h1" && ln -s `+victim+` "`+base+`/h1/shard-0.bin"`)
	inv := writeInventory(t, l, []string{host}, "  checkpoint_gbs: 0.0005\n", `  checkpoint:
    enabled: true
    dir: `+scratch+`
    size: 1MiB
    shards: 1
    shared: false
    timeout: 1m
`)
	res, r := runWindow(t, inv)
	if run := planted(); run != r.ID {
		t.Fatalf("%s planted for run %s, the window was %s", lab.MalloryName, run, r.ID)
	}
	var saved phases.CkptSave
	p := phaseData(t, r, "checkpoint-write", 0, &saved)
	want := "refusing " + scratch + "/gpuaccept-" + r.ID + ": it is owned by uid "
	if p.Node != host || !strings.Contains(p.Error, want) || !strings.Contains(res.stderr, host+": checkpoint-write failed: checkpoint: refusing "+scratch) {
		t.Errorf("checkpoint-write on %s: %q, want an error with %q, said of %s\n%s", p.Node, p.Error, want, host, res.stderr)
	}
	intact()
}
